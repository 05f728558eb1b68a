"""Faults a hall meets, against a real `yomite serve`: a voice that cannot say a clip, and a
journal that cannot be written (a file size limit, an immutable file).

Whatever fails, a referee's hold silences the reading (heard in the capture of what the sound
server played), the server goes on serving, every request is answered, the channel says why it
paused, and after a restart it comes up flagged instead of refusing to start."""

import asyncio
import contextlib
import json
import resource
import signal
import subprocess
import time
from pathlib import Path

import httpx2
import numpy as np
import pytest
import websockets

from audio.codec import write_wav
from audio.voices.pack import MANIFEST
from reader.deck import Deck
from reader.journal import read_journal, replay

from .audio_capture import OwnNullSink, Recorder
from .serverproc import Server
from .voice_fakes import tone

pytestmark = pytest.mark.server

TOKEN = "faults-operator-token-0123456789abcdef"
PACK_RATE = 16000
SEED = 5
DECK_KEY = b"faults-deck-key-".ljust(32, b"!")  # given to the servers: the order is known
ORDER = Deck.build(colors=["blue"], seed=SEED, key=DECK_KEY).order


def tone_pack(folder: Path, poems, seconds: float) -> Path:
    """A manifest pack: the calls and both verses of `poems`, each a tone of its own pitch
    (the rest of the hundred fall back to Open JTalk, never reached in these tests)."""
    folder.mkdir(parents=True, exist_ok=True)
    files = {}
    for i, call in enumerate(("memorise_call", "prelude_intro", "end_call")):
        write_wav(folder / f"{call}.wav", tone(0.3, PACK_RATE, 300 + 40 * i), PACK_RATE)
        files[f"call/{call}"] = f"{call}.wav"
    for no in poems:
        for half, verse in ((1, "kami"), (2, "shimo")):
            name = f"{no:03d}-{half}.wav"
            write_wav(folder / name, tone(seconds, PACK_RATE, 200 + 7 * no + half), PACK_RATE)
            files[f"{no:03d}/{verse}"] = name
    (folder / MANIFEST).write_text(
        "name: tones\nfiles:\n" + "".join(f'  "{k}": {v}\n' for k, v in files.items()), "utf-8")
    return folder


def config(tmp: Path, pack: Path, **audio) -> dict:
    return {
        "match": {"memorise_s": 0.5, "cards": 3, "prelude": {"enabled": False},
                  "bow_call": {"enabled": False},
                  "gaps": {"between_verses_s": 0.3, "between_cards_s": 0.3},
                  "resume": {"lead_in_s": 0.3}},
        "voice": {"engine": "pack", "pack": str(pack), "pack_fallback": True,
                  "cache_dir": str(tmp / "cache")},
        "audio": {"output": "null", **audio},
    }


def state(s: Server) -> dict:
    return httpx2.get(f"{s.base}/api/channels/main", headers=s.op, timeout=30).json()


def wait_for(s: Server, what, timeout: float = 60.0) -> dict:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        st = state(s)
        if what(st):
            return st
        time.sleep(0.05)
    raise AssertionError(f"not reached in {timeout} s; last state: {json.dumps(st)[:2000]}")


def holders(st: dict) -> list[str]:
    return [h["referee"] for h in (st["match"] or {}).get("holds", [])]


def newest_journal(s: Server) -> Path:
    return sorted((s.tmp / "journal" / "main").glob("*.jsonl"))[-1]


def stops_within(s: Server, seconds: float) -> None:
    s.proc.send_signal(signal.SIGTERM)
    s.proc.wait(seconds)


# ---------------------------------------------------------------------- render failure
def test_a_text_no_voice_can_say_stops_the_start_naming_its_key(tmp_path):
    bad = Server(tmp_path, {"match": {"end_call": {"text": "x", "yomi": "abc"}},
                            "voice": {"engine": "estimate"}, "audio": {"output": "null"}}, TOKEN)
    with pytest.raises(RuntimeError, match=r"match\.end_call\.yomi: a yomi must hold kana"):
        bad.start()


