"""The pages' Content-Security-Policy in real Chromium, against a real `yomite serve`: the three
pages run under it without one violation (scripts, styles, the QR code, the WebSocket), and a
page of another origin cannot frame the referee's 止める button (clickjacking)."""

from collections.abc import Iterator

import httpx2
import pytest
from playwright.sync_api import Browser, expect

from .chromium import launched
from .serverproc import Server

pytestmark = [pytest.mark.browser, pytest.mark.server]

TOKEN = "policy-operator-token-0123456789abcdef"

# every violation the page sees, collected before any of its own scripts runs
COLLECT = """
window.__violations = [];
document.addEventListener("securitypolicyviolation",
  (e) => window.__violations.push(`${e.violatedDirective} ${e.blockedURI}`));
"""


@pytest.fixture(scope="module")
def server(tmp_path_factory) -> Iterator[Server]:
    s = Server(tmp_path_factory.mktemp("policy"), {
        "match": {"memorise_s": 60, "cards": 2},
        "voice": {"engine": "estimate"}, "audio": {"output": "null"},
    }, TOKEN).start()
    with httpx2.Client(base_url=s.base, headers=s.op) as c:
        c.post("/api/channels/main/match", json={"seed": 3})
        c.post("/api/channels/main/match/start")
    yield s
    s.stop()


@pytest.fixture(scope="module")
def browser(server: Server) -> Iterator[Browser]:
    yield from launched()


def test_the_pages_run_under_their_policy(server: Server, browser: Browser):
    pin = httpx2.get(f"{server.base}/api/channels/main/pin", headers=server.op).json()["pin"]
    ctx = browser.new_context(locale="ja-JP")
    ctx.add_init_script(COLLECT)
    errors: list[str] = []
    try:
        for path in (f"/console#token={TOKEN}", f"/referee/main?pin={pin}", "/display/main"):
            page = ctx.new_page()
            page.on("pageerror", lambda e, p=path: errors.append(f"{p}: {e}"))
            page.on("console", lambda m, p=path: errors.append(f"{p}: {m.text}")
                    if m.type == "error" else None)
            page.goto(server.base + path)
            if path.startswith("/referee"):
                page.fill("#name", "policy mat")
                page.click("#join-button")
                expect(page.locator("#live")).to_be_visible()
            expect(page.locator("#conn")).to_have_attribute("data-state", "online")
            if path.startswith("/console"):  # the QR code is an SVG put into the page
                expect(page.locator("#qr svg")).to_be_visible()
            assert page.evaluate("window.__violations") == [], path
    finally:
        ctx.close()
    assert errors == []


def test_another_origin_cannot_frame_the_referee_page(server: Server, browser: Browser):
    ctx = browser.new_context()
    page = ctx.new_page()
    refused: list[str] = []
    page.on("console", lambda m: refused.append(m.text) if "frame-ancestors" in m.text else None)
    try:
        # a page of another origin (opaque) that would lay the 止める button under a decoy
        page.set_content(f'<p>win a prize!</p><iframe src="{server.base}/referee/main" '
                         'width="360" height="600"></iframe>')
        page.wait_for_timeout(1500)
        frame = page.frames[-1]
        assert frame is not page.main_frame
        assert frame.url.startswith("chrome-error://") or refused, frame.url
        assert frame.locator("#join-button").count() == 0
    finally:
        ctx.close()


def test_the_console_removes_a_referee_and_gives_a_new_pin(server: Server, browser: Browser):
    pin = httpx2.get(f"{server.base}/api/channels/main/pin", headers=server.op).json()["pin"]
    ref = httpx2.post(f"{server.base}/api/channels/main/referees",
                      json={"pin": pin, "name": "mat 9"}).json()
    ctx = browser.new_context(locale="ja-JP")
    try:
        page = ctx.new_page()
        page.goto(f"{server.base}/console#token={TOKEN}")
        expect(page.locator("#pin")).to_have_text(pin)
        row = page.locator(f'#referees li[data-referee="{ref["referee"]}"]')
        expect(row).to_contain_text("mat 9")
        remove = row.locator("button.remove")
        remove.click()
        expect(remove).to_have_text("もう一度押すと削除")  # the first press only arms it
        # a state arrives between the two presses (another phone joins): the armed button
        # must survive it (the list used to be rebuilt on every state, disarming the press)
        other = httpx2.post(f"{server.base}/api/channels/main/referees",
                            json={"pin": pin, "name": "mat 10"}).json()
        expect(page.locator(f'#referees li[data-referee="{other["referee"]}"]')).to_have_count(1)
        expect(remove).to_have_text("もう一度押すと削除")
        remove.click()
        expect(row).to_have_count(0)
        assert httpx2.get(f"{server.base}/api/session", headers={
            "Authorization": f"Bearer {ref['token']}"}).status_code == 401
        page.click("#new-pin")
        page.click("#new-pin")
        expect(page.locator("#pin")).not_to_have_text(pin)
        new = httpx2.get(f"{server.base}/api/channels/main/pin", headers=server.op).json()["pin"]
        expect(page.locator("#pin")).to_have_text(new)
        assert len(new) == 6 and new != pin
    finally:
        ctx.close()
