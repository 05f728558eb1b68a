"""Speakers on a bad Wi-Fi (issue 47, item 7): a real speaker page in headless Chromium behind an
impaired link to a real `yomite serve`, beside a reference speaker on a clean link.

The network (tests/netns.py): the server runs in namespace `a`; namespace `b` holds a relay
(tests/delayrelay.py) to it. Chromium runs in the root namespace (the test's): the reference
speaker opens the server's own address, the "Wi-Fi" speaker the relay's, so all its traffic
(page, clips, WebSocket) crosses b. An outage is a packet filter in b that drops everything
between b and the root namespace, both ways, without a reset (as a Wi-Fi that drops out); jitter
is the relay's: each chunk's delay drawn anew in 80 ± 40 ms, in order within a connection.

- A 3 s outage mid-verse: the Wi-Fi speaker keeps playing the verse under way through it (it
  used to fade out 3 s after its last sync answer and sound again 0.15-2.35 s after the link
  came back), is back in step with the reference within 2 s of the link's return, and every
  clip it never played is counted in its `missed`.
- 80 ± 40 ms of jitter: the two speakers' estimates of the server's timeline agree within
  5 ms p99 (they differed by 7.2 ms p50, 22.5 ms p99 against a wired speaker), and a hold
  reaches the Wi-Fi speaker as fast as the network allows: it acts on each stop no later after
  the wired one than the relay's longest delay and a margin (it was p50 70-380 ms, up to 1.1 s).
"""

from __future__ import annotations

import os
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx2
import numpy as np
import pytest
from playwright.sync_api import Page, expect, sync_playwright

from tests import netns
from tests.chromium import CHROMIUM, CHROMIUM_ARGS, require_chromium
from tests.delayrelay import Relay
from tests.serverproc import Server, wait_rendered
from tests.speakers import (
    ScheduleLog,
    SpeakerBrowser,
    TimelineMap,
    loud,
    pct,
    speaker_link,
)

pytestmark = [pytest.mark.browser, pytest.mark.server, pytest.mark.audio]

RATE = 48000
TOKEN = "speaker-link-operator-token-0123456789"
CACHE = Path(os.environ.get("YOMITE_TEST_CACHE", "/tmp/yomite-test-cache"))
CONFIG: dict[str, Any] = {
    "match": {"memorise_s": 1, "cards": 2,
              "gaps": {"after_call_s": 0.4, "between_verses_s": 0.5, "between_cards_s": 0.6,
                       "repeat_s": 0.5}},
    # slow: an upper verse lasts 5.4 s or more, so a 3 s outage fits inside one
    "voice": {"engine": "openjtalk", "cache_dir": str(CACHE), "speed": 0.45},
    "audio": {"output": "null"},
    "server": {"channels": [{"name": "main", "output": "browser"}]},
}
OUTAGE_S_IN = 3.0  # an outage this short falls within one verse
BACK_S = 2.0  # in step again this long after the link returns
STEP_MS = 50.0  # in step: the Wi-Fi speaker's sound within this of the reference's, a bound of
#                 behaviour on a busy machine (measured: 16 ms at most); a speaker that rejoined
#                 from its own load time, or restarted the verse, is 100s of ms off
GAP_MS = 100.0  # the longest the Wi-Fi speaker may be silent where the reference sounds, in the
#                 verse the outage falls in (the old page was silent for 0.6 s or more there)
JITTER_P99_MS = 5.0
RETURN_S = 2.0  # the return: the windows from BACK_S to BACK_S + this after it are all in step
#                 (6 s once: a window 5 s later was 151 ms off under a fresh clone's load, as
#                 windows are now and then with no outage; those fall under the 1 in 10)


def _require() -> None:
    require_chromium()
    if not os.environ.get("PULSE_SERVER"):
        pytest.fail("PULSE_SERVER not set: run the browser tests with `make test`, which starts "
                    "scripts/audio-harness.sh and sources its env.sh")


@pytest.fixture
def net() -> Iterator[netns.Net]:
    netns.require()
    with netns.Net() as n:
        yield n


def _api(server: Server, method: str, path: str, **kw: Any) -> dict[str, Any]:
    r = httpx2.request(method, server.base + path, headers=server.op, timeout=30, **kw)
    assert r.status_code == 200, r.text
    out: dict[str, Any] = r.json()
    return out


