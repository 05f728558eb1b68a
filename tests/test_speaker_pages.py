"""The speaker page in real headless Chromium: two speakers (two Chromium processes, each playing
into a PulseAudio null sink of its own, both recorded) read a whole match from a real
`yomite serve` whose channel has browser speakers only; what they played is compared with the
server's timeline: every clip heard on both speakers at its time, the silence after each hold,
the resumed verse from its start, a page reloaded in the middle of a verse that rejoins in step,
and a browser frozen for 2 s that catches up. The bounds are what a working speaker keeps on a
busy machine and a broken one cannot (see the constants); the figures against the 5 ms targets
are printed here and measured in bench/speaker_sync.py.
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
from playwright.sync_api import expect, sync_playwright

from .chromium import require_chromium
from .serverproc import Server, wait_rendered
from .speakers import (
    ClipAudio,
    ScheduleLog,
    SpeakerBrowser,
    TimelineMap,
    lag_ms,
    last_sound,
    loud,
    onset,
    pct,
    speaker_link,
)
from .test_pages import shots_dir

pytestmark = [pytest.mark.browser, pytest.mark.server, pytest.mark.audio]

TOKEN = "speaker-test-operator-token-0123456789"
CACHE = Path(os.environ.get("YOMITE_TEST_CACHE", "/tmp/yomite-test-cache"))
SHOTS = shots_dir()
LEAD_IN_S = 0.4


def _require_environment() -> None:
    require_chromium()
    if not os.environ.get("PULSE_SERVER"):
        pytest.fail("PULSE_SERVER not set: run the browser tests with `make test`, which starts "
                    "scripts/audio-harness.sh and sources its env.sh")


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Server]:
    _require_environment()
    s = Server(tmp_path_factory.mktemp("speaker"), {
        "match": {"memorise_s": 1, "cards": 4,
                  "gaps": {"after_call_s": 0.4, "between_verses_s": 0.5,
                           "between_cards_s": 0.6, "repeat_s": 0.5},
                  "resume": {"lead_in_s": LEAD_IN_S}},
        # slow enough that a verse outlasts a page's reload on a busy machine (the rejoin)
        "voice": {"engine": "openjtalk", "cache_dir": str(CACHE), "speed": 0.45},
        "audio": {"output": "null"},
        "server": {"channels": [{"name": "main", "output": "browser"}]},
    }, TOKEN).start()
    try:
        yield s
    finally:
        client = _clients.pop(s.base, None)
        if client is not None:
            client.close()
        s.stop()


_clients: dict[str, httpx2.Client] = {}


def api(server: Server, method: str, path: str, **kw: Any) -> dict[str, Any]:
    # one client (one connection) per server: a new client costs tens of milliseconds before
    # its first byte (its TLS context), which a hold -> silence figure must not count
    c = _clients.get(server.base)
    if c is None:
        c = _clients[server.base] = httpx2.Client(base_url=server.base, headers=server.op,
                                                   timeout=30)
    r = c.request(method, path, **kw)
    assert r.status_code == 200, r.text
    out: dict[str, Any] = r.json()
    return out


def match_state(server: Server) -> dict[str, Any]:
    m: dict[str, Any] = api(server, "GET", "/api/channels/main")["match"]
    return m


def wait_for(server: Server, what: str, ok: Any, timeout_s: float = 40) -> dict[str, Any]:
    deadline = time.monotonic() + timeout_s
    m: dict[str, Any] = {}
    while time.monotonic() < deadline:
        m = match_state(server)
        if m and ok(m):
            return m
        time.sleep(0.02)
    raise AssertionError(f"no {what} within {timeout_s} s; last state: {m}")


def in_verse(m: dict[str, Any], tmap: TimelineMap, verse: str | None = None,
             card: int | None = None, min_s: float = 0.3, left_s: float = 0.3) -> bool:
    """A verse is sounding, has been for `min_s` and has `left_s` still to go (the state's
    times are the timeline's); `card`: that card or a later one (a moment the test was too
    slow to see, at high load, is taken in the next card)."""
    seg = m.get("segment") or {}
    now = time.monotonic() + tmap.offset
    return (not m["paused"] and seg.get("kind") in ("verse", "prelude")
            and (verse is None or seg.get("verse") == verse)
            and (card is None or (seg.get("card") or 0) >= card)
            and seg["started_s"] + min_s <= now < (seg["ends_s"] or 0) - left_s)


# Bounds of this test (the figures against the 5 ms targets are printed here and measured in
# bench/speaker_sync.py; a test of behaviour must not hope for a quiet machine). Each is far
# beyond what load does to a speaker that works (a browser's underrun is followed within
# ~120 ms, README) and far within what each bug does:
PLACE_MS = 150.0  # a clip sounds at its time: a page playing on the message's arrival would be
#                   the lead (500 ms) early, one that lost its clock after a freeze 2 s late
BIAS_MS = 20.0  # the median against the timeline: a page ignoring its output's delay
#                 (getOutputTimestamp) would sit its 36-45 ms late
SILENCE_MS = 700.0  # a hold silences both speakers: each hold is made with 1 s or more of its
#                     verse to come, which a page that played on would sound
REJOIN_MS = 50.0  # a reloaded page picks the verse up in step: one that started it from the
#                   top or from its load time would be seconds or hundreds of ms off. Compared
REJOIN_SETTLE_S = 1.0  # once the page has had this long to settle: right after a reload its
#                   output's timestamps are new, and a working page was seen 158 ms off for a
#                   moment (also on an idle machine), then moved in step by its own checks
FREEZE_S = 2.0
RELOAD_TRIES = 2  # B's reload in card 2's upper verse, and once more in the next card's


def test_two_speakers_read_a_match_in_step_with_the_timeline(
        server: Server, tmp_path: Path) -> None:
    ws_url = f"ws://127.0.0.1:{server.port}/ws/channels/main"
    link, key = speaker_link(server.base, server.op)
    schedule = ScheduleLog(f"{ws_url}?audience=speaker&token={key}")
    clips = ClipAudio(server.base, tmp_path, key)
    with sync_playwright() as pw:
        a = SpeakerBrowser(pw, "spk_a", tmp_path / "a.wav")
        b = SpeakerBrowser(pw, "spk_b", tmp_path / "b.wav")
        try:
            run_match(server, a, b, schedule, clips, ws_url, link)
        finally:
            schedule.close()
            errors = a.errors + b.errors
            a.close()
            b.close()
    assert not errors, errors


def run_match(server: Server, a: SpeakerBrowser, b: SpeakerBrowser, schedule: ScheduleLog,
              clips: ClipAudio, ws_url: str, link: str) -> None:
    # both open the console's speaker link (it holds the key); B's reload later finds the key
    # the page kept
    pa, pb = a.open(link), b.open(link)
    for p in (pa, pb):
        expect(p.locator("#enable")).to_be_visible()
        expect(p.locator("#conn")).to_have_attribute("data-state", "online")
    a.enable()
    b.enable()
    print(f"\nreal-time audio threads: A {a.promoted}, B {b.promoted}")
    expect(pa.locator("#sound")).to_have_attribute("data-state", "silent")
    api(server, "POST", "/api/channels/main/match", json={"colors": ["blue"], "seed": 11})
    wait_rendered(server)
    tmap = TimelineMap.measure(ws_url)
    a.record()
    b.record()
    holds: list[float] = []
    resumes: list[float] = []
    try:
        api(server, "POST", "/api/channels/main/match/start")
        # a hold in the prelude's upper verse and in card 1's lower verse, early in the verse
        # (each step in the first card it can have from there: of the 4 cards, one is to spare
        # for a moment missed at high load and one for B's second reload)
        card = 0
        for verse, first in (("kami", 0), ("shimo", 1)):
            least = max(first, card)
            m = wait_for(server, f"card {least}'s {verse} or a later one",
                         lambda m, v=verse, c=least: in_verse(m, tmap, v, c, left_s=1.0))
            card = m["segment"]["card"]
            expect(pa.locator("#sound")).to_have_attribute("data-state", "playing")
            holds.append(time.monotonic())
            api(server, "PUT", "/api/channels/main/holds/@operator", json={"name": "test"})
            expect(pa.locator("#sound")).to_have_attribute("data-state", "paused")
            time.sleep(0.5)  # held for a while, as a referee would
            resumes.append(time.monotonic())
            api(server, "DELETE", "/api/channels/main/holds/@operator")
        # card 2's upper verse: speaker B reloads as it begins and rejoins in the middle of it
        # (at speed 0.45 an upper verse lasts 5.4 s or more: a reload and rejoin took up to
        # 3.2 s at load 13, and the rejoined page is compared 1 s after it sounds again). A
        # reload that outlasted its verse (12 s once, on a loaded CI machine: the old page
        # played on until Chromium swapped it) is made again in the next card's upper verse
        reloads: list[tuple[float, float]] = []
        for _ in range(RELOAD_TRIES):
            want = max(2, card + 1)
            m = wait_for(server, f"card {want}'s upper verse or a later one",
                         lambda m, c=want: in_verse(m, tmap, "kami", c, 0.05, left_s=0.0))
            card = m["segment"]["card"]
            t_reload = time.monotonic()
            pb.reload()
            t_loaded = time.monotonic()
            b.enable()
            reloads.append((t_reload, time.monotonic()))
            left = tmap.mono(m["segment"]["ends_s"]) - reloads[-1][1]
            print(f"speaker B reloaded in {t_loaded - t_reload:.2f} s, ready in "
                  f"{reloads[-1][1] - t_reload:.2f} s, {left:.2f} s before its verse's end")
            if left >= REJOIN_SETTLE_S + 0.6:
                break
        expect(pa.locator("#sound")).to_have_attribute("data-state", "playing")
        SHOTS.mkdir(parents=True, exist_ok=True)
        pa.screenshot(path=str(SHOTS / "speaker-desktop.png"))
        # card 2's lower verse: speaker A's whole browser hangs for 2 s, then goes on
        wait_for(server, f"card {card}'s lower verse or a later one",
                 lambda m: in_verse(m, tmap, "shimo", card, 0.2))
        trouble = ("steps", "resyncs", "missed", "late")
        before = min(api(server, "GET", "/api/channels/main")["speaker_health"],
                     key=lambda r: r["number"])  # A joined first; B again on its reload
        frozen_at = time.monotonic()
        thawed_at = a.freeze(FREEZE_S)
        wait_for(server, "the end", lambda m: m["phase"] == "finished", 60)
        # each speaker reports itself; A's freeze is said on the operator's console
        console = a.browser.new_page(locale="ja-JP")
        console.goto(f"{server.base}/console#token={TOKEN}")
        health = console.locator("#speakers .speaker-health")
        expect(health).to_have_count(2, timeout=15_000)
        expect(console.locator("#speakers .speaker-health.bad").first).to_be_visible(
            timeout=15_000)
        reports = api(server, "GET", "/api/channels/main")["speaker_health"]
        print(f"speaker reports after A's freeze: {reports}")
        assert len(reports) == 2, reports
        after = next(r for r in reports if r["number"] == before["number"])
        assert sum(after[k] for k in trouble) > sum(before[k] for k in trouble), (before, after)
        console.close()
    finally:
        cap_a, cap_b = a.stop_recording(), b.stop_recording()
    check_audio(server, cap_a, cap_b, schedule, clips, tmap, holds, resumes,
                Disturbed(reloads, frozen_at, thawed_at), a.stats(), b.stats())


class Disturbed:
    """When the test itself disturbed a speaker: B's reload, A's freeze."""

    def __init__(self, reloads: list[tuple[float, float]], frozen_at: float,
                 thawed_at: float) -> None:
        # B's reloads (from, ready): the last is the one whose rejoin is compared
        self.reloads = reloads
        self.reload_from, self.reload_at = reloads[-1]
        self.frozen_at, self.thawed_at = frozen_at, thawed_at

    def of_a(self, t: float) -> bool:
        return self.frozen_at - 0.5 < t < self.thawed_at + 1.0

    def of_b(self, t: float) -> bool:
        return any(f - 0.5 < t < at + 2.0 for f, at in self.reloads)


def check_audio(server: Server, cap_a: Any, cap_b: Any, schedule: ScheduleLog, clips: ClipAudio,
                tmap: TimelineMap, holds: list[float], resumes: list[float],
                dist: Disturbed, stats_a: dict[str, Any], stats_b: dict[str, Any]) -> None:
    log = api(server, "GET", "/api/channels/main/match/log")
    timeline = log["timeline"]
    # every clip sent from its start (offset 0), not cancelled, and over before the recording
    rows = []
    for c in sorted(schedule.clips.values(), key=lambda c: c["at_s"]):
        if c["offset_s"] != 0 or schedule.cancelled(c):
            continue
        expected = tmap.mono(c["at_s"]) + clips.first_loud(c["url"]) / 48000
        if expected + c["duration_s"] > cap_a.t_line(len(cap_a.x)) - 0.1:
            continue
        rows.append((c, expected, onset(cap_a, expected), onset(cap_b, expected)))
    assert len(rows) >= 10, f"only {len(rows)} clips in the capture"
    # every speaker sounded every clip, but where the test itself silenced it
    for c, e, _, _ in rows:
        for cap, name, disturbed in ((cap_a, "A", dist.of_a), (cap_b, "B", dist.of_b)):
            if not disturbed(e):
                assert last_sound(cap, e - 0.1, e + c["duration_s"]) is not None, (
                    f"speaker {name} did not play clip {c['id']} at all")
    # the output of a busy machine underruns now and then: the page sees its output clock step
    # and follows it (see speaker.js); clips just after such a step are counted apart
    steps_a, steps_b = glitches(stats_a), glitches(stats_b)

    def clean(e: float, steps: list[float], disturbed: Any) -> bool:
        return not disturbed(e) and not any(-1.0 < e - g < 0.05 for g in steps)

    err_a = [(oa - e) * 1000 for _, e, oa, _ in rows if oa is not None and not dist.of_a(e)]
    err_b = [(ob - e) * 1000 for _, e, _, ob in rows if ob is not None and not dist.of_b(e)]
    bias = pct(err_a + err_b, 50)
    fine = [(oa - e) * 1000 for _, e, oa, _ in rows
            if oa is not None and clean(e, steps_a, dist.of_a)] + [
        (ob - e) * 1000 for _, e, _, ob in rows if ob is not None and clean(e, steps_b,
                                                                             dist.of_b)]
    between = [(ob - oa) * 1000 for _, e, oa, ob in rows if oa is not None and ob is not None
               and clean(e, steps_a + steps_b, lambda t: dist.of_a(t) or dist.of_b(t))]
    stop_ms: list[float] = []
    for th, tr in zip(holds, resumes, strict=True):
        for cap in (cap_a, cap_b):
            end = last_sound(cap, th - 1.0, tr)
            assert end is not None, "no sound before the hold"
            stop_ms.append((end - th) * 1000)
    print(f"\nspeakers: {len(rows)} clips; onset error against the timeline p50 {bias:+.2f} "
          f"ms, clean clips ({len(fine)}) p1..p99 {pct(fine, 1):+.2f}..{pct(fine, 99):+.2f} ms "
          f"(the 5 ms targets: bench/speaker_sync.py); B - A clean ({len(between)}) p50 "
          f"{pct(between, 50):+.2f} max |{max((abs(x) for x in between), default=0):.2f}| ms; "
          f"hold -> silence {[round(x, 1) for x in stop_ms]} ms; timeline probe rtt "
          f"{tmap.rtt_ms:.2f} ms; capture clock {cap_a.rate_ppm:+.0f} ppm\n"
          f"  A: {summary(stats_a)}\n  B: {summary(stats_b)}")
    assert abs(bias) <= BIAS_MS, f"onsets {bias:+.1f} ms off the timeline"
    placed = [x - bias for x in err_a + err_b]
    assert max(abs(x) for x in placed) <= PLACE_MS, f"onset errors around the bias: {placed}"
    assert max(stop_ms) <= SILENCE_MS, f"hold -> silence: {stop_ms} ms"
    check_resume(timeline, schedule, clips, tmap, cap_a, cap_b, bias)
    check_rejoin(cap_a, cap_b, dist, schedule, tmap)
    # after the freeze, speaker A is back in step: every clip that starts a second after the
    # thaw is placed like the others (checked above) and heard (checked above); at least one
    after = [r for r in rows if r[1] > dist.thawed_at + 1.0 and r[2] is not None]
    assert after, "no clip after speaker A's freeze to show that it caught up"
    print(f"after A's freeze of {FREEZE_S} s: {len(after)} clips, onset errors "
          f"{[round((r[2] - r[1]) * 1000 - bias, 1) for r in after]} ms around the bias")


def glitches(st: dict[str, Any]) -> list[float]:
    """When the page saw its output's delay step (monotonic seconds)."""
    wall = time.time() - time.monotonic()
    return [(st["timeOrigin"] + j["perf"]) / 1000 - wall for j in st["jumps"]]


