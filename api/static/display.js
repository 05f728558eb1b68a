/* The projector: readable from the back of a hall. It shows the phase, the memorisation
   countdown, the card counter, who stopped the reading, and the card just read: only once its
   lower verse has been read (cards[] entries with finished_s set; the public state carries no
   poem number for any other card, so nothing here could give the card away early). */
"use strict";

(function () {
  const { t } = Y;
  const ch = decodeURIComponent(location.pathname.split("/").filter(Boolean)[1] || "main");
  const $ = (id) => document.getElementById(id);
  const ui = {
    colours: $("colours"), phase: $("phase"), conn: $("conn"), banner: $("banner"),
    bannerMain: $("banner-main"), bannerSub: $("banner-sub"), stage: $("stage"), big: $("big"),
    sub: $("sub"), last: $("last"), lastN: $("last-n"), lastKami: $("last-kami"),
    lastShimo: $("last-shimo"), lastAuthor: $("last-author"), offline: $("offline"),
  };
  let state = null;
  let poems = null;
  let offlineTimer = null;

  const countdown = new Y.Countdown(() => renderStage());
  const conn = new Y.Channel(ch, {
    onState: (s) => {
      state = s;
      countdown.update(s.match);
      render();
    },
    onStatus: showStatus,
  });
  Y.live = conn;

  function loadPoems() {
    Y.poems().then((p) => {
      poems = p;
      render();
    }).catch(() => setTimeout(loadPoems, 3000));
  }

  function showStatus(s) {
    Y.showConnection(ui.conn, s);
    clearTimeout(offlineTimer);
    if (s === "online") {
      ui.offline.hidden = true;
    } else {
      // a short blip is not worth a message across the hall
      offlineTimer = setTimeout(() => {
        ui.offline.hidden = false;
        ui.offline.textContent = `${t("conn_offline")} · ${t("conn_reconnecting")}`;
      }, 3000);
    }
  }

  function render() {
    const m = state && state.match;
    ui.colours.replaceChildren(...(m ? m.colors : []).map(Y.colourChip));
    ui.phase.textContent = Y.phaseText(m);
    document.body.dataset.phase = m ? m.phase : "none";
    renderBanner(m);
    renderStage();
    renderLast(m);
  }

  function renderBanner(m) {
    if (!m || !m.paused) {
      ui.banner.hidden = true;
      return;
    }
    ui.banner.hidden = false;
    const resuming = m.resumes_at_s !== null;
    ui.banner.dataset.resuming = resuming ? "true" : "false";
    ui.bannerMain.textContent = resuming ? t("resuming") : t("paused");
    ui.bannerSub.textContent = resuming ? "" : t("held_by", { names: Y.joinNames(Y.holdNames(m)) });
  }

  function renderStage() {
    const m = state && state.match;
    const phase = m ? m.phase : "none";
    ui.stage.dataset.phase = phase;
    let big = "";
    let sub = "";
    switch (phase) {
      case "none":
        sub = t("waiting_match");
        break;
      case "ready":
        big = t("phase_ready");
        sub = m.bowed ? t("bowed_sub") : t("waiting_match");
        break;
      case "bowing":
        big = Y.callText(m) || t("phase_bowing");
        break;
      case "announcing":
        big = t("memorise_now");
        break;
      case "memorising": {
        const secs = countdown.seconds();
        big = secs === null ? "" : String(secs);
        sub = t("memorise_now");
        break;
      }
      case "prelude":
        big = t("phase_prelude");
        sub = Y.segmentText(m.segment, m);
        break;
      case "closing":
        // rule 18: 「ありがとうございました」, then the move call
        big = Y.callText(m) || t("phase_closing");
        sub = t("cards_done", { n: m.card });
        break;
      case "reading":
      case "tiebreak":
        if (phase === "tiebreak" && Y.callText(m)) {
          big = Y.callText(m); // rule 16: 「もう一枚読みます」
          sub = t("phase_tiebreak");
          break;
        }
        if (m.card) {
          ui.big.replaceChildren(
            Y.el("span", { class: "n" }, String(m.card)),
            Y.el("span", { class: "of" }, `/ ${m.cards_total}`));
          const seg = m.segment;
          sub = seg && seg.card && seg.verse
            ? `${t("card_no", { n: m.card })} · ${t(`verse_${seg.verse}`)}`
            : t("card_no", { n: m.card });
          ui.sub.textContent = sub;
          return;
        }
        big = Y.phaseText(m);
        break;
      case "finished":
        // rule 16: the reading is over and the players count their cards
        big = t("phase_finished");
        sub = `${t("count_cards")} · ${t("cards_done", { n: m.card })}`;
        break;
      case "closed":
        big = t("phase_closed");
        sub = t("closed_sub");
        break;
      case "aborted":
        big = t("phase_aborted");
        sub = m.reason || "";
        break;
      default:
        big = Y.phaseText(m);
    }
    ui.big.textContent = big;
    ui.sub.textContent = sub;
  }

  /** The last card whose lower verse has been read, or null. */
  function lastRead(m) {
    if (!m) return null;
    let last = null;
    for (const c of m.cards) {
      if (c.finished_s !== null && c.poem && (!last || c.n > last.n)) last = c;
    }
    return last;
  }

  function renderLast(m) {
    const c = lastRead(m);
    const p = c && poems ? poems.get(c.poem) : null;
    if (!p) {
      ui.last.hidden = true;
      delete ui.last.dataset.poem;
      return;
    }
    ui.last.hidden = false;
    ui.last.dataset.poem = String(p.no);
    ui.last.dataset.card = String(c.n);
    ui.lastN.textContent = `(${t("card_no", { n: c.n })} · ${t("poem_no", { no: p.no })})`;
    ui.lastKami.replaceChildren(Y.verse(p.kami));
    ui.lastShimo.replaceChildren(Y.verse(p.shimo));
    ui.lastAuthor.textContent = p.author;
  }

  Y.initI18n();
  Y.onLang(() => {
    document.title = `yomite ${t("display_title")} · ${ch}`;
    render();
    Y.showConnection(ui.conn, conn.status);
  });
  document.title = `yomite ${t("display_title")} · ${ch}`;
  Y.showConnection(ui.conn, "connecting");
  Y.keepAwake();
  loadPoems();
  conn.start();
})();
