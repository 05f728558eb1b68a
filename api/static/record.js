/* yomite: the recording page (/record, operator only). A reader records a voice pack in the
   browser: each verse shown big (text and kana), recorded from the microphone (getUserMedia +
   MediaRecorder), sent to the server, which checks it (level, clipping, speech), trims it on
   its own noise floor and keeps it in the pack (voice.recording_pack); play it back, record it
   again, move on. Progress is "n of 40" for one colour, or of the whole pack. */
"use strict";

(function () {
  const { t, el } = Y;
  const $ = (id) => document.getElementById(id);
  const SCOPE_KEY = "yomite.record.scope";
  const ui = {
    tokenBox: $("token-box"), tokenForm: $("token-form"), token: $("token"), app: $("app"),
    scope: $("scope"), progressText: $("progress-text"), progressBar: $("progress-bar"),
    complete: $("complete"), label: $("slot-label"), text: $("verse-text"), kana: $("verse-kana"),
    state: $("slot-state"), meter: $("meter-bar"), record: $("btn-record"), stop: $("btn-stop"),
    play: $("btn-play"), prev: $("btn-prev"), next: $("btn-next"), todo: $("btn-todo"),
    report: $("report"), list: $("slot-list"),
  };

  let token = null;
  let slots = [];       // every slot of the pack, from GET /api/recording
  let progress = null;
  let scope = Y.load(SCOPE_KEY, "blue");
  let index = 0;        // the shown slot, in the scope's list
  let stream = null;
  let recorder = null;
  let meterStop = null;
  let player = null;

  // ------------------------------------------------------------------ the token
  async function tryToken(tok) {
    try {
      await Y.operator.check(tok);
    } catch (e) {
      Y.showError(e);
      Y.operator.keep(null);
      ui.app.hidden = true;
      ui.tokenBox.hidden = false;
      return;
    }
    token = tok;
    Y.operator.keep(tok);
    ui.tokenBox.hidden = true;
    ui.app.hidden = false;
    await refresh();
  }

  ui.tokenForm.addEventListener("submit", (e) => {
    e.preventDefault();
    const tok = ui.token.value.trim();
    if (tok) tryToken(tok);
  });

  // ------------------------------------------------------------------ the pack
  async function refresh() {
    const data = await Y.api("GET", "/api/recording", { token });
    slots = data.slots;
    progress = data.progress;
    fillScopes();
    draw();
  }

  function inScope() {
    if (scope === "all") return slots;
    if (scope === "calls") return slots.filter((s) => s.kind !== "verse");
    return slots.filter((s) => s.colour === scope);
  }

  function fillScopes() {
    const options = [...Y.COLOURS.map((c) => [c, t(c)]),
      ["calls", t("record_scope_calls")], ["all", t("record_scope_all")]];
    ui.scope.replaceChildren(...options.map(([v, label]) => el("option", { value: v }, label)));
    if (!options.some(([v]) => v === scope)) scope = "blue";
    ui.scope.value = scope;
  }

  ui.scope.addEventListener("change", () => {
    scope = ui.scope.value;
    Y.save(SCOPE_KEY, scope);
    index = 0;
    draw();
  });

  function slotLabel(s) {
    if (s.kind === "call") return t("record_call", { name: s.text });
    if (s.kind === "prelude") return t("record_joka", { verse: t(`verse_${s.verse}`) });
    return t("record_poem", { no: s.poem, verse: t(`verse_${s.verse}`) });
  }

  function draw() {
    const list = inScope();
    if (index >= list.length) index = Math.max(0, list.length - 1);
    const done = list.filter((s) => s.recorded).length;
    ui.progressText.textContent = t("record_progress", { n: done, total: list.length });
    ui.progressBar.max = list.length;
    ui.progressBar.value = done;
    const colours = (progress && progress.complete_colours) || [];
    ui.complete.textContent = colours.length
      ? t("record_complete", { colours: colours.map((c) => t(c)).join("・") })
      : t("record_complete_none");
    const s = list[index];
    if (s) {
      ui.label.textContent = slotLabel(s);
      ui.text.replaceChildren(Y.verse(s.text));
      ui.kana.replaceChildren(Y.verse(s.yomi));
      ui.state.textContent = s.recorded
        ? t("record_done", { s: (s.speech_s || 0).toFixed(1) }) : t("record_todo");
      ui.state.dataset.done = s.recorded ? "yes" : "no";
      ui.record.textContent = s.recorded ? t("record_again") : t("record_start");
      ui.play.disabled = !s.recorded;
    }
    ui.prev.disabled = index === 0;
    ui.next.disabled = index >= list.length - 1;
    ui.list.replaceChildren(...list.map((x, i) => {
      const b = el("button", { type: "button", class: "slot", "aria-current": i === index ? "true" : null,
        dataset: { done: x.recorded ? "yes" : "no", slot: x.slot } },
        x.kind === "verse" ? `${x.poem}${x.verse === "kami" ? t("verse_kami_short") : t("verse_shimo_short")}`
          : slotLabel(x));
      b.addEventListener("click", () => { index = i; ui.report.replaceChildren(); draw(); });
      return el("li", {}, b);
    }));
  }

  function move(step) {
    index = Math.min(Math.max(0, index + step), inScope().length - 1);
    ui.report.replaceChildren();
    draw();
  }
  ui.prev.addEventListener("click", () => move(-1));
  ui.next.addEventListener("click", () => move(1));
  ui.todo.addEventListener("click", () => {
    const list = inScope();
    const after = list.findIndex((s, i) => i > index && !s.recorded);
    const any = list.findIndex((s) => !s.recorded);
    const to = after >= 0 ? after : any;
    if (to >= 0) { index = to; ui.report.replaceChildren(); draw(); }
  });

  // ------------------------------------------------------------------ recording
  function pickType() {
    for (const m of ["audio/webm;codecs=opus", "audio/ogg;codecs=opus", "audio/webm"]) {
      if (window.MediaRecorder && MediaRecorder.isTypeSupported(m)) return m;
    }
    return "";
  }

  function startMeter(s) {
    const ctx = new AudioContext();
    const src = ctx.createMediaStreamSource(s);
    const an = ctx.createAnalyser();
    an.fftSize = 2048;
    src.connect(an);
    const buf = new Float32Array(an.fftSize);
    let raf = 0;
    let top = 0;
    const tick = () => {
      an.getFloatTimeDomainData(buf);
      let p = 0;
      for (const v of buf) p = Math.max(p, Math.abs(v));
      top = Math.max(p, top * 0.95);
      ui.meter.style.width = `${Math.min(100, top * 100)}%`;
      ui.meter.dataset.level = top >= 0.99 ? "clip" : top < 0.02 ? "low" : "ok";
      raf = requestAnimationFrame(tick);
    };
    tick();
    return () => { cancelAnimationFrame(raf); ctx.close(); ui.meter.style.width = "0%"; };
  }

  async function startRecording() {
    if (!navigator.mediaDevices || !window.MediaRecorder) {
      Y.showError(new Error(t("record_unsupported")));
      return;
    }
    try {
      stream = await navigator.mediaDevices.getUserMedia({ audio: {
        echoCancellation: false, noiseSuppression: false, autoGainControl: false,
        channelCount: 1 } });
    } catch (e) {
      // the browser's reason is English: shown on the English page only (Y.errorText)
      Y.showError(new Y.ApiError(0, "microphone", String(e.message || e), ""));
      return;
    }
    const type = pickType();
    recorder = new MediaRecorder(stream, type ? { mimeType: type } : {});
    const chunks = [];
    recorder.addEventListener("dataavailable", (e) => { if (e.data.size) chunks.push(e.data); });
    // the take is the slot's that was shown when recording began: choosing another slot while
    // it is being saved (the recorder's stop comes later) must not file it under that one
    const slot = inScope()[index];
    recorder.addEventListener("stop", () => upload(slot, new Blob(chunks, { type: recorder.mimeType })));
    recorder.start();
    meterStop = startMeter(stream);
    ui.record.hidden = true;
    ui.stop.hidden = false;
    ui.stop.focus();
    ui.report.replaceChildren(el("span", {}, t("record_recording")));
    ui.report.dataset.result = "recording";
    document.body.dataset.recording = "yes";
  }

  function stopRecording() {
    if (!recorder) return;
    recorder.stop();
    for (const tr of stream.getTracks()) tr.stop();
    if (meterStop) meterStop();
    ui.stop.hidden = true;
    ui.record.hidden = false;
    document.body.dataset.recording = "no";
    ui.report.replaceChildren(el("span", {}, t("record_saving")));
    ui.report.dataset.result = "saving";
  }

  async function upload(s, blob) {
    const path = `/api/recording/slots/${s.slot.split("/").map(encodeURIComponent).join("/")}`;
    let res;
    try {
      res = await fetch(path, { method: "PUT", body: blob, cache: "no-store",
        headers: { Authorization: `Bearer ${token}`, "Content-Type": blob.type || "audio/webm" } });
    } catch (_e) {
      Y.showError(new Y.ApiError(0, "network", t("network_error"), t("network_hint")));
      return;
    }
    const data = await res.json().catch(() => ({}));
    if (!res.ok) {
      // in the page's language: the server's detail and hint are English, shown on the
      // English page (or for a code without words of its own), as in every error toast
      const e = Y.errorText(new Y.ApiError(res.status, data.error || `http_${res.status}`,
        data.detail || "", data.hint || "", data.params || null));
      ui.report.replaceChildren(el("strong", { class: "bad" }, e.title),
        ...[e.detail, e.hint].filter(Boolean).map((x) => el("span", {}, x)));
      ui.report.dataset.result = "refused";
      return;
    }
    const k = data.take;
    s.recorded = true;
    s.speech_s = k.speech_s;
    progress = data.progress;
    if (inScope()[index] !== s) { // another slot is shown now: its list marks this one done
      draw();
      return;
    }
    ui.report.dataset.result = "saved";
    ui.report.replaceChildren(el("strong", { class: "good" }, t("record_saved")),
      el("span", {}, t("record_figures", { s: k.speech_s.toFixed(2), peak: k.peak_dbfs.toFixed(1),
        lufs: k.loudness_lufs.toFixed(1), floor: k.noise_floor_dbfs.toFixed(0) })));
    draw();
  }

  async function play() {
    const s = inScope()[index];
    if (!s || !s.recorded) return;
    const path = `/api/recording/slots/${s.slot.split("/").map(encodeURIComponent).join("/")}/audio`;
    try {
      const res = await Y.api("GET", path, { token, raw: true });
      const url = URL.createObjectURL(await res.blob());
      if (player) player.pause();
      player = new Audio(url);
      ui.play.dataset.state = "loading";
      player.addEventListener("playing", () => { ui.play.dataset.state = "playing"; });
      player.addEventListener("ended", () => {
        ui.play.dataset.state = "ended";
        URL.revokeObjectURL(url);
      });
      await player.play();
    } catch (e) {
      Y.showError(e);
    }
  }

  ui.record.addEventListener("click", startRecording);
  ui.stop.addEventListener("click", stopRecording);
  ui.play.addEventListener("click", play);
  document.addEventListener("keydown", (e) => {
    if (e.target instanceof HTMLInputElement || e.target instanceof HTMLSelectElement) return;
    if (e.key === " ") {
      e.preventDefault();
      if (recorder && recorder.state === "recording") stopRecording(); else startRecording();
    } else if (e.key === "ArrowRight") move(1);
    else if (e.key === "ArrowLeft") move(-1);
  });

  // ------------------------------------------------------------------ start
  Y.initI18n();
  Y.onLang(() => { if (slots.length) { fillScopes(); draw(); } });
  const tok = Y.operator.token();
  if (tok) tryToken(tok); else { ui.tokenBox.hidden = false; ui.token.focus(); }
  window.YR = { get slots() { return slots; }, get index() { return index; } };
})();
