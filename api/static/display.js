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
    torifuda: $("torifuda"), lastKana: $("last-kana"), kimarijiNote: $("kimariji-note"),
    reads: $("reads"), readList: $("read-list"), readsPage: $("reads-page"),
    left: $("left"), leftGroups: $("left-groups"), full: $("full-torifuda"),
    fullCard: $("full-torifuda-card"), fullN: $("full-n"),
  };
  let state = null;
  let poems = null;
  let offlineTimer = null;

  // a room's projector or viewer link carries its key (#key=…, taken off the address bar),
  // kept for this channel's next visit; config.yaml's channels need none
  const VIEW_KEY = `yomite.view.${ch}`;
  const viewKey = Y.fromHash("key") || Y.load(VIEW_KEY);
  if (viewKey) Y.save(VIEW_KEY, viewKey);

  const countdown = new Y.Countdown(() => renderStage());
  const conn = new Y.Channel(ch, {
    token: () => viewKey,
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
    } else if (s === "cut_off") {
      // this server lost the cluster's other servers: said at once (what it shows may be old)
      ui.offline.hidden = false;
      ui.offline.textContent = t("conn_cut_off");
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
    renderReads(m);
    renderFull(m);
    renderLeft(m);
  }

  /** The operator's choice (PUT …/projector): the torifuda of the card just read over the
      whole screen, from the end of its lower verse until the next card's upper verse begins
      (or a hand goes up: the banner is what the hall must read then). */
  function renderFull(m) {
    const full = !!(state && state.projector && state.projector.torifuda === "full");
    const c = lastRead(m);
    const p = c && poems ? poems.get(c.poem) : null;
    const show = full && p && m.card === c.n && !m.paused
      && ["reading", "tiebreak", "finished"].includes(m.phase);
    ui.full.hidden = !show;
    document.body.dataset.full = show ? "shown" : "";
    if (!show) return;
    if (ui.full.dataset.poem !== String(p.no)) {
      ui.fullCard.replaceChildren(...torifuda(p.shimo_kana));
      ui.full.dataset.poem = String(p.no);
    }
    ui.full.setAttribute("aria-label", `${t("torifuda")}: ${p.shimo_kana}`);
    ui.fullN.textContent = `${t("card_no", { n: c.n })} · ${t("poem_no", { no: p.no })}`;
  }

  /** The cards still on the mats, by colour, with their kimariji now (public only while the
      operator shows them: kimariji.left). */
  function renderLeft(m) {
    const left = m && m.kimariji && m.kimariji.left;
    const on = !!(state && state.projector && state.projector.left && left && poems);
    ui.left.hidden = !on;
    document.body.dataset.left = on ? "shown" : "";
    if (!on) return;
    const groups = new Map();
    for (const c of left) {
      const p = poems.get(c.poem);
      const colour = p ? p.color : "";
      if (!groups.has(colour)) groups.set(colour, []);
      groups.get(colour).push(c);
    }
    const order = [...(m.colors || []), ...[...groups.keys()].filter((c) => !(m.colors || []).includes(c))];
    ui.leftGroups.replaceChildren(...order.filter((c) => groups.has(c)).map((colour) =>
      Y.el("div", { class: "group", dataset: { colour } },
        Y.el("h3", {}, Y.colourChip(colour), Y.el("span", { class: "count" },
          t("left_count", { n: groups.get(colour).length }))),
        Y.el("ul", {}, ...groups.get(colour).map((c) =>
          Y.el("li", { dataset: { poem: String(c.poem) } }, c.kimariji))))));
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
    ui.torifuda.replaceChildren(...torifuda(p.shimo_kana));
    ui.torifuda.setAttribute("aria-label", `${t("torifuda")}: ${p.shimo_kana}`);
    const k = readKimariji(m, c.n);
    ui.lastKana.replaceChildren(...highlighted(p.kami_kana, k ? k.kimariji.length : 0));
    ui.lastKana.dataset.kimariji = k ? k.kimariji : "";
    ui.kimarijiNote.textContent = k ? t("kimariji_note", { k: k.kimariji, hundred: k.hundred }) : "";
  }

  function readKimariji(m, n) {
    const read = (m && m.kimariji && m.kimariji.read) || [];
    return read.find((r) => r.n === n) || null;
  }

  /** The lower verse in hiragana as a torifuda has it: written top to bottom in three
      columns, right to left (5, 5 and the rest for the usual 14 kana). */
  function torifuda(kana) {
    const chars = [...kana.replace(/[ \u3000]/g, "")];
    const per = Math.ceil(chars.length / 3);
    const cols = [];
    for (let i = 0; i < chars.length; i += per) {
      cols.push(Y.el("span", { class: "col" }, chars.slice(i, i + per).join("")));
    }
    return cols;
  }

  /** The upper verse in kana with its first `n` kana (the kimariji) marked. */
  function highlighted(kana, n) {
    const out = [];
    let seen = 0;
    let marked = "";
    let rest = "";
    for (const ch of kana) {
      if (seen < n) {
        marked += ch;
        if (ch !== " ") seen += 1;
      } else {
        rest += ch;
      }
    }
    if (marked) out.push(Y.el("mark", { class: "kimariji" }, marked));
    out.push(rest);
    return out;
  }

  /** Every card read so far, with the kimariji it had when it was read: the 感想戦 list. */
  function renderReads(m) {
    const read = (m && m.kimariji && m.kimariji.read) || [];
    ui.reads.hidden = read.length === 0;
    ui.reads.dataset.phase = m ? m.phase : "none";
    document.body.dataset.reads = read.length ? "shown" : "";
    readItems = read.map((r) => {
      const p = poems ? poems.get(r.poem) : null;
      const first = p ? p.kami_kana.split(" ")[0] : "";
      return Y.el("li", { dataset: { poem: String(r.poem), n: String(r.n) } },
        Y.el("span", { class: "n" }, String(r.n)),
        Y.el("span", { class: "k" }, r.kimariji),
        Y.el("span", { class: "rest" }, first.slice(r.kimariji.length)));
    });
    layoutReads();
  }

  // The 感想戦 list: at the end of a match it fills the space left on the screen (the last
  // card's panel makes way when the list needs its room); while cards are read it takes at
  // most READING_SHARE of the screen's height, below the card number and the last card. In
  // the columns that give the largest text, never smaller than legible from the back of a
  // classroom (READ_MIN_VMIN, 20 px at least); cards that would be smaller are shown a page
  // at a time, turning every PAGE_MS.
  const READ_MIN_VMIN = 4.5;
  const READ_MAX_VMIN = 9;
  const READING_MAX_VMIN = 5; // while cards are read: the card number comes first
  const PAGE_MS = 6000;
  const READING_SHARE = 0.3;
  let readItems = [];
  let page = 0;
  let pageTimer = null;

  function layoutReads() {
    const list = ui.readList;
    ui.last.classList.remove("yield");
    if (ui.reads.hidden || !readItems.length) {
      list.replaceChildren();
      setPages(1);
      return;
    }
    let plan = planReads();
    if (plan.pages > 1 && ui.reads.dataset.phase === "finished" && !ui.last.hidden) {
      ui.last.classList.add("yield");
      plan = planReads();
    }
    setPages(plan.pages);
    list.style.height = plan.height === null ? "" : `${plan.height}px`;
    list.style.fontSize = `${plan.fs}px`;
    list.style.gap = `${plan.gap}px`;
    list.style.gridTemplateColumns = `repeat(${plan.cols}, minmax(0, 1fr))`;
    list.replaceChildren(...readItems.slice(page * plan.per, (page + 1) * plan.per));
  }

  /** How the cards read are laid out in the list's box: font size, columns, cards a page. */
  function planReads() {
    const list = ui.readList;
    // each card's size in em, measured on its own at 100 px
    list.classList.add("measure");
    list.style.fontSize = "100px";
    list.replaceChildren(...readItems);
    let wEm = 0;
    let hEm = 0;
    for (const li of readItems) {
      const r = li.getBoundingClientRect();
      wEm = Math.max(wEm, r.width / 100);
      hEm = Math.max(hEm, r.height / 100);
    }
    list.classList.remove("measure");
    list.replaceChildren();
    list.style.height = "";
    const finished = ui.reads.dataset.phase === "finished";
    const box = { width: list.getBoundingClientRect().width,
      // the room left with the list empty; while reading, a share of the screen
      height: finished ? list.getBoundingClientRect().height
        : innerHeight * READING_SHARE - list.getBoundingClientRect().top
          + ui.reads.getBoundingClientRect().top };
    const vmin = Math.min(innerWidth, innerHeight) / 100;
    const gap = Math.round(vmin * 1.2);
    const fsMin = Math.max(20, vmin * READ_MIN_VMIN);
    const best = (count) => {
      let out = { fs: 0, cols: 1 };
      for (let cols = 1; cols <= count; cols += 1) {
        const rows = Math.ceil(count / cols);
        const fs = Math.min(vmin * (finished ? READ_MAX_VMIN : READING_MAX_VMIN),
          (box.width - 1 - gap * (cols - 1)) / cols / wEm,
          (box.height - 1 - gap * (rows - 1)) / rows / hEm);
        if (fs > out.fs) out = { fs, cols };
      }
      return out;
    };
    const n = readItems.length;
    let per = n;
    while (per > 1 && best(per).fs < fsMin) per -= 1;
    const pages = Math.ceil(n / per);
    per = Math.ceil(n / pages); // the pages evenly filled
    const fs = Math.max(0, Math.floor(best(per).fs * 10) / 10);
    // as many columns as the text's size allows: a few cards keep their own width
    const cols = fs > 0 ? Math.max(1, Math.floor((box.width - 1 + gap) / (wEm * fs + gap))) : 1;
    const rows = Math.ceil(per / cols);
    return { pages, per, gap, cols, fs,
             height: finished ? null : Math.ceil(rows * hEm * fs + gap * (rows - 1)) + 1 };
  }

  function setPages(pages) {
    ui.reads.dataset.pages = String(pages);
    if (page >= pages) page = 0;
    ui.reads.dataset.page = String(page + 1);
    ui.readsPage.hidden = pages < 2;
    ui.readsPage.textContent = pages < 2 ? "" : t("reads_page", { page: page + 1, pages });
    if (pages < 2) {
      clearInterval(pageTimer);
      pageTimer = null;
    } else if (pageTimer === null) {
      pageTimer = setInterval(() => {
        page = (page + 1) % Number(ui.reads.dataset.pages);
        layoutReads();
      }, PAGE_MS);
    }
  }

  addEventListener("resize", () => layoutReads());

  Y.bootPage({ titleKey: "display_title", ch, badge: ui.conn, conn, onLang: render });
  loadPoems();
  conn.start();
})();
