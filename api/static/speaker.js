/* The speaker page: this browser plays the channel's reading itself (Web Audio), in step with
   the server's timeline and with every other speaker page.

   Three clocks meet here (the approach of Snapcast: every client keeps time with the server and
   plays each piece of audio at its timestamp):
   - the timeline: the engine's clock on the server, in seconds. A schedule says that sample
     `offset_s` of a clip sounds when the timeline reads `at_s`.
   - performance.now(): this page's clock. ServerClock (speaker-clock.js) estimates timeline =
     f(performance) from `sync` probes over the WebSocket, four a second (the probe's send and
     receive times bracket the server's answer: the middle of the intersection of the last
     120 brackets gives the offset, whatever the network's jitter).
   - the AudioContext's clock: OutputClock maps performance time to the context time whose
     sample is *heard* then, from getOutputTimestamp() sampled every 20 ms (one reading jitters
     by several ms: the median of the last half second is used, and a step, e.g. after an
     underrun of the sound system, is followed within about 120 ms).
   A clip is started at the context time of its `at_s` (AudioBufferSourceNode.start(when,
   offset)), or, if that is past (a page that joins late, reloads or reconnects), at once from
   the sample that is due, faded in. Every 100 ms each clip still sounding is checked against
   the latest estimates; one that is more than 3 ms off twice in a row is crossfaded to a
   corrected copy (one not started yet is simply moved). A schedule without a clip this page
   plays, after a stop, fades it out (from the stop's time, or now if that is past). A link that
   goes quiet (1.5 s) or closes gets a new socket at once; meanwhile the clip sounding plays on
   and nothing new starts (hush()); reconnected, the page gets the schedule again, catches up
   and counts what it missed.

   A stop does not wait for this page's main thread: the WebSocket is held by a worker
   (speaker-socket.js) that closes a gate on the audio thread (speaker-gate.js, an AudioWorklet
   after everything the page plays) the moment a schedule's stop counter moves; the main thread
   then fades the clips out as above and opens the gate once they are silent.
*/
"use strict";