def test_a_clip_that_cannot_be_rendered_pauses_the_channel_and_nothing_hangs(tmp_path):
    pack = tone_pack(tmp_path / "pack", ORDER[:3], seconds=0.4)
    s = Server(tmp_path, config(tmp_path, pack), TOKEN, deck_key=DECK_KEY).start()
    broken = pack / f"{ORDER[1]:03d}-1.wav"  # card 2's upper verse: not a sound file any more
    broken.write_bytes(b"RIFF....WAVEfmt " + b"\xff" * 64)
    try:
        with httpx2.Client(base_url=s.base, headers=s.op, timeout=30) as c:
            # a text no voice can say is refused where it enters: a match's overrides
            for yomi, words in (("abc", "must hold kana"), ("あ" * 200, "at most 60"),
                                ("あ" * 40, "at most 24 a phrase"),
                                ("ふだを\x1b[2Jください", "control or format")):
                r = c.post("/api/channels/main/match",
                           json={"overrides": {"end_call": {"text": "x", "yomi": yomi}}})
                assert r.status_code == 422, r.text
                assert "overrides: end_call.yomi" in r.json()["detail"]
                assert words in r.json()["detail"]
            # a clip that passed every check and still cannot be rendered
            assert c.post("/api/channels/main/match", json={"seed": SEED}).status_code == 200
            assert c.post("/api/channels/main/match/start").status_code == 200
            st = wait_for(s, lambda st: "@fault" in holders(st))
            m = st["match"]
            assert m["paused"] and m["phase"] == "reading" and m["card"] == 1
            reason = next(h["name"] for h in m["holds"] if h["referee"] == "@fault")
            assert f"{ORDER[1]:03d}/kami" in reason and f"{ORDER[1]:03d}/kami" in st["fault"]
            assert c.get("/api/health").json()["channels"]["main"]["runtime"] == "running"
            # every request is answered, and the match can be held, resumed, aborted, replaced
            assert c.put("/api/channels/main/holds/@operator").status_code == 200
            assert c.delete("/api/channels/main/holds/@operator").status_code == 200
            assert c.post("/api/channels/main/match/resume").status_code == 200
            # resuming reaches the same clip again: paused again, with the reason
            wait_for(s, lambda st: "@fault" in holders(st))
            assert c.post("/api/channels/main/match/abort").json()["match"]["phase"] == "aborted"
            r = c.post("/api/channels/main/match", json={"poems": [ORDER[0]], "seed": 1,
                                                          "overrides": {"cards": 1}})
            assert r.status_code == 200 and r.json()["match"]["phase"] == "ready"
            assert r.json()["fault"] is None
            c.post("/api/channels/main/match/start")
            wait_for(s, lambda st: st["match"]["phase"] == "finished")
        stops_within(s, 60)  # SIGTERM: nothing left hanging to wait for (a hang is forever)
    finally:
        s.kill()


# ---------------------------------------------------------------------- the journal
def fsize_limit(pid: int, size: int | None) -> None:
    """Limit the files process `pid` may write to `size` bytes (`ulimit -f`), or lift it."""
    _soft, hard = resource.prlimit(pid, resource.RLIMIT_FSIZE)
    resource.prlimit(pid, resource.RLIMIT_FSIZE,
                     (resource.RLIM_INFINITY if size is None else size, hard))


def join(s: Server, name: str) -> dict:
    pin = httpx2.get(f"{s.base}/api/channels/main/pin", headers=s.op).json()["pin"]
    r = httpx2.post(f"{s.base}/api/channels/main/referees", json={"pin": pin, "name": name})
    assert r.status_code == 200, r.text
    return r.json()


def assert_journal_complete(path: Path, live: dict) -> None:
    contents = read_journal(path)
    seqs = [r["seq"] for r in contents.records]
    assert seqs == list(range(1, len(seqs) + 1)) and contents.torn is None
    engine = replay(contents)
    snap = engine.snapshot().to_dict()
    for key in ("phase", "paused", "holds", "cut", "card"):
        assert snap[key] == live["match"][key], key


