"""Browser speakers on any process of a cluster (cluster.speakers): a speaker page connected to
a process that does not read the channel gets the owner's schedule, fetches its clips through
that process, and keeps time with the owner's timeline. A real nats-server and two
`yomite serve --bus` processes (tests/clusterprocs.py)."""

import os
import time
from pathlib import Path

import httpx2
import numpy as np
import pytest
from playwright.sync_api import expect, sync_playwright

from tests.clusterprocs import (  # noqa: F401 (broker_fixture: the fixture `broker`)
    Cluster,
    broker_fixture,
    start_reading,
    state,
    wait_for,
)
from tests.natsbroker import Broker
from tests.serverproc import Server
from tests.speakers import (
    ClipAudio,
    ScheduleLog,
    SpeakerBrowser,
    TimelineMap,
    lag_ms,
    last_sound,
    speaker_link,
)

CACHE = Path(os.environ.get("YOMITE_TEST_CACHE", "/tmp/yomite-test-cache"))
# Two speakers of one room on two processes (each page's estimate of the owner's timeline, one
# of them through the other process's estimate, through the broker): 0.0-0.5 ms apart here
# idle. The bounds are far beyond that and far within a page on the other process's own clock
# (seconds) or on an estimate 200 ms off (caught, tried): the median, and every verse but the
# worst (as in test_speaker_pages.py, an output underrun on a busy machine can move one clip)
APART_MEDIAN_MS = 30.0
APART_ANY_MS = 150.0


def speaker_ws(s: Server, key: str) -> str:
    return s.base.replace("http://", "ws://") + f"/ws/channels/main?audience=speaker&token={key}"


def test_a_speaker_page_on_another_process_plays_the_owners_schedule_on_its_timeline(
        tmp_path: Path, broker: Broker) -> None:
    c = Cluster(tmp_path, broker, 2, ("main",), channel={"output": "browser"}).start()
    logs: list[ScheduleLog] = []
    try:
        owner = c.owner("main")
        other = c.others(owner)[0]
        _, key = speaker_link(other.base, other.op)
        on_owner = ScheduleLog(speaker_ws(owner, key))
        on_other = ScheduleLog(speaker_ws(other, key))
        logs += [on_owner, on_other]
        start_reading(other, owner, "main")
        wait_for(lambda: len(on_owner.clips) >= 2, 30, "two clips in the owner's schedule")
        first = dict(on_owner.clips)
        # every clip the owner's pages were given, the other process's pages were given too,
        # the same URL at the same timeline time
        wait_for(lambda: set(first) <= set(on_other.clips), 10,
                 "the owner's clips in the other process's schedule")
        for cid, clip in first.items():
            got = on_other.clips[cid]
            assert (got["url"], got["at_s"], got["offset_s"]) == (
                clip["url"], clip["at_s"], clip["offset_s"])
        # a clip fetched through the other process is the owner's, byte for byte
        auth = {"Authorization": f"Bearer {key}"}
        for clip in first.values():
            a = httpx2.get(other.base + clip["url"], headers=auth, timeout=30)
            b = httpx2.get(owner.base + clip["url"], headers=auth, timeout=30)
            assert a.status_code == b.status_code == 200, (a.text, b.text)
            assert a.headers["content-type"] == "audio/ogg"
            assert a.content[:4] == b"OggS" and a.content == b.content
        # unknown or without the key: refused there as on the owner
        assert httpx2.get(other.base + "/api/clips/" + "0" * 32 + ".ogg", headers=auth,
                          timeout=10).status_code == 404
        assert httpx2.get(other.base + next(iter(first.values()))["url"],
                          timeout=10).status_code == 401
        # the other process answers a page's clock probe with the owner's timeline
        here, there = TimelineMap.measure(speaker_ws(owner, key)), TimelineMap.measure(
            speaker_ws(other, key))
        apart_ms = abs(here.offset - there.offset) * 1000
        bound_ms = 25 + (here.rtt_ms + there.rtt_ms) / 2
        print(f"timeline through the owner vs the other process: {apart_ms:.1f} ms apart "
              f"(page round trips {here.rtt_ms:.1f} / {there.rtt_ms:.1f} ms)")
        assert apart_ms <= bound_ms
    finally:
        for log in logs:
            log.close()
        c.stop()


