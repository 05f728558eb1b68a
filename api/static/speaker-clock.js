/* The speaker page's estimate of the server's timeline (speaker.js: ServerClock), in a file of
   its own so that it can be tested outside a browser (tests/test_speaker_clock.py runs it in
   node against a simulated jittery link).

   A `sync` probe is sent at performance time `sent` and its answer, the timeline's time `s`
   when the server read it, arrives at `received`. Whatever the network did, the server read it
   between the two: the offset (timeline ms minus performance ms) lies in [s - received,
   s - sent]. Each probe is such an interval, and the true offset lies in all of them: the
   estimate is the middle of their intersection (NTP's and Marzullo's idea, with exact bounds
   instead of votes). The intersection runs from the true offset less the fastest way *back*
   seen in the window to the true offset plus the fastest way *out*, each found on a probe of
   its own, so its middle is off by half their difference: with 80 ± 40 ms each way and 120
   probes, under 1 ms (p50 0.2-0.5 ms, p99 0.8-2 ms in tests/test_speaker_clock.py), where the
   middle of one probe's interval is off by up to half the jitter, and a median of the fastest
   half of the last 40 probes at 1 a second (this page's earlier estimate) was off by 3.4-3.9
   ms p50 and 11-18 ms p99 on the same simulated link. The bounds hold exactly, so nothing
   needs to be thrown away as an outlier; only the clocks' own drift moves them, and so the
   intersection is taken from the newest probe back and stops at the first older probe that
   would leave it empty. A step of the timeline smaller than a new epoch (0.25 s: hall/speaker)
   and smaller than the link's fastest ways is not told apart from a change of route: it is
   followed as the window's probes age out (30 s).

   The drift (timeline ms per performance ms, minus 1) is a line through the estimate's own
   value every 5 s (once the window is half full) over the last 2.5 minutes, once they span a
   minute; real clocks differ by
   well under 300 ppm, so more is taken for a stalled page and bounded.

   A new connection keeps the probes (the link is the same, the timeline too), but the page is
   not ready again until the first answer on it agrees with them (a restarted server's timeline
   may be another: then the estimate starts again). So a speaker that reconnects after an outage
   plays on within one round trip.
*/
"use strict";

(function (root) {
  const WINDOW = 120; // probes kept (one every 0.25 s: 30 s)
  const MIN_PROBES = 5; // ready after this many
  const CHECK_EVERY_MS = 5000; // a point of the drift's line (once the window is half full)
  const CHECKPOINTS = 30;
  const DRIFT_SPAN_MS = 60000;
  const MAX_DRIFT = 3e-4;
  const OFF_LINE_MS = 3; // a point of the drift's line this far off it: the line starts again
  const AGREE_MS = 10; // a new connection's first answer this far outside the estimate: another timeline

  function median(xs) {
    const v = xs.slice().sort((a, b) => a - b);
    const n = v.length;
    return n % 2 ? v[(n - 1) / 2] : (v[n / 2 - 1] + v[n / 2]) / 2;
  }

  class ServerClock {
    constructor() {
      this.reset();
    }

    reset() {
      this.samples = [];
      this.checkpoints = [];
      this.offset = null; // ms: timeline*1000 - performance, at `ref`
      this.ref = 0;
      this.drift = 0;
      this.rtt = null; // the fastest round trip in the window (ms)
      this.width = null; // the intersection's width (ms): how well the offset is known
      this.used = 0; // probes in the intersection
      this.confirming = false;
    }

    /** A new connection: the probes stay, but the next answer must agree with them. */
    reconnected() {
      if (this.samples.length) this.confirming = true;
    }

    add(sent, received, s) {
      const rtt = received - sent;
      if (!(rtt >= 0) || rtt > 2000 || !Number.isFinite(s)) return;
      const at = s * 1000;
      const x = { mid: (sent + received) / 2, rtt, lo: at - received, hi: at - sent };
      if (this.confirming) {
        this.confirming = false;
        const want = this.offsetAt(x.mid);
        if (!(want >= x.lo - AGREE_MS && want <= x.hi + AGREE_MS)) this.reset();
      }
      this.samples.push(x);
      if (this.samples.length > WINDOW) this.samples.shift();
      this._fit();
    }

    /** The offset (ms) at performance time `perf`, by the current estimate. */
    offsetAt(perf) {
      return this.offset + this.drift * (perf - this.ref);
    }

    _fit() {
      const xs = this.samples;
      const ref = xs[xs.length - 1].mid;
      let lo = -Infinity;
      let hi = Infinity;
      let used = 0;
      for (let i = xs.length - 1; i >= 0; i--) {
        const x = xs[i];
        const d = this.drift * (x.mid - ref); // the offset then, less the offset at ref
        const l = Math.max(lo, x.lo - d);
        const h = Math.min(hi, x.hi - d);
        if (l > h) break; // this probe and older ones disagree with the newer: left out
        lo = l;
        hi = h;
        used += 1;
      }
      this.ref = ref;
      this.offset = (lo + hi) / 2;
      this.width = hi - lo;
      this.used = used;
      this.rtt = Math.min(...xs.map((x) => x.rtt));
      const cps = this.checkpoints;
      if (xs.length >= WINDOW / 2
          && (!cps.length || ref - cps[cps.length - 1].mid >= CHECK_EVERY_MS)) {
        // one off the line by more than the estimate's noise: the timeline stepped (or the
        // route changed), and the line starts again from here, keeping the drift it had
        const last = cps[cps.length - 1];
        if (last && Math.abs(this.offset - last.off - this.drift * (ref - last.mid)) > OFF_LINE_MS) {
          cps.length = 0;
        }
        cps.push({ mid: ref, off: this.offset });
        if (cps.length > CHECKPOINTS) cps.shift();
        this._drift();
      }
    }

    _drift() {
      const cps = this.checkpoints;
      if (cps.length < 4 || cps[cps.length - 1].mid - cps[0].mid < DRIFT_SPAN_MS) return;
      const mm = cps.reduce((a, x) => a + x.mid, 0) / cps.length;
      const mo = cps.reduce((a, x) => a + x.off, 0) / cps.length;
      let num = 0;
      let den = 0;
      for (const x of cps) {
        num += (x.mid - mm) * (x.off - mo);
        den += (x.mid - mm) ** 2;
      }
      this.drift = den > 0 ? Math.max(-MAX_DRIFT, Math.min(MAX_DRIFT, num / den)) : 0;
    }

    get ready() {
      return this.samples.length >= MIN_PROBES && !this.confirming;
    }

    /** The timeline's time (s) at performance time `perf` (ms). */
    timeline(perf) {
      return (perf + this.offsetAt(perf)) / 1000;
    }

    /** The performance time (ms) at which the timeline reads `s`. */
    perf(s) {
      return (s * 1000 - this.offset + this.drift * this.ref) / (1 + this.drift);
    }
  }

  const out = { ServerClock, median };
  if (typeof module === "object" && module.exports) module.exports = out;
  else root.SpeakerClock = out;
})(typeof self !== "undefined" ? self : this);
