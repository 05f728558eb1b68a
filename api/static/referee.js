/* The referee's phone: join with the PIN, then one big button that raises and lowers this
   referee's hand (rule 10). What the button shows always comes from the server's state (is my
   id among the holds?), never from a local guess: a press only marks it "sending" until the
   state that confirms it arrives.

   On a bad Wi-Fi (issue 47): each press carries this referee's move (a number that only rises,
   kept in localStorage for every tab of this phone) and what the phone saw (the card, the last
   verse shown on it, the press's time on the server's clock as the page estimates it from its
   pongs), so that the server applies it once, never after a newer one, and refuses a hold that
   comes too late to stop what the referee saw (press_stale). The page pings twice a second and
   says "lost" after 2 s of silence; a press with no answer by the server's age limit is said to
   have failed (the server will refuse it if it comes later), never left "sending". */
"use strict";

(function () {
  const { t } = Y;
  const ch = decodeURIComponent(location.pathname.split("/").filter(Boolean)[1] || "main");
  const KEY = `yomite.referee.${ch}`;
  const NAME_KEY = "yomite.referee.lastName";
  const CONFIRM_MS = 1500; // no confirming state by then: send the same move by REST
  // the link's state within 2 s of its loss: silence is checked every 250 ms, and the last
  // pong came at most 500 ms before the loss
  const LIVENESS = { pingMs: 500, lostMs: 1750 };
  let maxAgeMs = 2000; // the server's press_max_age_s (its hello says it)

  const $ = (id) => document.getElementById(id);
  const ui = {
    conn: $("conn"), join: $("join"), joinForm: $("join-form"), joinNote: $("join-note"),
    pin: $("pin"), name: $("name"), joinButton: $("join-button"), live: $("live"),
    status: $("status"), phase: $("phase"), detail: $("detail"), pausedNote: $("paused-note"),
    hold: $("hold"), holdMain: $("hold-main"), holdSub: $("hold-sub"), others: $("others"),
    me: $("me"), leave: $("leave"),
  };

  let me = Y.load(KEY); // {token, referee, name, channel}
  let state = null;
  let pending = null; // {want: true (raise) | false (lower), msg, timer, deadline, abort}
  let seen = { card: null, verse: null }; // the card shown, and its last verse shown
  let prev = null; // {mine, paused, phase} of the last state shown
  let lastPointer = 0;

  const conn = new Y.Channel(ch, {
    token: () => (me ? me.token : null),
    onState,
    onStatus: (s) => Y.showConnection(ui.conn, s),
    onAuthLost: authLost,
    onHello: (h) => {
      if (typeof h.press_max_age_s === "number") maxAgeMs = h.press_max_age_s * 1000;
    },
    onMessageError: (m) => {
      const mine = pending && (m.move === undefined || m.move === null
        || m.move === pending.msg.move);
      if (m.error === "press_superseded") {
        // an older press (a late copy): the state says where the hand is. If it was this
        // one, this phone's counter was behind (another tab): past it, and send it again
        bumpMove(m.last);
        if (mine) {
          const want = pending.want;
          const again = !pending.again;
          clearPending();
          if (again) send(want, true);
        }
        render();
        return;
      }
      if (m.move !== undefined && m.move !== null && !mine) return; // an old press's answer
      clearPending();
      render();
      Y.showError(new Y.ApiError(0, m.error, m.detail, ""));
    },
    liveness: LIVENESS,
  });
  const countdown = new Y.Countdown(() => renderDetail());
  Y.live = conn; // a handle for debugging from the browser's console

  // ------------------------------------------------------------------ state
  function match() {
    return state && state.match;
  }

  function amHolding(s) {
    const m = s && s.match;
    return !!(m && me && m.holds.some((h) => h.referee === me.referee));
  }

  function onState(s) {
    state = s;
    const m = s.match;
    if (!m) seen = { card: null, verse: null };
    else {
      if (m.card !== seen.card) seen = { card: m.card, verse: null };
      const seg = m.segment;
      if (seg && seg.card === m.card && seg.verse) seen.verse = seg.verse;
    }
    const now = { mine: amHolding(s), paused: !!(m && m.paused), phase: m ? m.phase : null };
    if (pending && now.mine === pending.want) clearPending();
    if (prev) {
      if (now.mine !== prev.mine) {
        Y.vibrate(now.mine ? [150] : [60, 50, 60]);
        Y.flash();
        Y.announce(t(now.mine ? "announce_held" : "announce_released"), true);
      } else if (now.paused !== prev.paused) {
        Y.vibrate(now.paused ? [200, 80, 200] : [90]);
        Y.flash();
        Y.announce(t(now.paused ? "announce_paused" : "announce_resumed"), true);
      } else if (now.phase !== prev.phase) {
        Y.vibrate(40);
        Y.flash(ui.status);
      }
    }
    prev = now;
    countdown.update(m);
    render();
  }

  // ------------------------------------------------------------------ rendering
  function render() {
    const m = match();
    ui.live.dataset.phase = m ? m.phase : "none";
    ui.live.dataset.paused = m && m.paused ? "true" : "false";
    if (!m) ui.phase.textContent = t("waiting_match");
    else if (m.paused) ui.phase.textContent = m.resumes_at_s !== null ? t("resuming") : t("paused");
    else ui.phase.textContent = Y.phaseText(m);
    renderDetail();
    renderButton(m);
    const mine = amHolding(state);
    const others = me ? Y.holdNames(m, me.referee) : [];
    if (others.length) {
      ui.pausedNote.hidden = false;
      ui.pausedNote.textContent = t("others_holding", { names: Y.joinNames(others) });
    } else {
      ui.pausedNote.hidden = true;
    }
    ui.others.textContent = mine && others.length ? t("waiting_others") : "";
    ui.me.textContent = me ? t("you_are", { name: me.name }) : "";
    ui.leave.disabled = mine;
  }

  function renderDetail() {
    const m = match();
    const secs = countdown.seconds();
    let text = "";
    if (secs !== null) text = t("seconds_left", { s: secs });
    else if (m && ["finished", "closing", "closed"].includes(m.phase)) {
      text = t("cards_done", { n: m.card });
    } else if (m && m.card && ["reading", "tiebreak"].includes(m.phase)) {
      text = Y.cardText(m);
      const seg = m.segment;
      if (seg && seg.card && seg.verse) text += ` · ${t(`verse_${seg.verse}`)}`;
    }
    ui.detail.textContent = text;
    ui.detail.dataset.countdown = secs === null ? "" : String(secs);
  }

  function renderButton(m) {
    const mine = amHolding(state);
    const usable = !!me && !!m && (mine || !["aborted", "finished", "closed"].includes(m.phase));
    const b = ui.hold;
    b.disabled = !usable && !pending;
    let kind;
    if (pending) {
      kind = "pending";
      ui.holdMain.textContent = t(pending.want ? "stop" : "resume");
      ui.holdSub.textContent = t("sending");
    } else if (mine) {
      kind = "mine";
      ui.holdMain.textContent = t("resume");
      ui.holdSub.textContent = t("resume_sub");
    } else {
      kind = usable ? "ready" : "off";
      ui.holdMain.textContent = t("stop");
      ui.holdSub.textContent = !usable ? disabledText(m)
        : (m.paused ? t("stop_sub_paused") : t("stop_sub"));
    }
    b.dataset.state = kind;
    b.setAttribute("aria-label", t(mine ? "hold_aria_resume" : "hold_aria_stop"));
  }

  /** Why the button cannot be used now, in the words of the phase. */
  function disabledText(m) {
    if (!me) return "";
    if (!m) return t("hold_disabled_sub");
    if (m.phase === "finished") return t("hold_disabled_finished");
    if (["closed", "aborted"].includes(m.phase)) return t("hold_disabled_over");
    return t("hold_disabled_sub");
  }

  // ------------------------------------------------------------------ the button
  /** This referee's next move: above any before it on this phone (every tab's), and above
      the time in ms, so that a reload, or a storage that failed, never goes back. */
  function moveKey() {
    return `yomite.referee.move.${me ? me.referee : ""}`;
  }

  function nextMove() {
    const m = Math.max((Y.load(moveKey(), 0) || 0) + 1, Date.now());
    Y.save(moveKey(), m);
    return m;
  }

  function bumpMove(last) {
    if (typeof last === "number" && last > (Y.load(moveKey(), 0) || 0)) Y.save(moveKey(), last);
  }

  function press() {
    if (!me || pending || ui.hold.disabled) return;
    send(!amHolding(state), false);
  }

  /** Send one press (want: raise or lower), by the socket if it is open, else by REST. */
  function send(want, again) {
    const msg = { type: want ? "hold" : "release", move: nextMove() };
    if (seen.card !== null) {
      msg.card = seen.card;
      if (seen.verse) msg.verse = seen.verse;
    }
    const at = conn.serverNow();
    if (at !== null) msg.at_s = Math.round(at * 1000) / 1000;
    const p = { want, msg, again, abort: null };
    pending = p;
    p.timer = setTimeout(() => viaRest(p), CONFIRM_MS);
    // no answer by the server's age limit: the server refuses this press if it comes later
    // (a hold; a release is applied whenever it comes, and the state will say so)
    p.deadline = setTimeout(() => {
      if (pending !== p) return;
      if (p.abort) p.abort.abort();
      clearPending();
      render();
      if (want) Y.showError(new Y.ApiError(0, "press_stale", t("err_press_stale"), ""));
    }, maxAgeMs + 300);
    render();
    // the open socket is the quickest way to the reader; REST when it is not open
    if (!conn.send(msg)) {
      clearTimeout(p.timer);
      viaRest(p);
    }
  }

  async function viaRest(p) {
    if (!me || pending !== p) return;
    const path = `/api/channels/${encodeURIComponent(ch)}/holds/${encodeURIComponent(me.referee)}`;
    const { type: _type, ...fields } = p.msg;
    const body = p.want ? { name: me.name, ...fields } : fields;
    p.abort = typeof AbortController === "function" ? new AbortController() : null;
    try {
      const s = await Y.api(p.want ? "PUT" : "DELETE", path,
        { token: me.token, body, signal: p.abort ? p.abort.signal : undefined });
      if (s && s.press) bumpMove(s.press.last);
      conn.accept(s);
    } catch (e) {
      if (pending !== p) return; // answered meanwhile, or given up (said so already)
      if (e.status === 401) {
        authLost();
        return;
      }
      Y.showError(e);
    } finally {
      if (pending === p) {
        clearPending();
        render();
      }
    }
  }

  function clearPending() {
    if (pending) {
      clearTimeout(pending.timer);
      clearTimeout(pending.deadline);
    }
    pending = null;
  }

  // a touch stops the reading on the finger's down, not on its release; the keyboard
  // (Enter, Space) sends a click with detail 0
  ui.hold.addEventListener("pointerdown", (e) => {
    if (e.button !== 0) return;
    lastPointer = performance.now();
    press();
  });
  ui.hold.addEventListener("click", (e) => {
    if (e.detail !== 0 && performance.now() - lastPointer < 1500) return;
    press();
  });

  // ------------------------------------------------------------------ joining
  // The join link's PIN (#pin=…: a fragment never reaches a server, nor a log), taken off the
  // address bar at once so that it stays in no history; an old link's ?pin=… too.
  const linkPin = (() => {
    const old = new URLSearchParams(location.search).get("pin");
    const pin = Y.fromHash("pin") || old || "";
    if (old) history.replaceState(null, "", location.pathname);
    return pin.replace(/\D/g, "");
  })();

  function showJoin(note) {
    ui.live.hidden = true;
    ui.conn.hidden = true;
    ui.join.hidden = false;
    ui.joinNote.hidden = !note;
    ui.joinNote.textContent = note || "";
    if (!ui.pin.value) ui.pin.value = linkPin;
    if (!ui.name.value) ui.name.value = Y.load(NAME_KEY, "") || "";
    (ui.pin.value ? ui.name : ui.pin).focus();
  }

  function showLive() {
    ui.join.hidden = true;
    ui.conn.hidden = false;
    ui.live.hidden = false;
    render();
  }

  ui.joinForm.addEventListener("submit", async (e) => {
    e.preventDefault();
    const pin = ui.pin.value.trim();
    const name = ui.name.value.trim();
    if (!/^[0-9]{6,12}$/.test(pin)) {
      ui.pin.setAttribute("aria-invalid", "true");
      ui.pin.focus();
      Y.showError(new Y.ApiError(0, "pin", t("pin_label") + ": 0-9 × 6–12", ""));
      return;
    }
    ui.pin.removeAttribute("aria-invalid");
    if (!name) {
      ui.name.setAttribute("aria-invalid", "true");
      ui.name.focus();
      return;
    }
    ui.name.removeAttribute("aria-invalid");
    ui.joinButton.disabled = true;
    ui.joinButton.textContent = t("joining");
    try {
      const r = await Y.api("POST", `/api/channels/${encodeURIComponent(ch)}/referees`,
        { body: { pin, name } });
      me = { token: r.token, referee: r.referee, name: r.name, channel: r.channel };
      Y.save(KEY, me);
      Y.save(NAME_KEY, name);
      history.replaceState(null, "", location.pathname); // the PIN need not stay on screen
      prev = null;
      showLive();
      conn.start();
    } catch (err) {
      Y.showError(err);
    } finally {
      ui.joinButton.disabled = false;
      ui.joinButton.textContent = t("join_button");
    }
  });

  function authLost() {
    conn.stop();
    me = null;
    state = null;
    prev = null;
    clearPending();
    Y.save(KEY, null);
    showJoin(t("rejoin_needed"));
  }

  ui.leave.addEventListener("click", () => {
    if (amHolding(state)) return;
    conn.stop();
    me = null;
    state = null;
    prev = null;
    Y.save(KEY, null);
    showJoin();
  });

  // ------------------------------------------------------------------ start
  Y.bootPage({
    titleKey: "ref_title", ch, badge: ui.conn, conn,
    onLang: () => {
      render();
      if (!ui.join.hidden) ui.joinButton.textContent = t("join_button");
    },
  });
  $("channel-name").textContent = ch;
  if (me && me.token) {
    showLive();
    conn.start();
  } else {
    showJoin();
  }
})();
