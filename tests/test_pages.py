"""The hall's three pages in headless Chromium, against a real `yomite serve` playing into the
PulseAudio null sink of the audio harness (`make test` starts it).

The operator's console starts a match; a referee's phone joins with the PIN and presses 止める
during a card; the recorded monitor goes silent; the console shows the referee's hand; lowering
it resumes the reading (and the sound); the projector never shows a poem before its card's
lower verse has been read. Screenshots are taken here, at phone (360x740) and desktop
(1280x800) sizes, into a scratch folder ($YOMITE_SCREENSHOTS, default
/tmp/yomite-screenshots): `make screenshots` points it at docs/screenshots, which the README
shows, so that `make test` never rewrites tracked files.
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import httpx2
import numpy as np
import pytest
from playwright.sync_api import Browser, BrowserContext, Page, expect

from .audio_capture import THRESHOLD, Capture, Recorder
from .chromium import english_in, launched, require_chromium
from .serverproc import Server
from .speakers import TimelineMap

pytestmark = [pytest.mark.browser, pytest.mark.server, pytest.mark.audio]

TOKEN = "pages-test-operator-token-0123456789"


def shots_dir(env: Any = os.environ) -> Path:
    return Path(env.get("YOMITE_SCREENSHOTS") or "/tmp/yomite-screenshots")


SHOTS = shots_dir()
PHONE = {"width": 360, "height": 740}
DESKTOP = {"width": 1280, "height": 800}
# rendered voices are kept between runs (a fixed seed reads the same poems every time)
CACHE = Path(os.environ.get("YOMITE_TEST_CACHE", "/tmp/yomite-test-cache"))
SEED = 7
LEAD_IN_S = 0.5
HELD_S = 1.5  # the hand stays up at least this long
MEMORISE_S = 8  # long enough for the pages to be seen counting down on a busy machine
# How long after the engine cut the verse (its timeline's cut, mapped to this process's clock)
# the reading may still be heard: the stop's trip to the sound server and the output's buffer
# (a few ms idle). The bug it guards, a hold that does not cut the verse, reads the verse on to
# its end: always more than this bound (checked on the match's log). The press's trip to the
# server (page, WebSocket, server) is printed, not bounded: it is the machine's load (0.1 s
# idle, 1.9 s seen once on a loaded CI runner), measured in bench/holds.
SILENT_AFTER_CUT_S = 0.5
# How far the first sound after the release may be from the verse's restart in the timeline
# (after the lead-in): the clip's first loud sample and the output's buffer. The bug it
# guards, a resume that does not restart the sound, stays silent past it.
BACK_AFTER_RESTART_S = 0.5
PUBLIC_URL = "https://yomite-hall.test"


def _require_environment() -> None:
    require_chromium()
    missing = [k for k in ("PULSE_SERVER", "YOMITE_TEST_DEVICE", "YOMITE_TEST_MONITOR")
               if not os.environ.get(k)]
    if missing:
        pytest.fail(f"{', '.join(missing)} not set: run the browser tests with `make test`, which "
                    "starts scripts/audio-harness.sh and sources /tmp/yomite-audio/env.sh")


@pytest.fixture(scope="module")
def sink() -> Iterator[str]:
    """A null sink of our own on the harness's sound server, so that another process playing
    into the shared `yomite` sink cannot put sound into this test's recording. The server
    plays into it through the same ALSA `pulse` device (PULSE_SINK picks the sink); like the
    harness's sink it has no rewinds and a low-latency client holding it."""
    _require_environment()
    name = f"yomite_pages_{os.getpid()}"
    load = subprocess.run(
        ["pactl", "load-module", "module-null-sink", f"sink_name={name}", "rate=48000",
         "channels=2", "norewinds=1", f"sink_properties=device.description={name}"],
        capture_output=True, text=True)
    if load.returncode != 0:
        pytest.fail(f"cannot add a null sink to the sound server ({load.stderr.strip()}); "
                    "is the audio harness up? run the tests with `make test`")
    keeper = subprocess.Popen(
        ["parec", "-d", f"{name}.monitor", "--raw", "--format=s16le", "--rate=48000",
         "--channels=2", "--latency-msec=5", "/dev/null"])
    try:
        yield name
    finally:
        keeper.terminate()
        keeper.wait(5)
        subprocess.run(["pactl", "unload-module", load.stdout.strip()], capture_output=True)


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory, sink: str) -> Iterator[Server]:
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv("PULSE_SINK", sink)  # the server process inherits the environment
        s = Server(tmp_path_factory.mktemp("pages"), {
            "match": {"memorise_s": 2, "cards": 3,
                      "gaps": {"after_bow_s": 0.5, "after_call_s": 0.5,
                               "between_verses_s": 0.5, "between_cards_s": 0.5,
                               "repeat_s": 0.5, "before_move_s": 0.5},
                      "resume": {"lead_in_s": LEAD_IN_S}},
            "voice": {"engine": "openjtalk", "cache_dir": str(CACHE)},
            "audio": {"device": os.environ["YOMITE_TEST_DEVICE"]},
            # a hall behind a reverse proxy: the console offers it first, then the LAN
            "server": {"public_url": PUBLIC_URL},
        }, TOKEN, host="0.0.0.0").start()
    try:
        yield s
    finally:
        s.stop()