def summary(st: dict[str, Any]) -> str:
    return (f"rtt {st['rtt']:.2f} ms, drift {st['drift'] * 1e6:.0f} ppm, latency "
            f"{(st['latency'] or 0) * 1000:.0f} ms, placed {st['placed']} (late {st['late']}), "
            f"resyncs {st['resyncs']}, output steps {[round(j['ms'], 1) for j in st['jumps']]}")


def check_resume(timeline: list[dict[str, Any]], schedule: ScheduleLog, clips: ClipAudio,
                 tmap: TimelineMap, cap_a: Any, cap_b: Any, bias_ms: float) -> None:
    """After each hold the cut verse is read again from its start (restart_verse), at the
    frame the journal says, on both speakers."""
    cuts = [i for i, r in enumerate(timeline) if r.get("cut") and r["kind"] in
            ("verse", "prelude")]
    assert len(cuts) == 2, timeline
    for i in cuts:
        cut = timeline[i]
        again = next(r for r in timeline[i + 1:] if r["kind"] in ("verse", "prelude"))
        assert again["label"] == cut["label"] and again.get("from_s") is None
        c = next(c for c in schedule.clips.values()
                 if abs(c["at_s"] - again["start_s"]) < 1e-6)
        expected = tmap.mono(again["start_s"]) + clips.first_loud(c["url"]) / 48000
        for cap in (cap_a, cap_b):
            got = onset(cap, expected)
            assert got is not None and abs((got - expected) * 1000 - bias_ms) <= PLACE_MS, (
                f"the resumed {again['label']} sounded {(got - expected) * 1000:+.1f} ms off "
                f"the journal's frame (bias {bias_ms:+.1f} ms)" if got else "never resumed")