def _match(server: Server) -> dict[str, Any]:
    m: dict[str, Any] = _api(server, "GET", "/api/channels/main")["match"]
    return m


def _wait(server: Server, what: str, ok: Any, timeout_s: float = 60) -> dict[str, Any]:
    deadline = time.monotonic() + timeout_s
    m: dict[str, Any] = {}
    while time.monotonic() < deadline:
        m = _match(server)
        if m and ok(m):
            return m
        time.sleep(0.02)
    raise AssertionError(f"no {what} within {timeout_s} s; last state: {m}")


def _links(server: Server, relay: Relay) -> tuple[str, str, str]:
    """The speaker link on the clean path, the same on the relay's, and the key."""
    link, key = speaker_link(server.base, server.op)
    path = "/" + link.split("://", 1)[1].split("/", 1)[1]
    return f"{server.base}{path}", f"http://{relay.host}:{relay.port}{path}", key


def _start(tmp: Path, net: netns.Net, jitter: bool) -> tuple[Server, Relay, netns.Host]:
    a, b = net.host("a"), net.host("b")
    server = Server(tmp, CONFIG, TOKEN, host=a.ip, netns=a.ns).start()
    try:
        relay = Relay((b.ip, 0), (a.ip, server.port), 80 if jitter else 0, popen=b.popen,
                      jitter_ms=40 if jitter else 0, seed=47).start()
    except BaseException:
        server.stop()
        raise
    return server, relay, b


# ------------------------------------------------------------------------------- the outage
@pytest.mark.parametrize("outage_s", [3.0, 12.0])
def test_an_outage_mid_verse_plays_on_and_is_back_in_step_within_2_s(
        tmp_path: Path, net: netns.Net, outage_s: float) -> None:
    _require()
    server, relay, b = _start(tmp_path, net, jitter=False)
    clean, wifi_link, key = _links(server, relay)
    ws_url = f"{server.base.replace('http', 'ws', 1)}/ws/channels/main"
    schedule = ScheduleLog(f"{ws_url}?audience=speaker&token={key}")
    try:
        with sync_playwright() as pw:
            ref = SpeakerBrowser(pw, "link_ref", tmp_path / "ref.wav")
            wifi = SpeakerBrowser(pw, "link_wifi", tmp_path / "wifi.wav")
            try:
                _outage(server, b, net, ref, wifi, clean, wifi_link, schedule, ws_url,
                        outage_s)
            finally:
                b.heal()
                errors = [e for e in ref.errors + wifi.errors
                          if "WebSocket" not in e and "Failed to load" not in e]
                ref.close()
                wifi.close()
        assert not errors, errors
    finally:
        schedule.close()
        relay.stop()
        server.stop()


