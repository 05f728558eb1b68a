/* The speaker page's gate: an AudioWorklet between everything the page plays and the output,
   run on the audio thread. The page's socket worker (speaker-socket.js) closes it the moment a
   stop arrives, without waiting for the page's main thread; the page opens it again once it has
   faded out the clips the stop ended (at the context time their fades are over).

   Messages (on the node's port from the page, on a second port from the worker):
   {type: "close", seq, fade_s}: ramp to silence over fade_s, from the next sample;
   {type: "open", seq, at}: every close up to `seq` is handled; from context time `at`, ramp
   back over the last fade. Closed while the highest close is above the highest open in effect,
   so an open that arrives before its close (two ports, no order between them) leaves it open. */
"use strict";

class YomiteGate extends AudioWorkletProcessor {
  constructor() {
    super();
    this.closed = 0; // highest close seq
    this.opened = 0; // highest open seq in effect
    this.pending = []; // opens not yet in effect: {seq, at}
    this.fade = 0.002;
    this.gain = 1;
    this.closes = 0;
    const handle = (e) => {
      const m = e.data || {};
      if (m.type === "port" && e.ports && e.ports[0]) {
        e.ports[0].onmessage = handle;
      } else if (m.type === "close") {
        if (m.seq > this.closed) {
          this.closed = m.seq;
          this.closes += 1;
          if (m.fade_s > 0) this.fade = m.fade_s;
        }
      } else if (m.type === "open") {
        this.pending.push({ seq: m.seq, at: m.at || 0 });
      } else if (m.type === "stats") {
        this.port.postMessage({ type: "stats", closes: this.closes, closed: this.closed,
          opened: this.opened, gain: this.gain });
      }
    };
    this.port.onmessage = handle;
  }

  process(inputs, outputs) {
    const input = inputs[0];
    const output = outputs[0];
    const n = output.length ? output[0].length : 128;
    const step = 1 / Math.max(1, this.fade * sampleRate);
    for (let i = 0; i < n; i++) {
      if (this.pending.length) {
        const t = currentTime + i / sampleRate;
        this.pending = this.pending.filter((p) => {
          if (p.at > t) return true;
          if (p.seq > this.opened) this.opened = p.seq;
          return false;
        });
      }
      const target = this.closed > this.opened ? 0 : 1;
      if (this.gain < target) this.gain = Math.min(target, this.gain + step);
      else if (this.gain > target) this.gain = Math.max(target, this.gain - step);
      for (let c = 0; c < output.length; c++) {
        const x = input && input[c] ? input[c][i] : 0;
        output[c][i] = x * this.gain;
      }
    }
    return true;
  }
}

registerProcessor("yomite-gate", YomiteGate);
