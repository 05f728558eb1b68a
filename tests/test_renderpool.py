"""Rendering ahead in processes (audio.voices.renderpool) in a real server: a cold five-colour match
started in one tap (prepare, then start at once, as the console's Start button does) on this
2-core machine, read by Open JTalk into PulseAudio through the audio process."""

import asyncio
import time
from pathlib import Path

import httpx2
import numpy as np
import pytest

from audio.config import VoiceConfig
from audio.output.filesink import to_int16
from audio.voices.factory import make_voice
from reader.journal import read_journal, replay

from .audio_capture import OwnNullSink, Recorder, holes
from .serverproc import Server

pytestmark = [pytest.mark.audio, pytest.mark.server]

TOKEN = "render-pool-operator-token-0123456789"
COLORS = ["blue", "pink", "yellow", "green", "orange"]


async def one_tap(base: str) -> tuple[dict, float]:
    op = {"Authorization": f"Bearer {TOKEN}"}
    async with httpx2.AsyncClient(base_url=base, headers=op, timeout=90) as c:
        r = await c.post("/api/channels/main/match", json={"colors": COLORS, "seed": 8})
        assert r.status_code == 200, r.text
        t = time.monotonic()
        r = await c.post("/api/channels/main/match/start")
        assert r.status_code == 200, r.text
        return r.json(), time.monotonic() - t


def wait_finished(c: httpx2.Client, timeout: float) -> dict:
    deadline = time.monotonic() + timeout
    st: dict = {}
    while time.monotonic() < deadline:
        st = c.get("/api/channels/main").json()
        if st["match"]["phase"] == "finished":
            return st
        time.sleep(0.2)
    raise AssertionError(f"the match never finished: {st}")


def test_a_cold_five_colour_match_started_in_one_tap(tmp_path: Path) -> None:
    """The first call is heard whole (bit-exact from its first sample: a start sent before the call
    was rendered used to cut 109-135 ms of its head), every clip after it arrives on time (no
    late clip: each card was rendered before it was due, the first before the memorisation
    ended), the render's progress is in the state, and no render ran on the event loop (its
    thread never ran long enough at a stretch for one, and no request waited for a render)."""
    cache = tmp_path / "cache"  # cold: nothing rendered yet
    cfg = {
        # the memorisation is the time the renders have to finish card 1 before it is due:
        # ~3 s of renders with two CPU burners running, so 6 s keeps a margin on a busy
        # machine (render-ahead that does not work waits for card 1 however long it is)
        "match": {"memorise_s": 6, "cards": 2, "prelude": {"enabled": False},
                  "gaps": {"between_cards_s": 0.5, "between_verses_s": 0.5}},
        "voice": {"engine": "openjtalk", "cache_dir": str(cache)},
        # a 100 ms buffer: not what is tested, and one that rarely runs dry on a busy machine
        "audio": {"output": "device", "device": "pulse", "latency": 0.1},
    }
    with OwnNullSink() as own:
        server = Server(tmp_path, cfg, TOKEN).start()
        try:
            with Recorder(tmp_path / "cap.wav", source=own.monitor) as rec, \
                    httpx2.Client(base_url=server.base, timeout=10) as c:
                started, start_s = asyncio.run(one_tap(server.base))
                assert started["match"]["phase"] in ("bowing", "announcing")
                render = started["render"]
                assert render["total"] >= 6 and render["error"] is None
                st = wait_finished(c, 180)
                health = c.get("/api/health").json()
                log = c.get("/api/channels/main/match/log",
                            headers={"Authorization": f"Bearer {TOKEN}"}).json()
        finally:
            server.stop()
    assert st["render"]["done"] == st["render"]["total"], st["render"]
    out = health["channels"]["main"]["output_stats"]
    assert out["late_clips"] == 0 and out["late_frames"] == 0, out
    # the loop's thread never waited for a render, and never ran one: an Open JTalk verse
    # rendered in it is ~270 ms of its CPU at a stretch, where the longest stretch of this
    # match is ~25 ms idle. CPU time, so other programs' time does not count (the wall-clock
    # lag, printed, counts it), but a busy machine slows the same work down: hence 150 ms.
    loop = health["event_loop"]
    assert loop["max_busy_ms"] < 150, f"the event loop's thread ran a render? {loop}"
    assert health["render_waits"] == [], health["render_waits"]
    print(f"start answered in {start_s * 1000:.0f} ms; loop {loop}; output {out}")

    # the first call, as the server's voice rendered it (now in the cache), starts the capture
    first = next(e for e in log["timeline"] if e["kind"] == "call")
    clips = {c.key: c for c in replay(read_journal(log["journal"])).programme_clips()}
    voice = make_voice(VoiceConfig(engine="openjtalk", cache_dir=cache), 48000)
    expected = to_int16(voice.pcm(clips[first["clip"]]))
    assert voice.stats.renders == 0, "the server rendered the call into the shared cache"
    cap = rec.capture
    assert cap is not None
    e0 = int(np.flatnonzero(expected)[0])
    c0 = int(np.flatnonzero(cap.raw)[0])
    # from its first sample on, every sample heard is the call's, in order: a cut head starts
    # with a sample from inside the call, which `holes` names. The only difference allowed is
    # silence the sound server put in when the machine did not run it in time (a hole, not
    # the reader's doing), printed.
    found = holes(cap.raw[c0:], expected[e0:])
    if found:
        print(f"the sound server ran dry during the call (the machine is busy): {found}")
