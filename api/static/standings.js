/* The public standings for the projector (no login): each block's order by the rules (wins,
   cards, lottery), the round being read, and where everyone plays next (rule 18's move).
   It waits on the server for the next change (a long poll), so results show within a moment. */
"use strict";

(function () {
  const { t, el } = Y;
  const tid = decodeURIComponent(location.pathname.split("/").filter(Boolean)[1] || "");
  const $ = (id) => document.getElementById(id);
  let view = null;

  function render() {
    if (!view) return;
    $("title").textContent = `${view.name}　${t("standings_title")}`;
    document.title = `${view.name} ${t("standings_title")}`;
    $("blocks").dataset.version = String(view.version);
    $("blocks").replaceChildren(...view.blocks.map(block));
  }

  function block(b) {
    const r = b.round;
    const head = el("h2", {}, `${b.name}`, r ? Y.colourChip(r.colour) : "",
      el("span", { class: "round" }, r ? (r.final ? t("final") : t("round_n", { n: r.number })) : ""));
    if (b.reading && b.reading.state === "live") {
      const s = b.reading;
      head.append(el("span", { class: "reading", "data-paused": String(!!s.paused) },
        s.paused ? t("paused") : t(`phase_${s.phase}`)));
    }
    const rows = b.standings.map((s) => el("tr", {
      class: `${s.rank <= 2 && !s.withdrawn ? "top" : ""}${s.withdrawn ? " withdrawn" : ""}`, "data-no": s.no },
      el("td", { class: "n" }, String(s.rank)),
      el("td", {}, s.name, el("span", { class: "club" }, s.club),
        s.final_place ? ` ${s.final_place === 1 ? t("winner") : t("runner_up")}` : ""),
      el("td", { class: "n wins" }, String(s.wins)),
      el("td", { class: "n cards" }, String(s.cards)),
      el("td", { class: "n lot" }, s.by_lottery ? `${t("lottery")} ${s.lottery}` : "")));
    const table = el("table", {}, el("thead", {}, el("tr", {},
      el("th", {}, t("rank")), el("th", {}, t("name")), el("th", {}, t("wins")),
      el("th", {}, t("cards")), el("th", {}))), el("tbody", {}, ...rows));
    const parts = [head, table];
    const unstarted = r && r.results === 0 && (!b.reading || b.reading.state !== "live");
    if (b.next_mats && unstarted) {
      parts.push(el("h3", {}, `${t("next_mats")}（${b.next_mats.final ? t("final") : t("round_n", { n: b.next_mats.round })}）`));
      parts.push(el("div", { class: "moves" }, ...b.next_mats.seats.map((s) =>
        el("div", { "data-no": s.no }, s.name, el("b", {}, t("mat_n", { n: s.mat }))))));
    }
    return el("section", { class: "block", "data-block": b.name }, ...parts);
  }

  async function poll() {
    for (;;) {
      try {
        const after = view ? view.version : -1;
        const v = await Y.api("GET", `/api/tournaments/${encodeURIComponent(tid)}/public?after=${after}`);
        Y.showConnection($("conn"), "online");
        view = v;
        render();
      } catch (e) {
        Y.showConnection($("conn"), "reconnecting");
        if (e.status === 404) { Y.showError(e); return; }
        await new Promise((r) => setTimeout(r, 2000));
      }
    }
  }

  Y.initI18n();
  Y.onLang(render);
  Y.keepAwake();
  poll();
})();