@pytest.fixture(scope="module")
def browser(server: Server) -> Iterator[Browser]:
    yield from launched()


class Pages:
    """Browser contexts of one test, with every page's script errors collected."""

    def __init__(self, browser: Browser, base: str) -> None:
        self.browser = browser
        self.base = base
        self.contexts: list[BrowserContext] = []
        self.errors: list[str] = []

    def open(self, path: str, *, phone: bool) -> Page:
        ctx = self.browser.new_context(
            viewport=PHONE if phone else DESKTOP, device_scale_factor=2, is_mobile=phone,
            has_touch=phone, locale="ja-JP")
        self.contexts.append(ctx)
        page = ctx.new_page()
        page.on("pageerror", lambda e: self.errors.append(f"{path}: {e}"))
        page.on("console", lambda m: self._console(path, m.type, m.text))
        page.goto(self.base + path)
        return page

    def _console(self, path: str, kind: str, text: str) -> None:
        # a refused request (the wrong PIN) is logged by Chromium itself; the page shows it
        if kind == "error" and not text.startswith("Failed to load resource"):
            self.errors.append(f"{path}: console: {text}")

    def close(self) -> None:
        for c in self.contexts:
            c.close()


@pytest.fixture
def pages(browser: Browser, server: Server) -> Iterator[Pages]:
    p = Pages(browser, server.base)
    try:
        yield p
    finally:
        p.close()
    assert not p.errors, p.errors


def shot(page: Page, name: str, *, phone: bool) -> None:
    """Save docs/screenshots/<name>.png at phone or desktop size (then restore the size)."""
    SHOTS.mkdir(parents=True, exist_ok=True)
    size = page.viewport_size
    want = PHONE if phone else DESKTOP
    if size != want:
        page.set_viewport_size(want)
    page.screenshot(path=str(SHOTS / f"{name}.png"), scale="device" if phone else "css",
                    animations="disabled")
    if size is not None and size != want:
        page.set_viewport_size(size)


def op_state(server: Server) -> dict[str, Any]:
    r = httpx2.get(f"{server.base}/api/channels/main", headers=server.op, timeout=30)
    assert r.status_code == 200, r.text
    state: dict[str, Any] = r.json()
    # the reader holds the match itself when its output stalls (a hold named @audio); say so
    # at once rather than time out waiting for a card that will not come
    if state["audio"] != "ok":
        raise AssertionError(
            f"the server's audio output failed during the test ({state['audio']}): the sound "
            "server did not keep time (is the machine overloaded?); this is no page failure")
    return state


def wait_for(server: Server, what: str, ok: Callable[[dict[str, Any]], bool],
             timeout_s: float = 90) -> dict[str, Any]:
    deadline = time.monotonic() + timeout_s
    s: dict[str, Any] = {}
    while time.monotonic() < deadline:
        s = op_state(server)
        if s["match"] and ok(s["match"]):
            return s
        time.sleep(0.03)
    raise AssertionError(f"no {what} within {timeout_s} s; last state: {s}")


def zw(text: str) -> re.Pattern[str]:
    """`text` as the page shows it: Japanese strings carry U+200B at phrase boundaries, and a
    no-break space where a line must not break (PIN を)."""
    chars = ("[ \u00a0]" if c == " " else re.escape(c) for c in text)
    return re.compile("^" + "\u200b?".join(chars) + "$")


# the characters after which a line may end: a space, U+200B, or closing punctuation
BREAKS_AFTER = " \u200b、。）」・:"
LINE_BREAKS = """(el) => {
  const out = [];
  let prevTop = null, prev = "";
  const walker = document.createTreeWalker(el, NodeFilter.SHOW_TEXT);
  for (let node = walker.nextNode(); node; node = walker.nextNode()) {
    for (let i = 0; i < node.length; i++) {
      const r = document.createRange();
      r.setStart(node, i);
      r.setEnd(node, i + 1);
      const rect = [...r.getClientRects()].find((x) => x.width > 0);
      const ch = node.data[i];
      if (rect) {
        const top = Math.round(rect.top);
        if (prevTop !== null && top > prevTop + 2) out.push(prev + "|" + ch);
        prevTop = top;
      }
      prev = ch;
    }
  }
  return out;
}"""


