"""The referee page on a link that goes away (issue 47, item 7): a real `yomite serve` frozen with
SIGSTOP (its sockets stay open and nothing answers: what a phone sees when the hall's Wi-Fi drops
its packets), a real referee page in headless Chromium.

- the page's badge says the link is lost while the server is still frozen (today it noticed
  silence only after 25 s; the page now pings twice a second and calls 2 s of silence lost);
- a stop pressed into the outage is not left "sending": the page says it could not stop
  (「通信が途切れたため止められませんでした」), and when the server wakes and reads the press, it
  refuses it as stale: the hand stays down (today it was applied whenever the link returned);
- once the server answers again the page is back online, on a new socket.

How long the page took to say "lost" is printed (`-s`) as a figure, not asserted: a loaded
machine only delays the page's timers."""

from __future__ import annotations

import os
import re
import signal
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx2
import pytest
from playwright.sync_api import Browser, expect

from .chromium import launched, watch_errors
from .serverproc import Server

pytestmark = pytest.mark.server

TOKEN = "referee-link-operator-token-0123456789"
CONFIG: dict[str, Any] = {
    "match": {"memorise_s": 3600, "cards": 2},
    "voice": {"engine": "estimate"},
    "audio": {"output": "null"},
}


@pytest.fixture(scope="module")
def browser() -> Iterator[Browser]:
    yield from launched(timeout_ms=15_000)


def holding(state: dict[str, Any], rid: str) -> bool:
    return rid in [h["referee"] for h in (state.get("match") or {}).get("holds", [])]


def test_the_referee_page_says_a_lost_link_and_a_stop_pressed_into_it_is_refused(
        tmp_path: Path, browser: Browser) -> None:
    s = Server(tmp_path, CONFIG, TOKEN).start()
    assert s.proc is not None
    ctx = browser.new_context(locale="ja-JP", has_touch=True, is_mobile=True)
    errors: list[str] = []
    frozen = False
    try:
        with httpx2.Client(base_url=s.base, headers=s.op, timeout=30) as c:
            assert c.post("/api/channels/main/match", json={"seed": 3}).status_code == 200
            assert c.post("/api/channels/main/match/start").status_code == 200
            pin = c.get("/api/channels/main/pin").json()["pin"]
        page = watch_errors(ctx.new_page(), errors)
        page.goto(f"{s.base}/referee/main#pin={pin}")
        page.fill("#name", "mat 1")
        page.click("#join-button")
        badge = page.locator("#conn")
        expect(badge).to_have_attribute("data-state", "online")
        expect(page.locator("#hold")).to_have_attribute("data-state", "ready")
        # the page's estimate of the server's clock, from its pongs (it times its presses)
        page.wait_for_function("!Y.live.serverNow || Y.live.serverNow() !== null")
        rid = page.evaluate("JSON.parse(localStorage.getItem('yomite.referee.main')).referee")

        # when the badge turns "lost", on the page's own clock
        page.evaluate("""() => {
          const b = document.getElementById("conn");
          new MutationObserver(() => {
            if (b.dataset.state === "lost" && !window.lostAt) window.lostAt = Date.now();
          }).observe(b, { attributes: true });
        }""")
        frozen_at = page.evaluate("Date.now()")
        os.kill(s.proc.pid, signal.SIGSTOP)
        frozen = True
        t0 = time.monotonic()
        page.locator("#hold").click()  # into the outage: the socket still looks open
        expect(badge).to_have_attribute("data-state", "lost")
        lost_s = (page.evaluate("window.lostAt") - frozen_at) / 1000
        expect(badge.locator(".text")).to_have_text(re.compile("接続が\u200b?切れました"))
        # never left "sending": the page says it could not stop
        expect(page.locator(".toast strong")).to_have_text(
            re.compile("通信が\u200b?途切れたため\u200b?止められませんでした"))
        expect(page.locator("#hold")).not_to_have_attribute("data-state", "pending")
        said_s = time.monotonic() - t0
        print(f"\nlink lost said after {lost_s:.2f} s; the stop's failure after {said_s:.2f} s "
              "(server frozen at 0)")
        os.kill(s.proc.pid, signal.SIGCONT)
        frozen = False
        # the server wakes and reads the press it was sent: too old now, refused
        deadline = time.monotonic() + 20
        while "refused: stale" not in s.log():
            assert time.monotonic() < deadline, f"the press was never judged:\n{s.log()}"
            time.sleep(0.1)
        with httpx2.Client(base_url=s.base, headers=s.op, timeout=30) as c:
            assert not holding(c.get("/api/channels/main").json(), rid), \
                "a stop pressed into the outage was applied when the link returned"
        expect(badge).to_have_attribute("data-state", "online")
        expect(page.locator("#hold")).to_have_attribute("data-state", "ready")
        assert not errors, errors
    finally:
        if frozen:
            os.kill(s.proc.pid, signal.SIGCONT)
        ctx.close()
        s.stop()
