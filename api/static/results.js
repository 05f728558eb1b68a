/* A referee's results (rule 17): the mats the desk assigned this referee, the players now at
   each, the cards each took. The referee's identity is the one it joined its channel with
   (the referee page keeps it); nothing here can enter a mat that is not this referee's. */
"use strict";

(function () {
  const { t, el } = Y;
  const ch = decodeURIComponent(location.pathname.split("/").filter(Boolean)[1] || "main");
  const me = Y.load(`yomite.referee.${ch}`); // {token, referee, name, channel}
  const $ = (id) => document.getElementById(id);
  const drafts = new Map(); // "round/mat" -> {no: cards} not yet sent
  const touched = new Set(); // the mats whose counts the referee has set (typed or stepped)
  const armed = new Map(); // "round/mat" -> when a send of an untouched 0-0 was asked
  let data = [];

  $("back").href = `/referee/${encodeURIComponent(ch)}`;
  $("join-link").href = `/referee/${encodeURIComponent(ch)}`;

  async function load() {
    try {
      data = await Y.api("GET", "/api/tournaments/assigned", { token: me.token });
      Y.showConnection($("conn"), "online");
      // never redrawn under a referee's typing thumb: drawn again when the count is left
      const typing = document.activeElement && document.activeElement.matches("#mats input.count");
      if (!typing) render();
    } catch (e) {
      Y.showConnection($("conn"), "reconnecting");
      if (e.status === 401) { $("need-join").hidden = false; return; }
    }
  }

  function key(t, m) { return `${t.tournament}/${m.round}/${m.mat}`; }

  function render() {
    const mats = data.flatMap((tt) => tt.matches.map((m) => ({ tt, m })));
    $("no-mats").hidden = mats.length > 0;
    $("intro").hidden = mats.length === 0;
    $("mats").replaceChildren(...mats.map(({ tt, m }) => card(tt, m)));
  }

  function card(tt, m) {
    const k = key(tt, m);
    // what the referee typed stays until sent; an untouched card shows the result as the
    // server has it now (the desk may have corrected it from a slip)
    const draft = (touched.has(k) && drafts.get(k)) || Object.fromEntries(m.players.map((p, i) =>
      [p.no, m.result ? m.result.cards[i] : 0]));
    drafts.set(k, draft);
    const sent = m.result && m.players.every((p, i) => m.result.cards[i] === draft[p.no]);
    const read = m.cards_read;
    const total = Object.values(draft).reduce((a, b) => a + b, 0);
    const sum = el("p", { class: `sum${total > read ? " bad" : ""}` }, t("res_sum", { n: total, read }));
    const updateSum = () => {
      const n = Object.values(draft).reduce((a, b) => a + b, 0);
      sum.textContent = t("res_sum", { n, read });
      sum.classList.toggle("bad", n > read);
    };
    const rows = m.players.map((p) => {
      // the count is typed on the phone's number pad (9-6 is two taps), or stepped with − +
      const out = el("input", { type: "text", inputmode: "numeric", pattern: "[0-9]*",
        class: "count", "data-no": p.no, value: String(draft[p.no]), maxlength: "3",
        "aria-label": p.name, autocomplete: "off" });
      out.addEventListener("focus", () => out.select());
      out.addEventListener("input", () => {
        const v = out.value.normalize("NFKC").replace(/[^0-9]/g, "");
        draft[p.no] = Math.max(0, Math.min(read, Number(v || 0)));
        touched.add(k);
        updateSum();
      });
      out.addEventListener("change", () => render());
      const step = (d) => {
        draft[p.no] = Math.max(0, Math.min(read, draft[p.no] + d));
        touched.add(k);
        render();
      };
      const minus = el("button", { type: "button", "aria-label": `${p.name} −1`, class: "minus" }, "−");
      const plus = el("button", { type: "button", "aria-label": `${p.name} +1`, class: "plus" }, "+");
      minus.addEventListener("click", () => step(-1));
      plus.addEventListener("click", () => step(1));
      if (m.closed) { minus.disabled = true; plus.disabled = true; }
      return el("div", { class: "player" },
        el("div", { class: "name" }, p.furigana ? el("span", { class: "kana" }, p.furigana) : "", p.name),
        el("div", { class: "stepper" }, minus, out, plus));
    });
    const parts = [el("h2", {}, t("mat_n", { n: m.mat }), " ",
      m.final ? t("final") : t("round_n", { n: m.round }), Y.colourChip(m.colour),
      el("span", { class: `state${sent ? " sent" : ""}` }, sent ? t("res_sent") : "")), ...rows, sum];
    const tied = m.final && m.result && new Set(m.result.cards).size === 1;
    if (tied) {
      parts.push(el("p", {}, t("who_took_extra")));
      parts.push(el("div", { class: "tiebreak" }, ...m.players.map((p) => {
        const b = el("button", { type: "button", class: "btn", "aria-pressed": String(m.result.tiebreak === p.no),
          "data-tiebreak": p.no }, p.name);
        b.addEventListener("click", () => send(tt, m, draft, p.no));
        return b;
      })));
    }
    // the players at the mat confirm the result sent (as the server has it): shown to both,
    // then their press; a correction afterwards asks them again
    if (m.players_confirmed) {
      parts.push(el("p", { class: "players-done" }, `✓ ${t("res_players_done")}`));
    } else if (sent && !m.closed && !(tied && !m.result.tiebreak)) {
      const ok = el("button", { type: "button", class: "btn players-ok" }, t("res_players_ok"));
      ok.addEventListener("click", () => confirmByPlayers(tt, m));
      parts.push(el("div", { class: "players-ask" }, el("p", {}, t("res_players_ask")), ok));
    }
    for (const f of m.flags.filter((x) => x.level === "error" && x.code !== "missing_result")) {
      parts.push(el("p", { class: "flag" }, t(`f_${f.code}`)));
    }
    if (m.closed) parts.push(el("p", { class: "closed" }, t(m.confirmed ? "res_confirmed" : "res_closed")));
    else {
      // a first result of 0-0 that nobody set is a card sent by mistake more often than a
      // draw: it asks for a second press
      const blank = !m.result && !touched.has(k) && total === 0;
      const asked = armed.has(k) && Date.now() - armed.get(k) < 5000;
      const b = el("button", { type: "button", class: `btn primary send${blank && asked ? " armed" : ""}` },
        blank && asked ? t("res_zero_confirm") : t("res_send"));
      b.addEventListener("click", () => {
        if (blank && !(armed.has(k) && Date.now() - armed.get(k) < 5000)) {
          armed.set(k, Date.now());
          render();
          return;
        }
        armed.delete(k);
        send(tt, m, draft, null);
      });
      parts.push(b);
    }
    return el("section", { class: "mat-card", "data-mat": m.mat, "data-round": m.round }, ...parts);
  }

  async function send(tt, m, draft, tiebreak) {
    const body = { cards: draft };
    if (tiebreak !== null) body.tiebreak = tiebreak;
    try {
      await Y.api("PUT", `/api/tournaments/${encodeURIComponent(tt.tournament)}/rounds/${m.round}/mats/${m.mat}`,
        { token: me.token, body });
      Y.vibrate(60);
      drafts.delete(key(tt, m));
      touched.delete(key(tt, m));
    } catch (e) {
      Y.showError(e);
    }
    await load();
  }

  async function confirmByPlayers(tt, m) {
    const body = { cards: Object.fromEntries(m.players.map((p, i) => [p.no, m.result.cards[i]])) };
    if (m.result.tiebreak) body.tiebreak = m.result.tiebreak;
    try {
      await Y.api("POST", `/api/tournaments/${encodeURIComponent(tt.tournament)}/rounds/${m.round}/mats/${m.mat}/players-confirm`,
        { token: me.token, body });
      Y.vibrate(60);
    } catch (e) {
      Y.showError(e);
    }
    await load();
  }

  Y.initI18n();
  Y.onLang(render);
  if (!me || !me.token) {
    $("need-join").hidden = false;
    Y.showConnection($("conn"), "offline");
    return;
  }
  $("me").textContent = `${t("referee")}: ${me.name}`;
  load();
  setInterval(load, 3000);
})();