def _outage(server: Server, b: netns.Host, net: netns.Net, ref: SpeakerBrowser,
            wifi: SpeakerBrowser, clean: str, wifi_link: str, schedule: ScheduleLog,
            ws_url: str, outage_s: float) -> None:
    pr, pw_ = ref.open(clean), wifi.open(wifi_link)
    for p in (pr, pw_):
        expect(p.locator("#conn")).to_have_attribute("data-state", "online", timeout=20_000)
    ref.enable(20)
    wifi.enable(20)
    _api(server, "POST", "/api/channels/main/match", json={"colors": ["blue"], "seed": 7})
    wait_rendered(server)
    tmap = TimelineMap.measure(ws_url)
    ref.record()
    wifi.record()
    try:
        _api(server, "POST", "/api/channels/main/match/start")

        # a short outage inside a verse (4.6 s or more to go); a long one from late in a verse
        # (1-2.5 s to go), so that the next verse begins and ends within it (it is missed)
        left = (OUTAGE_S_IN + 1.6, 1e9) if outage_s <= OUTAGE_S_IN else (1.0, 2.5)

        def verse(m: dict[str, Any]) -> bool:
            seg = m.get("segment") or {}
            now = time.monotonic() + tmap.offset
            return (not m["paused"] and seg.get("kind") in ("verse", "prelude")
                    and seg["started_s"] + 0.2 <= now
                    and left[0] < (seg["ends_s"] or 0) - now < left[1])

        m = _wait(server, f"a verse with {left[0]:.1f}-{left[1]:.1f} s to go", verse)
        verse_end = tmap.mono(m["segment"]["ends_s"])
        cut_at = time.monotonic()
        b.cut(net.gateway)
        time.sleep(outage_s)
        b.heal()
        back_at = time.monotonic()
        _wait(server, "the end", lambda m: m["phase"] == "finished", 120)
        time.sleep(1.0)
    finally:
        cap_r, cap_w = ref.stop_recording(), wifi.stop_recording()
    st = wifi.stats()
    wall = time.time() - time.monotonic()
    hellos = [(st["timeOrigin"] + h) / 1000 - wall - back_at for h in st.get("hellos", [])]
    print(f"\noutage {cut_at:.2f}..{back_at:.2f}, verse ends {verse_end:.2f}; Wi-Fi speaker: "
          f"hello on a new socket {[round(h, 2) for h in hellos if h > -outage_s]} s after the "
          f"link returned, "
          f"quiet {st.get('quiet')}, new sockets {st.get('renewals')}, played on "
          f"{st.get('heldOn')}, withheld {st.get('withheld')}, late {st['late']}, missed "
          f"{st['missed']} {st.get('missedIds')}, resyncs {st['resyncs']}")

    # 1. the verse under way sounds on through the outage: no gap where the reference sounds
    gap = _longest_gap(cap_r, cap_w, cut_at + 0.05, min(verse_end, back_at) - 0.1)
    print(f"longest silence of the Wi-Fi speaker where the reference sounds, in the verse of "
          f"the outage: {gap:.0f} ms")
    assert gap <= GAP_MS, f"the Wi-Fi speaker fell silent for {gap:.0f} ms in the outage's verse"

    # 2. in step within 2 s of the link's return: every 0.5 s window from then on where the
    # reference sounds, the Wi-Fi speaker sounds the same within STEP_MS
    # reference speaker's steps too: a busy machine's output underruns now and then, and a page
    # follows such a step within about a second (tests/test_speaker_pages.py counts clips just
    # after one apart): windows within a second after one are left out
    steps = _steps(st, wall) + _steps(ref.stats(), wall)
    lags: list[float] = []
    lag_at: list[float] = []  # each window's start, after the link's return (s)
    skipped = 0
    t = back_at + BACK_S
    end = min(cap_r.t_line(len(cap_r.x)), cap_w.t_line(len(cap_w.x))) - 0.6
    while t < end:
        if any(t - 1.0 < g < t + 0.5 for g in steps):
            skipped += 1
        elif _loud_share(cap_r, t, t + 0.5) > 0.3:
            lags.append(_lag(cap_r, cap_w, t, t + 0.5))
            lag_at.append(t - back_at)
            if abs(lags[-1]) > 10:
                print(f"  at +{t - back_at:.1f} s: {lags[-1]:+.1f} ms (sound: reference "
                      f"{_loud_share(cap_r, t, t + 0.5):.2f}, Wi-Fi "
                      f"{_loud_share(cap_w, t, t + 0.5):.2f})")
        t += 0.5
    print(f"after the link returned (+{BACK_S} s): {len(lags)} windows ({skipped} left out after "
          f"{len(steps)} output steps), Wi-Fi - reference "
          f"p50 {pct(lags, 50):+.2f} ms, max |{max((abs(x) for x in lags), default=0):.2f}| ms")
    assert len(lags) >= 4, "too little reading after the outage to compare"
    # back in step: every window of the first RETURN_S (at least the first four) in step. Later
    # in the match a window is off now and then on a loaded machine whether or not there was an
    # outage (an output stall neither page reported as a step: one window in 53 at +16.5 s,
    # 242 ms, with 4 workers and two helpers' tests on 2 cores): those may be 1 in 10
    first = max(4, sum(1 for a in lag_at if a < BACK_S + RETURN_S))
    assert max(abs(x) for x in lags[:first]) <= STEP_MS, [round(x, 1) for x in lags[:first]]
    off = [round(x, 1) for x in lags[first:] if abs(x) > STEP_MS]
    assert len(off) <= len(lags[first:]) // 10, (off, len(lags[first:]))

    # 3. nothing missed uncounted: every clip the schedule listed that was not cut before it
    # began was placed by the Wi-Fi speaker or counted as missed
    placed = {e["id"] for e in st["log"]}
    uncounted = [c["id"] for c in schedule.clips.values()
                 if not schedule.cancelled(c) and c["id"] not in placed
                 and c["id"] not in st.get("missedIds", [])
                 and tmap.mono(c["at_s"]) + c["duration_s"] < end]
    assert not uncounted, f"clips neither played nor counted as missed: {uncounted}"
    if outage_s > OUTAGE_S_IN:  # a whole verse was read in the outage: missed, and said
        assert st["missed"] > 0


