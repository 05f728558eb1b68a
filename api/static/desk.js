/* The tournament desk: entries, blocks, referees' mats, rounds (pair, start the reading, the
   results as they arrive, corrections), standings, paper and files. Everything comes from the
   server's view of the tournament (GET /api/tournaments/{t}), fetched again whenever its
   version rises (a long poll); the readers' phases come live from the channels' WebSockets. */
"use strict";

(function () {
  const { t, el } = Y;
  const TOURNAMENT_KEY = "yomite.desk.tournament";
  const $ = (id) => document.getElementById(id);

  let token = null;
  let view = null; // the desk's view of the open tournament
  let tid = Y.load(TOURNAMENT_KEY);
  let tab = "rounds";
  let polling = 0; // the id of the running long poll (a newer one replaces it)
  // 取り消す asks for a second press within 5 s: kept here, not on the button, which a new
  // view replaces
  let unpairArmed = { key: null, at: 0 };
  let absentArmed = { key: null, at: 0 }; // the same for 欠席 (不戦勝) at a mat
  let drawDefaultsFor = null; // the tournament whose draw form took its rules' defaults
  const channels = new Map(); // channel name -> Y.Channel
  const channelState = new Map(); // channel name -> its latest state
  const matDrafts = new Map(); // referee id -> the mats typed for it, not yet assigned

  const tp = (p = "") => `/api/tournaments/${encodeURIComponent(tid)}${p}`;

  // ------------------------------------------------------------------ token
  async function tryToken(tok) {
    try {
      await Y.operator.check(tok);
    } catch (e) {
      Y.showError(e);
      if (e.status === 0) { setTimeout(() => tryToken(tok), 3000); return; }
      Y.operator.keep(null);
      $("token-box").hidden = false;
      $("app").hidden = true;
      return;
    }
    token = tok;
    Y.operator.keep(tok);
    printPass();
    $("token-box").hidden = true;
    $("app").hidden = false;
    Y.showConnection($("conn"), "online");
    await loadList();
  }

  $("token-form").addEventListener("submit", (e) => {
    e.preventDefault();
    const tok = $("token").value.trim();
    if (tok) tryToken(tok);
  });

  async function call(method, path, body) {
    try {
      return await Y.api(method, path, { token, body });
    } catch (e) {
      Y.showError(e);
      throw e;
    }
  }

  // a control's action: an API error is already shown (call), so it goes no further
  const act = (fn) => async (...args) => {
    try {
      await fn(...args);
    } catch (e) {
      if (!(e instanceof Y.ApiError)) throw e;
    }
  };

  // ------------------------------------------------------------------ tournaments
  async function loadList() {
    const list = await call("GET", "/api/tournaments");
    const sel = $("tournament");
    sel.replaceChildren(...list.map((x) => el("option", { value: x.id }, `${x.name} (${x.id})`)));
    $("t-pick").hidden = list.length === 0;
    if (!list.some((x) => x.id === tid)) tid = list.length ? list[list.length - 1].id : null;
    if (tid) {
      sel.value = tid;
      await open(tid);
    } else {
      $("t-app").hidden = true;
    }
  }

  $("tournament").addEventListener("change", () => open($("tournament").value));

  // a second tournament (another day, another hall) from the bar; its form hides again once
  // one is open
  $("new-toggle").addEventListener("click", () => {
    $("new-box").hidden = !$("new-box").hidden;
    if (!$("new-box").hidden) $("new-name").focus();
  });

  // deleting a tournament asks for a second press within 5 s, naming it
  let deleteArmed = 0;
  $("delete-tournament").addEventListener("click", act(async () => {
    const b = $("delete-tournament");
    if (Date.now() - deleteArmed > 5000) {
      deleteArmed = Date.now();
      b.classList.add("armed");
      b.textContent = t("delete_confirm", { name: view.name });
      setTimeout(() => {
        if (Date.now() - deleteArmed >= 5000) { b.classList.remove("armed"); b.textContent = t("delete_tournament"); }
      }, 5100);
      return;
    }
    deleteArmed = 0;
    await call("DELETE", tp());
    b.classList.remove("armed");
    b.textContent = t("delete_tournament");
    tid = null;
    await loadList();
    if (!tid) $("new-box").hidden = false;
  }));

  async function open(id) {
    tid = id;
    Y.save(TOURNAMENT_KEY, id);
    view = await call("GET", tp());
    $("t-app").hidden = false;
    $("new-box").hidden = true;
    $("new-toggle").hidden = false;
    render();
    poll();
  }

  // regional rules: a preset fills the rounds and the final (each still the organiser's to
  // change) and, later, how the blocks are drawn
  let presets = [];
  const presetOf = (v) => presets.find((p) => p.rounds === v.settings.rounds
    && p.finalists === v.settings.finalists) || null;
  Y.api("GET", "/api/tournaments/presets").then((ps) => { presets = ps; }).catch(() => {});
  $("new-preset").addEventListener("change", () => {
    const p = presets.find((x) => x.id === $("new-preset").value);
    if (!p) return;
    $("new-rounds").value = String(p.rounds);
    $("new-finalists").value = String(p.finalists);
  });

  $("new-form").addEventListener("submit", async (e) => {
    e.preventDefault();
    const body = { name: $("new-name").value.trim(), day: $("new-day").value.trim(),
      rounds: Number($("new-rounds").value) || null, cards: Number($("new-cards").value) || null,
      finalists: Number($("new-finalists").value) || null };
    const id = $("new-id").value.trim();
    if (id) body.id = id;
    const v = await call("POST", "/api/tournaments", body);
    tid = v.id;
    tab = "entries"; // the next step: the entries, then the check-in
    await loadList();
  });

  async function poll() {
    const me = ++polling;
    while (me === polling && tid) {
      try {
        const v = await Y.api("GET", `${tp()}?after=${view ? view.version : -1}`, { token });
        if (me !== polling) return;
        Y.showConnection($("conn"), "online");
        if (!view || v.version !== view.version || JSON.stringify(v.rounds.map((r) => r.live))
            !== JSON.stringify(view.rounds.map((r) => r.live))) {
          view = v;
          render();
        }
      } catch (e) {
        Y.showConnection($("conn"), "reconnecting");
        await new Promise((r) => setTimeout(r, 2000));
      }
    }
  }

  function refreshWith(v) {
    if (v && v.id === tid && typeof v.version === "number") {
      view = v;
      render();
    }
  }

  // ------------------------------------------------------------------ tabs
  for (const b of document.querySelectorAll("#tabs button")) {
    b.addEventListener("click", () => { tab = b.dataset.tab; render(); });
  }

  function renderTabs() {
    for (const b of document.querySelectorAll("#tabs button")) {
      b.setAttribute("aria-selected", String(b.dataset.tab === tab));
    }
    for (const s of document.querySelectorAll(".tab")) s.hidden = s.id !== `tab-${tab}`;
  }

  // ------------------------------------------------------------------ rendering
  function render() {
    if (!view) return;
    $("t-title").textContent = `${view.name}${view.day ? "　" + view.day : ""}`;
    const pub = $("public-link");
    pub.href = publicPath();
    pub.hidden = false;
    renderTabs();
    renderPlayers();
    renderBlocks();
    renderReferees();
    renderRounds();
    renderStandings();
    renderFiles();
    watchChannels();
  }

  function who(p) {
    return el("span", { class: "who" }, p.furigana ? el("span", { class: "kana" }, p.furigana) : "",
      p.name, p.club ? el("span", { class: "kana" }, p.club) : "");
  }

  // the player being corrected (its row holds inputs) and what was typed: kept across the
  // redraws a change of the tournament brings
  let editing = null; // {no, name, furigana, club, grade}

  function editRow(p) {
    const field = (k, max) => {
      const i = el("input", { type: "text", maxlength: String(max), value: editing[k], "data-field": k,
        "aria-label": t(k) });
      i.addEventListener("input", () => { editing[k] = i.value; });
      return el("td", {}, i);
    };
    const save = el("button", { class: "btn small primary save-player", type: "button" }, t("save"));
    save.addEventListener("click", act(async () => {
      const body = { name: editing.name.trim(), furigana: editing.furigana.trim(),
        club: editing.club.trim(), grade: editing.grade.trim() };
      const v = await call("PATCH", tp(`/players/${p.no}`), body);
      editing = null;
      refreshWith(v);
    }));
    const cancel = el("button", { class: "btn small", type: "button" }, t("cancel"));
    cancel.addEventListener("click", () => { editing = null; renderPlayers(); });
    return el("tr", { class: "editing", "data-no": p.no }, el("td", {}, String(p.no)),
      field("name", 40), field("furigana", 60), field("club", 60), field("grade", 20),
      el("td", {}, p.block || ""), el("td", {}, ""), el("td", {}, save, " ", cancel));
  }

  // 受付 (check-in) until round 1 is paired: every player present unless marked; one press
  // marks an absentee (withdrawn from round 1, out of the draw) or takes the mark back; once
  // blocks are drawn, the draw can be made again with its method and seed, absentees left out
  function renderCheckin() {
    const box = $("checkin");
    box.hidden = view.players.length === 0 || view.rounds.length > 0;
    if (box.hidden) return;
    const absent = view.players.filter((p) => p.withdrawn_round !== null);
    $("checkin-count").textContent = t("checkin_count", { here: view.players.length - absent.length, absent: absent.length });
    $("checkin-list").replaceChildren(...view.players.map((p) => {
      const out = p.withdrawn_round !== null;
      const b = el("button", { type: "button", class: `chip${out ? " absent" : ""}`, "data-no": p.no,
        "aria-pressed": String(out) }, el("span", { class: "no" }, String(p.no)), " ", p.name,
        out ? el("span", { class: "mark" }, t("absent")) : "");
      b.addEventListener("click", act(async () => {
        refreshWith(await call("PATCH", tp(`/players/${p.no}`), { withdrawn: !out }));
      }));
      return b;
    }));
    const sizes = view.blocks.map((b) => b.players);
    const uneven = sizes.length > 1 && Math.max(...sizes) - Math.min(...sizes) > 1;
    const redraw = $("checkin-redraw");
    redraw.hidden = !(view.blocks.length && view.draw.seed !== null && absent.length);
    redraw.querySelector("span").textContent = uneven ? t("checkin_uneven", { sizes: sizes.join("・") })
      : t("checkin_drawn");
  }

  $("redraw").addEventListener("click", act(async () => {
    refreshWith(await call("POST", tp("/blocks/draw"), { blocks: view.blocks.length,
      method: view.draw.method, seed: view.draw.seed }));
  }));

  function renderPlayers() {
    renderCheckin();
    $("players-count").textContent = t("players_n", { n: view.players.length });
    const rows = view.players.map((p) => {
      if (editing && editing.no === p.no) return editRow(p);
      const out = p.withdrawn_round !== null;
      const status = out ? t("withdrawn_from", { n: p.withdrawn_round })
        : (p.joined_round > 1 ? t("joins_from", { n: p.joined_round }) : t("active"));
      const btn = el("button", { class: "btn small withdraw-player", type: "button" },
        out ? t("reinstate") : t("withdraw"));
      btn.addEventListener("click", act(async () => {
        refreshWith(await call("PATCH", tp(`/players/${p.no}`), { withdrawn: !out }));
      }));
      const fix = el("button", { class: "btn small edit-player", type: "button" }, t("edit"));
      fix.addEventListener("click", () => {
        editing = { no: p.no, name: p.name, furigana: p.furigana, club: p.club, grade: p.grade };
        renderPlayers();
      });
      return el("tr", { class: out ? "withdrawn" : "", "data-no": p.no },
        el("td", {}, String(p.no)), el("td", {}, p.name), el("td", {}, p.furigana),
        el("td", {}, p.club), el("td", {}, p.grade), el("td", {}, p.block || ""),
        el("td", {}, status), el("td", {}, fix, " ", btn));
    });
    $("players").tBodies[0].replaceChildren(...rows);
  }

  // a CSV is read as soon as it is chosen (読み込む reads it again, e.g. after correcting a
  // refused file in the spreadsheet)
  $("csv-file").addEventListener("change", () => { if ($("csv-file").files[0]) $("csv-form").requestSubmit(); });
  $("csv-form").addEventListener("submit", async (e) => {
    e.preventDefault();
    const f = $("csv-file").files[0];
    if (!f) return;
    const res = await fetch(tp("/entries.csv"), { method: "POST", body: await f.arrayBuffer(),
      headers: { Authorization: `Bearer ${token}`, "Content-Type": "text/csv" } });
    const data = await res.json();
    if (!res.ok) {
      // the file stays chosen: corrected in the spreadsheet, it is imported again at once
      Y.showError(new Y.ApiError(res.status, data.error, data.detail, data.hint, data.params));
      return;
    }
    for (const w of data.notices || []) Y.showError(new Y.ApiError(0, w.code, w.detail, "", w.params));
    $("csv-file").value = "";
    refreshWith(data.tournament);
  });

  $("add-form").addEventListener("submit", async (e) => {
    e.preventDefault();
    const p = { name: $("add-name").value.trim(), furigana: $("add-furigana").value.trim(),
      club: $("add-club").value.trim(), grade: $("add-grade").value.trim() };
    const b = $("add-block").value.trim().toUpperCase();
    if (b) p.block = b;
    const data = await call("POST", tp("/entries"), { players: [p], late: view.blocks.length > 0 });
    for (const id of ["add-name", "add-furigana", "add-club", "add-grade", "add-block"]) $(id).value = "";
    refreshWith(data.tournament);
  });

  function channelOptions(selected) {
    const names = [...new Set([...(window.DESK_CHANNELS || []), selected].filter(Boolean))];
    return names.map((n) => el("option", { value: n, ...(n === selected ? { selected: "" } : {}) }, n));
  }

  function renderBlocks() {
    // before the first draw, the form proposes what the tournament's rules draw
    const p = presetOf(view);
    if (view.draw.seed === null && p && drawDefaultsFor !== view.id) {
      drawDefaultsFor = view.id;
      $("draw-method").value = p.method;
      $("draw-size").value = p.block_size ? String(p.block_size) : "";
    }
    $("drawn").textContent = view.draw.seed === null ? ""
      : t("drawn_with", { method: t(`m_${view.draw.method}`), seed: view.draw.seed });
    const rows = view.blocks.map((b) => {
      const ch = el("select", {}, ...channelOptions(b.channel));
      const col = el("select", {}, ...Y.COLOURS.map((c) => el("option",
        { value: c, ...(c === b.colours[b.colours.length - 1] ? { selected: "" } : {}) }, t(c))));
      const mat = el("input", { type: "number", min: "1", max: "999", value: String(b.first_mat) });
      const save = el("button", { class: "btn small", type: "button" }, t("save"));
      save.addEventListener("click", act(async () => {
        refreshWith(await call("PATCH", tp(`/blocks/${b.name}`), {
          channel: ch.value || null, colours: [col.value], first_mat: Number(mat.value) }));
      }));
      return el("tr", { "data-block": b.name }, el("td", {}, b.name), el("td", {}, String(b.players)),
        el("td", {}, ch), el("td", {}, col), el("td", {}, mat),
        el("td", {}, `${b.mats[0]}–${b.mats[1]}`), el("td", {}, save));
    });
    $("blocks").tBodies[0].replaceChildren(...rows);
  }

  $("draw-form").addEventListener("submit", async (e) => {
    e.preventDefault();
    const size = Number($("draw-size").value);
    const body = size ? { block_size: size, method: $("draw-method").value }
      : { blocks: Number($("draw-count").value), method: $("draw-method").value };
    if ($("draw-seed").value !== "") body.seed = Number($("draw-seed").value);
    refreshWith(await call("POST", tp("/blocks/draw"), body));
  });

  async function renderReferees() {
    if (tab !== "referees") return;
    let data;
    try {
      data = await Y.api("GET", tp("/referees"), { token });
    } catch (_e) { return; }
    const box = $("referees");
    const parts = [];
    for (const [ch, refs] of Object.entries(data.channels)) {
      const mine = view.blocks.filter((b) => b.channel === ch);
      const blocks = mine.map((b) => `${b.name} (${matList(b.all_mats)})`);
      // the mats of the channel's blocks no referee watches, and one press to share them out
      // two a referee among the joined referees who have none (rule: one referee, two mats)
      const watched = new Set(data.assigned.flatMap((a) => a.mats));
      const free = mine.flatMap((b) => b.all_mats).filter((m) => !watched.has(m));
      const idle = refs.filter((r) => !data.assigned.some((a) => a.referee === r.id && a.mats.length));
      const share = el("button", { class: "btn small share-mats", type: "button" }, t("share_mats"));
      share.disabled = !free.length || !idle.length;
      share.addEventListener("click", act(async () => {
        let left = free.slice();
        for (const r of idle) {
          if (!left.length) break;
          const mats = left.slice(0, 2);
          left = left.slice(2);
          refreshWith(await call("PUT", tp(`/referees/${r.id}`), { mats }));
          matDrafts.delete(r.id);
        }
        renderReferees();
      }));
      const unwatched = el("p", { class: free.length ? "unwatched warn-text" : "unwatched muted" },
        free.length ? t("mats_unwatched", { mats: matList(free) }) : t("mats_all_watched"));
      const join = el("div", { class: "join", "data-channel": ch },
        el("span", { class: "pin" }, t("pin"), " ", el("b", {}, "…")), el("div", { class: "qr" }));
      showJoin(ch, join);
      const items = refs.map((r) => {
        const have = data.assigned.find((a) => a.referee === r.id);
        // what was typed and not yet assigned survives a refused assignment and a redraw
        const typed = matDrafts.get(r.id);
        const input = el("input", { type: "text",
          value: typed ?? (have ? have.mats.join(",") : ""),
          placeholder: "1,2", "data-referee": r.id, size: "8" });
        input.addEventListener("input", () => matDrafts.set(r.id, input.value));
        const b = el("button", { class: "btn small", type: "button" }, t("assign"));
        b.addEventListener("click", act(async () => {
          const words = input.value.normalize("NFKC").split(/[,\s、]+/).filter(Boolean);
          const bad = words.find((w) => !/^\d+$/.test(w));
          if (bad !== undefined) {
            Y.showError(new Y.ApiError(0, "mat_not_number", `${bad} is not a mat number`, "",
              { value: bad }));
            return;
          }
          matDrafts.set(r.id, input.value);
          const mats = words.map(Number);
          refreshWith(await call("PUT", tp(`/referees/${r.id}`), { mats }));
          matDrafts.delete(r.id);
          renderReferees();
        }));
        return el("li", {}, el("span", { class: "who" }, r.name, r.connected ? " ●" : ""), " ", input, " ", b);
      });
      parts.push(el("div", { class: "round", "data-channel": ch }, el("h3", {}, `${t("channel")}: ${ch}`, " ",
        el("span", { class: "muted" }, blocks.join(", "))),
        join,
        el("p", {}, el("a", { href: `/results/${encodeURIComponent(ch)}`, target: "_blank" }, t("results_link"))),
        items.length ? el("ul", {}, ...items) : el("p", { class: "muted" }, t("not_joined")),
        unwatched, share));
    }
    box.replaceChildren(...parts);
  }

  // the free mats of every channel's blocks, two to each joined referee without mats
  $("deal-all").addEventListener("click", act(async () => {
    const data = await call("GET", tp("/referees"));
    const watched = new Set(data.assigned.flatMap((a) => a.mats));
    for (const [ch, refs] of Object.entries(data.channels)) {
      let left = view.blocks.filter((b) => b.channel === ch).flatMap((b) => b.all_mats)
        .filter((m) => !watched.has(m));
      for (const r of refs) {
        if (!left.length) break;
        if (data.assigned.some((a) => a.referee === r.id && a.mats.length)) continue;
        refreshWith(await call("PUT", tp(`/referees/${r.id}`), { mats: left.slice(0, 2) }));
        left = left.slice(2);
        matDrafts.delete(r.id);
      }
    }
    renderReferees();
  }));

  // `1–5, 21`: mats in words
  function matList(ms) {
    const out = [];
    for (let i = 0; i < ms.length;) {
      let j = i;
      while (j + 1 < ms.length && ms[j + 1] === ms[j] + 1) j++;
      out.push(i === j ? String(ms[i]) : `${ms[i]}–${ms[j]}`);
      i = j + 1;
    }
    return out.join(", ");
  }

  // each channel's PIN and the QR code of its join link, for the referees to scan from the
  // desk (fetched once per channel and PIN: the tab is drawn again at every change)
  const joins = new Map();
  async function showJoin(ch, box) {
    try {
      let j = joins.get(ch);
      if (!j) {
        const p = await Y.api("GET", `/api/channels/${encodeURIComponent(ch)}/pin`, { token });
        const svgText = await (await Y.api("GET", `/api/channels/${encodeURIComponent(ch)}/qr.svg`,
          { token, raw: true })).text();
        j = { pin: p.pin, url: p.join_url, svgText };
        joins.set(ch, j);
        setTimeout(() => joins.delete(ch), 60_000); // a new PIN from the console shows within a minute
      }
      box.querySelector(".pin b").textContent = j.pin;
      const svg = new DOMParser().parseFromString(j.svgText, "image/svg+xml").documentElement;
      if (svg.nodeName.toLowerCase() === "svg") {
        svg.removeAttribute("width");
        svg.removeAttribute("height");
        svg.setAttribute("aria-hidden", "true");
        const q = box.querySelector(".qr");
        q.replaceChildren(document.importNode(svg, true), el("a", { href: j.url, target: "_blank" }, j.url));
        q.setAttribute("aria-label", `QR: ${j.url}`);
        q.dataset.url = j.url;
      }
    } catch (_e) { /* the channel is not running: no PIN to show */ }
  }

  function liveOf(r) {
    const live = r.live;
    if (!live) return { key: "paired", text: t("r_paired") };
    if (live.state === "live") {
      // the channel's own state, if it is the same match and newer than the desk's view
      const s = channelState.get(live.channel);
      const m = s && s.match && r.reading && s.match.seed === r.reading.seed ? s.match : live;
      const phase = m.phase;
      const key = m.paused ? "paused" : (["finished", "closed"].includes(phase) ? "finished"
        : (["ready", "aborted"].includes(phase) ? phase : "reading"));
      const card = m.card ? ` ${t("card_of", { n: m.card, total: m.cards_total })}` : "";
      // rule 2: after 礼 the reader waits while the players shuffle, play janken and choose
      if (key === "ready" && m.bowed) return { key, phase, text: t("r_bowed") };
      return { key, phase, text: (m.paused ? t("paused") : t(`phase_${phase}`)) + card };
    }
    return { key: live.state, text: t(`r_${live.state}`) };
  }

  function latestRound() {
    const nums = view.rounds.map((r) => r.number);
    return nums.length ? Math.max(...nums) : 0;
  }

  // the final is the round after the preliminaries: called 決勝戦 / "Final" everywhere, never
  // by its number
  const isFinal = (n) => view.rounds.some((r) => r.number === n && r.final) || n > view.settings.rounds;
  const roundName = (n) => (isFinal(n) ? t("final") : t("round_n", { n }));
  const stepText = (next) => t(next.step === "results" && next.final ? "step_results_final"
    : `step_${next.step}`, { n: next.round });

  function renderRounds() {
    const n = latestRound();
    const current = view.rounds.filter((r) => r.number === n);
    const final = current.length && current[0].final;
    const start = $("start-round");
    start.hidden = !n;
    start.textContent = final ? t("start_final") : t("start_round", { n });
    start.disabled = !current.some((r) => !r.reading);
    // rule 18 on every block's reader at once, once any has read its cards
    $("close-all").hidden = !current.some((r) => liveOf(r).phase === "finished");
    $("pair-next").disabled = !view.blocks.some((b) => b.next.step === "pair");
    $("pair-final").disabled = !view.blocks.some((b) => b.next.step === "final");
    $("pair-final").hidden = view.settings.finalists === 1; // no final: the first wins
    // a mat without its result is shown on its round (results n / total); the list is for
    // what needs the desk: more cards than read, a tied final, a pairing to redo, a channel
    const flags = view.flags.filter((f) => f.code !== "missing_result" && f.code !== "no_referee");
    $("flags").replaceChildren(...flags.slice(0, 12).map((f) =>
      el("div", { class: `flag ${f.level}`, "data-code": f.code },
        `${f.block}${f.round ? " " + roundName(f.round) : ""}${f.mat ? " " + t("mat_n", { n: f.mat }) : ""}: ${t(`f_${f.code}`)} — ${flagText(f)}`)));
    const cards = view.blocks.map((b) => {
      const r = view.rounds.filter((x) => x.block === b.name).sort((x, y) => y.number - x.number)[0];
      const head = el("h3", {}, `${b.name}`, " ",
        r ? (r.final ? t("final") : t("round_n", { n: r.number })) : "", " ",
        r ? Y.colourChip(r.colour) : "");
      if (!r) return el("div", { class: "round", "data-block": b.name }, head,
        el("p", { class: "muted" }, stepText(b.next)));
      const st = liveOf(r);
      head.append(el("span", { class: "state", "data-state": st.key }, st.text),
        el("span", { class: "muted" }, t("results_n", { n: r.results, total: r.matches.length })));
      const body = r.matches.map((m) => matchRow(r, m));
      const extra = [];
      if (st.phase === "finished") {
        const c = el("button", { class: "btn small close-round", type: "button" }, t("close_round"));
        c.addEventListener("click", async () => {
          refreshWith((await call("POST", tp(`/rounds/${r.number}/close`), { blocks: [r.block] })).tournament);
        });
        extra.push(c);
      }
      if (st.key === "ready") {
        // rule 4: the mats are ready: 札を覚えてください on this block's reader
        const go = el("button", { class: "btn small go memorise", type: "button" }, t("memorise_now"));
        go.addEventListener("click", act(async () => {
          refreshWith((await call("POST", tp(`/rounds/${r.number}/memorise`), { blocks: [r.block] })).tournament);
        }));
        extra.push(go);
      }
      if (r.confirmed) head.append(el("span", { class: "muted confirmed" }, t("confirmed")));
      else if (r.complete && r.results > 0) {
        // 確定: a final above all (no next round locks it); from then on only the desk edits
        const c = el("button", { class: "btn small confirm-round", type: "button" }, t("confirm_round"));
        c.addEventListener("click", async () => {
          refreshWith(await call("POST", tp(`/rounds/${r.number}/confirm`), { blocks: [r.block] }));
        });
        extra.push(c);
      }
      if (r.final && r.reading && !r.confirmed) {
        const x = el("button", { class: "btn small", type: "button" }, t("extra_card"));
        x.addEventListener("click", async () => {
          refreshWith(await call("POST", tp(`/rounds/${r.number}/extra-card`), { block: r.block }));
        });
        extra.push(x);
      }
      extra.push(...pairingControls(r));
      return el("div", { class: "round", "data-block": b.name, "data-round": r.number }, head,
        el("p", { class: "muted" }, stepText(b.next), " · ",
          t("cards_read", { n: r.cards_read }), ...(r.notes.length ? [" · ", r.notes.join("; ")] : [])),
        ...body, ...extra);
    });
    $("rounds").replaceChildren(...cards);
  }

  // a round paired and not started (the block's latest): pair it again (after a withdrawal
  // or a late entry it must be, and the button says so) or undo its pairing
  function pairingControls(r) {
    if (r.started || view.rounds.some((x) => x.block === r.block && x.number > r.number)) return [];
    const stale = r.flags.some((f) => f.code === "not_paired" || f.code === "withdrawn_paired");
    const again = el("button", { class: `btn small pair-again${stale ? " primary" : ""}`, type: "button" },
      t("pair_again"));
    again.addEventListener("click", act(async () => {
      refreshWith(await call("POST", tp(`/rounds/${r.number}/pair-again`), { blocks: [r.block] }));
    }));
    const key = `${r.block}/${r.number}`;
    const armed = () => unpairArmed.key === key && Date.now() - unpairArmed.at < 5000;
    const undo = el("button", { class: `btn small danger unpair${armed() ? " armed" : ""}`, type: "button" },
      armed() ? t("unpair_confirm", { block: r.block, round: roundName(r.number) }) : t("unpair"));
    undo.addEventListener("click", act(async () => {
      if (!armed()) {
        unpairArmed = { key, at: Date.now() };
        render();
        setTimeout(() => { if (unpairArmed.key === key && !armed()) render(); }, 5100);
        return;
      }
      unpairArmed = { key: null, at: 0 };
      refreshWith(await call("DELETE", tp(`/rounds/${r.number}?block=${encodeURIComponent(r.block)}`)));
    }));
    return [again, undo];
  }

  $("close-all").addEventListener("click", act(async () => {
    const n = latestRound();
    refreshWith((await call("POST", tp(`/rounds/${n}/close`), {})).tournament);
  }));

  // who entered a result, in the page's words: the desk (本部) or the referee's name (never
  // its internal id)
  function byWhom(by) {
    if (!by || by === "operator") return t("by_desk");
    if (by === "players at the desk") return t("by_players_desk");
    const pm = /^players with referee \S+ (.*)$/.exec(by);
    if (pm) return t("by_players", { name: pm[1] });
    const m = /^referee \S+ (.*)$/.exec(by);
    return m ? m[1] : by;
  }

  // a time the server keeps in UTC, shown in this computer's time zone, which it names
  function localTime(iso) {
    const d = new Date(iso);
    if (Number.isNaN(d.getTime())) return iso;
    const pad = (x) => String(x).padStart(2, "0");
    return `${d.getFullYear()}-${pad(d.getMonth() + 1)}-${pad(d.getDate())} ${pad(d.getHours())}:${pad(d.getMinutes())}:${pad(d.getSeconds())}`;
  }
  const zoneName = () => {
    try { return Intl.DateTimeFormat().resolvedOptions().timeZone || ""; } catch (_e) { return ""; }
  };

  // a flag's detail in the page's language, from its code and figures (the server's detail
  // is English, for logs and scripts)
  function flagText(f) {
    const key = `fd_${f.code}`;
    return key in Y.STRINGS.ja
      ? t(key, { ...f.params, block: f.block, round: f.round, mat: f.mat }) : f.detail;
  }

  function matchRow(r, m) {
    const inputs = [];
    const seats = m.players.map((p, i) => {
      const input = el("input", { type: "number", min: "0", max: "100",
        value: m.result ? String(m.result.cards[i]) : "", "aria-label": `${p.name}` });
      inputs.push(input);
      const o = m.outcome ? m.outcome[i] : "";
      // 不戦勝: a player who did not come (a 2-player match without its result); the press
      // is asked again, naming who wins
      let gone = "";
      if (!m.result && m.players.length === 2) {
        const key = `${r.number}/${m.mat}/${p.no}`;
        const other = m.players[1 - i];
        const armed = () => absentArmed.key === key && Date.now() - absentArmed.at < 5000;
        gone = el("button", { class: `btn small danger absent-btn${armed() ? " armed" : ""}`, type: "button",
          "data-no": p.no }, armed() ? t("absent_confirm", { name: p.name, other: other.name }) : t("absent"));
        gone.addEventListener("click", act(async () => {
          if (!armed()) {
            absentArmed = { key, at: Date.now() };
            render();
            return;
          }
          absentArmed = { key: null, at: 0 };
          await call("POST", tp(`/rounds/${r.number}/mats/${m.mat}/absent`), { player: p.no });
          view = await call("GET", tp());
          render();
        }));
      }
      return el("div", { class: "seat" }, who(p), input,
        el("span", { class: `o ${o}` }, o ? t(`o_${o}`) : ""), gone);
    });
    // a tied final: who took the extra card, each name in full on its own line under the
    // match (the tensest moment of the day: no squeezed menu)
    let tiebreak = null;
    if (r.final && m.result && new Set(m.result.cards).size === 1) {
      const group = `tiebreak-${r.block}-${m.mat}`;
      tiebreak = el("fieldset", { class: "tiebreak" }, el("legend", {}, t("who_took_extra")),
        ...m.players.map((p) => el("label", {}, el("input", { type: "radio", name: group,
          value: String(p.no), ...(m.result.tiebreak === p.no ? { checked: "" } : {}) }),
          el("span", { class: "name" }, p.name))));
    }
    const chosen = () => {
      const c = tiebreak && tiebreak.querySelector("input:checked");
      return c ? Number(c.value) : null;
    };
    const send = el("button", { class: "btn small", type: "button" }, t("enter"));
    send.addEventListener("click", async () => {
      const cards = {};
      m.players.forEach((p, i) => { cards[p.no] = Number(inputs[i].value || 0); });
      const body = { cards };
      if (chosen() !== null) body.tiebreak = chosen();
      await call("PUT", tp(`/rounds/${r.number}/mats/${m.mat}`), body);
      view = await call("GET", tp());
      render();
    });
    const flagged = r.flags.some((f) => f.mat === m.mat && f.level === "error" && f.code !== "missing_result");
    const meta = el("div", { class: "meta" }, m.referee ? `${t("referee")}: ${m.referee.name}` : "",
      m.result ? ` · ${byWhom(m.result.by)}` : "",
      m.players_confirmed ? el("span", { class: "players-ok" }, ` · ✓ ${t("players_ok")}`) : "");
    return el("div", { class: `match${flagged ? " flagged" : ""}${m.result ? "" : " missing"}`, "data-mat": m.mat },
      el("div", { class: "mat" }, String(m.mat)),
      el("div", { class: "seats" }, ...seats, meta),
      el("div", {}, send), ...(tiebreak ? [tiebreak] : []));
  }

  $("pair-next").addEventListener("click", act(async () => {
    const blocks = view.blocks.filter((b) => b.next.step === "pair").map((b) => b.name);
    refreshWith(await call("POST", tp("/rounds"), { blocks }));
  }));
  $("pair-final").addEventListener("click", act(async () => {
    const blocks = view.blocks.filter((b) => b.next.step === "final").map((b) => b.name);
    refreshWith(await call("POST", tp("/final"), { blocks }));
  }));
  $("start-round").addEventListener("click", act(async () => {
    const n = latestRound();
    const data = await call("POST", tp(`/rounds/${n}/start`), {});
    refreshWith(data.tournament);
  }));

  function standingsTable(rows) {
    return el("table", { class: "grid-table" },
      el("thead", {}, el("tr", {}, ...["rank", "name", "club", "wins", "draws", "losses", "cards", "lottery"]
        .map((k) => el("th", {}, t(k))), el("th", {}))),
      // in the order to show: equals share a place until the preliminaries are complete, and
      // the final decides its two players' places
      el("tbody", {}, ...[...rows].sort((x, y) => x.place - y.place || x.rank - y.rank).map((s) =>
        el("tr", { class: s.withdrawn ? "withdrawn" : "", "data-no": s.no },
        el("td", {}, String(s.place)), el("td", {}, s.name), el("td", {}, s.club),
        el("td", {}, String(s.wins)), el("td", {}, String(s.draws)), el("td", {}, String(s.losses)),
        el("td", {}, String(s.cards)), el("td", { title: s.by_lottery ? t("by_lottery") : "" },
          `${s.lottery}${s.by_lottery ? " *" : ""}`),
        el("td", {}, s.final_place === 1 ? t("winner") : s.final_place === 2 ? t("runner_up") : "")))));
  }

  function renderStandings() {
    $("lottery").textContent = t("lottery_seed", { seed: view.lottery_seed });
    $("standings").replaceChildren(...view.blocks.map((b) => el("div", { class: "round", "data-block": b.name },
      el("h3", {}, b.name), standingsTable(view.standings[b.name] || []),
      ...(b.final_lottery ? [el("p", { class: "lottery-note" }, finalLottery(b.final_lottery))] : []))));
  }

  function finalLottery(fl) {
    const names = (xs) => xs.map((x) => x.name).join("・");
    return t(view.settings.finalists === 1 ? "final_lottery_one" : "final_lottery",
      { drawn: names(fl.drawn), left: names(fl.left), wins: fl.wins, cards: fl.cards });
  }

  async function download(path, name) {
    const res = await fetch(path, { headers: { Authorization: `Bearer ${token}` } });
    if (!res.ok) { Y.showError(new Y.ApiError(res.status, "download", res.statusText, "")); return; }
    const url = URL.createObjectURL(await res.blob());
    const a = el("a", { href: url, download: name });
    document.body.append(a);
    a.click();
    a.remove();
    setTimeout(() => URL.revokeObjectURL(url), 10000);
  }

  // the printed pages open in a tab of their own, which cannot send the token: the server
  // gives this browser a pass for them (a cookie, path /print/), renewed every hour
  let passAt = 0;
  function printPass() {
    if (!token || Date.now() - passAt < 3600e3) return;
    passAt = Date.now();
    Y.api("POST", "/api/tournaments/print-pass", { token }).catch(() => { passAt = 0; });
  }

  // the standings page: through the public link where there is one (players and parents),
  // else the desk's own (this browser's token)
  function publicPath() {
    const id = encodeURIComponent(view.id);
    return view.public_link ? `/standings/${id}?view=${encodeURIComponent(view.public_link)}`
      : `/standings/${id}`;
  }

  function renderPublishing() {
    const a = $("public-url");
    a.hidden = !view.public_link;
    $("no-public-url").hidden = Boolean(view.public_link);
    if (view.public_link) {
      a.href = publicPath();
      a.textContent = location.origin + publicPath();
    }
    $("make-public-link").textContent = t(view.public_link ? "new_public_link" : "make_public_link");
    $("revoke-public-link").hidden = !view.public_link;
    $("publish-details").checked = Boolean(view.settings.publish_details);
  }

  $("make-public-link").addEventListener("click", act(async () => {
    refreshWith(await call("POST", tp("/public-link")));
  }));
  $("revoke-public-link").addEventListener("click", act(async () => {
    refreshWith(await call("DELETE", tp("/public-link")));
  }));
  $("publish-details").addEventListener("change", act(async () => {
    refreshWith(await call("PATCH", tp(), { publish_details: $("publish-details").checked }));
  }));

  // a file the desk downloads with its token
  function fileLink(path, name, text) {
    const a = el("a", { href: path }, text);
    a.addEventListener("click", (e) => { e.preventDefault(); download(path, name); });
    return a;
  }

  function renderFiles() {
    printPass();
    renderPublishing();
    const id = encodeURIComponent(view.id);
    const n = latestRound();
    const links = [];
    if (n) {
      const fin = isFinal(n);
      links.push(el("a", { href: `/print/${id}/rounds/${n}`, target: "_blank" },
        fin ? t("print_final") : t("print_round", { n })));
      links.push(fileLink(tp(`/rounds/${n}.csv`), `${view.id}-round${n}.csv`, fin ? t("csv_final") : t("csv_round", { n })));
      links.push(el("a", { href: `/print/${id}/slips/${n}`, target: "_blank" },
        fin ? t("print_slips_final") : t("print_slips", { n })));
    }
    links.push(el("a", { href: `/print/${id}/names`, target: "_blank" }, t("print_names")));
    links.push(el("a", { href: `/print/${id}/mats`, target: "_blank" }, t("print_mats")));
    if (view.rounds.some((r) => r.final)) {
      links.push(el("a", { href: `/print/${id}/certificates`, target: "_blank" }, t("print_certificates")));
    }
    links.push(el("a", { href: `/print/${id}/standings`, target: "_blank" }, t("print_standings")));
    links.push(fileLink(tp("/standings.csv"), `${view.id}-standings.csv`, t("csv_standings")));
    const players = el("a", { href: "#" }, t("csv_players"));
    players.addEventListener("click", (e) => { e.preventDefault(); download(tp("/players.csv"), `${view.id}-players.csv`); });
    const exp = el("a", { href: "#", id: "export-link" }, t("export_json"));
    exp.addEventListener("click", (e) => { e.preventDefault(); download(tp("/export"), `${view.id}.json`); });
    links.push(players, exp, el("a", { href: publicPath(), target: "_blank" }, t("public_page")));
    $("files").replaceChildren(...links.map((a) => el("li", {}, a)));
    if (tab === "files") {
      Y.api("GET", tp("/history"), { token }).then((h) => {
        const head = el("tr", {}, el("th", {}, t("h_time", { zone: zoneName() })), el("th", {}, t("h_round")),
          el("th", {}, t("h_mat")), el("th", {}, t("h_change")), el("th", {}, t("h_by")));
        $("history").tBodies[0].replaceChildren(head, ...h.slice(-50).reverse().map((c) => el("tr", {},
          el("td", {}, localTime(c.at)), el("td", {}, roundName(c.round)),
          el("td", {}, t("mat_n", { n: c.mat })),
          el("td", {}, c.confirmed ? `${t("h_confirmed")} ${c.after.cards.join("-")}`
            : `${c.before ? c.before.cards.join("-") : "—"} → ${c.after.cards.join("-")}`),
          el("td", {}, byWhom(c.by)))));
      }).catch(() => {});
    }
  }

  $("import-form").addEventListener("submit", async (e) => {
    e.preventDefault();
    const f = $("import-file").files[0];
    if (!f) return;
    const res = await fetch("/api/tournaments/import", { method: "POST", body: await f.text(),
      headers: { Authorization: `Bearer ${token}`, "Content-Type": "application/json" } });
    const data = await res.json();
    if (!res.ok) { Y.showError(new Y.ApiError(res.status, data.error, data.detail, data.hint, data.params)); return; }
    tid = data.id;
    await loadList();
  });

  // ------------------------------------------------------------------ the readers, live
  function watchChannels() {
    const want = new Set(view.blocks.map((b) => b.channel).filter(Boolean));
    for (const name of want) {
      if (channels.has(name)) continue;
      const c = new Y.Channel(name, { token: () => token,
        onState: (s) => { channelState.set(name, s); renderRounds(); },
        onStatus: () => {} });
      channels.set(name, c);
      c.start();
    }
  }

  // ------------------------------------------------------------------ start
  Y.initI18n();
  Y.onLang(() => render());
  Y.api("GET", "/api/channels").then((list) => {
    window.DESK_CHANNELS = list.map((c) => c.channel);
    render();
  }).catch(() => {});
  const tok = Y.operator.token();
  if (tok) tryToken(tok);
  else $("token-box").hidden = false;
})();
