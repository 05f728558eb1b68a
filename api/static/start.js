/* yomite: the teachers' start page (/start).

   A teacher signs in to their school (an organisation) with the invite code the association's
   admin gave (typed, or in the link: /start?invite=CODE) and a name; the token it gets is kept
   in localStorage as the operator's (the console opened from here uses it). Then one tap opens
   a class room: its console, projector, speaker and referee links with their QR codes; the
   organisation's rooms are listed with a close button each, and the closed ones with their
   matches (each a result sheet). Every error is said in the page's language with what to do. */
"use strict";

(function () {
  const { t } = Y;
  const $ = (id) => document.getElementById(id);
  const ui = {
    orgName: $("org-name"), signin: $("signin"), signinForm: $("signin-form"), code: $("code"),
    name: $("name"), signinButton: $("signin-button"), signinError: $("signin-error"),
    adminNote: $("admin-note"), home: $("home"), who: $("who"), signout: $("signout"),
    openRoom: $("open-room"), quota: $("quota"), homeError: $("home-error"), noRooms: $("no-rooms"),
    rooms: $("rooms"), closedTitle: $("closed-title"), closedRooms: $("closed-rooms"),
  };
  const KINDS = ["console", "projector", "viewer", "referee", "speaker"];

  let token = null;
  let me = null; // {name, org, orgName}
  let listing = null; // GET /api/rooms
  let fresh = null; // the room just opened here: shown first, with its QR codes
  const shownQr = new Set(); // rooms whose QR codes are shown
  const speakerQr = new Set(); // rooms whose speaker QR code was asked for
  const qrCache = new Map(); // "room/kind" -> data: URL of its SVG
  let armed = null; // the room whose close button was pressed once
  let refreshTimer = null;

  // ------------------------------------------------------------------ errors
  function showErrorIn(box, err) {
    const e = Y.errorText(err);
    box.replaceChildren(Y.el("strong", {}, e.title));
    if (e.detail) box.append(Y.el("span", {}, e.detail));
    if (e.hint) box.append(Y.el("span", { class: "hint" }, e.hint));
    else if (err.code === "network") box.append(Y.el("span", { class: "hint" }, t("network_hint")));
    box.dataset.code = err.code || "";
    box.hidden = false;
  }

  function clearError(box) {
    box.hidden = true;
    box.replaceChildren();
  }

  function lost(err) {
    // the token is no longer known (the organisation removed, a new server): sign in again
    token = null;
    me = null;
    Y.operator.keep(null);
    showSignin();
    showErrorIn(ui.signinError, err);
  }

  async function call(method, path, body) {
    try {
      return await Y.api(method, path, { token, body });
    } catch (e) {
      if (e.status === 401) lost(e);
      throw e;
    }
  }

  // ------------------------------------------------------------------ signing in
  function showSignin() {
    clearTimeout(refreshTimer);
    ui.home.hidden = true;
    ui.signin.hidden = false;
    ui.orgName.textContent = "";
    (ui.code.value ? ui.name : ui.code).focus();
  }

  ui.signinForm.addEventListener("submit", async (e) => {
    e.preventDefault();
    clearError(ui.signinError);
    const code = ui.code.value.trim();
    const name = ui.name.value.trim();
    if (!code) return ui.code.focus();
    if (!name) return ui.name.focus();
    ui.signinButton.disabled = true;
    try {
      const r = await Y.api("POST", "/api/orgs/join", { body: { code, name } });
      token = r.token;
      Y.operator.keep(token);
      me = { name: r.name, org: r.org, orgName: r.org_name };
      ui.code.value = "";
      showHome();
    } catch (err) {
      showErrorIn(ui.signinError, err);
      if (err.code === "wrong_code") ui.code.select();
    } finally {
      ui.signinButton.disabled = false;
    }
  });

  ui.signout.addEventListener("click", () => {
    token = null;
    me = null;
    Y.operator.keep(null);
    ui.adminNote.hidden = true;
    showSignin();
  });

  // ------------------------------------------------------------------ the rooms
  function showHome() {
    ui.signin.hidden = true;
    ui.home.hidden = false;
    clearError(ui.signinError);
    renderWho();
    load();
  }

  function renderWho() {
    if (!me) return;
    ui.who.textContent = t("start_who", { name: me.name, org: me.orgName || me.org });
    ui.orgName.textContent = me.orgName || "";
  }

  async function load() {
    clearTimeout(refreshTimer);
    try {
      listing = await call("GET", "/api/rooms");
      if (listing.org) me.orgName = listing.org.name;
      renderWho();
      render();
    } catch (e) {
      if (e.status !== 401) showErrorIn(ui.homeError, e);
    }
    // clients and phases change: look again now and then while the page is open
    if (token) refreshTimer = setTimeout(load, 15000);
  }

  ui.openRoom.addEventListener("click", async () => {
    clearError(ui.homeError);
    ui.openRoom.disabled = true;
    ui.openRoom.textContent = t("start_opening");
    try {
      const room = await call("POST", "/api/rooms", {});
      fresh = room.room;
      shownQr.add(room.room);
      await load();
      Y.announce(t("start_room_meta", { time: fmt(room.opened_at), by: room.opened_by,
        clients: 0 }));
    } catch (e) {
      if (e.status !== 401) showErrorIn(ui.homeError, e);
    } finally {
      ui.openRoom.disabled = false;
      ui.openRoom.textContent = t("start_open_room");
    }
  });

  function fmt(iso) {
    if (!iso) return "";
    const d = new Date(iso);
    return d.toLocaleString(Y.lang === "en" ? "en-GB" : "ja-JP",
      { month: "numeric", day: "numeric", hour: "2-digit", minute: "2-digit" });
  }

  /** The link as the page opens it: on this server's own origin (the token kept here is this
      origin's), whatever address the QR code gives other devices. */
  function local(url) {
    const u = new URL(url);
    return u.pathname + u.search + u.hash;
  }

  function render() {
    if (!listing) return;
    const org = listing.org;
    ui.quota.textContent = org ? t("start_quota", { open: listing.open, max: org.max_open_rooms }) : "";
    const open = listing.rooms.filter((r) => r.open);
    const closed = listing.rooms.filter((r) => !r.open);
    open.sort((a, b) => (b.room === fresh) - (a.room === fresh));
    ui.noRooms.hidden = open.length > 0;
    ui.rooms.replaceChildren(...open.map(openCard));
    ui.closedTitle.hidden = closed.length === 0;
    ui.closedRooms.replaceChildren(...closed.map(closedCard));
  }

  function openCard(r) {
    const li = Y.el("li", { class: r.room === fresh ? "room fresh" : "room", dataset: { room: r.room } });
    li.append(Y.el("header", {},
      Y.el("span", { class: "room-name" }, r.room),
      Y.el("span", { class: "meta" }, t("start_room_meta", { time: fmt(r.opened_at),
        by: r.opened_by, clients: r.clients ?? 0 }))));
    const close = Y.el("button", { type: "button", class: armed === r.room ? "btn danger armed close" : "btn danger close" },
      t(armed === r.room ? "start_close_armed" : "start_close_room"));
    close.addEventListener("click", () => closeRoom(r.room));
    const actions = Y.el("div", { class: "actions" });
    if (!shownQr.has(r.room)) {
      const show = Y.el("button", { type: "button", class: "btn small show-qr" }, t("start_show_qr"));
      show.addEventListener("click", () => { shownQr.add(r.room); render(); });
      actions.append(show);
    }
    actions.append(close);
    li.append(actions);
    if (r.links) li.append(linkCards(r));
    return li;
  }

  function linkCards(r) {
    const box = Y.el("div", { class: "links" });
    for (const kind of KINDS) {
      const url = r.links[kind];
      const shown = kind === "speaker" ? url.replace(/#key=.*$/, "#key=•••") : url;
      const fig = Y.el("figure", { class: `link-card link-${kind}`, dataset: { kind } },
        Y.el("span", { class: "label" }, t(`start_link_${kind}`)),
        Y.el("a", { href: local(url), target: "_blank", rel: "noopener" }, shown));
      const withQr = shownQr.has(r.room) && (kind !== "speaker" || speakerQr.has(r.room));
      if (withQr) {
        const img = Y.el("img", { class: "qr", alt: `QR: ${t(`start_link_${kind}`)}` });
        fig.insertBefore(img, fig.firstChild.nextSibling);
        drawQr(img, r, kind);
      } else if (kind === "speaker" && shownQr.has(r.room)) {
        const b = Y.el("button", { type: "button", class: "btn small speaker-qr" }, t("start_speaker_qr_show"));
        b.addEventListener("click", () => { speakerQr.add(r.room); render(); });
        fig.append(b);
      }
      if (kind === "speaker") fig.append(Y.el("p", { class: "speaker-note" }, t("start_speaker_note")));
      box.append(fig);
    }
    return box;
  }

  async function drawQr(img, r, kind) {
    const key = `${r.room}/${kind}`;
    let src = qrCache.get(key);
    if (!src) {
      try {
        const res = await Y.api("GET", r.qr[kind], { token, raw: true });
        src = `data:image/svg+xml;charset=utf-8,${encodeURIComponent(await res.text())}`;
        qrCache.set(key, src);
      } catch (e) {
        if (e.status === 401) lost(e);
        else showErrorIn(ui.homeError, e);
        return;
      }
    }
    img.src = src;
  }

  async function closeRoom(name) {
    if (armed !== name) { // the first press only arms it: a class is not closed by a slip
      armed = name;
      render();
      return;
    }
    armed = null;
    clearError(ui.homeError);
    try {
      await call("DELETE", `/api/rooms/${encodeURIComponent(name)}`);
    } catch (e) {
      if (e.status !== 401) showErrorIn(ui.homeError, e);
    }
    if (fresh === name) fresh = null;
    await load();
  }

  function closedCard(r) {
    const li = Y.el("li", { class: "room", dataset: { room: r.room } });
    li.append(Y.el("header", {},
      Y.el("span", { class: "room-name" }, r.room),
      Y.el("span", { class: "meta" }, t("start_closed_meta", { time: fmt(r.closed_at),
        why: t(`start_why_${r.closed_why}`) }))));
    const list = Y.el("ul", { class: "history" });
    const b = Y.el("button", { type: "button", class: "btn small history-button" }, t("start_history"));
    b.addEventListener("click", async () => {
      b.disabled = true;
      try {
        const rows = await call("GET", `${r.history}?limit=20&started=true`);
        list.replaceChildren(...(rows.length ? rows.map((m) => Y.el("li", {},
          Y.el("a", { href: `/sheet/${encodeURIComponent(r.room)}?match=${encodeURIComponent(m.id)}`,
            target: "_blank", rel: "noopener" },
          t("start_history_match", { time: fmt(m.started_at || m.prepared_at), read: m.cards_read ?? 0 }))))
          : [Y.el("li", {}, t("start_history_none"))]));
      } catch (e) {
        if (e.status !== 401) showErrorIn(ui.homeError, e);
      } finally {
        b.disabled = false;
      }
    });
    li.append(Y.el("div", { class: "actions" }, b), list);
    return li;
  }

  // ------------------------------------------------------------------ start
  Y.initI18n();
  Y.onLang(() => {
    document.title = `yomite ${t("start_title")}`;
    renderWho();
    render();
    ui.openRoom.textContent = t("start_open_room");
  });
  document.title = `yomite ${t("start_title")}`;
  // the invite code (#invite=…: a fragment never reaches a server; an old link's ?invite=…
  // too) stays out of the address bar, the history and a bookmark
  const oldInvite = new URLSearchParams(location.search).get("invite");
  const invite = Y.fromHash("invite") || oldInvite;
  if (oldInvite) history.replaceState(null, "", location.pathname + location.hash);
  if (invite) ui.code.value = invite;
  (async () => {
    token = Y.operator.token();
    if (!token) return showSignin();
    let s;
    try {
      s = await Y.api("GET", "/api/session", { token });
    } catch (e) {
      showSignin();
      showErrorIn(ui.signinError, e);
      if (e.status === 401) Y.operator.keep(null);
      return;
    }
    if (s.role === "operator" && s.org) {
      me = { name: s.name, org: s.org, orgName: "" };
      return showHome();
    }
    // the admin's token (or another role's): a teacher signs in with a code here
    ui.adminNote.hidden = s.role !== "operator";
    token = null;
    showSignin();
  })();
})();