def assert_phrase_breaks(page: Page, selector: str) -> list[str]:
    """Every line break inside `selector` falls after a space, a U+200B or punctuation:
    never inside a word (挙げられ／ます)."""
    breaks: list[str] = page.locator(selector).evaluate(LINE_BREAKS)
    bad = [b for b in breaks if b.split("|")[0] not in BREAKS_AFTER]
    assert not bad, f"{selector} wraps inside a word at {bad}"
    return breaks


def log_timeline(server: Server) -> list[dict[str, Any]]:
    r = httpx2.get(f"{server.base}/api/channels/main/match/log", headers=server.op,
                   timeout=30)
    assert r.status_code == 200, r.text
    timeline: list[dict[str, Any]] = r.json()["timeline"]
    return timeline


def join(page: Page, name: str) -> None:
    page.fill("#name", name)
    page.click("#join-button")
    expect(page.locator("#live")).to_be_visible()
    expect(page.locator("#conn")).to_have_attribute("data-state", "online")


def monotonic_of(page: Page, expression: str, probes: int = 7) -> float:
    """A page's performance time (epoch ms) as this process's time.monotonic(): the page's clock
    read now against this process's (the probe with the shortest round trip), not through the
    wall clock (a page's timeOrigin was once 0.16 s off time.time() on a loaded machine)."""
    epoch_ms = page.evaluate(expression)
    assert epoch_ms, f"{expression} is not set"
    best: tuple[float, float] | None = None  # (round trip, page's clock less ours)
    for _ in range(probes):
        t0 = time.monotonic()
        now_ms = float(page.evaluate("performance.timeOrigin + performance.now()"))
        t1 = time.monotonic()
        if best is None or t1 - t0 < best[0]:
            best = (t1 - t0, now_ms / 1000 - (t0 + t1) / 2)
    assert best is not None
    return float(epoch_ms) / 1000 - best[1]


# ---------------------------------------------------------------------- the referee's phone
def test_referee_joins_with_the_pin_keeps_its_identity_and_language(
        server: Server, pages: Pages) -> None:
    pin = httpx2.get(f"{server.base}/api/channels/main/pin", headers=server.op).json()["pin"]
    wrong = f"{(int(pin) + 1) % 10 ** len(pin):0{len(pin)}d}"
    ref = pages.open(f"/referee/main?pin={wrong}", phone=True)
    expect(ref.locator("#pin")).to_have_value(wrong)  # prefilled from the link
    ref.fill("#name", "mat 1")
    ref.click("#join-button")
    toast = ref.locator(".toast").last
    # item 8: in the page's language (the API's English detail only on the English page)
    expect(toast.locator("strong")).to_have_text(
        zw("PIN が違います。運営の画面の PIN を確かめてください"))
    expect(toast).to_contain_text("wrong_pin")
    expect(toast).not_to_contain_text("that PIN is not this channel's")
    ref.fill("#pin", pin)
    shot(ref, "referee-join-phone", phone=True)
    join(ref, "mat 1")
    assert "pin=" not in ref.url  # the PIN does not stay on the screen
    expect(ref.locator("#hold-main")).to_have_text("止める")
    expect(ref.locator("#me")).to_have_text("審判: mat 1")
    me = ref.evaluate("Y.live.hello.referee")
    assert me.startswith("r")

    # English, remembered across a reload, with the identity
    ref.click("button.lang")
    expect(ref.locator("#hold-main")).to_have_text("Stop")
    assert ref.evaluate("document.documentElement.lang") == "en"
    ref.reload()
    expect(ref.locator("#live")).to_be_visible()
    expect(ref.locator("#hold-main")).to_have_text("Stop")
    expect(ref.locator("#conn")).to_have_attribute("data-state", "online")
    assert ref.evaluate("Y.live.hello.referee") == me
    # at 360 px the English buttons stay on one line beside a long name (40 characters, the
    # most a name may have: "Leave" wrapped to "Leav / e"), and the page is no wider than the
    # phone
    expect(ref.locator("#leave")).to_have_text("Leave")
    assert ref.evaluate("""() => {
      document.getElementById('me').textContent = 'Referee: ' + 'W'.repeat(40);
      const r = document.createRange(); r.selectNodeContents(document.getElementById('leave'));
      return new Set([...r.getClientRects()].map((x) => Math.round(x.top))).size;
    }""") == 1
    assert ref.evaluate("document.documentElement.scrollWidth") <= PHONE["width"]
    ref.click("button.lang")
    expect(ref.locator("#hold-main")).to_have_text("止める")

    # a dropped connection comes back by itself, as the same referee; every state the page
    # shows is noted as it happens (on a busy machine a look may come after "reconnecting")
    ref.evaluate("""() => {
      const conn = document.getElementById('conn');
      window.connStates = [];
      new MutationObserver((records) => {
        for (const r of records) window.connStates.push(r.oldValue);
        window.connStates.push(conn.dataset.state);
      }).observe(conn, {attributes: true, attributeFilter: ['data-state'],
                        attributeOldValue: true});
    }""")
    ref.evaluate("Y.live.ws.close()")
    # (the referee page calls a dropped link "lost" until a server answers again)
    ref.wait_for_function("() => window.connStates.includes('lost')")
    expect(ref.locator("#conn")).to_have_attribute("data-state", "online", timeout=30_000)
    assert ref.evaluate("Y.live.hello.referee") == me
    refs = [r for r in op_state(server)["referees"] if r["name"] == "mat 1"]
    assert [r["id"] for r in refs] == [me] and refs[0]["connected"]


