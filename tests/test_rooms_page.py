"""The teachers' start page (/start) in headless Chromium against a real `yomite serve`: a
teacher arrives with the invite link, signs in with a name, opens a class room with one tap and
sees its links and QR codes; the console link opens the console of that room with the
teacher's token; the room closes with two presses and its records stay. Errors are said in
Japanese with what to do: a wrong code, the organisation's quota, the network. No policy
violation, no script error; screenshots to $YOMITE_SCREENSHOTS."""

from __future__ import annotations

import re
from collections.abc import Iterator
from typing import Any

import pytest
from playwright.sync_api import Browser, Page, expect

from .chromium import english_in, launched, require_chromium, watch_errors
from .orgs import FAST, call, make_org
from .serverproc import Server
from .test_pages import shots_dir

pytestmark = [pytest.mark.browser, pytest.mark.server]

TOKEN = "rooms-page-operator-token-0123456789"
SHOTS = shots_dir()
# every policy violation the page sees (the pages' Content-Security-Policy, api/guards.py)
COLLECT = """
window.__violations = [];
document.addEventListener("securitypolicyviolation",
  (e) => window.__violations.push(`${e.violatedDirective} ${e.blockedURI}`));
"""


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Server]:
    require_chromium()
    s = Server(tmp_path_factory.mktemp("start"), {
        **FAST, "server": {"channels": [{"name": "main"}],
                           "security": {"pin_attempts_per_minute": 1000}},
    }, TOKEN).start()
    try:
        yield s
    finally:
        s.stop()


@pytest.fixture(scope="module")
def browser(server: Server) -> Iterator[Browser]:
    yield from launched()


def new_page(browser: Browser, errors: list[str], **viewport: Any) -> Page:
    ctx = browser.new_context(viewport=viewport or {"width": 1280, "height": 900},
                              locale="ja-JP")
    ctx.add_init_script(COLLECT)
    return watch_errors(ctx.new_page(), errors)


def sign_in(page: Page, server: Server, code: str, name: str) -> None:
    page.goto(f"{server.base}/start?invite={code}")
    expect(page.locator("#code")).to_have_value(code)
    assert "invite" not in page.url  # the code leaves the address bar at once
    page.fill("#name", name)
    page.click("#signin-button")
    expect(page.locator("#home")).to_be_visible()


def test_a_teacher_signs_in_opens_a_room_and_its_console(server: Server,
                                                         browser: Browser) -> None:
    org = make_org(server, "桜小学校")
    errors: list[str] = []
    page = new_page(browser, errors)
    sign_in(page, server, org["code"], "山田")
    expect(page.locator("#who")).to_have_text("山田（桜小学校）")
    expect(page.locator("#no-rooms")).to_be_visible()
    page.click("#open-room")
    card = page.locator("#rooms li.room.fresh")
    expect(card).to_have_count(1)
    room = card.get_attribute("data-room")
    assert room and room.startswith("r-")
    # the links, and the QR codes of the console, the projector, the viewers and the referees
    # (the speaker's, which holds the key, only when asked)
    qr = card.locator("img.qr")
    expect(qr).to_have_count(4)
    page.wait_for_function(
        "() => [...document.querySelectorAll('#rooms li.fresh img.qr')]"
        ".every((i) => i.complete && i.naturalWidth > 0)")
    expect(card.locator(".link-console a")).to_have_attribute("href", f"/console?ch={room}")
    expect(card.locator(".link-projector a")).to_have_attribute(
        "href", re.compile(rf"^/display/{room}#key=[\w-]+$"))
    expect(card.locator(".link-viewer a")).to_have_attribute(
        "href", re.compile(rf"^/display/{room}#key=[\w-]+$"))
    expect(card.locator(".link-speaker a")).to_contain_text("#key=•••")
    expect(card.locator(".link-referee a")).to_contain_text(f"/referee/{room}#pin=")
    card.locator("button.speaker-qr").click()
    expect(card.locator("img.qr")).to_have_count(5)
    expect(page.locator("#quota")).to_have_text("開いている教室: 1 / 20")
    SHOTS.mkdir(parents=True, exist_ok=True)
    page.screenshot(path=str(SHOTS / "start-room.png"), full_page=True)
    # the console link opens the console of that room, with the teacher's token
    with page.context.expect_page() as info:
        card.locator(".link-console a").click()
    console = watch_errors(info.value, errors, "console: ")
    expect(console.locator("#conn")).to_have_attribute("data-state", "online")
    expect(console.locator("#channel")).to_have_value(room)
    expect(console.locator("#pin")).to_have_text(
        call(server, "GET", f"/api/channels/{room}", TOKEN).json()["pin"])
    console.close()
    # closed with two presses: it goes to the records
    close = card.locator("button.close")
    close.click()
    expect(close).to_have_text("もう一度押すと閉じる")
    close.click()
    closed = page.locator(f'#closed-rooms li[data-room="{room}"]')
    expect(closed).to_contain_text("先生が閉じた")
    closed.locator("button.history-button").click()
    expect(closed.locator(".history")).to_contain_text("試合の記録はありません")
    assert page.evaluate("window.__violations") == []
    assert not english_in(page.locator("main").inner_text())
    assert errors == []


def test_errors_are_said_in_japanese_with_what_to_do(server: Server, browser: Browser) -> None:
    org = make_org(server, "梅中学校", max_open_rooms=1)
    errors: list[str] = []
    page = new_page(browser, errors, width=390, height=844)
    page.goto(f"{server.base}/start")
    # a wrong code
    page.fill("#code", "ABCD-EFGH")
    page.fill("#name", "鈴木")
    page.click("#signin-button")
    err = page.locator("#signin-error")
    expect(err).to_contain_text("招待コードが\u200b違います")
    expect(err).to_contain_text("管理者から\u200b届いた\u200bコードを\u200b確かめてください")
    assert not english_in(err.inner_text())
    SHOTS.mkdir(parents=True, exist_ok=True)
    page.screenshot(path=str(SHOTS / "start-wrong-code-phone.png"))
    # the right one; the organisation's one room open, a second is over its quota
    page.fill("#code", org["code"].lower())
    page.click("#signin-button")
    expect(page.locator("#home")).to_be_visible()
    page.click("#open-room")
    expect(page.locator("#rooms li.room")).to_have_count(1)
    page.click("#open-room")
    err = page.locator("#home-error")
    expect(err).to_contain_text("上限に\u200b達しました")
    expect(err).to_contain_text("使っていない\u200b教室を\u200b閉じる")
    # the server out of reach
    page.route("**/api/rooms", lambda route: route.abort())
    page.click("#open-room")
    expect(err).to_contain_text("サーバーに\u200b接続できません")
    expect(err).to_contain_text("ネットワーク")
    assert not english_in(err.inner_text())
    page.screenshot(path=str(SHOTS / "start-errors-phone.png"), full_page=True)
    assert page.evaluate("window.__violations") == []
    assert [e for e in errors if "ERR_FAILED" not in e] == []
