/* yomite: code shared by the hall's three pages (console, referee, display).

   Plain script, no build step and nothing fetched from outside the hall's own server: a sports
   hall often has no internet. Everything is on `window.Y`:

   - i18n: Japanese by default, English on request; the choice is kept in localStorage.
   - api(): fetch with the token; an error answer ({error, detail, hint}) becomes an ApiError.
     In a cluster, a call its own process cannot answer (it died) goes to the next one.
   - Channel: the WebSocket of one channel. It reconnects by itself with backoff, keeps the
     same token (so a referee keeps its identity), detects dead links with pings, and passes on
     only states whose `seq` is newer than the last one shown. A page opened at one of a
     cluster's processes' own addresses (hello.peers) reconnects to the next one when its
     process dies (docs/cluster.md); one opened through another name reconnects through it.
   - helpers to show a match: phase words, card counter, countdown, colour chips.
*/
"use strict";

(function () {
  // ------------------------------------------------------------------ i18n
  const LANG_KEY = "yomite.lang";

  // The pages' strings, one JSON file per language (api/static/strings.<lang>.json), served
  // together as /static/strings.js, which every page loads before this file. The desk's pages
  // add theirs (/static/desk-strings.js) into these same objects after it: read them when
  // called, never copy them at load.
  const STRINGS = window.YOMITE_STRINGS || { ja: {}, en: {} };

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

  /** Whether this page came over plain http from another machine: whatever the network
      carries (a PIN, a token, the speaker key) anyone on it can read (the server was started
      with --insecure-http, or a proxy in front of it serves http). Loopback is this machine. */
  function insecure() {
    if (location.protocol !== "http:") return false;
    const h = location.hostname.replace(/^\[|\]$/g, "").toLowerCase();
    return !(h === "localhost" || h.endsWith(".localhost") || /^127\./.test(h) || h === "::1");
  }

  /** Every page served over plain http on a network says so at its top, in its language. */
  function warnInsecure() {
    if (!insecure() || !document.body || document.getElementById("insecure-http")) return;
    const p = document.createElement("p");
    p.id = "insecure-http";
    p.className = "insecure-http";
    p.setAttribute("role", "alert");
    p.dataset.i18n = "insecure_http";
    document.body.prepend(p);
  }

  /** Wire every button.lang of the page and translate it once. */
  function initI18n() {
    warnInsecure();
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

  /** A text as base64url without padding (a WebSocket subprotocol's characters). */
  function b64url(text) {
    let bin = "";
    for (const b of new TextEncoder().encode(text)) bin += String.fromCharCode(b);
    return btoa(bin).replace(/\+/g, "-").replace(/\//g, "_").replace(/=+$/, "");
  }

  /** A secret handed over in the page's link (`#token=…`, `#key=…`: a fragment is never sent
      to a server, nor in a Referer), taken off the address bar at once; null if absent. */
  function fromHash(name) {
    const h = new URLSearchParams(location.hash.slice(1));
    const v = h.get(name);
    if (v) history.replaceState(null, "", location.pathname + location.search);
    return v;
  }

  /** The operator's token, one for the operator's pages (console, desk, record): handed over
      in the link `yomite serve` prints (`#token=…`) or kept in localStorage from last time. */
  const OPERATOR_KEY = "yomite.operator";

  const operator = {
    /** The token in the link (taken off the address bar), else the one kept; null if none. */
    token() {
      return fromHash("token") || load(OPERATOR_KEY);
    },

    /** Keep `tok` for the next visit; null forgets it. */
    keep(tok) {
      save(OPERATOR_KEY, tok);
    },

    /** Resolves if `tok` is the operator's; throws an ApiError otherwise (status 0: the server
        was not reached; 403 for another role's token). */
    async check(tok) {
      const s = await api("GET", "/api/session", { token: tok });
      if (s.role !== "operator") throw new ApiError(403, "forbidden", t("token_wrong"), "");
    },
  };

  // ------------------------------------------------------------------ the API
  class ApiError extends Error {
    constructor(status, code, detail, hint, params = null) {
      super(detail || code);
      this.status = status;
      this.code = code;
      this.detail = detail;
      this.hint = hint;
      this.params = params; // the figures for err_<code>'s words (e.g. too_many_cards)
    }
  }

  // A cluster's processes' addresses (a Channel's hello sets them, Channel._peers): when the
  // page's own process cannot be reached (it died), a call is made to the next one, and the
  // calls after it go there first. Empty on one machine: calls go to the page's own server.
  const route = { bases: [], at: 0 };

  /** fetch a JSON API path. Throws ApiError(status, error, detail, hint); status 0 when the
      server could not be reached. `raw: true` returns the Response (CSV, SVG). */
  async function api(method, path, { token = null, body, raw = false, signal } = {}) {
    const headers = { Accept: "application/json" };
    if (token) headers.Authorization = `Bearer ${token}`;
    const init = { method, headers, cache: "no-store" };
    if (signal) init.signal = signal; // an AbortController's: a call given up
    if (body !== undefined) {
      headers["Content-Type"] = "application/json";
      init.body = JSON.stringify(body);
    }
    let res;
    const tries = Math.max(1, route.bases.length);
    for (let i = 0; ; i += 1) {
      const base = route.bases.length > 1 ? route.bases[route.at] : "";
      try {
        res = await fetch(base + path, init);
        break;
      } catch (e) { // no answer at all (an error answer is an answer): the next process
        if (i + 1 >= tries) throw new ApiError(0, "network", t("network_error"), t("network_hint"));
        route.at = (route.at + 1) % route.bases.length;
      }
    }
    if (!res.ok) {
      let data = {};
      try {
        data = await res.json();
      } catch (_e) { /* not JSON: a proxy's page */ }
      throw new ApiError(res.status, data.error || `http_${res.status}`,
        data.detail || res.statusText, data.hint || "", data.params || null);
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

  /** An error in the page's language: every code the API answers has a string in each
      (strings.<lang>.json, `err_<code>`). The server's own detail and hint are English: they
      are shown in English, and in Japanese only for a code without a string. */
  function errorText(err) {
    if (!(err instanceof ApiError)) {
      return { title: t("error"), detail: err.message || String(err), hint: "", meta: "" };
    }
    let key = `err_${err.code}`;
    if (!(key in STRINGS.ja) && /^http_\d+$/.test(err.code || "")) key = "err_http_error";
    // words within the words, each in the page's language: a column's name (col_<column>), a
    // reason (reason_<reason>), and a step's own reason (why_<why>) said instead of the code's
    const params = { ...(err.params || {}) };
    const own = (prefix, v) => (typeof v === "string" && `${prefix}${v}` in STRINGS.ja
      ? `${prefix}${v}` : null);
    if (own("col_", params.column)) params.column = t(own("col_", params.column));
    if (own("reason_", params.reason)) params.reason = t(own("reason_", params.reason), params);
    if (own("why_", params.why)) key = own("why_", params.why);
    const known = key in STRINGS.ja;
    const english = lang === "en" || !known;
    return {
      title: known ? t(key, params) : t("error"),
      detail: english ? (err.detail || "") : "",
      hint: english ? (err.hint || "") : "",
      meta: err.status ? `${t("error")} ${err.status} · ${err.code}` : `${t("error")} · ${err.code}`,
    };
  }

  /** Show an error (ApiError or anything) until dismissed or for 10 s. */
  function showError(err) {
    const box = toastBox();
    const div = el("div", { class: "toast", role: "alert" });
    const text = el("div", { class: "toast-text" });
    const e = errorText(err);
    text.append(el("strong", {}, e.title));
    if (e.detail) text.append(el("span", {}, e.detail));
    if (e.hint) text.append(el("span", { class: "hint" }, e.hint));
    if (e.meta) text.append(el("span", { class: "meta" }, e.meta));
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
   * onStatus(s): "connecting" | "online" | "cut_off" (a cluster's server without its broker) |
   * "reconnecting" | "lost" (opts.liveness only). onAuthLost(): the token is no longer
   * known to the server (checked with GET /api/session after failed connections); reconnecting
   * stops until start() is called again.
   *
   * opts.liveness = { pingMs, lostMs } (a referee page: 500, 2000): ping every pingMs while
   * the page is shown, call the link "lost" after lostMs without a word from the server, and
   * open a new socket at once (the old one's close can take minutes on a phone that lost its
   * Wi-Fi); a socket not open within lostMs is given up for another. The pongs' `s` (the
   * channel's match clock) also give serverNow(), the server's clock as this page estimates it
   * (the pong of the shortest round trip among the last 20: a slow one says nothing of the
   * offset). Pages without it keep the slow pings (every 10 s, silence noticed after 25 s).
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
      this.onOther = opts.onOther || (() => {}); // messages other than hello/state/error/pong
      this.onClose = opts.onClose || (() => true); // (CloseEvent) => false stops reconnecting
      this.query = opts.query || {}; // extra URL parameters (e.g. audience: "speaker")
      // (url) => a WebSocket or an object that acts like one (the speaker page's, in a worker)
      this.socket = opts.socket || null;
      this.liveness = opts.liveness || null; // {pingMs, lostMs}: see above
      this.pings = []; // the send times (performance.now) of the pings not answered yet
      this.clockSamples = []; // [rtt, offset] of the latest pongs with a clock
      this.ws = null;
      this.state = null;
      this.lastSeq = -1;
      this.status = "connecting";
      this.attempt = 0;
      this.failures = 0;
      this.retryTimer = null;
      this.pingTimer = null;
      this.lastRx = 0;
      this.shownAt = 0; // when the page was last shown again (its silence counts from there)
      this.stopped = true;
      this.hello = null;
      // where the socket goes: this page's own server, or, once a cluster's hello named this
      // page's address among its processes', each of them in turn after a drop
      this.bases = [location.origin];
      this.at = 0;
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
      if (this.ws && this.ws.readyState === WebSocket.OPEN
          && (this.status === "online" || this.status === "cut_off")) {
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
      // a cluster's server that lost the others (its broker) says so in every state: the
      // badge says it too, and so that the page knows its buttons may not reach the reader
      if (state.broker === false && this.status === "online") this._setStatus("cut_off");
      else if (state.broker !== false && this.status === "cut_off") this._setStatus("online");
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
      const base = this.bases[this.at] || location.origin;
      const tok = this.token();
      const params = new URLSearchParams(this.query);
      const q = params.toString() ? `?${params}` : "";
      // the token goes as a subprotocol, never in the URL (a URL stays in logs and history)
      const protocols = tok ? ["yomite", `yomite.bearer.${b64url(tok)}`] : [];
      let ws;
      try {
        const url = `${base.replace(/^http/, "ws")}/ws/channels/${encodeURIComponent(this.name)}${q}`;
        ws = this.socket ? this.socket(url, protocols) : new WebSocket(url, protocols);
      } catch (_e) {
        this._closed(false);
        return;
      }
      this.ws = ws;
      let opened = false;
      // with other processes to try, one that does not answer (its machine is off) is left
      // after 2.5 s for the next
      // (a referee page's: one that has not said hello within lostMs is left for a new one)
      let helloed = false;
      const giveUp = this.bases.length > 1 || this.liveness ? setTimeout(() => {
        if (this.ws !== ws || (this.liveness ? helloed : opened)) return;
        this.ws = null;
        try { ws.close(); } catch (_e) { /* already closing */ }
        this._closed(false);
      }, this.liveness ? this.liveness.lostMs : 2500) : null;
      ws.onopen = () => {
        opened = true;
        if (!this.liveness) clearTimeout(giveUp);
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
            helloed = true;
            clearTimeout(giveUp);
            // a new connection (perhaps to a restarted server, whose seq starts again): the
            // state that follows is the current one whatever its number
            this.lastSeq = -1;
            this.attempt = 0;
            this.failures = 0;
            this.hello = msg;
            this.fullSaid = false;
            this._peers(msg.peers);
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
          case "pong":
            this._pong(msg);
            break;
          default:
            this.onOther(msg);
            break;
        }
      };
      ws.onclose = (ev) => {
        if (this.ws !== ws) return;
        if (ev.reason === "room_closed") { // the room was closed: there is nothing to reconnect to
          this.ws = null;
          this.stop();
          this._setStatus("offline");
          showError(new ApiError(0, "room_closed", t("err_room_closed"), ""));
          return;
        }
        if (ev.reason === "viewer_link_needed") { // a room watched without its link
          this.ws = null;
          this.stop();
          this._setStatus("offline");
          showError(new ApiError(0, "viewer_link_needed", t("err_viewer_link_needed"), ""));
          return;
        }
        if (ev.reason === "room_full" && !this.fullSaid) { // said once; it tries again
          this.fullSaid = true;
          showError(new ApiError(0, "room_full", t("err_room_full"), ""));
        }
        if (this.onClose(ev) === false) { // the page gives up (a refusal that will not change)
          this.ws = null;
          this.stop();
          return;
        }
        this._closed(opened);
      };
      ws.onerror = () => { /* onclose follows */ };
    }

    /** A cluster's hello: its processes' addresses, the one that answered first. */
    _peers(peers) {
      if (!Array.isArray(peers) || peers.length === 0) return;
      const mine = location.origin;
      // a page opened through another name (a reverse proxy, DNS) keeps reconnecting through it
      if (this.bases.length < 2 && !peers.includes(mine)) return;
      const here = this.bases[this.at] || mine;
      this.bases = [...new Set([here, ...peers.filter((p) => typeof p === "string"), mine])];
      this.at = 0;
      route.bases = this.bases.slice(); // the REST calls move on the same way (api())
      route.at = 0;
    }

    _closed(opened) {
      if (this.bases.length > 1) this.at = (this.at + 1) % this.bases.length; // the next one
      this.ws = null;
      clearInterval(this.pingTimer);
      if (this.stopped) return;
      this._retry(opened);
    }

    _retry(opened) {
      // a referee page's lost link stays "lost" until a server answers again
      this._setStatus(this.liveness && this.status !== "connecting" ? "lost" : "reconnecting");
      if (!opened) this.failures += 1;
      // a referee page tries again at once, then at most every 2 s
      const base = this.liveness ? (this.attempt === 0 ? 0 : Math.min(2000, 250 * 2 ** this.attempt))
        : Math.min(8000, 400 * 2 ** this.attempt);
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
      this.pings = [];
      const live = this.liveness;
      const lostMs = live ? live.lostMs : 25000;
      // a phone that lost the Wi-Fi gets no close event for minutes: notice silence ourselves
      // (a referee page within lostMs: it pings twice a second while shown)
      const tickMs = live ? Math.max(50, Math.min(250, live.pingMs / 2)) : 10000;
      let ticks = 0;
      if (live) this._ping(ws); // a first clock sample at once
      this.pingTimer = setInterval(() => {
        if (this.ws !== ws) return;
        // hidden, a referee page pings as the others do (a phone in a pocket costs nothing),
        // and its silence counts from when it was shown again
        const shown = document.visibilityState !== "hidden";
        const quiet = Date.now() - Math.max(this.lastRx, this.shownAt);
        if (quiet > (live && shown ? lostMs : 25000)) {
          this._lost(ws);
          return;
        }
        ticks += 1;
        const every = Math.max(1, Math.round((live && shown ? live.pingMs : 10000) / tickMs));
        if (ticks % every === 0 && ws.readyState === WebSocket.OPEN) this._ping(ws);
      }, tickMs);
    }

    /** The link is gone: say so, and try a new socket at once (the old one may not close for
        minutes: it is left to the browser). */
    _lost(ws) {
      this.ws = null;
      try { ws.close(); } catch (_e) { /* already closing */ }
      if (this.liveness) {
        this._setStatus("lost");
        this.attempt = 0;
      }
      this._closed(true);
    }

    /** A new socket now, the old one set aside (its events are then ignored: this.ws !== ws)
        and closed: for a page that knows its link is gone before the browser does (a speaker
        page whose clock probes go unanswered). A cluster's processes are tried in turn, as
        after a close. */
    renew() {
      const old = this.ws;
      this.ws = null;
      clearInterval(this.pingTimer);
      clearTimeout(this.retryTimer);
      if (old) {
        try { old.close(); } catch (_e) { /* closing already */ }
      }
      if (this.bases.length > 1) this.at = (this.at + 1) % this.bases.length;
      this.attempt = 0;
      this._setStatus("reconnecting");
      this._open();
    }

    _wakeUp() {
      if (this.stopped || document.visibilityState === "hidden") return;
      this.shownAt = Date.now();
      if (!this.ws) {
        this.attempt = 0;
        this._open();
      } else if (this.ws.readyState === WebSocket.OPEN) {
        this._ping(this.ws);
      }
    }

    _ping(ws) {
      if (this.pings.length > 50) this.pings.shift(); // a server that never answers
      this.pings.push(performance.now());
      ws.send('{"type":"ping"}');
    }

    /** A pong: the round trip of the oldest ping unanswered (a socket answers in order) and,
        with the server's clock in it, a sample of the offset between the clocks. */
    _pong(msg) {
      const sent = this.pings.shift();
      if (sent === undefined || typeof msg.s !== "number") return;
      const now = performance.now();
      const rtt = now - sent;
      this.clockSamples.push([rtt, msg.s * 1000 - (sent + rtt / 2)]);
      if (this.clockSamples.length > 20) this.clockSamples.shift();
    }

    /** The server's clock (seconds, the channel's match clock: a state's `at_s`) as this
        page estimates it now, from the pong of the shortest round trip; null before one. */
    serverNow() {
      if (this.clockSamples.length === 0) return null;
      let best = this.clockSamples[0];
      for (const c of this.clockSamples) if (c[0] < best[0]) best = c;
      return (performance.now() + best[1]) / 1000;
    }
  }

  // ------------------------------------------------------------------ showing a match
  const COLOURS = ["blue", "pink", "yellow", "green", "orange"];

  function phaseText(m) {
    if (!m) return t("phase_none");
    return t(`phase_${m.phase}`);
  }

  function isRunning(m) {
    return !!m && ["bowing", "announcing", "memorising", "prelude", "reading", "tiebreak",
      "closing"].includes(m.phase);
  }

  function cardText(m) {
    if (!m || !m.card) return "";
    return t("card_of", { n: m.card, total: m.cards_total });
  }

  function holdNames(m, except = null) {
    if (!m) return [];
    return m.holds.filter((h) => h.referee !== except).map((h) => holderName(h));
  }

  // yomite's own holds (reader/events.py), said in the page's language: the name the server
  // gives them is English ("recovered after a restart", "audio device: …")
  const SYSTEM_HOLDS = { "@recovered": "hold_recovered", "@audio": "hold_audio",
    "@fault": "hold_fault", "@journal": "hold_journal", "@handover": "hold_handover",
    "@lease": "hold_lease" };

  function holderName(h) {
    if (h.referee === "@operator" && (!h.name || h.name === "operator")) return t("operator_name");
    if (SYSTEM_HOLDS[h.referee]) return t(SYSTEM_HOLDS[h.referee]);
    return h.name || h.referee;
  }

  function joinNames(names) {
    return names.length ? names.join(t("name_sep")) : t("nobody");
  }

  /** What a segment is, in words: a call by its configured text (m.calls), anything else by
      its label's string. */
  function segmentText(seg, m = null) {
    if (!seg) return "";
    const text = m && m.calls ? m.calls[seg.label] : null;
    if (text) return t("quoted", { text });
    const key = `seg_${seg.label}`;
    const s = t(key);
    return s === key ? seg.label : s;
  }

  /** The configured text of the call being read (or cut), or null. */
  function callText(m) {
    const seg = m && (m.paused ? m.cut : m.segment);
    return seg && m.calls ? m.calls[seg.label] || null : null;
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

  /** The boot of a live page: its title in the page's language (and again on a change of
   *  language, with `onLang` re-rendering the page), the connection badge, the screen kept
   *  awake. `conn` is the page's Channel (its `status` shown on a change of language). */
  function bootPage({ titleKey, ch, badge, conn, onLang: rerender }) {
    const title = () => { document.title = `yomite ${t(titleKey)} · ${ch}`; };
    initI18n();
    onLang(() => {
      title();
      rerender();
      showConnection(badge, conn.status);
    });
    title();
    showConnection(badge, "connecting");
    keepAwake();
  }

  window.Y = {
    STRINGS, t, setLang, onLang, initI18n, applyI18n, get lang() { return lang; },
    insecure, load, save, fromHash, operator, api, ApiError, errorText, showError, clearErrors, announce, Channel,
    COLOURS, phaseText, isRunning, cardText, holdNames, holderName, joinNames, segmentText,
    callText,
    Countdown, fmtTime, poems, el, verse, colourChip, showConnection, vibrate, flash, keepAwake,
    bootPage,
  };
})();