# ---------------------------------------------------------------------- joining from a phone
def test_console_offers_every_address_and_a_phone_joins_at_the_lan_one(
        server: Server, pages: Pages) -> None:
    """Item 1: the console's QR code and link are for server.public_url first; the operator
    can switch them to the machine's LAN address (the choice is kept), and a phone opening
    that link joins."""
    from api.addresses import default_route_address

    lan = f"http://{default_route_address()}:{server.port}"
    console = pages.open(f"/console#token={TOKEN}", phone=False)
    expect(console.locator("#base-pick")).to_be_visible()
    options = console.locator("#join-base option")
    # public_url, then the default route's address, then any other interface's (another
    # test's network namespaces put a bridge on this machine now and then)
    expect(options.nth(1)).to_have_attribute("value", lan)
    assert options.nth(0).get_attribute("value") == PUBLIC_URL
    expect(console.locator("#join-url")).to_have_text(re.compile(f"^{re.escape(PUBLIC_URL)}/"))
    expect(console.locator("#qr")).to_have_attribute("data-url", re.compile(f"^{PUBLIC_URL}"))
    console.select_option("#join-base", lan)
    expect(console.locator("#qr")).to_have_attribute("data-url", re.compile(f"^{lan}/referee"))
    expect(console.locator("#join-url")).to_have_text(re.compile(f"^{re.escape(lan)}/referee"))
    expect(console.locator("#display-url")).to_have_text(f"{lan}/display/main#key=•••")
    expect(console.locator("#loopback")).to_be_hidden()
    console.reload()
    expect(console.locator("#join-base")).to_have_value(lan)
    join_link = console.locator("#join-url").get_attribute("href")
    assert join_link is not None

    ctx = pages.browser.new_context(viewport=PHONE, is_mobile=True, has_touch=True,
                                    locale="ja-JP")
    pages.contexts.append(ctx)
    phone = ctx.new_page()
    phone.on("pageerror", lambda e: pages.errors.append(f"phone: {e}"))
    phone.goto(join_link)  # the LAN address, not the one the test reaches the server by
    expect(phone.locator("#pin")).to_have_value(join_link.split("pin=")[1])
    join(phone, "mat 5")
    expect(console.locator("#referees li.on .who").filter(has_text="mat 5")).to_be_visible()