@pytest.mark.browser
@pytest.mark.audio
def test_two_speaker_pages_on_two_processes_sound_in_step(tmp_path: Path, broker: Broker) -> None:
    # real Chromium speakers, each into a PulseAudio null sink of its own, recorded: A through
    # the process that reads the channel, B through the other; every verse of the match heard
    # on both, B in step with A (bounds above)
    if not os.environ.get("PULSE_SERVER"):
        pytest.fail("PULSE_SERVER not set: run the browser tests with `make test`")
    c = Cluster(tmp_path, broker, 2, ("main",), channel={"output": "browser"}, match={
        "memorise_s": 1, "cards": 2, "prelude": {"enabled": False},
        "gaps": {"between_verses_s": 0.5, "between_cards_s": 0.5}},
        voice={"engine": "openjtalk", "cache_dir": str(CACHE), "speed": 1.0}).start()
    try:
        owner = c.owner("main")
        other = c.others(owner)[0]
        link, key = speaker_link(owner.base, owner.op)
        path = link.split("://", 1)[1].split("/", 1)[1]
        schedule = ScheduleLog(speaker_ws(owner, key))
        clips = ClipAudio(owner.base, tmp_path, key)
        with sync_playwright() as pw:
            a = SpeakerBrowser(pw, "cl_spk_a", tmp_path / "a.wav")
            b = SpeakerBrowser(pw, "cl_spk_b", tmp_path / "b.wav")
            try:
                for spk, s in ((a, owner), (b, other)):
                    page = spk.open(f"{s.base}/{path}")
                    expect(page.locator("#conn")).to_have_attribute("data-state", "online")
                    spk.enable()
                tmap = TimelineMap.measure(speaker_ws(owner, key))
                a.record()
                b.record()
                try:
                    start_reading(other, owner, "main")
                    wait_for(lambda: state(owner, "main")["match"]["phase"] == "finished", 90,
                             "the end of the match")
                    time.sleep(0.5)
                finally:
                    cap_a, cap_b = a.stop_recording(), b.stop_recording()
                errors = a.errors + b.errors
                seen = {n: {k: v for k, v in spk.stats().items() if k not in ("log", "hellos")}
                        for n, spk in (("A", a), ("B", b))}
            finally:
                schedule.close()
                a.close()
                b.close()
        assert not errors, errors
        verses = sorted((x for x in schedule.clips.values() if x["offset_s"] == 0
                         and x["duration_s"] >= 1.0 and not schedule.cancelled(x)),
                        key=lambda x: x["at_s"])
        assert len(verses) >= 4, verses  # the call, two cards' upper and lower verses
        # a verse a page did not sound is a failure, unless the page itself counted it missed
        # (its link judged gone for a moment, as on a machine loaded past its page's 1.5 s of
        # quiet: it withholds what has not begun and says so, speaker.js) - once at most
        apart, excused = [], []
        for x in verses:
            start = tmap.mono(x["at_s"]) + clips.first_loud(x["url"]) / 48000
            heard = {}
            for cap, name in ((cap_a, "A"), (cap_b, "B")):
                heard[name] = last_sound(cap, start - 0.1, start + x["duration_s"]) is not None
                if not heard[name]:
                    assert x["id"] in seen[name]["missedIds"], (
                        f"speaker {name} did not play clip {x['id']} and did not say so "
                        f"(its page: {seen[name]})")
                    excused.append(f"{name} {x['id']}")
            if all(heard.values()):
                apart.append(lag_ms(cap_a, cap_b, start,
                                    start + min(1.5, x["duration_s"] - 0.1), max_lag_ms=500))
        print(f"\nverses a page counted missed (not heard): {excused}")
        assert len(excused) <= 1, excused
        assert len(apart) >= 3, apart
        print(f"\nB (other process) - A (owner) per verse: {[round(v, 2) for v in apart]} ms; "
              f"timeline probe rtt {tmap.rtt_ms:.2f} ms")
        assert abs(float(np.median(apart))) <= APART_MEDIAN_MS, apart
        # every verse but the worst: one verse 304 ms off once, four workers of a fresh clone on
        # two cores (an output underrun); a page on a wrong clock is off in every verse
        assert sorted(abs(v) for v in apart)[-2] <= APART_ANY_MS, apart
    finally:
        c.stop()