TONE_S = 6.0  # each verse of the disk-full test: most of it still to come at the hold
LATENCY_S = 0.1  # the output buffer (not what is tested here: a 100 ms one rarely runs dry)
# How long after the server answered the hold sound may still be heard: the buffer, and a
# second for a busy machine to run the audio process (idle: ~20 ms). The bug this guards, a
# hold that does not silence the reading because the journal cannot record it, plays the
# rest of the tone: seconds more (checked below to be more than a second past this bound).
SILENT_AFTER_S = LATENCY_S + 1.0


@pytest.mark.audio
def test_a_hold_silences_the_reading_when_the_disk_is_full_and_the_hall_restarts_flagged(
        tmp_path):
    pack = tone_pack(tmp_path / "pack", ORDER[:3], seconds=TONE_S)
    with OwnNullSink() as sink:
        s = Server(tmp_path, config(tmp_path, pack, output="device", device="pulse",
                                    latency=LATENCY_S), TOKEN, deck_key=DECK_KEY)
        s.start(piped=True)
        try:
            ref = join(s, "mat 1")
            with Recorder(tmp_path / "cap.wav", source=sink.monitor) as rec, \
                    httpx2.Client(base_url=s.base, headers=s.op, timeout=30) as c:
                c.post("/api/channels/main/match", json={"seed": SEED})
                c.post("/api/channels/main/match/start")
                wait_for(s, lambda st: (st["match"]["segment"] or {}).get("kind") == "verse")
                time.sleep(0.8)  # where the hold comes: inside card 1's upper verse
                path = newest_journal(s)
                before = path.read_bytes()
                fsize_limit(s.proc.pid, len(before))  # not one byte more: a full disk
                t_hold = time.monotonic()
                r = httpx2.put(f"{s.base}/api/channels/main/holds/{ref['referee']}",
                               headers={"Authorization": f"Bearer {ref['token']}"}, timeout=30)
                t_answered = time.monotonic()  # the stop was given before the answer
                assert r.status_code == 200, r.text
                # what follows the bound is listened to for a second and a half: the tone,
                # had it gone on, would be heard there
                time.sleep(max(0.0, t_answered + SILENT_AFTER_S + 1.5 - time.monotonic()))
            st = wait_for(s, lambda st: "@journal" in holders(st))
            assert set(holders(st)) == {ref["referee"], "@journal"} and st["match"]["paused"]
            assert st["journal"].startswith("fault:") and "too large" in st["journal"]
            assert path.read_bytes() == before  # nothing half-written
            # what the sound server played: the tone until the hold, silence after it
            cap = rec.capture
            assert cap is not None
            loud = np.abs(cap.x) > 1e-3
            # frame i cannot have been rendered before t_line(i): the frames of the 0.1 s
            # before the hold were sounding, and every frame that can only have been rendered
            # SILENT_AFTER_S after the server answered the hold is silent
            def frame_at(t: float) -> int:
                return max(0, cap.frame_at(t))

            before_hold = loud[frame_at(t_hold) - round(0.2 * cap.rate):
                               frame_at(t_hold) - round(0.1 * cap.rate)]
            segs = [((a / cap.rate + cap.t0) - t_hold, (b - a) / cap.rate)
                    for a, b in cap.segments()]
            assert before_hold.size and before_hold.mean() > 0.5, (
                "the tone was sounding", segs, t_answered - t_hold)
            after = frame_at(t_answered + SILENT_AFTER_S)
            # the test can tell: without the stop, the tone would sound past the bound
            onset = next((a for a, b in cap.segments()
                          if a <= frame_at(t_hold) - 0.1 * cap.rate < b), None)
            assert onset is not None and onset + TONE_S * cap.rate > after + cap.rate, (
                "the hold came too late in the tone to tell a stop from its end", segs)
            assert loud.size - after > cap.rate, "the capture goes on for a second"
            print(f"hold answered in {(t_answered - t_hold) * 1000:.0f} ms; sound segments "
                  f"(s from the hold, length): {segs}")
            assert not loud[after:].any(), (
                f"sound {(np.flatnonzero(loud[after:])[-1]) / cap.rate:.3f} s after the bound")
            # forward moves are refused with what to do; holds and health still work
            with httpx2.Client(base_url=s.base, headers=s.op, timeout=30) as c:
                r = c.post("/api/channels/main/match/resume")
                assert r.status_code == 503 and r.json()["error"] == "journal_unavailable"
                assert "free disk space" in r.json()["hint"]
                health = c.get("/api/health").json()["channels"]["main"]
                assert health["journal"].startswith("fault:") and health["runtime"] == "running"
                # space again: resume writes what waited, in order, and the reading goes on
                fsize_limit(s.proc.pid, None)
                assert c.post("/api/channels/main/match/resume").status_code == 200
                st = wait_for(s, lambda st: not st["match"]["paused"])
                assert st["journal"] == "ok"
                c.put("/api/channels/main/holds/@operator")
                st = state(s)
            assert_journal_complete(path, st)
            # the disk fills again and the server is killed: it starts again, flagged
            s.kill()
            size = path.stat().st_size
            s.start(preexec_fn=lambda: resource.setrlimit(
                resource.RLIMIT_FSIZE, (size, resource.getrlimit(resource.RLIMIT_FSIZE)[1])),
                piped=True)
            st = state(s)
            assert {"@recovered", "@journal", "@operator"} <= set(holders(st))
            assert st["journal"].startswith("fault:") and st["match"]["paused"]
            assert path.stat().st_size == size
        finally:
            s.kill()