# ---------------------------------------------------------------------- a whole match
def test_console_starts_a_match_a_referee_stops_it_and_the_audio_stops(
        server: Server, sink: str, pages: Pages, tmp_path: Path) -> None:
    poems = {p["no"]: p for p in httpx2.get(f"{server.base}/api/poems").json()}

    console = pages.open(f"/console#token={TOKEN}", phone=False)
    expect(console.locator("#conn")).to_have_attribute("data-state", "online")
    assert TOKEN not in console.url, "the token leaves the address bar"
    expect(console.locator("#pin")).to_have_text(str(op_state(server)["pin"]))
    expect(console.locator("#qr svg")).to_be_visible()
    expect(console.locator("#output")).to_contain_text("出力装置 pulse")
    join_url = console.locator("#join-url").get_attribute("href")
    assert join_url and join_url.startswith(PUBLIC_URL) and "pin=" in join_url

    # the projector: every state it receives is recorded
    frames: list[str] = []
    display = pages.browser.new_context(viewport=DESKTOP, device_scale_factor=2, locale="ja-JP")
    pages.contexts.append(display)
    dp = display.new_page()
    dp.on("pageerror", lambda e: pages.errors.append(f"display: {e}"))
    dp.on("websocket", lambda ws: ws.on("framereceived", lambda f: frames.append(str(f))))
    dp.goto(f"{server.base}/display/main")
    expect(dp.locator("#conn")).to_have_attribute("data-state", "online")

    ref = pages.open(join_url.removeprefix(PUBLIC_URL), phone=True)
    join(ref, "mat 3")
    expect(console.locator("#referees li.on .who").filter(has_text="mat 3")).to_be_visible()

    # the teacher's settings: blue, a fixed seed, short timings; one tap prepares and starts
    for colour in ("blue", "pink", "yellow", "green", "orange"):
        box = console.locator(f"#colour-{colour}")
        if box.is_checked() != (colour == "blue"):
            console.click(f"label[for=colour-{colour}]")
    expect(console.locator("#colour-picks input:checked")).to_have_count(1)
    console.fill("#seed", str(SEED))
    console.fill("#memorise", str(MEMORISE_S))
    console.fill("#cards", "3")

    # rule 1 in game 1: the bow alone (the match is prepared by the same tap), then the
    # players shuffle and lay out their cards; the projector shows the call
    console.click("#bow")
    expect(console.locator("#step-hint")).to_contain_text("礼をしました")
    bowing = [f for f in frames if '"phase":"bowing"' in f.replace(" ", "")]
    assert bowing and "礼" in bowing[0], "the projector was told of the bow call"
    expect(console.locator("#bow")).to_be_disabled()
    expect(dp.locator("#sub")).to_have_text(zw("札を並べて、開始を待っています"))
    m = op_state(server)["match"]
    assert m["phase"] == "ready" and m["bowed"] and m["seed"] == SEED

    with Recorder(tmp_path / "hall.wav", source=f"{sink}.monitor") as rec:
        console.click("#start")
        expect(console.locator("#prepared")).to_contain_text(f"シード {SEED}")
        wait_for(server, "memorisation", lambda m: m["phase"] == "memorising")
        ws_url = f"ws://127.0.0.1:{server.port}/ws/channels/main"
        expect(dp.locator("#stage")).to_have_attribute("data-phase", "memorising")
        expect(ref.locator("#detail")).to_contain_text("残り")
        shot(dp, "display-countdown-desktop", phone=False)

        # hold during card 2's upper verse, when card 1 has been read: pressed as soon as the
        # verse is seen to begin, so that most of it is still to come (on a busy machine the
        # press comes later; check_audio says if too late to tell a cut from the verse's end)
        ref.evaluate("""document.getElementById('hold').addEventListener('pointerdown',
            () => { window.pressedAt = performance.timeOrigin + performance.now(); },
            {capture: true})""")
        s = wait_for(server, "card 2's upper verse",
                     lambda m: (m["segment"] or {}).get("label") == "card_kami"
                     and m["segment"]["card"] == 2)
        ref.locator("#hold").tap()
        expect(ref.locator("#hold")).to_have_attribute("data-state", "mine")
        t_press = monotonic_of(ref, "window.pressedAt")
        # the timeline's clock (the output's) against this process's, read now: the audio is
        # checked against the moments the engine cut and restarted the verse. Read once at the
        # memorisation, it was 0.21 s off by the press in a fresh clone (the output's clock
        # had fallen behind in a stall: the timeline follows the sound, hall.speaker's epochs)
        tmap_press = TimelineMap.measure(ws_url)
        card1 = s["match"]["cards"][0]
        assert card1["finished_s"] is not None
        expect(dp.locator("#last")).to_have_attribute("data-poem", str(card1["poem"]))
        expect(dp.locator("#last-shimo")).to_have_text(poems[card1["poem"]]["shimo"])
        expect(ref.locator("#hold-main")).to_have_text("再開")

        # everyone sees the hand: the console with the referee's name, the projector's banner
        expect(console.locator("#holds li .who")).to_have_text(["mat 3"])
        expect(console.locator("#paused")).to_contain_text("mat 3")
        expect(console.locator("#referees li .badge")).to_have_count(1)
        expect(dp.locator("#banner")).to_be_visible()
        expect(dp.locator("#banner-sub")).to_contain_text("mat 3")
        m = op_state(server)["match"]
        assert m["paused"] and m["cut"]["card"] == 2 and m["cut"]["verse"] == "kami"
        assert [h["name"] for h in m["holds"]] == ["mat 3"]
        for page, name in ((console, "console"), (ref, "referee"), (dp, "display")):
            shot(page, f"{name}-desktop", phone=False)
            shot(page, f"{name}-phone", phone=True)
        time.sleep(max(0.0, t_press + HELD_S - time.monotonic()))

        ref.evaluate("""document.getElementById('hold').addEventListener('pointerdown',
            () => { window.releasedAt = performance.timeOrigin + performance.now(); },
            {capture: true})""")
        ref.locator("#hold").tap()
        expect(ref.locator("#hold")).to_have_attribute("data-state", "ready")
        t_release = monotonic_of(ref, "window.releasedAt")
        tmap_release = TimelineMap.measure(ws_url)
        expect(console.locator("#phase")).to_have_attribute("data-paused", "false")
        expect(dp.locator("#banner")).to_be_hidden()
        expect(console.locator("#holds li.empty")).to_be_visible()

        # to the end; the projector shows only cards whose lower verse has been read
        shown: set[int] = set()
        deadline = time.monotonic() + 120
        while True:
            poem = dp.locator("#last").get_attribute("data-poem")
            text = dp.locator("body").inner_text()
            m = op_state(server)["match"]  # read after the page: at least as new
            done = {c["poem"] for c in m["cards"] if c["finished_s"] is not None}
            if poem is not None:
                assert int(poem) in done, f"poem {poem} shown before its lower verse was read"
                shown.add(int(poem))
            for c in m["cards"]:
                if c["finished_s"] is None:
                    p = poems[c["poem"]]
                    assert p["kami"] not in text and p["shimo"] not in text
            if m["phase"] == "finished":
                break
            assert time.monotonic() < deadline, f"the match did not finish: {m}"
            time.sleep(0.25)
        expect(dp.locator("#stage")).to_have_attribute("data-phase", "finished")
        last = m["cards"][-1]
        expect(dp.locator("#last")).to_have_attribute("data-poem", str(last["poem"]))
        # the last card's lower verse can end between the page's read and the state's (the match
        # finishes with it): the wait just above is what shows it
        shown.add(last["poem"])
        assert len(m["cards"]) == 3 and shown >= {c["poem"] for c in m["cards"][1:]}
        expect(console.locator("#card-rows tr")).to_have_count(3)
        expect(console.locator("#extra")).to_be_enabled()
        # rule 16: the players count their cards; nothing says ありがとうございました yet
        expect(dp.locator("#big")).to_have_text("読み終わり")
        expect(dp.locator("#sub")).to_contain_text(re.compile("札を\u200b?数えてください"))
        expect(console.locator("#step-hint")).to_contain_text("挨拶・移動")
        expect(ref.locator("#hold-sub")).to_have_text(
            zw("読み終わりました（もう一枚読むときにまた使えます）"))
        assert_phrase_breaks(ref, "#hold-sub")
        shot(console, "console-finished-desktop", phone=False)
        timeline = log_timeline(server)  # this match's (the next one is prepared below)
        assert not any(s.get("label") == "end_call" for s in timeline)

    # rule 18: when every mat is ready, the thanks and the move call, then the match is over
    console.click("#close")
    expect(dp.locator("#big")).to_have_text("ありがとうございました")
    expect(dp.locator("#big")).to_have_text("移動してください")
    expect(dp.locator("#stage")).to_have_attribute("data-phase", "closed")
    expect(dp.locator("#big")).to_have_text("試合終了")
    expect(console.locator("#close")).to_be_disabled()
    expect(ref.locator("#hold-sub")).to_have_text(zw("この試合は終わりました"))
    # item 15: the console's history lists this match (its CSV says who held)
    row = console.locator("#history li.current")
    expect(row).to_contain_text(f"シード {SEED}")
    expect(row).to_contain_text("試合終了")
    labels = [s["label"] for s in log_timeline(server) if "label" in s]
    assert labels[0] == "bow_call" and labels[-3:] == ["end_call", "gap_before_move", "move_call"]
    assert labels.count("bow_call") == 1

    # the next match: a new order (item 11: the seed typed for this one is not used again),
    # the console's own pause, then an abort in two presses
    console.click("#next")
    expect(console.locator("#phase")).to_have_attribute("data-phase", "ready")
    expect(console.locator("#seed")).to_have_value("")
    assert op_state(server)["match"]["seed"] != SEED
    saved = console.evaluate("localStorage.getItem('yomite.console.settings.main')")
    assert saved and json.loads(saved)["seed"] == "", "settings are kept per channel"
    expect(console.locator("#card-rows tr")).to_have_count(1)  # "none yet"
    console.click("#pause")
    expect(console.locator("#holds li .who")).to_have_text(["運営"])
    expect(console.locator("#pause")).to_have_text("一時停止を解除")
    console.click("#pause")
    expect(console.locator("#holds li.empty")).to_be_visible()
    console.click("#abort")
    expect(console.locator("#abort")).to_have_text("もう一度押すと中止")
    assert op_state(server)["match"]["phase"] == "ready", "one press does not abort"
    console.click("#abort")
    expect(console.locator("#phase")).to_have_attribute("data-phase", "aborted")
    expect(dp.locator("#stage")).to_have_attribute("data-phase", "aborted")
    expect(dp.locator("#sub")).to_have_text("操作卓で中止")
    expect(ref.locator("#hold")).to_be_disabled()

    # every state the projector received kept unread poems secret
    states = [json.loads(f) for f in frames if '"type": "state"' in f or '"type":"state"' in f]
    assert len(states) > 20
    for st in states:
        assert "pin" not in st
        mm = st["match"]
        if not mm:
            continue
        assert mm["segment"] is None or mm["segment"]["poem"] is None
        assert mm["cut"] is None or mm["cut"]["poem"] is None
        assert all(c["poem"] is None for c in mm["cards"] if c["finished_s"] is None)

    assert rec.capture is not None
    check_audio(rec.capture, t_press, t_release, timeline, tmap_press, tmap_release)


