/* On the referee's phone: a link to this channel's results page (the desk's), once joined. */
"use strict";

(function () {
  const ch = decodeURIComponent(location.pathname.split("/").filter(Boolean)[1] || "main");
  const a = document.getElementById("results-link");
  if (!a) return;
  a.href = `/results/${encodeURIComponent(ch)}`;
  const show = () => {
    let me = null;
    try { me = JSON.parse(localStorage.getItem(`yomite.referee.${ch}`) || "null"); } catch (_e) { /* */ }
    a.hidden = !(me && me.token);
  };
  show();
  setInterval(show, 2000);
})();
