"""Issue 20 item 1 in real headless Chromium: a restart recovers a finished match (its
timeline goes on ahead of the new process's clock); the next match's bow and calls then sound
on both speaker pages at their times (captured from two PulseAudio null sinks), the timeline
never moves back, and no page misses a clip or has to start its clock again."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from playwright.sync_api import expect, sync_playwright

from .serverproc import Server, wait_rendered
from .speakers import ClipAudio, ScheduleLog, SpeakerBrowser, TimelineMap, onset, speaker_link
from .test_speaker_pages import CACHE, PLACE_MS, _require_environment, api, match_state, wait_for

pytestmark = [pytest.mark.browser, pytest.mark.server, pytest.mark.audio]

TOKEN = "speaker-restart-operator-token-0123456789"


@pytest.fixture
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Server]:
    _require_environment()
    s = Server(tmp_path_factory.mktemp("speaker-restart"), {
        "match": {"memorise_s": 1, "cards": 1,
                  "gaps": {"after_call_s": 0.4, "between_verses_s": 0.5,
                           "between_cards_s": 0.6, "repeat_s": 0.5}},
        "voice": {"engine": "openjtalk", "cache_dir": str(CACHE)},
        "audio": {"output": "null"},
        "server": {"channels": [{"name": "main", "output": "browser"}]},
    }, TOKEN).start()
    try:
        yield s
    finally:
        s.stop()


def test_after_a_restart_the_speakers_play_the_next_matchs_bow_and_calls(
        server: Server, tmp_path: Path) -> None:
    # a first match read to its end and left finished (not closed): a restart adopts it
    api(server, "POST", "/api/channels/main/match", json={"colors": ["blue"], "seed": 3})
    wait_rendered(server)
    api(server, "POST", "/api/channels/main/match/start")
    wait_for(server, "the first match's end", lambda m: m["phase"] == "finished", 120)
    old = api(server, "GET", "/api/channels/main/match/log")["timeline"]
    old_end = max(r.get("end_s") or r["start_s"] for r in old)
    server.kill()
    server.start()
    assert match_state(server)["phase"] == "finished"  # recovered
    ws_url = f"ws://127.0.0.1:{server.port}/ws/channels/main"
    link, key = speaker_link(server.base, server.op)
    schedule = ScheduleLog(f"{ws_url}?audience=speaker&token={key}")
    clips = ClipAudio(server.base, tmp_path, key)
    stats: list[dict[str, Any]] = []
    with sync_playwright() as pw:
        a = SpeakerBrowser(pw, "rst_a", tmp_path / "a.wav")
        b = SpeakerBrowser(pw, "rst_b", tmp_path / "b.wav")
        try:
            for s in (a, b):
                p = s.open(link)
                expect(p.locator("#conn")).to_have_attribute("data-state", "online")
                s.enable()
            a.record()
            b.record()
            try:
                api(server, "POST", "/api/channels/main/match",
                    json={"colors": ["blue"], "seed": 4})
                wait_rendered(server)
                tmap = TimelineMap.measure(ws_url)
                api(server, "POST", "/api/channels/main/match/start")
                # the opening: 礼, 札を覚えてください, the memorisation, the prelude
                wait_for(server, "the prelude's lower verse",
                         lambda m: (m.get("segment") or {}).get("kind") == "prelude"
                         and (m.get("segment") or {}).get("verse") == "shimo", 60)
            finally:
                cap_a, cap_b = a.stop_recording(), b.stop_recording()
            stats = [a.stats(), b.stats()]
        finally:
            schedule.close()
            errors = a.errors + b.errors
            a.close()
            b.close()
    assert not errors, errors
    new = sorted((c for c in schedule.clips.values() if c["offset_s"] == 0),
                 key=lambda c: c["at_s"])
    # the timeline went on from the recovered match's: it never moved back
    assert new and new[0]["at_s"] > old_end, (new[:1], old_end)
    heard = 0
    for c in new:
        expected = tmap.mono(c["at_s"]) + clips.first_loud(c["url"]) / 48000
        if expected + c["duration_s"] > cap_a.t_line(len(cap_a.x)) - 0.1:
            continue
        for cap, name in ((cap_a, "A"), (cap_b, "B")):
            got = onset(cap, expected)
            assert got is not None, f"speaker {name} did not play clip {c['id']} (at {c['at_s']})"
            assert abs(got - expected) * 1000 <= PLACE_MS, (name, c["id"], got - expected)
        heard += 1
    assert heard >= 3, f"only {heard} clips of the opening in the capture"
    for st in stats:
        assert st["missed"] == 0 and st["epochs"] == 0, {k: st[k] for k in (
            "missed", "epochs", "placed", "late", "retries")}
    print(f"\nafter the restart: {heard} clips of the opening on both speakers; the old "
          f"match ended at {old_end:.1f} s, the new one began at {new[0]['at_s']:.1f} s")