def verse_left_at_cut(timeline: list[dict[str, Any]]) -> float:
    """How much of the verse the hold cut was still to be read (seconds), from the match's
    log: the cut entry, and the same verse read again after the resume."""
    i = next(k for k, e in enumerate(timeline) if e["kind"] == "verse" and e.get("cut"))
    cut = timeline[i]
    again = next(e for e in timeline[i + 1:] if e["kind"] == "verse")
    assert (again["card"], again["verse"]) == (cut["card"], cut["verse"]), (cut, again)
    whole = again.get("from_s", 0.0) + again["end_s"] - again["start_s"]
    return whole - cut.get("from_s", 0.0) - (cut["end_s"] - cut["start_s"])


def check_audio(cap: Capture, t_press: float, t_release: float,
                timeline: list[dict[str, Any]], tmap: TimelineMap,
                tmap_release: TimelineMap) -> None:
    """Sound just before the press; silence from at most SILENT_AFTER_CUT_S after the engine
    cut the verse for as long as the hand was up; sound again when the engine restarted the
    verse, a lead-in after the release. The timeline's times as this process's by the clock
    maps read after the press (`tmap`) and after the release."""
    left = verse_left_at_cut(timeline)
    i = next(k for k, e in enumerate(timeline) if e["kind"] == "verse" and e.get("cut"))
    t_cut = tmap.mono(timeline[i]["end_s"])
    lead = next(e for e in timeline[i + 1:] if e["kind"] == "lead_in")
    t_lead, t_restart = tmap_release.mono(lead["start_s"]), tmap_release.mono(lead["end_s"])
    # the reading must fall silent within SILENT_AFTER_CUT_S of the cut and a quarter second
    # before the verse would have ended by itself (`left` after the cut): a hold that let the
    # verse play on fails, however late the press reached the server. On a loaded machine the
    # press can land late in the verse: only a cut with under 0.5 s to go proves nothing
    silent_within = min(SILENT_AFTER_CUT_S, left - 0.25)
    assert silent_within >= 0.25, (
        f"the cut came {left:.2f} s before the verse's end: too late to tell a hold that "
        "cuts the verse from one that lets it end")
    loud = np.abs(cap.x) > THRESHOLD

    def frame(t: float) -> int:
        return int(np.clip(round((t - cap.t0) * cap.rate), 0, len(loud)))

    def at(i: int) -> float:
        return cap.t_line(i)

    assert loud[frame(t_press - 0.8):frame(t_press)].any(), (
        "the card was not being read when the referee pressed")
    sound = np.flatnonzero(loud[:frame(t_release)])
    last_sound = at(int(sound[-1]) + 1)  # the reading's last sample before the silence
    after = np.flatnonzero(loud[frame(t_release):])
    assert len(after), "no sound after the release"
    back = at(frame(t_release) + int(after[0]))
    near = [(round((at(a) - t_press) * 1000), round((at(b) - t_press) * 1000))
            for a, b in cap.segments() if abs(at(a) - t_press) < 2]
    print(f"\naudio: the press reached the engine {(t_cut - t_press) * 1000:.0f} ms after the "
          f"tap; last sound {(last_sound - t_cut) * 1000:+.0f} ms from the cut; the release "
          f"{(t_lead - t_release) * 1000:.0f} ms after the tap; sound again "
          f"{(back - t_restart) * 1000:+.0f} ms from the verse's restart (lead-in "
          f"{(lead['end_s'] - lead['start_s']) * 1000:.0f} ms); silent for "
          f"{back - last_sound:.2f} s; capture jitter {cap.jitter_ms:.1f} ms; clock probe rtt "
          f"{tmap.rtt_ms:.1f} ms; the map moved {(tmap_release.offset - tmap.offset) * 1000:+.0f} "
          f"ms by the release; sound near the press (ms): {near}; the verse had {left:.2f} s "
          "to go")
    # the clocks agree: the engine cut after the press, and led in after the release
    assert t_cut > t_press - 0.1 and t_lead > t_release - 0.1, (t_cut - t_press,
                                                                 t_lead - t_release)
    assert last_sound < t_cut + silent_within, (
        f"the reading went on {(last_sound - t_cut) * 1000:.0f} ms after the cut (bound "
        f"{silent_within * 1000:.0f} ms: the verse had {left:.2f} s to go)")
    assert last_sound > t_press - 0.5, "a long silence before the press: the test is broken"
    # the lead-in is the configured one, and the verse is heard again when it restarts
    assert abs(lead["end_s"] - lead["start_s"] - LEAD_IN_S) < 0.02, lead
    assert t_restart - 0.1 < back < t_restart + BACK_AFTER_RESTART_S, (
        f"the reading came back {back - t_restart:+.2f} s from the verse's restart")