def resumed(cap: Any, start: float, end: float) -> float | None:
    """When sound comes back in `cap` after the first silence (50 ms or more) from `start`
    on, before `end` (the reloaded page goes quiet as it unloads, then rejoins)."""
    ld = loud(cap)[max(0, cap.frame_at(start)):max(0, cap.frame_at(end))]
    quiet = np.convolve(~ld, np.ones(int(0.05 * 48000)), "valid") >= int(0.05 * 48000)
    first = np.flatnonzero(quiet)
    if not first.size:
        return None
    after = np.flatnonzero(ld[first[0]:])
    return None if not after.size else cap.t_line(cap.frame_at(start) + first[0] + after[0])


def check_rejoin(cap_a: Any, cap_b: Any, dist: Disturbed, schedule: ScheduleLog,
                 tmap: TimelineMap) -> None:
    """The reloaded speaker picks card 2's upper verse up in the middle, in step with A."""
    reload_at = dist.reload_at
    c = next(c for c in schedule.clips.values() if not schedule.cancelled(c) and
             tmap.mono(c["at_s"]) < dist.reload_from < tmap.mono(c["at_s"]) + c["duration_s"])
    end = tmap.mono(c["at_s"]) + c["duration_s"]
    back = resumed(cap_b, dist.reload_from, end)
    assert back is not None, "the reloaded speaker stayed silent for the rest of the verse"
    print(f"rejoin: sound {(back - reload_at) * 1000:+.0f} ms from the page being ready, "
          f"{(end - back):.2f} s before the verse's end")
    if end - back >= 0.3:  # for the record: the first half second, before it settled
        early = lag_ms(cap_a, cap_b, back + 0.05, min(end, back + 0.6), max_lag_ms=300)
        print(f"rejoin: lag behind A over its first half second {early:+.2f} ms")
    start = max(back, reload_at) + REJOIN_SETTLE_S
    assert end - 0.05 - start >= 0.4, (
        f"the verse ended {end - reload_at:.2f} s after the reloaded page was ready: too soon "
        "to compare it (the reload is made as the verse begins)")
    # searched over ±1.5 s, so that a page off by its load time is found as such
    lag = lag_ms(cap_a, cap_b, start, min(end - 0.05, start + 1.5), max_lag_ms=1500)
    print(f"rejoin: lag behind A once settled {lag:+.2f} ms")
    assert abs(lag) <= REJOIN_MS, f"the rejoined speaker is {lag:+.2f} ms off A"


