/* The speaker page's WebSocket, held by a worker: a thread of its own, so that a stop reaches
   the sound while the page's main thread is busy or starved (a laptop that is both the server
   and a speaker, a slow phone).

   The page opens its channel through this worker (speaker.js: WorkerSocket). Every message is
   passed on to the page; before that, a `speaker` schedule whose `stops` counter moved (a hand
   raised, the operator's pause, a skip) closes the page's gate at once: an AudioWorklet on the
   audio thread (speaker-gate.js), reached through a MessagePort the page handed over. The page
   then does the exact work itself (it fades out the clips the schedule no longer lists) and
   opens the gate again. The worker does nothing else: no clock, no clips, no decisions.

   From the page: {op: "open", id, url} | {op: "send", id, data} | {op: "close", id, code,
   reason} | {op: "gate", port, fade_s}. To the page: {id, ev: "open" | "message" | "close",
   data, gate, closedAt, code, reason}, where `gate` is the number of closes sent so far (the page
   opens the gate up to it once it has handled the message) and `closedAt` when this message
   closed it (performance.timeOrigin + now(), ms; null if it did not). */
"use strict";

const sockets = new Map(); // id -> {ws, stops}
let gate = null; // MessagePort to the AudioWorklet
let closes = 0; // gate closes sent, for the page's opens

function onMessage(id, s, data) {
  let closedAt = null; // when this worker closed the gate for this message (ms since the epoch)
  if (gate && typeof data === "string" && data.includes('"type":"speaker"')) {
    let msg = null;
    try {
      msg = JSON.parse(data);
    } catch (_e) { /* the page reports it */ }
    if (msg && msg.type === "speaker") {
      if (s.stops !== null && msg.stops !== s.stops) {
        closes += 1;
        const fade = Math.max(0.001, (msg.fade_ms || 2) / 1000);
        gate.postMessage({ type: "close", seq: closes, fade_s: fade });
        closedAt = performance.timeOrigin + performance.now();
      }
      s.stops = msg.stops;
    }
  }
  postMessage({ id, ev: "message", data, gate: closes, closedAt });
}

onmessage = (e) => {
  const m = e.data;
  if (m.op === "gate") {
    gate = m.port;
  } else if (m.op === "open") {
    let ws;
    try {
      ws = new WebSocket(m.url, m.protocols || []);
    } catch (_e) {
      postMessage({ id: m.id, ev: "close", code: 1006, reason: "", wasClean: false });
      return;
    }
    const s = { ws, stops: null };
    sockets.set(m.id, s);
    ws.onopen = () => postMessage({ id: m.id, ev: "open" });
    ws.onmessage = (ev) => onMessage(m.id, s, ev.data);
    ws.onclose = (ev) => {
      sockets.delete(m.id);
      postMessage({ id: m.id, ev: "close", code: ev.code, reason: ev.reason,
        wasClean: ev.wasClean });
    };
  } else if (m.op === "send") {
    const s = sockets.get(m.id);
    if (s && s.ws.readyState === WebSocket.OPEN) s.ws.send(m.data);
  } else if (m.op === "close") {
    const s = sockets.get(m.id);
    if (s) s.ws.close(m.code, m.reason);
  }
};