# ---------------------------------------------------------------------- no audio device
def test_no_audio_device_is_said_in_the_pages_language_and_start_asks_first(
        browser: Browser, tmp_path: Path) -> None:
    """Item 5: speakers that cannot be opened do not look normal: health says no_device, the
    console says it next to 開始 in Japanese, and 開始 needs a second press. Item 19: at
    360 px the long Japanese lines break between phrases only."""
    s = Server(tmp_path, {"match": {"memorise_s": 1, "cards": 1},
                          "voice": {"engine": "estimate"},
                          "audio": {"device": "no-such-device-for-yomite"}}, TOKEN).start()
    p = Pages(browser, s.base)
    try:
        health = httpx2.get(f"{s.base}/api/health", timeout=30).json()
        assert health["channels"]["main"]["audio"] == "no_device"
        console = p.open(f"/console#token={TOKEN}", phone=True)
        warning = console.locator("#audio-warning")
        expect(warning).to_be_visible()
        expect(warning).to_have_text(zw("音声出力装置がありません。開始しても会場には聞こえません。"
                                        "スピーカーをつないでサーバーを再起動してください。"))
        expect(console.locator("#audio")).to_have_text("音声出力装置がありません")
        expect(console.locator("#output")).to_contain_text("音声出力装置を開けません")
        # issue 20, item 9: why, in Japanese too (the server's reason was shown in English)
        expect(console.locator("#output")).to_contain_text("no-such-device-for-yomite")
        for sel in ("#output", "#audio", "#audio-warning"):
            text = console.locator(sel).inner_text()
            assert not english_in(text), (sel, text)
        console.click("#start")
        expect(console.locator("#start")).to_have_text(zw("もう一度押すと音なしで始めます"))
        st = httpx2.get(f"{s.base}/api/channels/main", headers=s.op, timeout=30).json()
        assert st["match"] is None, "one press starts nothing"
        console.click("#start")
        expect(console.locator("#phase")).to_have_attribute(
            # started: a busy machine may show it a phase or two on
            "data-phase", re.compile("bowing|announcing|memorising|prelude|reading|finished"))
        assert_phrase_breaks(console, "#audio-warning")
        breaks = assert_phrase_breaks(console, "#resume")
        assert breaks, "the test looks at a line that wraps at 360 px"
    finally:
        p.close()
        s.stop()
    assert not p.errors, p.errors