(function () {
  const { t } = Y;
  const ch = decodeURIComponent(location.pathname.split("/").filter(Boolean)[1] || "main");
  const $ = (id) => document.getElementById(id);
  const ui = {
    conn: $("conn"), enable: $("enable"), now: $("now"), sound: $("sound"),
    soundText: $("sound-text"), phase: $("phase"), detail: $("detail"), clock: $("clock"),
    sync: $("sync"), latency: $("latency"), volume: $("volume"), chname: $("chname"),
    missed: $("missed"),
  };

  const MARGIN_S = 0.01; // a start or fade is placed at least this far after currentTime
  const FADE_IN_S = 0.005; // a clip joined in the middle fades in (no click)
  const RESYNC_S = 0.003; // a sounding clip further off than this is moved
  const PROBE_MS = 250; // a clock probe this often (speaker-clock.js: more probes, a narrower estimate)
  const QUIET_MS = 1500; // no answer to a probe for this long: the link is gone, a new socket now
  const RENEW_MS = 1000; // a new socket that has not said hello in this long: another (a fresh SYN)
  // getOutputTimestamp() is read every 20 ms; one reading is several ms off, so the median of
  // the last WINDOW is used, and STEP readings in a row more than STEP_S off are a step
  const WINDOW = 25;
  const STEP = 6;
  const STEP_S = 0.004;

  const { median } = window.SpeakerClock;

  // ------------------------------------------------------------------ the server's timeline
  // ServerClock: speaker-clock.js (the intersection of the probes' bounds; tested in node)
  const { ServerClock } = window.SpeakerClock;

  // ------------------------------------------------------------------ this device's output
  class OutputClock {
    constructor(ctx) {
      this.ctx = ctx;
      this.samples = [];
      this.k = null; // s: context time heard at performance time p is k + p/1000
      this.jumps = [];
      this.steps = 0; // every step of the output's delay (jumps keeps the last 100)
    }

    sample() {
      const ctx = this.ctx;
      let k = null;
      const ts = ctx.getOutputTimestamp ? ctx.getOutputTimestamp() : null;
      if (ts && ts.contextTime > 0 && ts.performanceTime > 0) {
        k = ts.contextTime - ts.performanceTime / 1000;
      } else if (ctx.state === "running" && ctx.currentTime > 0) {
        // no output timestamps: what is rendered now is heard after the stated latency
        const lat = (ctx.outputLatency || 0) + (ctx.baseLatency || 0);
        k = ctx.currentTime - lat - performance.now() / 1000;
      }
      if (k === null) return;
      this.samples.push(k);
      if (this.samples.length > WINDOW) this.samples.shift();
      // A step: the output's delay changed (an underrun of the sound system delays everything
      // after it; another device). The last STEP samples all on one side of the median, far
      // from it, is no longer noise: follow them at once.
      if (this.samples.length > 2 * STEP) {
        const m = median(this.samples);
        const recent = this.samples.slice(-STEP);
        const sign = Math.sign(recent[0] - m);
        if (recent.every((x) => Math.sign(x - m) === sign && Math.abs(x - m) > STEP_S)) {
          this.samples = recent;
          this.jumps.push({ perf: performance.now(), ms: (median(recent) - m) * 1000 });
          this.steps += 1;
          if (this.jumps.length > 100) this.jumps.shift();
        }
      }
      this.k = median(this.samples);
    }

    get ready() {
      return this.k !== null && this.samples.length >= 5;
    }

    ctxTime(perf) {
      return this.k + perf / 1000;
    }

    /** How long after being rendered a sample is heard, as measured (s). */
    latency() {
      return this.ready ? this.ctx.currentTime - this.ctxTime(performance.now()) : null;
    }
  }

  // ------------------------------------------------------------------ state
  const server = new ServerClock();
  let output = null;
  let ctx = null;
  let master = null;
  let gate = null; // the AudioWorkletNode between master and the output, once it is in place
  let gateStats = null;
  let gateSettled = false;
  let fadedUntil = 0; // the context time the last stop's fades are over
  let schedule = null; // the last `speaker` message
  let seenStops = null;
  let fadeS = 0.002;
  let volumeDb = 0;
  let online = false;
  let lastSyncRx = 0;
  let renewedAt = 0; // when this page last opened a new socket itself (renew())
  let renewals = 0; // new sockets opened since the link was last up
  let probeId = 0;
  const probes = new Map(); // id -> performance time sent
  const buffers = new Map(); // url -> Promise<AudioBuffer>
  const wanted = new Map(); // id -> clip entry, from the latest schedule
  const playing = new Map(); // id -> {c, src, gain, ctxAt, end, off}
  const stats = { placed: 0, late: 0, resyncs: 0, stops: 0, silenced: 0, retries: 0,
    missed: 0, epochs: 0, quiet: 0, renewals: 0, heldOn: 0, withheld: 0, missedIds: [], hellos: [], log: [],
    stopLags: [] };
  let epoch = null; // the server's timeline epoch this page's estimate belongs to
  let retryTimer = 0; // a clip whose fetch failed is asked for again while it is still due
  const done = new Set(); // ids of clips placed (or given up as missed) in this epoch
  let readyFrom = null; // the timeline's time from which this page could play (missed after)
  let match = null; // the public state's match
  let refused = null; // why the server refused this page

  // ------------------------------------------------------------------ the key
  // The console's speaker link carries the channel's speaker key (#key=…): only a page that
  // holds it gets the schedule and the clips (the next card's among them). Kept per channel,
  // so that a reload or a restart of the browser keeps playing.
  const KEY = `yomite.speaker.${ch}`;
  let key = Y.fromHash("key") || Y.load(KEY);
  if (key) Y.save(KEY, key);

  // ------------------------------------------------------------------ the socket's worker
  // The channel's WebSocket lives in a worker (speaker-socket.js), which closes the audio gate
  // (speaker-gate.js) the moment a stop arrives, on threads the page's own work cannot delay.
  // Without workers, a plain WebSocket: the stop then waits for this thread.
  let worker = null;
  try {
    worker = window.Worker ? new Worker("/static/speaker-socket.js") : null;
  } catch (e) {
    console.warn(e);
  }
  const sockets = new Map(); // id -> WorkerSocket
  let socketId = 0;

  /** What Y.Channel needs of a WebSocket, the socket itself being the worker's. */
  class WorkerSocket {
    constructor(url, protocols) {
      socketId += 1;
      this.id = socketId;
      this.readyState = WebSocket.CONNECTING;
      this.gate = 0; // the worker's closes up to the message being handled
      this.onopen = null;
      this.onmessage = null;
      this.onclose = null;
      this.onerror = null;
      sockets.set(this.id, this);
      worker.postMessage({ op: "open", id: this.id, url, protocols });
    }

    send(data) {
      if (this.readyState === WebSocket.OPEN) worker.postMessage({ op: "send", id: this.id, data });
    }

    close(code = 1000, reason = "") {
      if (this.readyState >= WebSocket.CLOSING) return;
      this.readyState = WebSocket.CLOSING;
      worker.postMessage({ op: "close", id: this.id, code, reason });
    }
  }

  if (worker) {
    worker.onmessage = (e) => {
      const m = e.data;
      const sock = sockets.get(m.id);
      if (!sock) return;
      if (m.ev === "open") {
        sock.readyState = WebSocket.OPEN;
        if (sock.onopen) sock.onopen({});
      } else if (m.ev === "message") {
        sock.gate = m.gate;
        sock.closedAt = m.closedAt;
        if (sock.onmessage) sock.onmessage({ data: m.data });
      } else if (m.ev === "close") {
        sock.readyState = WebSocket.CLOSED;
        sockets.delete(m.id);
        if (sock.onclose) sock.onclose({ code: m.code, reason: m.reason, wasClean: m.wasClean });
      }
    };
    worker.onerror = (e) => console.warn("speaker socket worker:", e.message);
  }

  // ------------------------------------------------------------------ the connection
  const conn = new Y.Channel(ch, {
    socket: worker ? (url, protocols) => new WorkerSocket(url, protocols) : null,
    query: { audience: "speaker" },
    token: () => key,
    onHello: () => {
      // the probes of the last connection stay: the first answer on this one must agree
      // with them (speaker-clock.js), so a page back from an outage plays on at once
      server.reconnected();
      probes.clear();
      lastSyncRx = performance.now();
      renewals = 0;
      stats.hellos.push(lastSyncRx);
      if (stats.hellos.length > 20) stats.hellos.shift();
      burst();
    },
    onState: (s) => {
      match = s.match;
      render();
    },
    onStatus: (s) => {
      Y.showConnection(ui.conn, s);
      online = s === "online";
      // a link gone quiet or closed: what sounds plays on (hush); the server's own word that
      // this process cannot read (cut_off: a cluster's process without its broker) or that
      // there is nothing to reconnect to silences at once (lost)
      if (s === "reconnecting" || s === "connecting") hush();
      else if (!online) lost();
      render();
    },
    onOther: (msg) => {
      if (msg.type === "sync") onSync(msg);
      else if (msg.type === "speaker") onSchedule(msg);
    },
    onClose: (ev) => {
      if (ev.code !== 1008) return true;
      refused = ev.reason || "refused";
      if (refused === "speaker_key_needed" || refused === "speaker_link_changed") {
        key = null; // replaced by the operator, or never given: the new link is needed
        Y.save(KEY, null);
      }
      lost(); // refused: silent at once
      render();
      return false; // asking again will not help
    },
  });
  Y.live = conn;

  function probe() {
    probeId += 1;
    const c = performance.now();
    probes.set(probeId, c);
    if (probes.size > 50) probes.delete(probes.keys().next().value);
    conn.send({ type: "sync", id: probeId, c });
  }

  function burst() {
    for (let i = 0; i < 10; i++) setTimeout(probe, i * 40);
  }

  function onSync(msg) {
    const received = performance.now();
    const sent = probes.get(msg.id);
    if (sent === undefined || msg.c !== sent || typeof msg.s !== "number") return;
    probes.delete(msg.id);
    lastSyncRx = received;
    if (!sameEpoch(msg.epoch)) return; // a probe of the old timeline: the burst asks again
    server.add(sent, received, msg.s);
    if (server.ready) apply();
  }

  // this page's report of itself, every 2 s: the console shows each speaker and its trouble
  let reportTick = 0;
  // this page load's id: a page that reconnects keeps its number on the console
  const pageId = Array.from(crypto.getRandomValues(new Uint8Array(8)),
    (b) => b.toString(16).padStart(2, "0")).join("");
  function report() {
    const lat = output && output.latency();
    conn.send({ type: "report", page: pageId, placed: stats.placed, late: stats.late, missed: stats.missed,
      resyncs: stats.resyncs, epochs: stats.epochs, steps: output ? output.steps : 0,
      rtt_ms: server.rtt === null ? null : Math.max(0, server.rtt),
      latency_ms: lat === null || lat === undefined ? null : Math.max(0, lat * 1000) });
  }

  /** A new socket now, without waiting for the old one's close event (on a link that died
      quietly it comes only after TCP gives up, minutes later, and a socket still trying to
      connect sends its next SYN seconds later: a fresh one tries at once). Channel's own
      socket is left to it: set aside here, its events are then ignored (this.ws !== ws). */
  function renew() {
    renewedAt = performance.now();
    renewals += 1;
    stats.renewals += 1;
    conn.renew();
  }

  setInterval(() => {
    const now = performance.now();
    if (refused || conn.stopped) return;
    if (!online) {
      // still connecting on a socket this page opened itself: a SYN or a hello lost in an
      // outage is not waited for; after a minute of tries, every 3 s. A socket that closed
      // (refused by a server that is down) is left to Channel's own backoff.
      const every = renewals < 60 ? RENEW_MS : 3 * RENEW_MS;
      if (renewedAt && conn.ws && conn.ws.readyState <= WebSocket.OPEN && now - renewedAt > every) {
        renew();
      }
      return;
    }
    probe();
    reportTick += 1;
    if (ctx && reportTick % 8 === 0) report();
    // a link that died without a close event: what sounds plays on, and a new socket now
    if (now - lastSyncRx > QUIET_MS && conn.ws) {
      stats.quiet += 1;
      renew();
    }
  }, PROBE_MS);

  // ------------------------------------------------------------------ audio
  function enable() {
    if (!ctx) {
      const AC = window.AudioContext || window.webkitAudioContext;
      // ?latency=playback: larger buffers for a slow device (more delay before a hold is heard)
      const hint = new URLSearchParams(location.search).get("latency");
      ctx = new AC({ latencyHint: ["balanced", "playback"].includes(hint) ? hint : "interactive" });
      master = ctx.createGain();
      master.connect(ctx.destination);
      setVolume(volumeDb);
      addGate();
      output = new OutputClock(ctx);
      setInterval(() => output.sample(), 20);
      setInterval(check, 100);
      ctx.addEventListener("statechange", render);
    }
    ctx.resume().then(() => {
      document.body.dataset.sound = "on";
      apply();
      render();
    });
  }

  ui.enable.addEventListener("click", enable);

  /** The gate on the audio thread, closed by the worker at a stop (where the page may have
      AudioWorklets: a secure context, i.e. https or this machine itself). Until it is in
      place, and where it cannot be, the page stops its clips itself. */
  function addGate() {
    if (!worker || !ctx.audioWorklet || !window.AudioWorkletNode) {
      gateSettled = true;
      return;
    }
    ctx.audioWorklet.addModule("/static/speaker-gate.js").then(() => {
      const node = new AudioWorkletNode(ctx, "yomite-gate");
      const link = new MessageChannel();
      node.port.postMessage({ type: "port" }, [link.port1]);
      worker.postMessage({ op: "gate", port: link.port2 }, [link.port2]);
      node.port.onmessage = (e) => { if (e.data.type === "stats") gateStats = e.data; };
      node.connect(ctx.destination);
      master.connect(node);
      master.disconnect(ctx.destination);
      gate = node;
    }).catch((e) => console.warn("no audio gate:", e)).finally(() => { gateSettled = true; });
  }

  /** The worker's closes up to `seq` are handled here: the gate opens once the clips this
      page faded out are silent (context time `at`). */
  function openGate(seq, at) {
    if (gate && seq) gate.port.postMessage({ type: "open", seq, at });
  }

  function ready() {
    return !!ctx && ctx.state === "running" && online && server.ready && output && output.ready;
  }

  /** The context time at which the timeline's time `s` is heard. */
  function ctxOf(s) {
    return output.ctxTime(server.perf(s));
  }

  function buffer(url) {
    let p = buffers.get(url);
    if (!p) {
      p = fetch(url, { headers: key ? { Authorization: `Bearer ${key}` } : {} }).then((r) => {
        if (!r.ok) throw new Error(`${url}: HTTP ${r.status}`);
        return r.arrayBuffer();
      }).then((data) => ctx.decodeAudioData(data));
      p.catch(() => buffers.delete(url)); // fetched again when next wanted
      buffers.set(url, p);
      while (buffers.size > 48) buffers.delete(buffers.keys().next().value);
    }
    return p;
  }

  /** A sync answer or a schedule of another timeline epoch: the timeline jumped on the server
      (it should not; a new match goes on from the last one's time): the estimate and what
      plays start again, and the clips still due are placed on the new estimate. */
  function sameEpoch(e) {
    if (typeof e !== "number" || e === epoch) return true;
    const first = epoch === null;
    epoch = e;
    if (first) return true;
    stats.epochs += 1;
    server.reset();
    probes.clear();
    for (const p of [...playing.values()]) fadeOut(p);
    wanted.clear();
    done.clear();
    readyFrom = null;
    burst();
    return false;
  }

  function onSchedule(msg) {
    sameEpoch(msg.epoch);
    schedule = msg;
    fadeS = Math.max(0.001, (msg.fade_ms || 2) / 1000);
    if (msg.volume_db !== volumeDb) setVolume(msg.volume_db);
    fadedUntil = 0;
    try {
      apply();
    } finally {
      // whatever apply() did, the gate the worker closed for this message opens again
      if (ctx) openGate(conn.ws && conn.ws.gate, Math.max(fadedUntil, ctx.currentTime));
    }
    render();
  }

  /** Bring what plays in line with the latest schedule. */
  function apply() {
    if (!schedule || !ctx) return;
    const msg = schedule;
    for (const url of msg.prefetch || []) buffer(url).catch(() => {});
    if (!ready()) return;
    const listed = new Set(msg.clips.map((c) => c.id));
    if (seenStops !== null && msg.stops !== seenStops) {
      stats.stops += 1;
      let faded = 0;
      for (const [id, p] of playing) if (!listed.has(id)) { fadeOut(p, msg.stop_s); faded += 1; }
      // how long after the stop this page (and its worker, closing the gate) acted on it: the
      // timeline's time then minus the stop's, kept for the bench (bench/speaker_sync.py)
      if (typeof msg.stop_s === "number") {
        const closed = conn.ws && conn.ws.closedAt;
        stats.stopLags.push({ lag_ms: (server.timeline(performance.now()) - msg.stop_s) * 1000,
          gate_ms: gate && closed
            ? (server.timeline(closed - performance.timeOrigin) - msg.stop_s) * 1000 : null,
          stop_s: msg.stop_s, faded });
        if (stats.stopLags.length > 100) stats.stopLags.shift();
      }
    }
    seenStops = msg.stops;
    for (const id of [...wanted.keys()]) if (!listed.has(id)) wanted.delete(id);
    for (const c of msg.clips) {
      if (playing.has(c.id) || wanted.has(c.id)) continue;
      wanted.set(c.id, c);
      buffer(c.url).then((buf) => {
        if (wanted.get(c.id) === c && ready() && !playing.has(c.id)) place(c, buf);
      }).catch((e) => {
        // asked for again while it is still due (not only with the next schedule, which may
        // not come before it is over)
        wanted.delete(c.id);
        console.warn(e);
        if (!retryTimer) {
          stats.retries += 1;
          retryTimer = setTimeout(() => { retryTimer = 0; apply(); }, 250);
        }
      });
    }
  }

  /** Start clip `c`: its sample `offset_s` heard when the timeline reads `at_s`; from `from`
      (a context time) when given (a resync), or at once if its time is past. */
  function place(c, buf, from = null) {
    const ctxAt = ctxOf(c.at_s);
    const earliest = ctx.currentTime + MARGIN_S;
    let when = from === null ? ctxAt : from;
    let fadeIn = from !== null;
    if (when < earliest) {
      when = earliest;
      fadeIn = true;
    }
    const off = c.offset_s + (when - ctxAt);
    if (off >= buf.duration - 0.002) return null; // over already
    const src = ctx.createBufferSource();
    src.buffer = buf;
    const gain = ctx.createGain();
    src.connect(gain).connect(master);
    if (fadeIn) {
      gain.gain.setValueAtTime(0, when);
      gain.gain.linearRampToValueAtTime(1, when + FADE_IN_S);
      if (from === null) stats.late += 1;
    }
    src.start(when, off);
    done.add(c.id);
    const p = { c, src, gain, ctxAt, when, end: when + buf.duration - off, off, bad: 0 };
    playing.set(c.id, p);
    src.onended = () => {
      if (playing.get(c.id) === p) playing.delete(c.id);
    };
    stats.placed += 1;
    stats.log.push({ id: c.id, at_s: c.at_s, when, off, ctxAt, k: output.k,
      perf: performance.now(), heard: server.perf(c.at_s) + (when - ctxAt) * 1000 });
    if (stats.log.length > 400) stats.log.shift();
    render();
    return p;
  }

  function fadeOut(p, stopS = null, at = null) {
    playing.delete(p.c.id);
    const now = ctx.currentTime;
    let from = at !== null ? at : (stopS === null ? now : ctxOf(stopS));
    from = Math.max(from, now);
    if (from <= p.when) {
      p.src.stop(); // the stop comes before the clip: it never sounds
      return;
    }
    fadedUntil = Math.max(fadedUntil, from + fadeS + 0.005);
    const g = p.gain.gain;
    g.cancelScheduledValues(from);
    g.setValueAtTime(g.value, from);
    g.linearRampToValueAtTime(0, from + fadeS);
    p.src.stop(from + fadeS + 0.005);
    stats.silenced += 1;
  }

  /** Silent now: refused, or told by the server that it cannot read. */
  function lost() {
    readyFrom = null;
    if (ctx) for (const p of [...playing.values()]) fadeOut(p);
    wanted.clear();
    seenStops = null;
    schedule = null;
  }

  /** The link is gone (quiet, or closed): the clips already sounding play on to their end, as
      scheduled, since only a stop this page hears or its schedule running out silences it. A
      hold made meanwhile cannot be heard, so the trade is bounded: no clip starts while the
      link is gone (one placed ahead, the next verse or the next card's, is taken back; it is
      placed again, late, if it is still due when the link returns, or counted as missed),
      so at most the rest of the verse under way sounds after a hold this page did not hear,
      and nothing of a card is played that the server has not begun to read by then. The
      schedule, the stop counter and the clock stay: on the new socket the schedule's clips
      due are joined in step, a stop made meanwhile fades out what it cut, and every clip
      that passed unplayed is counted (missed). */
  function hush() {
    wanted.clear();
    if (!ctx) return;
    const now = ctx.currentTime;
    for (const p of [...playing.values()]) {
      if (p.when > now + 0.002) {
        playing.delete(p.c.id);
        done.delete(p.c.id);
        p.src.onended = null;
        p.src.stop();
        stats.withheld += 1;
      } else if (p.end > now) {
        stats.heldOn += 1;
      }
    }
  }

  /** Keep every clip where the latest estimates put it: one not started yet is simply placed
      again; one sounding is crossfaded to a corrected copy when it stays off. */
  function check() {
    render();
    if (!ready()) return;
    missed();
    const now = ctx.currentTime;
    for (const p of [...playing.values()]) {
      if (p.end < now + 0.05) continue;
      const off = ctxOf(p.c.at_s) - p.ctxAt;
      if (p.when > now + 0.03) {
        if (Math.abs(off) > 0.0005) {
          playing.delete(p.c.id);
          p.src.onended = null;
          p.src.stop();
          place(p.c, p.src.buffer);
        }
        continue;
      }
      p.bad = Math.abs(off) > RESYNC_S ? p.bad + 1 : 0;
      if (p.bad < 2) continue;
      const at = now + 0.02;
      fadeOut(p, null, at);
      if (place(p.c, p.src.buffer, at)) stats.resyncs += 1;
    }
  }

  /** A clip of the schedule whose end has passed and that never sounded here: counted and
      shown (a lost clip is said, never dropped silently). */
  function missed() {
    if (!schedule) return;
    const now = server.timeline(performance.now());
    if (readyFrom === null) readyFrom = now;
    for (const c of schedule.clips) {
      if (done.has(c.id) || playing.has(c.id) || c.at_s < readyFrom) continue;
      if (c.at_s + c.duration_s - c.offset_s < now - 0.1) {
        done.add(c.id);
        stats.missed += 1;
        stats.lastMissed = c.id;
        stats.missedIds.push(c.id);
        if (stats.missedIds.length > 100) stats.missedIds.shift();
      }
    }
    // kept to the clips the schedule still lists (it drops those long over): never cleared
    // whole, which would count a clip played a moment ago as missed
    if (done.size > 200) {
      const listed = new Set(schedule.clips.map((c) => c.id));
      for (const id of done) if (!listed.has(id)) done.delete(id);
    }
  }

  function setVolume(db) {
    volumeDb = typeof db === "number" ? db : 0;
    if (master) master.gain.setTargetAtTime(10 ** (volumeDb / 20), ctx.currentTime, 0.02);
  }

  // ------------------------------------------------------------------ showing it
  function render() {
    ui.chname.textContent = ch;
    ui.now.hidden = !ctx && !refused;
    ui.clock.hidden = !ctx;
    let state = "silent";
    let text = t("speaker_ready");
    document.body.dataset.refused = refused ? "true" : "false";
    if (refused) {
      state = "lost";
      // the server's reasons are codes, said in the page's language (an unknown one as is)
      const words = t(`speaker_refused_${refused}`);
      text = words !== `speaker_refused_${refused}` ? words : t("speaker_refused");
    } else if (!online) {
      state = "lost";
      text = t(conn.status === "reconnecting" ? "speaker_reconnecting" : "speaker_lost");
    } else if (ctx && ctx.state !== "running") {
      state = "off";
      text = t("speaker_suspended");
      document.body.dataset.sound = "off";
    } else if (match && match.paused) {
      state = "paused";
      text = t("speaker_paused");
    } else if (ctx && [...playing.values()].some((p) => p.end > ctx.currentTime)) {
      state = "playing";
      text = t("speaker_playing");
    }
    ui.sound.dataset.state = state;
    ui.soundText.textContent = text;
    ui.phase.textContent = match ? `${Y.phaseText(match)}${match.card ? ` · ${Y.cardText(match)}` : ""}` : t("phase_none");
    ui.detail.textContent = match && match.paused
      ? t("held_by", { names: Y.joinNames(Y.holdNames(match)) }) : "";
    ui.sync.textContent = server.ready
      ? t("speaker_sync_value", { rtt: server.rtt.toFixed(1), ppm: Math.round(server.drift * 1e6) })
      : t("speaker_syncing");
    const lat = output && output.latency();
    ui.latency.textContent = lat === null || lat === undefined ? "" : `${Math.round(lat * 1000)} ms`;
    ui.volume.textContent = volumeDb === 0 ? "0 dB" : `${volumeDb} dB`;
    ui.missed.hidden = stats.missed === 0;
    ui.missed.textContent = t("speaker_missed", { n: stats.missed });
  }

  // for tests and the curious: what this page has estimated and done
  Y.speaker = {
    get ready() { return ready(); },
    /** The audio gate is in place, or this page cannot have one. */
    get gateSettled() { return gateSettled; },
    stats() {
      if (gate) gate.port.postMessage({ type: "stats" });
      return {
        ...stats, log: stats.log.slice(), stopLags: stats.stopLags.slice(),
        missedIds: stats.missedIds.slice(), hellos: stats.hellos.slice(),
        playing: playing.size, rtt: server.rtt,
        drift: server.drift, offset: server.offset, probes: server.samples.length,
        latency: output ? output.latency() : null, jumps: output ? output.jumps.slice() : [],
        timeOrigin: performance.timeOrigin,
        state: ctx ? ctx.state : "none",
        gate: gate ? "worklet" : "none", worker: !!worker, gateStats,
      };
    },
    /** The timeline's time now, as this page estimates it. */
    timeline() { return server.ready ? server.timeline(performance.now()) : null; },
  };

  Y.bootPage({ titleKey: "speaker_title", ch, badge: ui.conn, conn, onLang: render });
  render();
  conn.start();
})();
