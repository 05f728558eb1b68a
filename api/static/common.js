/* yomite: code shared by the hall's three pages (console, referee, display).

   Plain script, no build step and nothing fetched from outside the hall's own server: a sports
   hall often has no internet. Everything is on `window.Y`:

   - i18n: Japanese by default, English on request; the choice is kept in localStorage.
   - api(): fetch with the token; an error answer ({error, detail, hint}) becomes an ApiError.
   - Channel: the WebSocket of one channel. It reconnects by itself with backoff, keeps the
     same token (so a referee keeps its identity), detects dead links with pings, and passes on
     only states whose `seq` is newer than the last one shown.
   - helpers to show a match: phase words, card counter, countdown, colour chips.
*/
"use strict";

(function () {
  // ------------------------------------------------------------------ i18n
  const LANG_KEY = "yomite.lang";

  const STRINGS = {
    ja: {
      lang_switch: "English",
      lang_switch_aria: "Switch to English",
      conn_connecting: "接続中…",
      conn_online: "接続済み",
      conn_reconnecting: "再接続中…",
      conn_offline: "切断",
      error: "エラー",
      network_error: "サーバーに接続できません",
      network_hint: "ネットワーク（Wi-Fi）とサーバーを確かめてください",
      dismiss: "閉じる",
      phase_none: "試合なし",
      phase_ready: "開始前",
      phase_announcing: "札を覚えてください",
      phase_memorising: "暗記時間",
      phase_prelude: "序歌",
      phase_reading: "読み上げ中",
      phase_closing: "終わりの挨拶",
      phase_finished: "終了",
      phase_tiebreak: "もう一枚",
      phase_aborted: "中止",
      paused: "一時停止中",
      resuming: "まもなく再開",
      card_of: "{n} / {total} 枚",
      card_no: "{n} 枚目",
      cards_done: "{n} 枚 読み終わりました",
      verse_kami: "上の句",
      verse_shimo: "下の句",
      seconds_left: "残り {s} 秒",
      held_by: "手を挙げている人: {names}",
      nobody: "なし",
      name_sep: "、",
      poem_no: "{no}番",
      operator_name: "運営",
      blue: "青", pink: "桃", yellow: "黄", green: "緑", orange: "橙",
      seg_memorise_call: "「札を覚えてください」",
      seg_memorise: "暗記時間",
      seg_prelude_intro: "「ご用意よければ」",
      seg_gap_after_call: "間",
      seg_prelude_kami: "序歌 上の句",
      seg_prelude_shimo: "序歌 下の句",
      seg_card_kami: "上の句",
      seg_card_shimo: "下の句",
      seg_gap_between_verses: "上の句と下の句の間",
      seg_gap_repeat: "下の句の繰り返しの間",
      seg_gap_between_cards: "札と札の間",
      seg_end_call: "「ありがとうございました」",
      thanks: "ありがとうございました",
      waiting_match: "試合の開始を待っています",

      // referee
      ref_title: "審判",
      join_title: "審判として参加",
      join_intro: "運営の画面に出ている PIN と、あなたの名前（担当のマット）を入れてください。",
      pin_label: "PIN",
      name_label: "名前・担当マット",
      name_placeholder: "例: 3番マット",
      join_button: "参加する",
      joining: "参加中…",
      stop: "止める",
      stop_sub: "押すと読み上げが止まります",
      stop_sub_paused: "止まっています。あなたも手を挙げられます",
      resume: "再開",
      resume_sub: "あなたが止めています\n押すと手を下ろします",
      sending: "送信中…",
      hold_aria_stop: "止める: 手を挙げて読み上げを止める",
      hold_aria_resume: "再開: 手を下ろす（全員が下ろすと読み上げが再開します）",
      hold_disabled_sub: "試合が始まると使えます",
      others_holding: "止めている人: {names}",
      waiting_others: "ほかの人が手を下ろすまで止まったままです",
      you_are: "審判: {name}",
      leave: "退出",
      leave_aria: "この審判の登録をやめる",
      rejoin_needed: "この端末の登録が無効になりました。PIN を入れてもう一度参加してください。",
      announce_held: "読み上げを止めました",
      announce_released: "手を下ろしました",
      announce_paused: "読み上げが止まりました",
      announce_resumed: "読み上げを再開します",

      // console
      console_title: "操作卓",
      token_title: "操作用トークン",
      token_intro: "`yomite serve` が表示した操作卓のリンクを開くか、トークンを貼り付けてください。",
      token_label: "トークン",
      token_submit: "開く",
      token_wrong: "このトークンは操作用ではありません",
      channel: "チャンネル",
      match_title: "試合",
      settings_title: "試合の設定",
      colours: "色",
      colours_hint: "選ばなければ設定ファイルの色",
      seed: "シード",
      seed_placeholder: "無作為",
      memorise_s: "暗記時間（秒）",
      cards: "読む枚数",
      default: "既定",
      prepare: "準備",
      start: "開始",
      start_aria: "開始（準備がまだなら準備してから始めます）",
      pause: "一時停止",
      unpause: "一時停止を解除",
      resume_all: "全員の手を下ろして再開",
      extra: "もう一枚読む",
      abort: "中止",
      abort_confirm: "もう一度押すと中止",
      abort_reason: "操作卓で中止",
      next_match: "次の試合",
      next_match_aria: "次の試合を準備する",
      prepared: "準備済み: {colours} ・ シード {seed} ・ {cards} 枚 ・ 暗記 {mem} 秒",
      reading_now: "いま: {what}",
      holds_title: "手を挙げている人",
      lower: "下ろす",
      lower_aria: "{name} の手を下ろす",
      since: "{s} 秒",
      system_hold: "（再開ボタンで解除）",
      cards_title: "読んだ札",
      col_n: "枚目",
      col_poem: "歌",
      col_start: "開始",
      col_end: "読了",
      none_yet: "まだありません",
      in_progress: "読み上げ中",
      csv: "CSV を保存",
      join_panel: "審判の参加",
      pin: "PIN",
      join_link: "参加用リンク",
      projector: "投影画面",
      loopback_warning: "この QR コードはこのコンピューターの中でしか開けません。操作卓を LAN のアドレスで開いてください。",
      referees_title: "審判",
      connected: "接続中",
      not_connected: "未接続",
      holding: "手を挙げている",
      no_referees: "まだ誰も参加していません",
      audio_title: "音声出力",
      audio_ok: "正常",
      audio_status: "状態",
      output: "出力",

      // display
      display_title: "投影画面",
      last_card: "読み終えた札",
      memorise_now: "札を覚えてください",
    },
    en: {
      lang_switch: "日本語",
      lang_switch_aria: "日本語に切り替える",
      conn_connecting: "Connecting…",
      conn_online: "Connected",
      conn_reconnecting: "Reconnecting…",
      conn_offline: "Disconnected",
      error: "Error",
      network_error: "Cannot reach the server",
      network_hint: "Check the network (Wi-Fi) and the server",
      dismiss: "Dismiss",
      phase_none: "No match",
      phase_ready: "Ready",
      phase_announcing: "Memorise the cards",
      phase_memorising: "Memorising",
      phase_prelude: "Prelude (jokā)",
      phase_reading: "Reading",
      phase_closing: "Closing",
      phase_finished: "Finished",
      phase_tiebreak: "Extra card",
      phase_aborted: "Aborted",
      paused: "Paused",
      resuming: "Resuming…",
      card_of: "Card {n} / {total}",
      card_no: "Card {n}",
      cards_done: "{n} cards read",
      verse_kami: "upper verse",
      verse_shimo: "lower verse",
      seconds_left: "{s} s left",
      held_by: "Hands up: {names}",
      nobody: "none",
      name_sep: ", ",
      poem_no: "No. {no}",
      operator_name: "operator",
      blue: "Blue", pink: "Pink", yellow: "Yellow", green: "Green", orange: "Orange",
      seg_memorise_call: "“Memorise the cards”",
      seg_memorise: "memorisation",
      seg_prelude_intro: "“Go yōi yokereba”",
      seg_gap_after_call: "pause",
      seg_prelude_kami: "prelude, upper verse",
      seg_prelude_shimo: "prelude, lower verse",
      seg_card_kami: "upper verse",
      seg_card_shimo: "lower verse",
      seg_gap_between_verses: "between the verses",
      seg_gap_repeat: "before the repeat",
      seg_gap_between_cards: "between cards",
      seg_end_call: "“Arigatō gozaimashita”",
      thanks: "Thank you",
      waiting_match: "Waiting for the match",

      ref_title: "Referee",
      join_title: "Join as a referee",
      join_intro: "Enter the PIN shown on the operator's screen and your name (your mat).",
      pin_label: "PIN",
      name_label: "Name or mat",
      name_placeholder: "e.g. mat 3",
      join_button: "Join",
      joining: "Joining…",
      stop: "Stop",
      stop_sub: "Press to stop the reading",
      stop_sub_paused: "Stopped. You can raise your hand too",
      resume: "Resume",
      resume_sub: "You are holding\nPress to lower your hand",
      sending: "Sending…",
      hold_aria_stop: "Stop: raise your hand to stop the reading",
      hold_aria_resume: "Resume: lower your hand (reading resumes when every hand is down)",
      hold_disabled_sub: "Usable once a match is prepared",
      others_holding: "Holding: {names}",
      waiting_others: "Still stopped until the others lower their hands",
      you_are: "Referee: {name}",
      leave: "Leave",
      leave_aria: "Stop being a referee on this phone",
      rejoin_needed: "This phone's registration is no longer valid. Enter the PIN to join again.",
      announce_held: "Reading stopped",
      announce_released: "Hand lowered",
      announce_paused: "The reading has stopped",
      announce_resumed: "The reading resumes",

      console_title: "Operator console",
      token_title: "Operator token",
      token_intro: "Open the console link printed by `yomite serve`, or paste the token.",
      token_label: "Token",
      token_submit: "Open",
      token_wrong: "This is not the operator's token",
      channel: "Channel",
      match_title: "Match",
      settings_title: "Match settings",
      colours: "Colours",
      colours_hint: "none chosen: the configured colours",
      seed: "Seed",
      seed_placeholder: "random",
      memorise_s: "Memorisation (s)",
      cards: "Cards",
      default: "default",
      prepare: "Prepare",
      start: "Start",
      start_aria: "Start (prepares the match first if needed)",
      pause: "Pause",
      unpause: "End pause",
      resume_all: "Lower every hand and resume",
      extra: "Read one more card",
      abort: "Abort",
      abort_confirm: "Press again to abort",
      abort_reason: "aborted from the console",
      next_match: "Next match",
      next_match_aria: "Next match: prepare it",
      prepared: "Prepared: {colours} · seed {seed} · {cards} cards · memorise {mem} s",
      reading_now: "Now: {what}",
      holds_title: "Raised hands",
      lower: "Lower",
      lower_aria: "Lower {name}'s hand",
      since: "{s} s",
      system_hold: "(cleared by resume)",
      cards_title: "Cards read",
      col_n: "Card",
      col_poem: "Poem",
      col_start: "Start",
      col_end: "Read",
      none_yet: "None yet",
      in_progress: "reading",
      csv: "Save CSV",
      join_panel: "Referees join",
      pin: "PIN",
      join_link: "Join link",
      projector: "Projector",
      loopback_warning: "This QR code only works on this computer. Open the console with its LAN address.",
      referees_title: "Referees",
      connected: "connected",
      not_connected: "not connected",
      holding: "holding",
      no_referees: "Nobody has joined yet",
      audio_title: "Audio output",
      audio_ok: "OK",
      audio_status: "Status",
      output: "Output",

      display_title: "Projector",
      last_card: "Card just read",
      memorise_now: "Memorise the cards",
    },
  };

  function storedLang() {
    try {
      const v = localStorage.getItem(LANG_KEY);
      return v === "en" || v === "ja" ? v : "ja";
    } catch (_e) {
      return "ja";
    }
  }

  let lang = storedLang();
  const langListeners = [];

  function t(key, vars) {
    let s = (STRINGS[lang] && STRINGS[lang][key]) ?? STRINGS.ja[key] ?? key;
    if (vars) {
      for (const [k, v] of Object.entries(vars)) s = s.split(`{${k}}`).join(String(v));
    }
    return s;
  }

  /** Fill every [data-i18n] (text), [data-i18n-aria] (aria-label), [data-i18n-placeholder]. */
  function applyI18n(root = document) {
    document.documentElement.lang = lang;
    for (const e of root.querySelectorAll("[data-i18n]")) e.textContent = t(e.dataset.i18n);
    for (const e of root.querySelectorAll("[data-i18n-aria]")) {
      e.setAttribute("aria-label", t(e.dataset.i18nAria));
    }
    for (const e of root.querySelectorAll("[data-i18n-placeholder]")) {
      e.setAttribute("placeholder", t(e.dataset.i18nPlaceholder));
    }
    for (const b of root.querySelectorAll("button.lang")) {
      b.textContent = t("lang_switch");
      b.setAttribute("aria-label", t("lang_switch_aria"));
    }
  }

  function setLang(l) {
    lang = l === "en" ? "en" : "ja";
    try {
      localStorage.setItem(LANG_KEY, lang);
    } catch (_e) { /* private mode: the choice lasts for this page only */ }
    applyI18n();
    for (const f of langListeners) f(lang);
  }

  function onLang(f) {
    langListeners.push(f);
  }

  /** Wire every button.lang of the page and translate it once. */
  function initI18n() {
    for (const b of document.querySelectorAll("button.lang")) {
      b.addEventListener("click", () => setLang(lang === "ja" ? "en" : "ja"));
    }
    applyI18n();
  }

  // ------------------------------------------------------------------ storage
  function load(key, fallback = null) {
    try {
      const v = localStorage.getItem(key);
      return v === null ? fallback : JSON.parse(v);
    } catch (_e) {
      return fallback;
    }
  }

  function save(key, value) {
    try {
      if (value === null || value === undefined) localStorage.removeItem(key);
      else localStorage.setItem(key, JSON.stringify(value));
    } catch (_e) { /* storage full or disabled: nothing to do */ }
  }

  // ------------------------------------------------------------------ the API
  class ApiError extends Error {
    constructor(status, code, detail, hint) {
      super(detail || code);
      this.status = status;
      this.code = code;
      this.detail = detail;
      this.hint = hint;
    }
  }

  /** fetch a JSON API path. Throws ApiError(status, error, detail, hint); status 0 when the
      server could not be reached. `raw: true` returns the Response (CSV, SVG). */
  async function api(method, path, { token = null, body, raw = false } = {}) {
    const headers = { Accept: "application/json" };
    if (token) headers.Authorization = `Bearer ${token}`;
    const init = { method, headers, cache: "no-store" };
    if (body !== undefined) {
      headers["Content-Type"] = "application/json";
      init.body = JSON.stringify(body);
    }
    let res;
    try {
      res = await fetch(path, init);
    } catch (e) {
      throw new ApiError(0, "network", t("network_error"), t("network_hint"));
    }
    if (!res.ok) {
      let data = {};
      try {
        data = await res.json();
      } catch (_e) { /* not JSON: a proxy's page */ }
      throw new ApiError(res.status, data.error || `http_${res.status}`,
        data.detail || res.statusText, data.hint || "");
    }
    if (raw) return res;
    const type = res.headers.get("content-type") || "";
    return type.includes("json") ? res.json() : res.text();
  }

  // ------------------------------------------------------------------ messages
  function toastBox() {
    let box = document.getElementById("toasts");
    if (!box) {
      box = document.createElement("div");
      box.id = "toasts";
      box.className = "toasts";
      document.body.appendChild(box);
    }
    return box;
  }

  /** Show an error (ApiError or anything) until dismissed or for 10 s. */
  function showError(err) {
    const box = toastBox();
    const div = el("div", { class: "toast", role: "alert" });
    const text = el("div", { class: "toast-text" });
    const title = err instanceof ApiError && err.status
      ? `${t("error")} ${err.status} (${err.code})` : t("error");
    text.append(el("strong", {}, title), el("span", {}, err.detail || err.message || String(err)));
    if (err.hint) text.append(el("span", { class: "hint" }, err.hint));
    const close = el("button", { type: "button", class: "toast-close", "aria-label": t("dismiss") },
      "×");
    close.addEventListener("click", () => div.remove());
    div.append(text, close);
    box.append(div);
    while (box.children.length > 3) box.firstChild.remove();
    setTimeout(() => div.remove(), 10000);
    if (!(err instanceof ApiError)) console.error(err);
  }

  function clearErrors() {
    const box = document.getElementById("toasts");
    if (box) box.replaceChildren();
  }

  /** Screen readers: say `text` (politely, or at once with urgent). */
  function announce(text, urgent = false) {
    const id = urgent ? "sr-urgent" : "sr-polite";
    let live = document.getElementById(id);
    if (!live) {
      live = el("div", { id, class: "sr-only", "aria-live": urgent ? "assertive" : "polite" });
      document.body.appendChild(live);
    }
    live.textContent = "";
    setTimeout(() => { live.textContent = text; }, 30);
  }

  // ------------------------------------------------------------------ the WebSocket
  /**
   * The live state of one channel.
   *
   *   const ch = new Y.Channel("main", { token: () => tok, onState, onStatus, onAuthLost });
   *   ch.start();
   *
   * onStatus(s): "connecting" | "online" | "reconnecting". onAuthLost(): the token is no longer
   * known to the server (checked with GET /api/session after failed connections); reconnecting
   * stops until start() is called again.
   */
  class Channel {
    constructor(name, opts = {}) {
      this.name = name;
      this.token = opts.token || (() => null);
      this.onState = opts.onState || (() => {});
      this.onHello = opts.onHello || (() => {});
      this.onStatus = opts.onStatus || (() => {});
      this.onMessageError = opts.onMessageError || ((m) => showError(
        new ApiError(0, m.error, m.detail, "")));
      this.onAuthLost = opts.onAuthLost || (() => {});
      this.ws = null;
      this.state = null;
      this.lastSeq = -1;
      this.status = "connecting";
      this.attempt = 0;
      this.failures = 0;
      this.retryTimer = null;
      this.pingTimer = null;
      this.lastRx = 0;
      this.stopped = true;
      this.hello = null;
      this._wake = () => this._wakeUp();
    }

    start() {
      if (!this.stopped) return;
      this.stopped = false;
      this.failures = 0;
      window.addEventListener("online", this._wake);
      document.addEventListener("visibilitychange", this._wake);
      this._open();
    }

    stop() {
      this.stopped = true;
      clearTimeout(this.retryTimer);
      clearInterval(this.pingTimer);
      window.removeEventListener("online", this._wake);
      document.removeEventListener("visibilitychange", this._wake);
      const ws = this.ws;
      this.ws = null;
      if (ws) ws.close(1000, "bye");
    }

    /** Send a message if the socket is open; false otherwise (use the REST API then). */
    send(msg) {
      if (this.ws && this.ws.readyState === WebSocket.OPEN && this.status === "online") {
        this.ws.send(JSON.stringify(msg));
        return true;
      }
      return false;
    }

    /** Show a state (from the socket or a REST answer) unless an equal or newer one was. */
    accept(state) {
      if (!state || typeof state !== "object") return false;
      if (typeof state.seq === "number") {
        if (state.seq <= this.lastSeq) return false;
        this.lastSeq = state.seq;
      }
      this.state = state;
      this.onState(state);
      return true;
    }

    _setStatus(s) {
      if (this.status !== s) {
        this.status = s;
        this.onStatus(s);
      }
    }

    _open() {
      clearTimeout(this.retryTimer);
      if (this.stopped || this.ws) return;
      const proto = location.protocol === "https:" ? "wss:" : "ws:";
      const tok = this.token();
      const q = tok ? `?token=${encodeURIComponent(tok)}` : "";
      let ws;
      try {
        ws = new WebSocket(`${proto}//${location.host}/ws/channels/${encodeURIComponent(this.name)}${q}`);
      } catch (_e) {
        this._retry(false);
        return;
      }
      this.ws = ws;
      let opened = false;
      ws.onopen = () => {
        opened = true;
        this.lastRx = Date.now();
      };
      ws.onmessage = (ev) => {
        if (this.ws !== ws) return;
        this.lastRx = Date.now();
        let msg;
        try {
          msg = JSON.parse(ev.data);
        } catch (_e) {
          return;
        }
        switch (msg.type) {
          case "hello":
            // a new connection (perhaps to a restarted server, whose seq starts again): the
            // state that follows is the current one whatever its number
            this.lastSeq = -1;
            this.attempt = 0;
            this.failures = 0;
            this.hello = msg;
            this._setStatus("online");
            this._startPings(ws);
            this.onHello(msg);
            break;
          case "state":
            this.accept(msg);
            break;
          case "error":
            this.onMessageError(msg);
            break;
          default:
            break; // pong
        }
      };
      ws.onclose = () => {
        if (this.ws !== ws) return;
        this._closed(opened);
      };
      ws.onerror = () => { /* onclose follows */ };
    }

    _closed(opened) {
      this.ws = null;
      clearInterval(this.pingTimer);
      if (this.stopped) return;
      this._retry(opened);
    }

    _retry(opened) {
      this._setStatus("reconnecting");
      if (!opened) this.failures += 1;
      const base = Math.min(8000, 400 * 2 ** this.attempt);
      this.attempt = Math.min(this.attempt + 1, 6);
      const delay = base * (0.75 + Math.random() * 0.5);
      this.retryTimer = setTimeout(() => this._open(), delay);
      // a refused handshake looks like any network failure to a browser: ask the REST API
      // whether our token is still known
      if (this.failures === 2 || (this.failures > 0 && this.failures % 5 === 0)) this._checkToken();
    }

    async _checkToken() {
      const tok = this.token();
      if (!tok) return;
      try {
        await api("GET", "/api/session", { token: tok });
      } catch (e) {
        if (e instanceof ApiError && e.status === 401 && !this.stopped) {
          this.stop();
          this._setStatus("reconnecting");
          this.onAuthLost();
        }
      }
    }

    _startPings(ws) {
      clearInterval(this.pingTimer);
      // a phone that lost the Wi-Fi gets no close event for minutes: notice silence ourselves
      this.pingTimer = setInterval(() => {
        if (this.ws !== ws) return;
        if (Date.now() - this.lastRx > 25000) {
          try { ws.close(); } catch (_e) { /* already closing */ }
          this._closed(true);
          return;
        }
        if (ws.readyState === WebSocket.OPEN) ws.send('{"type":"ping"}');
      }, 10000);
    }

    _wakeUp() {
      if (this.stopped || document.visibilityState === "hidden") return;
      if (!this.ws) {
        this.attempt = 0;
        this._open();
      } else if (this.ws.readyState === WebSocket.OPEN) {
        this.ws.send('{"type":"ping"}');
      }
    }
  }

  // ------------------------------------------------------------------ showing a match
  const COLOURS = ["blue", "pink", "yellow", "green", "orange"];

  function phaseText(m) {
    if (!m) return t("phase_none");
    return t(`phase_${m.phase}`);
  }

  function isRunning(m) {
    return !!m && ["announcing", "memorising", "prelude", "reading", "closing", "tiebreak"]
      .includes(m.phase);
  }

  function cardText(m) {
    if (!m || !m.card) return "";
    return t("card_of", { n: m.card, total: m.cards_total });
  }

  function holdNames(m, except = null) {
    if (!m) return [];
    return m.holds.filter((h) => h.referee !== except).map((h) => holderName(h));
  }

  function holderName(h) {
    if (h.referee === "@operator" && (!h.name || h.name === "operator")) return t("operator_name");
    return h.name || h.referee;
  }

  function joinNames(names) {
    return names.length ? names.join(t("name_sep")) : t("nobody");
  }

  function segmentText(seg) {
    if (!seg) return "";
    const key = `seg_${seg.label}`;
    const s = t(key);
    return s === key ? seg.label : s;
  }

  /** The memorisation countdown, counted down locally between the server's once-a-second
      states (the state's times are the audio device's clock, not the phone's). */
  class Countdown {
    constructor(onTick) {
      this.onTick = onTick;
      this.left = null;
      this.at = 0;
      this.running = false;
      this.timer = null;
    }

    update(m) {
      const cd = m && m.phase === "memorising" && typeof m.countdown_s === "number"
        ? m.countdown_s : null;
      if (cd === null) {
        this.left = null;
        clearInterval(this.timer);
        this.timer = null;
      } else {
        this.left = cd;
        this.at = performance.now();
        this.running = !m.paused;
        if (!this.timer) this.timer = setInterval(() => this.onTick(this.seconds()), 200);
      }
      this.onTick(this.seconds());
    }

    /** Whole seconds left (rounded up), or null outside memorisation. */
    seconds() {
      if (this.left === null) return null;
      const gone = this.running ? (performance.now() - this.at) / 1000 : 0;
      return Math.max(0, Math.ceil(this.left - gone - 0.05));
    }
  }

  function fmtTime(s) {
    if (typeof s !== "number" || !isFinite(s)) return "";
    const neg = s < 0;
    s = Math.abs(Math.round(s));
    const m = Math.floor(s / 60);
    return `${neg ? "-" : ""}${m}:${String(s % 60).padStart(2, "0")}`;
  }

  let poemsPromise = null;

  /** The hundred poems by number, fetched once. */
  function poems() {
    if (!poemsPromise) {
      poemsPromise = api("GET", "/api/poems").then((list) => {
        const byNo = new Map();
        for (const p of list) byNo.set(p.no, p);
        return byNo;
      }).catch((e) => {
        poemsPromise = null;
        throw e;
      });
    }
    return poemsPromise;
  }

  // ------------------------------------------------------------------ DOM helpers
  function el(tag, attrs = {}, ...children) {
    const e = document.createElement(tag);
    for (const [k, v] of Object.entries(attrs)) {
      if (v === null || v === undefined || v === false) continue;
      if (k === "class") e.className = v;
      else if (k === "dataset") Object.assign(e.dataset, v);
      else e.setAttribute(k, v === true ? "" : v);
    }
    for (const c of children) {
      if (c === null || c === undefined || c === false) continue;
      e.append(c instanceof Node ? c : document.createTextNode(String(c)));
    }
    return e;
  }

  /** A verse with its phrases (5-7-5 / 7-7, separated by spaces in the data) kept whole when
      the line wraps: a phrase split in two is hard to read from the back of a hall. */
  function verse(text) {
    const f = document.createDocumentFragment();
    text.split(/[ \u3000]+/).filter(Boolean).forEach((phrase, i) => {
      if (i) f.append(" ");
      f.append(el("span", { class: "phrase" }, phrase));
    });
    return f;
  }

  function colourChip(c) {
    return el("span", { class: `chip colour-${c}` }, el("span", { class: "swatch", "aria-hidden": "true" }),
      t(c));
  }

  /** Show the connection status in `node` (an element with .dot and .text children). */
  function showConnection(node, status) {
    node.dataset.state = status;
    const text = node.querySelector(".text");
    if (text) text.textContent = t(`conn_${status}`);
  }

  function vibrate(pattern) {
    try {
      if (navigator.vibrate) navigator.vibrate(pattern);
    } catch (_e) { /* not allowed before a user gesture: no matter */ }
  }

  /** Flash an element (the whole page by default) to make a change seen. */
  function flash(node = document.body, cls = "flash") {
    node.classList.remove(cls);
    void node.offsetWidth; // restart the animation
    node.classList.add(cls);
    setTimeout(() => node.classList.remove(cls), 900);
  }

  /** Keep the screen on while the page is shown, where the browser allows it (the Screen Wake
      Lock API needs https or localhost; elsewhere this does nothing). */
  function keepAwake() {
    if (!("wakeLock" in navigator)) return;
    let lock = null;
    const take = async () => {
      if (document.visibilityState !== "visible" || lock) return;
      try {
        lock = await navigator.wakeLock.request("screen");
        lock.addEventListener("release", () => { lock = null; });
      } catch (_e) { /* refused (battery saver, no gesture yet): the screen may sleep */ }
    };
    document.addEventListener("visibilitychange", take);
    document.addEventListener("pointerdown", take, { once: true });
    take();
  }

  window.Y = {
    STRINGS, t, setLang, onLang, initI18n, applyI18n, get lang() { return lang; },
    load, save, api, ApiError, showError, clearErrors, announce, Channel,
    COLOURS, phaseText, isRunning, cardText, holdNames, holderName, joinNames, segmentText,
    Countdown, fmtTime, poems, el, verse, colourChip, showConnection, vibrate, flash, keepAwake,
  };
})();