# ---------------------------------------------------------------------- the API docs offline
def test_api_docs_render_with_no_internet(server: Server, pages: Pages) -> None:
    """Item 17: /docs draws in Chromium from this server's own files: every request to
    anywhere else is cut, and none is even tried."""
    ctx = pages.browser.new_context(viewport=DESKTOP)
    pages.contexts.append(ctx)
    outside: list[str] = []

    def only_the_server(route: Any) -> None:
        if route.request.url.startswith(server.base):
            route.continue_()
        else:
            outside.append(route.request.url)
            route.abort()

    ctx.route("**/*", only_the_server)
    page = ctx.new_page()
    page.on("pageerror", lambda e: pages.errors.append(f"docs: {e}"))
    page.goto(f"{server.base}/docs")
    # Swagger UI draws all the operations at once, 3 s after the page on an idle machine; every
    # request goes through the route above, and CI once took more than 10 s (stop 39): the
    # render has a minute, then every operation of the schema must be on the page
    expect(page.locator('.swagger-ui .opblock-summary-path'
                        '[data-path="/api/channels/{ch}/match/close"]')).to_be_visible(
        timeout=60_000)
    spec = httpx2.get(f"{server.base}/openapi.json", timeout=30).json()
    ops = sum(m in ("get", "post", "put", "delete", "patch")
              for item in spec["paths"].values() for m in item)
    expect(page.locator(".swagger-ui .opblock")).to_have_count(ops)
    expect(page.locator(".swagger-ui .authorize")).to_be_visible()  # the bearer scheme
    assert not outside, f"the docs asked the internet for {outside}"