def make_unwritable(path: Path):
    """Make `path` refuse writes: immutable (chattr +i) where the file system allows it,
    else read-only permissions (which bind a process that is not root). Returns the undo."""
    try:
        subprocess.run(["chattr", "+i", str(path)], check=True, capture_output=True)
        return lambda: subprocess.run(["chattr", "-i", str(path)], check=True)
    except (OSError, subprocess.CalledProcessError):
        import os

        assert os.geteuid() != 0, "neither chattr +i nor permissions can stop root here"
        path.chmod(0o444)
        return lambda: path.chmod(0o644)


def test_an_immutable_journal_pauses_the_match_and_the_server_still_starts(tmp_path):
    cfg = config(tmp_path, tmp_path)
    cfg["voice"] = {"engine": "estimate"}  # no sound needed here: quicker to start
    s = Server(tmp_path, cfg, TOKEN).start()
    undo = None
    try:
        ref = join(s, "mat 2")
        with httpx2.Client(base_url=s.base, headers=s.op, timeout=30) as c:
            c.post("/api/channels/main/match", json={"seed": SEED})
            c.post("/api/channels/main/match/start")
            wait_for(s, lambda st: (st["match"]["segment"] or {}).get("kind") == "verse")
            path = newest_journal(s)
            undo = make_unwritable(path)

            async def hold_by_websocket() -> None:
                uri = f"ws://127.0.0.1:{s.port}/ws/channels/main?token={ref['token']}"
                async with websockets.connect(uri) as ws:
                    await ws.send(json.dumps({"type": "hold"}))
                    async with asyncio.timeout(30):
                        async for text in ws:
                            m = json.loads(text)
                            if m["type"] == "state" and "@journal" in holders(m):
                                return

            asyncio.run(hold_by_websocket())
            st = state(s)
            assert set(holders(st)) == {ref["referee"], "@journal"} and st["match"]["paused"]
            assert "not permitted" in st["journal"] or "denied" in st["journal"]
            assert c.post("/api/channels/main/match/resume").status_code == 503
            r = c.post("/api/channels/main/match", json={"seed": 2})
            assert r.status_code in (409, 503)
        s.kill()
        s.start()  # the server starts with the journal still immutable
        st = state(s)
        # the referee's hold was never on disk: the match comes back from its last record,
        # paused by yomite's own holds
        assert set(holders(st)) == {"@recovered", "@journal"}
        assert st["journal"].startswith("fault:")
        with httpx2.Client(base_url=s.base, headers=s.op, timeout=30) as c:
            assert c.post("/api/channels/main/match/resume").status_code == 503
            undo()
            undo = None
            assert c.post("/api/channels/main/match/resume").status_code == 200
            c.post("/api/channels/main/match/abort")
            st = state(s)
        assert st["journal"] == "ok"
        assert_journal_complete(path, st)
    finally:
        if undo is not None:
            with contextlib.suppress(Exception):
                undo()
        s.kill()
