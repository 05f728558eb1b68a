/* The class result sheet (結果用紙): one match of a channel on paper, for a teacher. Opened from
   the console's history (a row's 印刷 button: /sheet/<channel>?match=<id>), or for the current
   match (/sheet/<channel>). It shows when the match was read, its colours, the cards read in
   order (number, poem, kimariji, and what happened: who stopped it, read again, skipped), and a
   table of the mats for the pupils' names and cards taken, written in by hand. The operator's
   pages only: the match log it reads is the operator's (the token the console keeps). A card
   is on the sheet only once its upper verse began (the log holds nothing later). */
"use strict";

(function () {
  const { t } = Y;
  const parts = location.pathname.split("/").filter(Boolean);
  const ch = decodeURIComponent(parts[1] || "main");
  const params = new URLSearchParams(location.search);
  const matchId = params.get("match");
  const $ = (id) => document.getElementById(id);
  const ui = {
    error: $("sheet-error"), note: $("sheet-note"), meta: $("meta"), mats: $("mats"),
    results: document.querySelector("#results tbody"), cards: document.querySelector("#cards tbody"),
    cardsEmpty: $("cards-empty"), print: $("print"),
  };
  const MATS_MIN = 1;
  const MATS_MAX = 60;
  const MATS_DEFAULT = 20; // a class of 40: 20 pairs

  let log = null;
  let poems = null;
  let failure = null; // an ApiError or Error: said in the page's language
  let matsNote = null; // a mats value that was out of range: said, and the nearest used

  /** The number of mats asked for (?mats=), kept within 1-60; a value outside is said. */
  function matsFrom(raw) {
    matsNote = null;
    if (raw === null || raw === "") return MATS_DEFAULT;
    const n = Number(raw);
    if (!Number.isInteger(n) || n < MATS_MIN || n > MATS_MAX) {
      matsNote = { value: String(raw).slice(0, 20) };
      return Number.isFinite(n) ? Math.min(MATS_MAX, Math.max(MATS_MIN, Math.round(n)))
        : MATS_DEFAULT;
    }
    return n;
  }
  let mats = matsFrom(params.get("mats"));

  async function load() {
    const token = Y.operator.token();
    if (!token) {
      failure = new Error(t("sheet_no_token"));
      render();
      return;
    }
    const base = `/api/channels/${encodeURIComponent(ch)}`;
    const path = matchId ? `${base}/matches/${encodeURIComponent(matchId)}/log` : `${base}/match/log`;
    try {
      [log, poems] = await Promise.all([Y.api("GET", path, { token }), Y.poems()]);
      failure = null;
    } catch (e) {
      failure = e;
    }
    render();
  }

  /** The cards read, in order, with what happened to each (the journal's facts: read again,
      skipped; the timeline's holds and who raised a hand); and the match's holds. */
  function summarise(l) {
    const cards = [];
    const byCard = new Map();
    let last = null;
    let holds = 0;
    for (const r of l.timeline || []) {
      if (r.kind === "verse" && r.card) {
        let c = byCard.get(r.card);
        if (!c) {
          c = { card: r.card, poem: r.poem, holdBy: [], holds: 0, again: 0, skipped: false };
          byCard.set(r.card, c);
          cards.push(c);
        }
        if (r.skipped) c.skipped = true;
        last = c;
      } else if (r.kind === "hold") {
        holds += 1;
        if (last) { // a hold before the first card counts for the match only
          last.holds += 1;
          for (const n of r.held_by || []) if (!last.holdBy.includes(n)) last.holdBy.push(n);
        }
      }
    }
    for (const rec of l.records || []) {
      for (const f of rec.facts || []) {
        const c = f && byCard.get(f.card);
        if (c && f.fact === "read_again") c.again += 1;
      }
    }
    return { cards, holds };
  }

  /** Wall-clock times of the match from its journal: prepared, started (bow or start), last. */
  function times(l) {
    const wall = l.header && l.header.wall ? new Date(l.header.wall) : null;
    const t0 = l.header ? Number(l.header.t) : NaN;
    const at = (r) => (wall && r && Number.isFinite(Number(r.t)) && Number.isFinite(t0)
      ? new Date(wall.getTime() + (Number(r.t) - t0) * 1000) : null);
    const recs = l.records || [];
    const start = recs.find((r) => r.event && ["start", "bow"].includes(r.event.type));
    const end = recs.length ? recs[recs.length - 1] : null;
    return { prepared: wall, started: at(start), last: start ? at(end) : null };
  }

  function fmtDate(d) {
    return d ? d.toLocaleString(Y.lang === "ja" ? "ja-JP" : "en-GB", {
      year: "numeric", month: "numeric", day: "numeric", hour: "2-digit", minute: "2-digit" })
      : "—";
  }

  /** Who stopped the reading, as the console says it (the journal keeps a name or an id). */
  function names(list) {
    return list.map((n) => (n === "@operator" || n === "operator" ? t("operator_name")
      : Y.holderName({ referee: n, name: n.startsWith("@") ? "" : n }))).join(t("name_sep"));
  }

  function render() {
    ui.mats.value = String(mats);
    ui.error.hidden = !failure;
    if (failure) {
      const e = Y.errorText(failure);
      ui.error.textContent = [e.title, e.detail, e.hint].filter(Boolean).join(" — ");
    }
    ui.note.hidden = !matsNote;
    if (matsNote) {
      ui.note.textContent = t("sheet_mats_range", { value: matsNote.value, min: MATS_MIN,
        max: MATS_MAX, used: mats });
    }
    renderResults();
    renderMatch();
  }

  function renderResults() {
    const rows = [];
    for (let i = 1; i <= mats; i++) {
      rows.push(Y.el("tr", {}, Y.el("td", { class: "mat" }, String(i)),
        Y.el("td", { class: "blank name" }), Y.el("td", { class: "blank count" }),
        Y.el("td", { class: "blank name" }), Y.el("td", { class: "blank count" }),
        Y.el("td", { class: "blank note" })));
    }
    ui.results.replaceChildren(...rows);
  }

  function renderMatch() {
    if (!log || !poems) {
      ui.meta.replaceChildren();
      ui.cards.replaceChildren();
      ui.cardsEmpty.hidden = true; // loading, or said in the error above
      return;
    }
    const deck = (log.header && log.header.deck) || {};
    const s = summarise(log);
    const when = times(log);
    const colours = (deck.colors || []).map((c) => t(c)).join(t("name_sep"));
    const planned = log.header ? log.header.cards : null;
    const minutes = when.started && when.last
      ? Math.max(0, Math.round((when.last - when.started) / 60000)) : null;
    const item = (key, value) => [Y.el("dt", {}, t(key)), Y.el("dd", { dataset: { k: key } }, value)];
    ui.meta.replaceChildren(
      ...item("sheet_class", ch),
      ...item("sheet_date", fmtDate(when.started || when.prepared)),
      ...item("sheet_colours", colours || "—"),
      ...item("sheet_read", t("sheet_read_value", { read: s.cards.length,
        planned: planned === null || planned === undefined ? "—" : planned })),
      ...item("sheet_holds", String(s.holds)),
      ...item("sheet_minutes", minutes === null ? "—" : t("sheet_minutes_value", { n: minutes })),
    );
    ui.cards.replaceChildren(...s.cards.map((c) => {
      const p = poems.get(c.poem) || {};
      const marks = [];
      if (c.holds) marks.push(t("sheet_mark_held", { names: names(c.holdBy) || "—" }));
      if (c.again) marks.push(t("sheet_mark_again", { n: c.again }));
      if (c.skipped) marks.push(t("sheet_mark_skipped"));
      return Y.el("tr", { dataset: { card: c.card, poem: c.poem } },
        Y.el("td", { class: "n" }, String(c.card)),
        Y.el("td", { class: "colour" }, p.color ? t(p.color) : ""),
        Y.el("td", { class: "no" }, String(c.poem)),
        Y.el("td", { class: "kami" }, p.kami || ""),
        Y.el("td", { class: "shimo" }, p.shimo || ""),
        Y.el("td", { class: "kimariji" }, p.kimariji || ""),
        Y.el("td", { class: "marks" }, marks.join(" / ")));
    }));
    ui.cardsEmpty.hidden = s.cards.length > 0;
  }

  ui.mats.addEventListener("change", () => {
    mats = matsFrom(ui.mats.value);
    const q = new URLSearchParams(location.search);
    q.set("mats", String(mats));
    history.replaceState(null, "", `${location.pathname}?${q}`);
    render();
  });
  ui.print.addEventListener("click", () => window.print());

  const title = () => { document.title = `yomite ${t("sheet_title")} · ${ch}`; };
  Y.initI18n();
  Y.onLang(() => { title(); render(); });
  title();
  render();
  load();
})();
