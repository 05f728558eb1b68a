/* The operator's console: choose the deck, the bow (rule 1), start (preparing first when
   needed), pause, see and lower raised hands, one more card (rule 16), the closing calls
   (rule 18), abort, the next match; the cards read with their poems,
   the referees, the PIN and QR code, the audio output. The operator's token comes from the
   link `yomite serve` prints (#token=...) or from the form, and is kept in localStorage. */
"use strict";

(function () {
  const { t } = Y;
  const SETTINGS_KEY = "yomite.console.settings";
  const CHANNEL_KEY = "yomite.console.channel";
  const BASE_KEY = "yomite.console.joinBase";
  const OPERATOR = "@operator";

  const $ = (id) => document.getElementById(id);
  const ui = {
    conn: $("conn"), channelPick: $("channel-pick"), channel: $("channel"), tokenBox: $("token-box"),
    tokenForm: $("token-form"), token: $("token"), app: $("app"), phase: $("phase"),
    cardno: $("cardno"), countdown: $("countdown"), now: $("now"), prepared: $("prepared"),
    paused: $("paused"), start: $("start"), pause: $("pause"), resume: $("resume"),
    extra: $("extra"), again: $("again"), skip: $("skip"), next: $("next"), abort: $("abort"), holds: $("holds"), bow: $("bow"),
    close: $("close"), stepHint: $("step-hint"), audioWarning: $("audio-warning"),
    settings: $("settings"), colourPicks: $("colour-picks"), seed: $("seed"),
    memorise: $("memorise"), cards: $("cards"), prepare: $("prepare"), qr: $("qr"), pin: $("pin"),
    loopback: $("loopback"), joinUrl: $("join-url"), displayUrl: $("display-url"),
    basePick: $("base-pick"), joinBase: $("join-base"),
    refCount: $("ref-count"), referees: $("referees"), csv: $("csv"), cardRows: $("card-rows"), reveal: $("reveal"),
    output: $("output"), audio: $("audio"), newPin: $("new-pin"), history: $("history"), replay: $("replay"), presetPicks: $("preset-picks"),
    presetSets: $("preset-sets"), lower: $("lower"), speed: $("speed"), style: $("style"),
    stylePreview: $("style-preview"), gapVerses: $("gap-verses"),
    recorded: $("recorded"), recordedBox: $("recorded-box"), recordedCount: $("recorded-count"),
    gapCards: $("gap-cards"), gapRepeat: $("gap-repeat"), poemPicks: $("poem-picks"),
    poemCount: $("poem-count"), poemsClear: $("poems-clear"), volume: $("volume"),
    volumeOut: $("volume-out"), projFull: $("proj-full"), projLeft: $("proj-left"), speakers: $("speakers"), speakerUrl: $("speaker-url"),
    speakerRow: $("speaker-row"), speakerHint: $("speaker-hint"), speakerOff: $("speaker-off"),
    speakerQrShow: $("speaker-qr-show"), speakerQr: $("speaker-qr"), speakerNew: $("speaker-new"),
    trust: $("trust"), trustQr: $("trust-qr"), trustUrl: $("trust-url"), trustFp: $("trust-fp"),
    trustUncovered: $("trust-uncovered"),
    kimarijiList: $("kimariji-list"), kimarijiChanged: $("kimariji-changed"),
    underruns: $("underruns"), render: $("render"), renderBar: $("render-bar"),
  };

  let token = null;
  let ch = null;
  let conn = null;
  let state = null;
  let receivedAt = 0;
  let poems = null;
  let t0 = null; // the device-clock time the match started, for the cards' times
  let logKey = null;
  let busy = false;
  let abortTimer = null;
  let presets = []; // GET /api/presets
  let preset = null; // the chosen preset's id
  let volumeDragging = false;

  const countdown = new Y.Countdown((secs) => {
    ui.countdown.textContent = secs === null ? "" : t("seconds_left", { s: secs });
  });

  const chPath = (p = "") => `/api/channels/${encodeURIComponent(ch)}${p}`;

  // ------------------------------------------------------------------ the token
  function askToken() {
    ui.app.hidden = true;
    ui.channelPick.hidden = true;
    ui.tokenBox.hidden = false;
    ui.conn.hidden = true;
    ui.token.focus();
  }

  async function tryToken(tok) {
    try {
      await Y.operator.check(tok);
    } catch (e) {
      Y.showError(e);
      if (e.status === 0) {
        setTimeout(() => tryToken(tok), 3000); // the server is not up yet
        return;
      }
      Y.operator.keep(null);
      askToken();
      return;
    }
    token = tok;
    Y.operator.keep(tok);
    Y.clearErrors();
    ui.tokenBox.hidden = true;
    ui.conn.hidden = false;
    loadRecorded();
    await openChannels();
  }

  // the recording page's pack: once it holds a verse, the next match may be read from it
  async function loadRecorded() {
    try {
      const r = await Y.api("GET", "/api/recording", { token });
      const v = r.progress.verses;
      ui.recordedBox.hidden = v.done === 0;
      ui.recordedCount.textContent = t("voice_recorded_count", { done: v.done, total: v.total,
        colours: r.progress.complete_colours.map((c) => t(c)).join("・") || "–" });
    } catch (_e) {
      ui.recordedBox.hidden = true; // no recording on this server: nothing to offer
    }
  }

  ui.tokenForm.addEventListener("submit", (e) => {
    e.preventDefault();
    const tok = ui.token.value.trim();
    if (tok) tryToken(tok);
  });

  function authLost() {
    if (conn) conn.stop();
    Y.operator.keep(null);
    token = null;
    askToken();
  }

  // ------------------------------------------------------------------ channels
  async function openChannels() {
    let list;
    try {
      list = await Y.api("GET", "/api/channels", { token });
    } catch (e) {
      Y.showError(e);
      if (e.status === 401) authLost();
      else setTimeout(openChannels, 3000);
      return;
    }
    const names = list.map((s) => s.channel);
    if (!names.length) { // an organisation's token whose rooms are all closed
      Y.showError(new Y.ApiError(0, "no_rooms", t("err_no_rooms"), ""));
      return;
    }
    const wanted = new URLSearchParams(location.search).get("ch") || Y.load(CHANNEL_KEY);
    ui.channel.replaceChildren(...names.map((n) => Y.el("option", { value: n }, n)));
    ui.channelPick.hidden = names.length < 2;
    ui.app.hidden = false;
    connect(names.includes(wanted) ? wanted : names[0]);
  }

  ui.channel.addEventListener("change", () => connect(ui.channel.value));

  function connect(name) {
    if (conn) conn.stop();
    ch = name;
    ui.channel.value = name;
    Y.save(CHANNEL_KEY, name);
    loadSettings(); // each channel keeps its own form
    state = null;
    t0 = null;
    logKey = null;
    historyKey = null;
    historyRows = null;
    document.title = `yomite ${t("console_title")} · ${name}`;
    conn = new Y.Channel(name, {
      token: () => token,
      onState,
      onStatus: (s) => Y.showConnection(ui.conn, s),
      onAuthLost: authLost,
    });
    Y.live = conn;
    conn.start();
    loadJoin();
  }

  let bases = [];
  let speakerLinks = []; // the speaker link (with the channel's speaker key) at each base
  let projectorKey = null; // the projector link's key (a room's projector needs it)
  let speakerMode = "device"; // the channel's output: browser speakers only with browser/both
  let tls = null; // GET /api/tls: how phones reach this server, and the CA they trust

  /** The PIN, and the join link and QR code at the address phones use: the server offers
      every address it has (server.public_url first, else the default route's); the choice
      is kept. */
  async function loadJoin() {
    try {
      const p = await Y.api("GET", chPath("/pin"), { token });
      ui.pin.textContent = p.pin;
      bases = p.bases;
      projectorKey = p.projector_key || null;
      const sp = await Y.api("GET", chPath("/speakers"), { token });
      speakerLinks = sp.bases;
      speakerMode = sp.mode;
      if (tls === null) tls = await Y.api("GET", "/api/tls");
      const saved = Y.load(BASE_KEY);
      const chosen = bases.find((b) => b.base === saved) || bases[0];
      ui.joinBase.replaceChildren(...bases.map((b) => Y.el("option", { value: b.base },
        `${b.base} (${b.source})`)));
      ui.joinBase.value = chosen.base;
      ui.basePick.hidden = bases.length < 2;
      await showJoin(chosen);
    } catch (e) {
      Y.showError(e);
    }
  }

  async function showJoin(b) {
    ui.joinUrl.href = b.join_url;
    ui.joinUrl.textContent = b.join_url;
    const display = `${b.base}/display/${encodeURIComponent(ch)}`
      + (projectorKey ? `#key=${projectorKey}` : "");
    ui.displayUrl.href = display;
    ui.displayUrl.textContent = display.replace(/#key=.*$/, "#key=•••");
    // the speaker link holds the channel's speaker key: opened here it makes this browser a
    // speaker; its text hides the key (a console may be on the projector) and its QR code is
    // drawn only on request
    // offered only where the channel's output admits browser speakers: elsewhere the page
    // could only refuse, and the console says how to enable them instead
    const admits = speakerMode === "browser" || speakerMode === "both";
    ui.speakerRow.hidden = !admits;
    ui.speakerHint.hidden = !admits;
    ui.speakerOff.hidden = admits;
    const sl = speakerLinks.find((x) => x.base === b.base);
    ui.speakerUrl.href = sl ? sl.url : "#";
    ui.speakerUrl.textContent = `${b.base}/speaker/${encodeURIComponent(ch)}#key=•••`;
    ui.speakerQr.hidden = true;
    ui.speakerQr.replaceChildren();
    ui.loopback.hidden = !b.loopback;
    await drawQr(ui.qr, `/qr.svg?base=${encodeURIComponent(b.base)}`, b.join_url);
    await showTrust(b);
  }

  /** How a phone or a Chromebook trusts this server once (its own certificate authority):
      the CA's address at the chosen base over plain http (it opens before the device trusts
      the server), its QR code, and its SHA-256 to compare with what the device shows. */
  async function showTrust(b) {
    const own = tls && tls.mode === "own_ca";
    ui.trust.hidden = !own;
    ui.trustUncovered.hidden = !(own && tls.uncovered.length);
    if (!own) return;
    ui.trustUncovered.textContent = t("trust_uncovered", { names: tls.uncovered.join(", ") });
    const url = `http://${b.base.split("://")[1]}/ca.crt`;
    ui.trustUrl.href = url;
    ui.trustUrl.textContent = url;
    ui.trustFp.textContent = tls.fingerprint_sha256;
    await drawQr(ui.trustQr, `/api/tls/qr.svg?base=${encodeURIComponent(b.base)}`, url);
  }

  /** Draw the QR code of `path` (an SVG the server makes) into `box`, labelled with `url`. */
  async function drawQr(box, path, url) {
    const full = path.startsWith("/api/") ? path : chPath(path);
    const svgText = await (await Y.api("GET", full, { token, raw: true })).text();
    const svg = new DOMParser().parseFromString(svgText, "image/svg+xml").documentElement;
    if (svg.nodeName.toLowerCase() !== "svg") return;
    svg.removeAttribute("width");
    svg.removeAttribute("height");
    svg.setAttribute("aria-hidden", "true");
    box.replaceChildren(document.importNode(svg, true));
    box.setAttribute("aria-label", `QR: ${url}`);
    box.dataset.url = url;
  }

  ui.speakerQrShow.addEventListener("click", async () => {
    if (!ui.speakerQr.hidden) {
      ui.speakerQr.hidden = true;
      return;
    }
    const b = bases.find((x) => x.base === ui.joinBase.value) || bases[0];
    if (!b) return;
    try {
      await drawQr(ui.speakerQr, `/speakers/qr.svg?base=${encodeURIComponent(b.base)}`,
        ui.speakerUrl.href);
      ui.speakerQr.hidden = false;
    } catch (e) {
      Y.showError(e);
    }
  });

  ui.speakerNew.addEventListener("click", () => twoPress(ui.speakerNew, "speaker_link_new",
    "speaker_link_new_confirm", () => act(async () => {
      await Y.api("POST", chPath("/speakers/link"), { token });
      await loadJoin();
    })));

  ui.joinBase.addEventListener("change", () => {
    const b = bases.find((x) => x.base === ui.joinBase.value);
    if (!b) return;
    Y.save(BASE_KEY, b.base);
    showJoin(b).catch(Y.showError);
  });

  // ------------------------------------------------------------------ state
  function onState(s) {
    state = s;
    receivedAt = performance.now();
    const m = s.match;
    countdown.update(m);
    if (m && m.segment && m.segment.label === "memorise_call") t0 = m.segment.started_s;
    if (!m || m.phase === "ready") t0 = null;
    render();
    refreshLog(m);
    const key = m ? `${m.seed}/${m.phase}/${m.cards.length}` : "none";
    if (key !== historyKey) {
      historyKey = key;
      loadHistory();
    }
  }

  // ------------------------------------------------------------------ the history
  let historyKey = null;
  let historyRows = null; // the last rows fetched: drawn again in the other language

  /** The channel's matches, newest first, each with its CSV (who held included). */
  async function loadHistory() {
    try {
      historyRows = await Y.api("GET", chPath("/matches?limit=20&started=true"), { token });
    } catch (_e) {
      return; // shown again at the next change
    }
    renderHistory();
  }

  function renderHistory() {
    const rows = historyRows;
    if (rows === null) return;
    if (!rows.length) {
      ui.history.replaceChildren(Y.el("li", { class: "empty" }, t("none_yet")));
      return;
    }
    ui.history.replaceChildren(...rows.map((r) => {
      const when = r.started_at || r.prepared_at;
      const time = when ? new Date(when).toLocaleString(Y.lang === "ja" ? "ja-JP" : "en-GB",
        { month: "numeric", day: "numeric", hour: "2-digit", minute: "2-digit" }) : "";
      const what = r.error ? r.error : t("history_row", {
        colours: (r.colors || []).map((c) => t(c)).join(t("name_sep")),
        seed: r.seed, read: r.cards_read, phase: t(`phase_${r.phase}`),
      });
      const b = Y.el("button", { type: "button", class: "btn small" }, "CSV");
      b.addEventListener("click", () => download(`/matches/${encodeURIComponent(r.id)}/log?format=csv`,
        `${ch}-${r.id}.csv`));
      // the class result sheet, printable, in a tab of its own (it reads the token kept here)
      const sheet = Y.el("a", { class: "btn small sheet-link", target: "_blank", rel: "noopener",
        href: `/sheet/${encodeURIComponent(ch)}?match=${encodeURIComponent(r.id)}`,
        "aria-label": t("print_sheet_aria") }, t("print_sheet"));
      return Y.el("li", { dataset: { id: r.id }, class: r.current ? "current" : "" },
        Y.el("span", { class: "when" }, time), Y.el("span", { class: "what" }, what), b,
        r.error ? "" : sheet);
    }));
  }

  async function download(path, filename) {
    try {
      const res = await Y.api("GET", chPath(path), { token, raw: true });
      const url = URL.createObjectURL(await res.blob());
      const a = Y.el("a", { href: url, download: filename });
      document.body.append(a);
      a.click();
      a.remove();
      setTimeout(() => URL.revokeObjectURL(url), 10000);
    } catch (e) {
      Y.showError(e);
    }
  }

  /** The match log gives the start of a match the console joined late. */
  async function refreshLog(m) {
    if (!m || m.phase === "ready" || t0 !== null) return;
    const key = `${m.seed}/${m.phase}/${m.cards.length}`;
    if (key === logKey) return;
    logKey = key;
    try {
      const log = await Y.api("GET", chPath("/match/log"), { token });
      if (log.timeline.length) {
        const call = log.timeline.find((e) => e.label === "memorise_call");
        t0 = (call || log.timeline[0]).start_s;
        renderCards(state && state.match);
      }
    } catch (_e) { /* the times wait for the next state */ }
  }

  // ------------------------------------------------------------------ rendering
  function render() {
    const m = state && state.match;
    renderHeadline(m);
    renderButtons(m);
    renderHolds(m);
    renderCards(m);
    renderReferees(state ? state.referees || [] : []);
    renderAudio(state);
    renderKimariji(m);
  }

  /** How each card still on the mats is decided now, and what the last card read changed. */
  function renderKimariji(m) {
    const left = (m && m.kimariji && m.kimariji.left) || [];
    const changed = left.filter((c) => c.before !== c.kimariji);
    ui.kimarijiChanged.textContent = !left.length ? t("kimariji_none")
      : (changed.length ? t("kimariji_changed", { n: changed.length }) : "");
    const sorted = left.slice().sort((a, b) => a.kimariji.length - b.kimariji.length
      || a.kimariji.localeCompare(b.kimariji, "ja"));
    ui.kimarijiList.replaceChildren(...sorted.map((c) => Y.el("li",
      { class: c.before !== c.kimariji ? "changed" : "", dataset: { poem: String(c.poem) } },
      Y.el("span", { class: "no" }, t("poem_no", { no: c.poem })),
      Y.el("span", { class: "now" }, c.kimariji),
      c.before !== c.kimariji ? Y.el("span", { class: "before" }, c.before) : "")));
  }

  function renderHeadline(m) {
    ui.phase.dataset.phase = m ? m.phase : "none";
    ui.phase.dataset.paused = m && m.paused ? "true" : "false";
    ui.phase.textContent = m && m.paused ? `${Y.phaseText(m)} · ${t("paused")}` : Y.phaseText(m);
    ui.cardno.textContent = Y.cardText(m);
    ui.now.textContent = nowText(m);
    ui.prepared.textContent = m ? t("prepared", {
      colours: m.colors.map((c) => t(c)).join(t("name_sep")),
      seed: m.seed, cards: m.cards_total, mem: m.timings.memorise_s,
    }) + (m.reason ? ` · ${m.reason}` : "") : "";
    if (m && m.paused) {
      ui.paused.hidden = false;
      ui.paused.textContent = m.resumes_at_s !== null ? t("resuming")
        : `${t("paused")} — ${t("held_by", { names: Y.joinNames(Y.holdNames(m)) })}`;
    } else {
      ui.paused.hidden = true;
    }
  }

  // a card's poem is shown once its (last) lower verse has been read, as on the projector: a
  // laptop mirrored to the class's screen must not show the answer while the class listens.
  // The operator may show every card at once (kept in this browser).
  const REVEAL_KEY = "yomite.console.reveal";
  let reveal = Y.load(REVEAL_KEY, false) === true;
  ui.reveal.checked = reveal;
  ui.reveal.addEventListener("change", () => {
    reveal = ui.reveal.checked;
    Y.save(REVEAL_KEY, reveal);
    render();
  });

  /** Whether card `n` of match `m` may be shown: read to its end, or the operator asked. */
  function shown(m, n) {
    if (reveal) return true;
    const c = m && m.cards.find((x) => x.n === n);
    return !!c && c.finished_s !== null;
  }

  function nowText(m) {
    const seg = m && (m.paused ? m.cut : m.segment);
    if (!seg || !Y.isRunning(m)) return "";
    let what = Y.segmentText(seg, m);
    if (seg.card && seg.poem && !shown(m, seg.card)) {
      what = `${t("card_no", { n: seg.card })} ${what}`;
    } else if (seg.card && seg.poem) {
      const p = poems && poems.get(seg.poem);
      what = `${t("card_no", { n: seg.card })} ${what} — ${t("poem_no", { no: seg.poem })}`;
      if (p) what += ` ${seg.verse === "shimo" ? p.shimo : p.kami}`;
    }
    return t("reading_now", { what });
  }

  // phases in which nothing is read and the next match may be prepared (hall/reading.py ENDED)
  const ENDED = ["finished", "closed", "aborted"];

  function renderButtons(m) {
    const phase = m ? m.phase : null;
    const over = !m || ENDED.includes(phase);
    const opHold = !!m && m.holds.some((h) => h.referee === OPERATOR);
    const bowCall = !m || !m.calls || !!m.calls.bow_call;
    ui.start.disabled = busy || !(over || phase === "ready");
    // the bow alone (rule 1), before the players shuffle and lay out their cards
    ui.bow.hidden = !bowCall;
    ui.bow.disabled = busy || !(over || (phase === "ready" && !m.bowed));
    ui.pause.disabled = busy || !m || ["aborted", "closed"].includes(phase)
      || (phase === "finished" && !opHold);
    ui.pause.textContent = t(opHold ? "unpause" : "pause");
    ui.resume.disabled = busy || !m || m.holds.length === 0;
    ui.extra.disabled = busy || phase !== "finished" || !(m.unread_left > 0);
    // the teacher's controls: the last card again between cards (pause first: the gap is
    // short) or once finished; on to the next card's upper verse while anything is read
    const seg = m && m.segment;
    ui.again.disabled = busy || !(phase === "finished" || (["reading", "tiebreak"].includes(phase)
      && seg && seg.label === "gap_between_cards" && seg.card > 0));
    ui.skip.disabled = busy || !["memorising", "prelude", "reading", "tiebreak"].includes(phase);
    ui.close.disabled = busy || phase !== "finished";
    ui.next.disabled = busy || !m || !ENDED.includes(phase);
    ui.replay.disabled = busy || !m || !ENDED.includes(phase);
    ui.abort.disabled = busy || over || phase === "closing";
    if (ui.abort.disabled) disarmAbort();
    ui.prepare.disabled = busy || !(over || phase === "ready");
    const hint = phase === "finished" && !m.paused ? t("finished_hint")
      : (phase === "ready" && m.bowed ? t("bowed_hint") : "");
    ui.stepHint.hidden = !hint;
    ui.stepHint.textContent = hint;
  }

  let holdsKey = null;

  /** The raised hands. The list is rebuilt only when the hands change (a rebuild under the
      pointer would swallow a click on "lower"); the durations are updated in place. */
  function renderHolds(m) {
    const holds = m ? m.holds : [];
    const key = `${Y.lang}|${holds.map((h) => `${h.referee}:${h.name}`).join("|")}`;
    if (key !== holdsKey) {
      if (holdsKey !== null && holds.length) {
        Y.announce(t("held_by", { names: Y.joinNames(holds.map(Y.holderName)) }), true);
      }
      holdsKey = key;
      ui.holds.replaceChildren(...(holds.length ? holds.map(holdItem)
        : [Y.el("li", { class: "empty" }, t("nobody"))]));
    }
    const gone = (performance.now() - receivedAt) / 1000;
    for (const h of holds) {
      const li = ui.holds.querySelector(`li[data-referee="${CSS.escape(h.referee)}"] .since`);
      const secs = Math.max(0, Math.floor(m.at_s - h.since_s + gone));
      if (li) li.textContent = t("since", { s: secs });
    }
  }

  function holdItem(h) {
    const name = Y.holderName(h);
    const li = Y.el("li", { dataset: { referee: h.referee } },
      Y.el("span", { class: "hand", "aria-hidden": "true" }),
      Y.el("span", { class: "who" }, name),
      Y.el("span", { class: "since" }));
    if (h.referee.startsWith("@") && h.referee !== OPERATOR) {
      li.append(Y.el("span", { class: "system" }, t("system_hold")));
    } else {
      const b = Y.el("button", { type: "button", class: "btn small",
        "aria-label": t("lower_aria", { name }) }, t("lower"));
      b.addEventListener("click", () => act(() => Y.api("DELETE",
        chPath(`/holds/${encodeURIComponent(h.referee)}`), { token })));
      li.append(b);
    }
    return li;
  }

  function renderCards(m) {
    const cards = m ? m.cards : [];
    if (!cards.length) {
      ui.cardRows.replaceChildren(Y.el("tr", {}, Y.el("td", { colspan: "4", class: "empty" },
        t("none_yet"))));
      return;
    }
    const rel = (s) => (t0 === null || s === null ? "" : Y.fmtTime(s - t0));
    ui.cardRows.replaceChildren(...cards.slice().reverse().map((c) => {
      if (!shown(m, c.n)) {
        return Y.el("tr", { class: "reading", dataset: { poem: "" } },
          Y.el("th", { scope: "row" }, String(c.n)),
          Y.el("td", { class: "poem withheld" }, t("poem_hidden")),
          Y.el("td", { class: "time" }, rel(c.started_s)),
          Y.el("td", { class: "time" }, t("in_progress")));
      }
      const p = poems && c.poem ? poems.get(c.poem) : null;
      const poemCell = Y.el("td", { class: "poem" },
        Y.el("span", { class: "no" }, c.poem ? t("poem_no", { no: c.poem }) : ""),
        p ? Y.el("span", { class: "verses" }, Y.el("span", { class: "kami" }, Y.verse(p.kami)), " ",
          Y.el("span", { class: "shimo" }, Y.verse(p.shimo))) : "",
        p ? Y.el("span", { class: "author" }, p.author) : "");
      return Y.el("tr", { class: c.finished_s === null ? "reading" : "", dataset: { poem: c.poem || "" } },
        Y.el("th", { scope: "row" }, String(c.n)),
        poemCell,
        Y.el("td", { class: "time" }, rel(c.started_s)),
        Y.el("td", { class: "time" }, c.finished_s === null ? t("in_progress") : rel(c.finished_s)));
    }));
  }

  // one row a referee, kept across states (keyed by id): a state that arrives between the two
  // presses of 削除 must not replace the armed button with a fresh one
  const refRows = new Map();

  function renderReferees(refs) {
    ui.refCount.textContent = refs.length ? `(${refs.filter((r) => r.connected).length}/${refs.length})` : "";
    if (!refs.length) {
      refRows.clear();
      ui.referees.replaceChildren(Y.el("li", { class: "empty" }, t("no_referees")));
      return;
    }
    const seen = new Set(refs.map((r) => r.id));
    for (const id of [...refRows.keys()]) if (!seen.has(id)) refRows.delete(id);
    ui.referees.replaceChildren(...refs.map((r) => {
      let row = refRows.get(r.id);
      if (!row) {
        row = { li: Y.el("li", { dataset: { referee: r.id } }), remove: removeButton(r) };
        refRows.set(r.id, row);
      }
      row.li.className = r.connected ? "on" : "off";
      row.li.replaceChildren(
        Y.el("span", { class: "dot", role: "img", "aria-label": t(r.connected ? "connected" : "not_connected") }),
        Y.el("span", { class: "who" }, r.name),
        r.holding ? Y.el("span", { class: "badge" }, t("holding")) : "",
        row.remove);
      return row.li;
    }));
  }

  // two presses, like abort: the first arms the button for 4 s
  function twoPress(button, label, armedLabel, action) {
    if (!button.classList.contains("armed")) {
      button.classList.add("armed");
      button.textContent = t(armedLabel);
      setTimeout(() => {
        button.classList.remove("armed");
        button.textContent = t(label);
      }, 4000);
      return;
    }
    button.classList.remove("armed");
    button.textContent = t(label);
    action();
  }

  function removeButton(r) {
    const b = Y.el("button", { type: "button", class: "btn small remove",
                               "aria-label": `${t("remove_referee")}: ${r.name}` }, t("remove_referee"));
    b.addEventListener("click", () => twoPress(b, "remove_referee", "remove_referee_confirm",
      () => act(() => Y.api("DELETE", chPath(`/referees/${encodeURIComponent(r.id)}`), { token }))));
    return b;
  }

  function renderAudio(s) {
    const out = s ? s.output || "" : "";
    const status = s ? s.audio || "" : "";
    const missing = status === "no_device";
    const info = (s && s.output_info) || {};
    ui.output.textContent = s ? outputText(s, info, missing) : "";
    ui.output.title = missing ? s.no_device || "" : out; // the server's own words, for a bug report
    ui.output.className = missing || info.code === "null" ? "bad" : "";
    ui.audio.textContent = status === "ok" ? t("audio_ok")
      : (missing ? t("audio_no_device") : status);
    ui.audio.className = status && status !== "ok" ? "bad" : "good";
    const sp = s && s.speakers;
    ui.speakers.textContent = !sp ? "" : (sp.mode === "device" ? t("speakers_none")
      : t("speakers_pages", { n: sp.pages, mode: t(`output_${sp.mode}`) }));
    // each speaker page's own report: what it could not play, and why it may not have
    for (const h of (s && s.speaker_health) || []) {
      const trouble = h.missed + h.late + h.resyncs + h.epochs + h.steps > 0;
      ui.speakers.append(Y.el("div", { class: `speaker-health${trouble ? " bad" : ""}`, "data-n": h.number },
        t("speaker_health", { n: h.where ? `${h.number} (${h.where})` : h.number, missed: h.missed, late: h.late, resyncs: h.resyncs,
          steps: h.steps, epochs: h.epochs,
          rtt: h.rtt_ms === null ? "–" : h.rtt_ms.toFixed(1) })));
    }
    const proj = (s && s.projector) || { torifuda: "panel", left: false };
    ui.projFull.checked = proj.torifuda === "full";
    ui.projLeft.checked = !!proj.left;
    ui.projFull.disabled = ui.projLeft.disabled = !s;
    if (s && typeof s.volume_db === "number" && !volumeDragging) {
      ui.volume.value = String(s.volume_db);
      ui.volumeOut.textContent = `${s.volume_db} dB`;
    }
    // said next to 開始, in the page's language: a match started now is heard by no one
    const unheard = missing ? "no_device_warning" : (noSpeakers() ? "no_speakers_warning" : null);
    ui.audioWarning.hidden = !unheard;
    ui.audioWarning.textContent = unheard ? t(unheard) : "";
    const st = s && s.output_stats;
    ui.underruns.textContent = st ? t("underruns_value", { n: st.underruns, late: st.late_clips }) : "";
    ui.underruns.className = st && (st.underruns || st.late_clips) ? "bad" : "good";
    const r = s && s.render;
    ui.renderBar.hidden = !r;
    ui.renderBar.max = r ? Math.max(1, r.total) : 1;
    ui.renderBar.value = r ? r.done : 0;
    ui.render.textContent = !r ? "" : r.error ? t("render_failed", { detail: r.error })
      : r.done >= r.total ? t("render_done", { total: r.total })
      : t("render_value", { done: r.done, total: r.total });
    ui.render.className = r && r.error ? "bad" : "";
  }

  /** The channel's output in the page's language, from the code and figures the server
      sends (its own line is English); a sink it did not describe is shown as it says. */
  function outputText(s, o, missing) {
    if (missing) {
      const key = `no_device_${o.why || "device_error"}`;
      const why = t(key, o);
      return t("output_no_device", { reason: why !== key ? why : t("no_device_device_error") });
    }
    switch (o.code) {
      case "device": {
        let text = t("output_info_device", { device: o.device, blocksize: o.blocksize,
                                              latency: o.latency_ms });
        if (o.pid !== null && o.pid !== undefined) {
          text += t("output_info_process", { pid: o.pid,
            prio: t(o.realtime ? "output_info_realtime" : "output_info_normal") });
        }
        if (o.wakeup_us !== null && o.wakeup_us !== undefined) {
          text += t("output_info_wakeup", { us: o.wakeup_us });
        }
        return text;
      }
      case "browser":
        return t("output_info_browser");
      case "null":
        return t("output_info_null");
      default:
        return s.output || "";
    }
  }

  const noDevice = () => !!state && state.audio === "no_device";
  // a channel read by the browsers alone, with no speaker page open: heard by no one either
  const noSpeakers = () => !!state && !!state.speakers && state.speakers.mode === "browser"
    && state.speakers.pages === 0;
  let silentTimer = null;

  /** With no audio device, or no speaker page on a browser-only channel, a start (or the bow)
      needs a second press within 4 s. */
  function confirmSilent(button, label) {
    if (!(noDevice() || noSpeakers()) || button.classList.contains("armed")) {
      clearTimeout(silentTimer);
      button.classList.remove("armed");
      button.textContent = t(label);
      return true;
    }
    button.classList.add("armed");
    button.textContent = t("start_silent_confirm");
    silentTimer = setTimeout(() => {
      button.classList.remove("armed");
      button.textContent = t(label);
    }, 4000);
    return false;
  }

  function renderAll() {
    if (ch) document.title = `yomite ${t("console_title")} · ${ch}`;
    render();
    countdown.update(state && state.match);
    Y.showConnection(ui.conn, conn ? conn.status : "connecting");
    buildColourPicks(true);
    renderPresets();
    renderHistory();
  }

  // ------------------------------------------------------------------ settings
  function buildColourPicks(keep = false) {
    const checked = keep ? formColours() : null;
    ui.colourPicks.replaceChildren(...Y.COLOURS.map((c) => {
      const input = Y.el("input", { type: "checkbox", name: "colour", value: c, id: `colour-${c}` });
      if (checked && checked.includes(c)) input.checked = true;
      return Y.el("label", { class: `pick colour-${c}`, for: `colour-${c}` }, input,
        Y.el("span", { class: "swatch", "aria-hidden": "true" }), t(c));
    }));
  }

  function formColours() {
    return [...ui.colourPicks.querySelectorAll("input:checked")].map((i) => i.value);
  }

  function num(input, { integer = false, min = 0, max = Infinity } = {}) {
    const v = input.value.trim();
    if (v === "") return null;
    const n = Number(v);
    if (!isFinite(n) || n < min || n > max || (integer && !Number.isInteger(n))) {
      input.setAttribute("aria-invalid", "true");
      throw new Y.ApiError(0, "invalid", `${input.labels[0].textContent.trim()}: ${v}`, "");
    }
    input.removeAttribute("aria-invalid");
    return n;
  }

  /** The form's settings; throws (shown to the user) if a number is impossible. */
  function formSettings() {
    return {
      colours: formColours(),
      poems: formPoems(),
      seed: num(ui.seed, { integer: true, max: 2 ** 53 - 1 }),
      memorise: num(ui.memorise, { max: 3600 }),
      cards: num(ui.cards, { integer: true, min: 1, max: 100 }),
      lower: num(ui.lower, { integer: true, min: 1, max: 3 }),
      speed: num(ui.speed, { min: 0.25, max: 3 }),
      style: ui.style.value || null,
      gapVerses: num(ui.gapVerses, { max: 60 }),
      gapCards: num(ui.gapCards, { max: 60 }),
      gapRepeat: num(ui.gapRepeat, { max: 60 }),
      preset,
    };
  }

  const FIELDS = ["seed", "memorise", "cards", "lower", "speed", "style", "gapVerses", "gapCards", "gapRepeat"];

  // each channel has its own settings (a pink reader is not a blue one)
  const settingsKey = () => `${SETTINGS_KEY}.${ch}`;

  function saveSettings() {
    if (!ch) return;
    const s = { colours: formColours(), poems: formPoems(), preset };
    for (const f of FIELDS) s[f] = ui[f].value;
    Y.save(settingsKey(), s);
    ui.poemCount.textContent = s.poems.length ? t("poems_chosen", { n: s.poems.length }) : "";
  }

  function loadSettings() {
    const s = Y.load(settingsKey(), null) || { colours: ["blue"] };
    for (const i of ui.colourPicks.querySelectorAll("input")) i.checked = (s.colours || []).includes(i.value);
    for (const i of ui.poemPicks.querySelectorAll("input")) i.checked = (s.poems || []).includes(Number(i.value));
    for (const f of FIELDS) ui[f].value = s[f] || "";
    preset = presets.some((p) => p.id === s.preset) ? s.preset : (s.preset || null);
    renderPresets();
    ui.poemCount.textContent = (s.poems || []).length ? t("poems_chosen", { n: s.poems.length }) : "";
  }

  function prepareBody(f) {
    const body = { colors: f.colours };
    if (f.poems.length) body.poems = f.poems;
    if (f.seed !== null) body.seed = f.seed;
    if (f.preset) body.preset = f.preset;
    const over = {};
    if (f.cards !== null) over.cards = f.cards;
    if (f.memorise !== null) over.memorise_s = f.memorise;
    if (f.lower !== null) over.lower_verse_times = f.lower;
    const gaps = {};
    if (f.gapVerses !== null) gaps.between_verses_s = f.gapVerses;
    if (f.gapCards !== null) gaps.between_cards_s = f.gapCards;
    if (f.gapRepeat !== null) gaps.repeat_s = f.gapRepeat;
    if (Object.keys(gaps).length) over.gaps = gaps;
    // the match's settings name its colours too (its journal's header keeps them); the cards
    // are checked against the deck the server builds (the colours and the poems picked)
    if (f.colours.length) over.colors = f.colours;
    if (Object.keys(over).length) body.overrides = over;
    if (f.speed !== null) body.voice = { speed: f.speed };
    if (f.style !== null) body.voice = { ...(body.voice || {}), style: f.style };
    if (ui.recorded.checked && !ui.recordedBox.hidden) body.voice = { ...(body.voice || {}), recorded: true };
    return body;
  }

  function matchesForm(m, f) {
    const same = (a, b) => a.length === b.length && a.every((x) => b.includes(x));
    const v = (state && state.voice) || {};
    const tm = m.timings;
    return (f.colours.length === 0 || same(f.colours, m.colors))
      && f.poems.length === 0
      && (f.seed === null || f.seed === m.seed)
      && (f.cards === null || f.cards === m.cards_planned)
      && (f.memorise === null || f.memorise === tm.memorise_s)
      && (f.lower === null || f.lower === tm.lower_verse_times)
      && (f.gapVerses === null || f.gapVerses === tm.between_verses_s)
      && (f.gapCards === null || f.gapCards === tm.between_cards_s)
      && (f.gapRepeat === null || f.gapRepeat === tm.repeat_s)
      && (f.speed === null || f.speed === v.speed)
      && (f.style === null || f.style === v.style)
      && (f.preset === null || f.preset === (state && state.preset));
  }

  // ------------------------------------------------------------------ presets
  async function loadPresets() {
    try {
      presets = await Y.api("GET", "/api/presets");
    } catch (e) {
      Y.showError(e);
      return;
    }
    renderPresets();
  }

  function presetLabel(p) {
    return Y.lang === "en" ? p.label_en : p.label;
  }

  /** What a preset sets, in words, before anything starts. */
  function presetText(p) {
    const m = p.match;
    const v = p.voice;
    return t("preset_sets", { mem: m.memorise_s, cards: m.cards, lower: m.lower_verse_times,
      speed: v.speed, verses: m.gaps.between_verses_s, between: m.gaps.between_cards_s })
      + (p.description ? ` — ${Y.lang === "en" ? p.description_en : p.description}` : "");
  }

  function renderPresets() {
    ui.presetPicks.replaceChildren(...presets.map((p) => {
      const b = Y.el("button", { type: "button", class: "btn", role: "radio",
        "aria-checked": p.id === preset ? "true" : "false", dataset: { preset: p.id } },
      presetLabel(p));
      b.addEventListener("click", () => choosePreset(p.id === preset ? null : p));
      return b;
    }));
    const p = presets.find((x) => x.id === preset);
    ui.presetSets.textContent = p ? presetText(p) : t("preset_none");
  }

  /** Tap a preset: its settings fill the form (and can still be changed there). */
  function choosePreset(p) {
    preset = p ? p.id : null;
    if (p) {
      ui.memorise.value = String(p.match.memorise_s);
      ui.cards.value = String(p.match.cards);
      ui.lower.value = String(p.match.lower_verse_times);
      ui.speed.value = String(p.voice.speed);
      ui.gapVerses.value = String(p.match.gaps.between_verses_s);
      ui.gapCards.value = String(p.match.gaps.between_cards_s);
      ui.gapRepeat.value = String(p.match.gaps.repeat_s);
    }
    renderPresets();
    saveSettings();
  }

  // ------------------------------------------------------------------ the poem picker
  function buildPoemPicks() {
    if (!poems) return;
    ui.poemPicks.replaceChildren(...[...poems.values()].map((p) => {
      const input = Y.el("input", { type: "checkbox", value: String(p.no), id: `poem-${p.no}` });
      return Y.el("label", { for: `poem-${p.no}`, class: `colour-${p.color}` }, input,
        Y.el("span", { class: "swatch", "aria-hidden": "true" }),
        `${p.no} ${p.kimariji}`);
    }));
    loadSettings();
  }

  function formPoems() {
    return [...ui.poemPicks.querySelectorAll("input:checked")].map((i) => Number(i.value));
  }

  ui.poemsClear.addEventListener("click", () => {
    for (const i of ui.poemPicks.querySelectorAll("input")) i.checked = false;
    saveSettings();
  });

  // ------------------------------------------------------------------ the volume
  ui.volume.addEventListener("input", () => {
    volumeDragging = true;
    ui.volumeOut.textContent = `${ui.volume.value} dB`;
  });
  ui.volume.addEventListener("change", () => act(async () => {
    volumeDragging = false;
    return Y.api("PUT", chPath("/volume"), { token, body: { volume_db: Number(ui.volume.value) } });
  }));

  // what the projector shows: on every projector page of the channel at once
  for (const box of [ui.projFull, ui.projLeft]) {
    box.addEventListener("change", () => act(() => Y.api("PUT", chPath("/projector"), {
      token, body: { torifuda: ui.projFull.checked ? "full" : "panel", left: ui.projLeft.checked } })));
  }

  ui.settings.addEventListener("change", saveSettings);

  // ------------------------------------------------------------------ actions
  async function act(fn) {
    if (busy) return;
    busy = true;
    renderButtons(state && state.match);
    try {
      const s = await fn();
      if (s && conn) conn.accept(s);
    } catch (e) {
      Y.showError(e);
      if (e.status === 401) authLost();
    } finally {
      busy = false;
      render();
    }
  }

  const prepare = () => Y.api("POST", chPath("/match"), { token, body: prepareBody(formSettings()) });

  ui.settings.addEventListener("submit", (e) => {
    e.preventDefault();
    act(prepare);
  });

  /** One tap for a teacher: prepare when nothing (or something else) is prepared, then
      `step` (start, or the bow alone). A match that has bowed is kept as it is. */
  const prepared = (step) => act(async () => {
    const m = state && state.match;
    const f = formSettings();
    const keep = m && m.phase === "ready" && (m.bowed || matchesForm(m, f));
    if (!keep) conn.accept(await prepare());
    return Y.api("POST", chPath(`/match/${step}`), { token });
  });

  ui.start.addEventListener("click", () => {
    if (confirmSilent(ui.start, "start")) prepared("start");
  });
  ui.bow.addEventListener("click", () => {
    if (confirmSilent(ui.bow, "bow")) prepared("bow");
  });

  ui.pause.addEventListener("click", () => act(() => {
    const m = state && state.match;
    const held = !!m && m.holds.some((h) => h.referee === OPERATOR);
    const path = chPath(`/holds/${encodeURIComponent(OPERATOR)}`);
    return held ? Y.api("DELETE", path, { token })
      : Y.api("PUT", path, { token, body: { name: t("operator_name") } });
  }));

  ui.resume.addEventListener("click", () => act(() => Y.api("POST", chPath("/match/resume"), { token })));
  ui.newPin.addEventListener("click", () => twoPress(ui.newPin, "new_pin", "new_pin_confirm",
    async () => {
      try {
        await Y.api("POST", chPath("/pin"), { token });
        await loadJoin();
      } catch (e) {
        Y.showError(e);
      }
    }));
  ui.extra.addEventListener("click", () => act(() => Y.api("POST", chPath("/match/extra-card"), { token })));
  ui.again.addEventListener("click", () => act(() => Y.api("POST", chPath("/match/read-again"), { token })));
  ui.skip.addEventListener("click", () => act(() => Y.api("POST", chPath("/match/skip"), { token })));
  ui.close.addEventListener("click", () => act(() => Y.api("POST", chPath("/match/close"), { token })));
  // the next match draws a new order: a seed typed for this one is not kept
  ui.next.addEventListener("click", () => act(() => {
    ui.seed.value = "";
    saveSettings();
    return prepare();
  }));

  // 感想戦: the last match again, on purpose: the same deck, order, settings and voice
  ui.replay.addEventListener("click", () => act(() => Y.api("POST", chPath("/match/replay"), { token })));

  function disarmAbort() {
    clearTimeout(abortTimer);
    ui.abort.classList.remove("armed");
    ui.abort.textContent = t("abort");
  }

  // two presses, not a dialog: a dialog blocks the page (and the live state) on a phone
  ui.abort.addEventListener("click", () => {
    if (!ui.abort.classList.contains("armed")) {
      ui.abort.classList.add("armed");
      ui.abort.textContent = t("abort_confirm");
      abortTimer = setTimeout(disarmAbort, 4000);
      return;
    }
    disarmAbort();
    act(() => Y.api("POST", chPath("/match/abort"), { token, body: { reason: t("abort_reason") } }));
  });

  ui.csv.addEventListener("click", () => download("/match/log?format=csv", `${ch}-match.csv`));

  // ------------------------------------------------------------------ the voice's preview
  // The jokā (never a card) read in the chosen style and speed, played on this page alone
  // through Web Audio: the token goes in a header, and the page's policy lets no blob: media
  let previewCtx = null;
  let previewSrc = null;
  let previewRun = 0; // a press while one loads or plays stops it

  function previewState(s) {
    ui.stylePreview.dataset.state = s;
    ui.stylePreview.textContent = t(s === "loading" || s === "playing" ? "preview_stop" : "preview");
  }

  function stopPreview() {
    previewRun += 1;
    if (previewSrc) {
      previewSrc.onended = null;
      previewSrc.stop();
      previewSrc = null;
    }
    previewState("");
  }

  async function playPreview() {
    if (["loading", "playing"].includes(ui.stylePreview.dataset.state)) {
      stopPreview();
      return;
    }
    const run = ++previewRun;
    try {
      const q = new URLSearchParams();
      if (ui.style.value) q.set("style", ui.style.value); // none: the configured style
      const speed = num(ui.speed, { min: 0.25, max: 3 });
      if (speed !== null) q.set("speed", String(speed));
      if (!previewCtx) previewCtx = new (window.AudioContext || window.webkitAudioContext)();
      const resumed = previewCtx.resume(); // within the press: the browser lets it sound
      previewState("loading");
      const query = q.toString();
      const res = await Y.api("GET", chPath(`/voice/preview${query ? `?${query}` : ""}`),
        { token, raw: true });
      const data = await res.arrayBuffer();
      let buffer;
      try {
        await resumed;
        buffer = await previewCtx.decodeAudioData(data);
      } catch (e) {
        throw new Error(t("preview_failed", { why: (e && (e.message || e.name)) || String(e) }));
      }
      if (run !== previewRun) return; // stopped while it loaded
      const src = previewCtx.createBufferSource();
      src.buffer = buffer;
      src.connect(previewCtx.destination);
      src.onended = () => {
        if (previewSrc !== src) return;
        previewSrc = null;
        ui.stylePreview.dataset.played = buffer.duration.toFixed(2);
        previewState("done");
      };
      previewSrc = src;
      src.start();
      previewState("playing");
    } catch (e) {
      if (run === previewRun) previewState("");
      Y.showError(e);
    }
  }

  ui.stylePreview.addEventListener("click", playPreview);

  // the hold durations tick while the hall waits
  setInterval(() => {
    const m = state && state.match;
    if (m && m.holds.length) renderHolds(m);
  }, 1000);

  // ------------------------------------------------------------------ start
  Y.initI18n();
  Y.onLang(renderAll);
  buildColourPicks();
  Y.showConnection(ui.conn, "connecting");
  loadPresets();
  Y.poems().then((p) => {
    poems = p;
    buildPoemPicks();
    render();
  }).catch(Y.showError);
  const tok = Y.operator.token();
  if (tok) tryToken(tok);
  else askToken();
})();
