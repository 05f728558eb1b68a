/* The public standings for the projector and the players' phones, through the tournament's
   public link (`?view=KEY`, made at the desk; no login) or in the desk's own browser (its
   token): each block's
   order by the rules (wins, cards, lottery), the round being read, and where everyone plays
   next (rule 18's move). It waits on the server for the next change (a long poll), so results
   show within a moment.

   On a projector (a screen at least 640 x 440 px) the blocks are laid out in pages of the
   screen's size that turn by themselves (pager.js; `?page_s=` seconds a page, default 10, 0 to
   scroll instead); on a phone they follow one another down the page. Before a block's first
   result there is no order to show: its players by name (with their mats once paired). Until
   the preliminaries are complete the lottery decides nothing, so equals share a place; after,
   the places it decided are marked, and where it decided a place in the final it is said. */
"use strict";

(function () {
  const { t, el } = Y;
  const tid = decodeURIComponent(location.pathname.split("/").filter(Boolean)[1] || "");
  const $ = (id) => document.getElementById(id);
  const params = new URLSearchParams(location.search);
  const pageS = params.has("page_s") ? Math.max(0, Number(params.get("page_s")) || 0) : 10;
  const key = params.get("view") || "";
  const viewQ = key ? `&view=${encodeURIComponent(key)}` : "";
  // without a link: the desk's browser, with its token (anyone else is told to ask for one)
  const token = key ? null : Y.operator.token();
  const projector = matchMedia("(min-width: 640px) and (min-height: 440px)");
  let view = null;
  let pager = null;

  const roundName = (final, n) => (final ? t("final") : t("round_n", { n }));

  // on the projector, a QR code of this page's public link for the players' phones
  function showPhoneQr() {
    const a = $("phone-qr");
    a.hidden = !projector.matches || !key;
    if (a.hidden || a.dataset.ready) return;
    a.querySelector("img").src = `/api/tournaments/${encodeURIComponent(tid)}/qr.svg?view=${encodeURIComponent(key)}`;
    a.dataset.ready = "1";
  }

  function render() {
    if (!view) return;
    showPhoneQr();
    $("title").textContent = `${view.name}　${t("standings_title")}`;
    document.title = `${view.name} ${t("standings_title")}`;
    $("blocks").dataset.version = String(view.version);
    const specs = view.blocks.map(spec);
    const paged = pageS > 0 && projector.matches;
    document.documentElement.classList.toggle("stage", paged);
    if (paged) {
      if (!pager) {
        pager = new Y.Pager($("blocks"), $("pager"), { seconds: pageS, label: pageLabel });
      }
      pager.lay(specs);
    } else {
      if (pager) { pager.stop(); pager = null; }
      $("blocks").replaceChildren(...specs.map((s) => {
        const sec = el("section", { class: "block", "data-block": s.key }, s.head(false));
        for (const part of s.parts()) {
          if (!part.box) { sec.append(part); continue; }
          const b = part.box();
          b.slot.append(...part.items);
          sec.append(b.node);
        }
        return sec;
      }));
    }
  }

  function pageLabel(n, total, keys) {
    return el("span", { "aria-label": t("page_aria", { n, total }) },
      el("b", {}, t("page_of", { n, total })), ` ${keys.join("・")}`);
  }

  function head(b, continued) {
    const r = b.round;
    const h = el("h2", {}, `${b.name}`, r ? Y.colourChip(r.colour) : "",
      el("span", { class: "round" }, r ? roundName(r.final, r.number) : ""));
    if (continued) h.append(el("span", { class: "cont" }, t("continued")));
    if (b.reading && b.reading.state === "live") {
      const s = b.reading;
      h.append(el("span", { class: "reading", "data-paused": String(!!s.paused) },
        s.paused ? t("paused") : t(`phase_${s.phase}`)));
    }
    return h;
  }

  function spec(b) {
    const started = b.standings.some((s) => s.played > 0);
    const r = b.round;
    const unstarted = r && r.results === 0 && (!b.reading || b.reading.state !== "live");
    return { key: b.name, head: (continued) => head(b, continued),
      parts: () => (started ? ranked(b, unstarted) : entrants(b)) };
  }

  /** Before the block's first result: its players by name, with their mats once paired. */
  function entrants(b) {
    const nm = b.next_mats;
    const mats = new Map(nm ? nm.seats.map((s) => [s.no, s.mat]) : []);
    const people = b.standings.filter((s) => !s.withdrawn && (!nm || mats.has(s.no)))
      .sort((x, y) => (x.furigana || x.name).localeCompare(y.furigana || y.name, "ja") || x.no - y.no);
    const title = nm ? t("mats_of", { round: roundName(nm.final, nm.round) })
      : t("entrants_n", { n: people.length });
    return [{ box: () => list(title), items: people.map((s) => el("div", { "data-no": s.no },
      s.name, el("span", { class: "club" }, s.club),
      mats.has(s.no) ? el("b", {}, t("mat_n", { n: mats.get(s.no) })) : "")) }];
  }

  function list(title) {
    const slot = el("div", { class: "moves" });
    return { node: el("div", { class: "list" }, el("h3", {}, title), slot), slot };
  }

  function ranked(b, unstarted) {
    const rows = [...b.standings].sort((x, y) => x.place - y.place || x.rank - y.rank);
    const decided = rows.some((s) => s.final_place);
    const sharing = new Map();
    for (const s of rows) sharing.set(s.place, (sharing.get(s.place) || 0) + 1);
    const items = rows.map((s) => {
      // gold: going on as things stand, the top two (or the first, with no final); not when
      // equals share the place across the line
      const going = (view.settings && view.settings.finalists) || 2;
      const gold = !s.withdrawn && (decided ? s.final_place && s.final_place <= going
        : s.place + sharing.get(s.place) - 1 <= going);
      const badges = [];
      if (s.final_place) {
        badges.push(el("span", { class: `badge place${s.final_place}` },
          s.final_place === 1 ? t("winner") : t("runner_up")));
      }
      if (s.by_lottery && !s.final_place) {  // once the final is played, it decided their places
        badges.push(el("span", { class: "badge lot", title: t("by_lottery") }, t("lottery")));
      }
      return el("tr", { class: `${gold ? "top" : ""}${s.withdrawn ? " withdrawn" : ""}`,
        "data-no": s.no, "data-place": s.place },
        el("td", { class: "n place" }, String(s.place)),
        el("td", { class: "who" }, el("span", { class: "name" }, s.name),
          el("span", { class: "club" }, s.club), ...badges),
        el("td", { class: "n wins" }, String(s.wins)),
        el("td", { class: "n cards" }, String(s.cards)));
    });
    const table = () => {
      const slot = el("tbody");
      return { node: el("table", {}, el("thead", {}, el("tr", {},
        el("th", {}, t("rank")), el("th", {}, t("name")), el("th", { class: "n" }, t("wins")),
        el("th", { class: "n" }, t("cards")))), slot), slot };
    };
    const parts = [{ box: table, items }];
    const fl = b.final_lottery;
    if (fl) {
      const names = (xs) => xs.map((x) => x.name).join("・");
      parts.push(el("p", { class: "lottery-note" }, t(view.settings && view.settings.finalists === 1
        ? "final_lottery_one" : "final_lottery", {
        drawn: names(fl.drawn), left: names(fl.left), wins: fl.wins, cards: fl.cards })));
    }
    if (b.next_mats && unstarted) {
      const title = `${t("next_mats")}（${roundName(b.next_mats.final, b.next_mats.round)}）`;
      parts.push({ box: () => list(title), items: b.next_mats.seats.map((s) =>
        el("div", { "data-no": s.no }, s.name, el("b", {}, t("mat_n", { n: s.mat })))) });
    }
    return parts;
  }

  async function poll() {
    for (;;) {
      try {
        const after = view ? view.version : -1;
        const v = await Y.api("GET", `/api/tournaments/${encodeURIComponent(tid)}/public?after=${after}${viewQ}`,
          { token });
        Y.showConnection($("conn"), "online");
        view = v;
        render();
      } catch (e) {
        Y.showConnection($("conn"), "reconnecting");
        if (e.status === 404 || e.status === 401) { Y.showError(e); return; }
        await new Promise((r) => setTimeout(r, 2000));
      }
    }
  }

  let queued = false;
  addEventListener("resize", () => {
    if (queued) return;
    queued = true;
    requestAnimationFrame(() => { queued = false; render(); });
  });
  addEventListener("keydown", (e) => {
    if (!pager) return;
    if (e.key === "ArrowRight" || e.key === "PageDown" || e.key === " ") pager.turn(1);
    else if (e.key === "ArrowLeft" || e.key === "PageUp") pager.turn(-1);
  });

  Y.initI18n();
  Y.onLang(render);
  Y.keepAwake();
  poll();
})();