def _steps(st: dict[str, Any], wall: float) -> list[float]:
    """When a page saw its output's delay step (monotonic seconds)."""
    return [(st["timeOrigin"] + j["perf"]) / 1000 - wall for j in st["jumps"]]


def _frames(cap: Any, start: float, end: float) -> np.ndarray:
    a, b = max(0, cap.frame_at(start)), min(len(cap.x), cap.frame_at(end))
    return np.asarray(loud(cap)[a:b])


def _blocks(cap: Any, start: float, end: float, ms: float = 10.0) -> np.ndarray:
    """Whether each `ms` block of [start, end] has sound."""
    x = _frames(cap, start, end)
    n = int(48 * ms)
    k = len(x) // n
    return np.asarray(x[:k * n].reshape(k, n).any(axis=1))


def _longest_gap(ref: Any, other: Any, start: float, end: float) -> float:
    """The longest run (ms) of 10 ms blocks where `ref` sounds and `other` does not, allowing
    a 30 ms pause of the reference within it (a consonant's silence)."""
    r, o = _blocks(ref, start, end), _blocks(other, start, end)
    k = min(len(r), len(o))
    run = best = quiet_ref = 0
    for i in range(k):
        if o[i]:
            run = quiet_ref = 0
        elif r[i]:
            run += 1 + quiet_ref
            quiet_ref = 0
            best = max(best, run)
        elif run:
            quiet_ref += 1
            if quiet_ref > 3:
                run = quiet_ref = 0
    return best * 10.0


def _loud_share(cap: Any, start: float, end: float) -> float:
    x = _frames(cap, start, end)
    return float(x.mean()) if len(x) else 0.0


def _lag(a: Any, b: Any, start: float, end: float, max_lag_ms: float = 250) -> float:
    """How much later b plays what a plays over [start, end] (ms), within ± max_lag_ms: the
    cross-correlation's peak on every 6th sample (8 kHz, 0.125 ms steps)."""
    step = 6
    n = int(max_lag_ms * RATE / 1000 / step)
    ia, ib = a.frame_at(start), b.frame_at(start)
    length = a.frame_at(end) - ia
    x = a.x[ia:ia + length:step].astype(np.float64)
    lo = ib - n * step
    y = b.x[lo:ib + length + n * step:step].astype(np.float64)
    if lo < 0 or len(y) < len(x) + 2 * n or not np.any(x):
        raise AssertionError("the captures do not cover the interval")
    corr = np.correlate(y, x, mode="valid")  # corr[k]: b shifted by (k - n) steps
    return float((int(np.argmax(corr)) - n) * step * 1000 / RATE)


# ------------------------------------------------------------------------------- the jitter
def test_a_speaker_behind_80_40_ms_of_jitter_keeps_the_wired_ones_time_within_5_ms(
        tmp_path: Path, net: netns.Net) -> None:
    require_chromium()
    server, relay, _b = _start(tmp_path, net, jitter=True)
    clean, wifi_link, _key = _links(server, relay)
    try:
        with sync_playwright() as pw:
            browser = pw.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_ARGS)
            try:
                wired, wifi = browser.new_page(), browser.new_context().new_page()
                wired.goto(clean)
                wifi.goto(wifi_link)
                for p in (wired, wifi):
                    p.wait_for_function("() => window.Y && Y.speaker && Y.speaker.timeline() "
                                        "!== null", timeout=30_000)
                    p.click("#enable")  # an AudioContext: a page that plays acts on stops
                diffs, rtts = _compare(wired, wifi, warm_s=15.0, seconds=40.0)
                extra = _holds(server, wired, wifi)
            finally:
                browser.close()
    finally:
        relay.stop()
        server.stop()
    print(f"\n80 ± 40 ms each way: Wi-Fi speaker's timeline - wired one's over {len(diffs)} "
          f"samples: |p50| {pct(np.abs(diffs).tolist(), 50):.2f} ms, p99 "
          f"{pct(np.abs(diffs).tolist(), 99):.2f} ms, max {np.abs(diffs).max():.2f} ms; "
          f"Wi-Fi round trip {min(rtts):.0f} ms at best")
    print(f"a hold acted on by the Wi-Fi speaker after the wired one, {len(extra)} holds: "
          f"{[round(x, 1) for x in extra]} ms (the relay holds each chunk 40-120 ms)")
    assert min(rtts) >= 80, "the relay did not delay the Wi-Fi speaker's link"
    assert pct(np.abs(diffs).tolist(), 99) <= JITTER_P99_MS
    # a hold reaches it as fast as the network allows: after the wired speaker by about the
    # relay's delay (bounds below; the red team measured p50 70-380 ms extra, up to 1.1 s)
    assert len(extra) >= HOLDS - 1, extra
    assert float(np.median(extra)) <= HOLD_EXTRA_P50_MS, extra
    assert max(extra) <= HOLD_EXTRA_MAX_MS, extra