BUSY_S = 2.0  # the page's main thread is frozen this long (under the 3 s after which the page
#               itself would call its connection lost)


def test_a_hold_silences_a_speaker_whose_page_is_busy(server: Server, tmp_path: Path) -> None:
    """The stop does not wait for the page's main thread: its socket's worker closes the audio
    gate (an AudioWorklet) at once. Here the main thread is frozen (the debugger paused, so no
    script of the page runs, whatever the machine's load) for 2 s from 0.2 s before a hold made
    with 2.5 s of the verse to come: a page that stopped its clips itself would sound on until
    the freeze ends (1.8 s after the hold); the gate silences it in tens of ms. The hand goes
    down once the thread runs again; the page opens the gate and the resumed verse is heard.
    (A busy loop started by setTimeout began late on a loaded machine, and the hold was then
    handled by the page itself, or the resumed verse came into the window.)"""
    ws_url = f"ws://127.0.0.1:{server.port}/ws/channels/main"
    link, _key = speaker_link(server.base, server.op)
    with sync_playwright() as pw:
        s = SpeakerBrowser(pw, "spk_busy", tmp_path / "busy.wav")
        try:
            page = s.open(link)
            s.enable()
            assert page.evaluate("Y.speaker.stats().gate") == "worklet"
            cdp = page.context.new_cdp_session(page)
            cdp.send("Debugger.enable")
            api(server, "POST", "/api/channels/main/match", json={"colors": ["pink"],
                                                                   "seed": 3})
            wait_rendered(server)
            tmap = TimelineMap.measure(ws_url)
            s.record()
            try:
                api(server, "POST", "/api/channels/main/match/start")
                wait_for(server, "a verse with 2.5 s to come",
                         lambda m: in_verse(m, tmap, min_s=0.2, left_s=2.5))
                cdp.send("Debugger.pause")  # the next script of the page waits
                busy_from = time.monotonic()
                time.sleep(0.2)
                held = time.monotonic()
                api(server, "PUT", "/api/channels/main/holds/@operator", json={"name": "test"})
                time.sleep(busy_from + BUSY_S - time.monotonic())
                cdp.send("Debugger.resume")
                freed = time.monotonic()
                time.sleep(0.1)
                api(server, "DELETE", "/api/channels/main/holds/@operator")
                time.sleep(freed + 3.5 - time.monotonic())
            finally:
                cdp.send("Debugger.disable")  # the page runs again, whatever happened
                cap = s.stop_recording()
            s.stats()  # asks the gate for its figures, which come back on its port
            time.sleep(0.3)
            stats = s.stats()
        finally:
            errors = s.errors
            s.close()
    assert not errors, errors
    end = last_sound(cap, held - 1.0, held + 1.5)
    assert end is not None, "no sound before the hold"
    print(f"\nbusy page: hold -> silence {(end - held) * 1000:.1f} ms with the main thread "
          f"frozen; gate {stats['gateStats']}")
    assert (end - held) * 1000 <= SILENCE_MS, (
        f"the speaker sounded {(end - held) * 1000:.0f} ms after the hold: the stop waited "
        "for the page's main thread")
    assert stats["gateStats"] and stats["gateStats"]["closes"] >= 1, stats["gateStats"]
    back = last_sound(cap, freed + 0.2, freed + 3.5)
    assert back is not None, "the gate stayed closed: nothing heard after the resume"