HOLDS = 4
# the relay's longest one-way delay is 120 ms, but the relay is a Python process that a loaded
# machine delays too (measured: 40-97 ms extra idle; 45-225 ms, median 158, in a fresh clone's
# suite on two cores): bounds with room for that, still under the red team's figures
HOLD_EXTRA_P50_MS = 250.0
HOLD_EXTRA_MAX_MS = 700.0


def _holds(server: Server, wired: Page, wifi: Page) -> list[float]:
    """A match, and a hold in each of its first HOLDS verses (0.6 s into it, held 0.5 s): how
    much later than the wired speaker the Wi-Fi speaker acted on each stop (ms), each on its
    own estimate of the timeline (the same within 5 ms: above)."""
    _api(server, "POST", "/api/channels/main/match", json={"colors": ["blue"], "seed": 3})
    wait_rendered(server)
    _api(server, "POST", "/api/channels/main/match/start")
    seen: set[tuple[Any, Any]] = set()
    for _ in range(HOLDS):
        m = _wait(server, "a verse not held before", lambda m: not m["paused"] and (
            m.get("segment") or {}).get("kind") in ("verse", "prelude") and (
            m["segment"].get("card"), m["segment"].get("verse")) not in seen, 60)
        seen.add((m["segment"].get("card"), m["segment"].get("verse")))
        time.sleep(0.6)
        _api(server, "PUT", "/api/channels/main/holds/@operator", json={"name": "test"})
        time.sleep(0.5)
        _api(server, "DELETE", "/api/channels/main/holds/@operator")
    time.sleep(1.0)
    lags = [{round(x["stop_s"], 4): x["lag_ms"] for x in p.evaluate("Y.speaker.stats()")[
        "stopLags"]} for p in (wired, wifi)]
    print(f"\nstop lags (the page's timeline when it acted on a stop - the stop's): wired "
          f"{[round(v, 1) for v in lags[0].values()]} ms, Wi-Fi "
          f"{[round(v, 1) for v in lags[1].values()]} ms")
    return [lags[1][k] - lags[0][k] for k in lags[0] if k in lags[1]]


# the page's estimate of the timeline less this machine's clock (ms), with its best round trip:
# constant for a page whose estimate holds, whatever the moment it is read
READ = """() => {
  const wall = performance.timeOrigin + performance.now();
  const s = Y.speaker.timeline();
  return s === null ? null : [s * 1000 - wall, Y.speaker.stats().rtt];
}"""


def _compare(wired: Page, wifi: Page, warm_s: float, seconds: float) -> tuple[np.ndarray,
                                                                              list[float]]:
    time.sleep(warm_s)  # the Wi-Fi page's estimate settles (its probes fill the window)
    diffs: list[float] = []
    rtts: list[float] = []
    deadline = time.monotonic() + seconds
    for _ in range(int(seconds * 20)):  # bounded in count and in time
        if time.monotonic() > deadline:
            break
        w, f = wired.evaluate(READ), wifi.evaluate(READ)
        if w is not None and f is not None:
            diffs.append(f[0] - w[0])
            rtts.append(f[1])
        time.sleep(0.1)
    assert len(diffs) >= 100, f"only {len(diffs)} readings of both pages"
    return np.asarray(diffs), rtts
