"""The render cache under a bound (issue 47: "six previews at new speeds added 25 MB in 30 s;
nothing evicts; a full disk stops every hall's journal"), against a real `yomite serve` reading
with Open JTalk and a small `voice.cache_max_mb`:

- previews and prepares at many speeds and both styles leave the cache folder under its bound
  (its bytes measured on disk), the oldest clips evicted;
- a match being read meanwhile keeps its clips: every render and every encoded clip of it that
  was on disk is still there, the very same file (never evicted and made again), and a
  scripted speaker page fetches each of its clips and the match reads to its end;
- a preview evicted comes back when asked again of the server started again (nothing in its
  memory): rendered and encoded again, the same audio;
- a preview or a match at a speed the console does not offer is refused with the speeds that
  exist (422 `speed_not_offered`, words in both languages: tests/test_strings.py);
- a disk without room for the cache (less free than `voice.cache_min_free_mb`): nothing is
  written, said once, and the preview and the match are read from memory to the end.
"""

from __future__ import annotations

import json
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx2
import numpy as np
import pytest

from audio.codec import decode
from audio.config import VoiceConfig
from audio.voices.cachefolder import MB, scan
from audio.voices.factory import make_voice
from reader.clip import Clip
from reader.journal import read_journal, replay

from .serverproc import Server
from .speakers import ScheduleLog, speaker_link

pytestmark = pytest.mark.server

TOKEN = "render-cache-bound-operator-token-012345"
BOUND_MB = 16
MATCH: dict[str, Any] = {
    "memorise_s": 2, "cards": 2, "prelude": {"enabled": False},
    "gaps": {"after_bow_s": 0.3, "after_call_s": 0.3, "between_verses_s": 0.5,
             "between_cards_s": 0.5},
}
STATIC = Path(__file__).resolve().parent.parent / "api" / "static"


def config(cache: Path, **voice: Any) -> dict[str, Any]:
    return {
        "match": MATCH,
        "voice": {"engine": "openjtalk", "cache_dir": str(cache), **voice},
        "audio": {"output": "null"},
        "server": {"channels": [{"name": "a", "output": "browser"},
                                {"name": "b", "output": "device"}]},
    }


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Server]:
    tmp = tmp_path_factory.mktemp("cache-bound")
    s = Server(tmp, config(tmp / "cache", cache_max_mb=BOUND_MB), TOKEN).start()
    try:
        yield s
    finally:
        s.stop()


def cache_of(server: Server) -> Path:
    return server.tmp / "cache"


def folder_bytes(cache: Path) -> int:
    return sum(f.size for f in scan(cache))


def files(cache: Path) -> set[Path]:
    return {f.path for f in scan(cache) if not f.temporary}


def preview(server: Server, **params: Any) -> httpx2.Response:
    return httpx2.get(f"{server.base}/api/channels/b/voice/preview", params=params,
                      headers=server.op, timeout=180)


def api(server: Server, method: str, path: str, **kw: Any) -> Any:
    r = httpx2.request(method, server.base + path, headers=server.op, timeout=120, **kw)
    assert r.status_code == 200, r.text
    return r.json()


def prepare_rendered(server: Server, ch: str, speed: float, seed: int) -> None:
    """Prepare a match on `ch` at `speed` and wait until every clip of it is rendered."""
    api(server, "POST", f"/api/channels/{ch}/match",
        json={"seed": seed, "colors": ["blue"], "voice": {"speed": speed}})
    deadline = time.monotonic() + 180
    render: dict[str, Any] = {}
    while time.monotonic() < deadline:
        render = api(server, "GET", f"/api/channels/{ch}")["render"] or {}
        assert render.get("error") is None, render
        if render.get("total") and render["done"] == render["total"]:
            return
        time.sleep(0.1)
    raise AssertionError(f"channel {ch}'s match was never rendered: {render}")


def wait_phase(server: Server, ch: str, phases: set[str], timeout_s: float = 180) -> None:
    deadline = time.monotonic() + timeout_s
    seen = None
    while time.monotonic() < deadline:
        m = api(server, "GET", f"/api/channels/{ch}")["match"]
        seen = None if m is None else m["phase"]
        if seen in phases:
            return
        time.sleep(0.1)
    raise AssertionError(f"channel {ch} never reached {phases}: {seen}")


def wait_under(cache: Path, limit: int, timeout_s: float = 60) -> int:
    """The folder's bytes once the keeper has brought it under `limit` (the keeper runs off
    the reading's path, after the writes: moments later)."""
    deadline = time.monotonic() + timeout_s
    size = folder_bytes(cache)
    while size > limit and time.monotonic() < deadline:
        time.sleep(0.1)
        size = folder_bytes(cache)
    return size


def pcm_of(data: bytes, tmp: Path) -> np.ndarray:
    path = tmp / f"clip-{time.monotonic_ns()}.ogg"
    path.write_bytes(data)
    return decode(path, 48000)


def match_clips(server: Server, ch: str) -> list[Clip]:
    log = api(server, "GET", f"/api/channels/{ch}/match/log")
    return list(replay(read_journal(log["journal"])).programme_clips())


class Fetcher:
    """A scripted speaker page: fetches every clip of the channel's schedule as it comes, and
    notes each file of `watch` (the match's encoded clips) the first time it is on disk."""

    def __init__(self, server: Server, ch: str, watch: set[Path]) -> None:
        _url, key = speaker_link(server.base, server.op, ch)
        ws = server.base.replace("http://", "ws://")
        self.schedule = ScheduleLog(f"{ws}/ws/channels/{ch}?audience=speaker&token={key}")
        self.base, self.headers = server.base, {"Authorization": f"Bearer {key}"}
        self.watch = watch
        self.status: dict[str, int] = {}
        self.inodes: dict[Path, int] = {}
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)
        self._thread.start()

    def _run(self) -> None:
        with httpx2.Client(base_url=self.base, headers=self.headers, timeout=60) as c:
            while not self._stop.is_set():
                for clip in list(self.schedule.clips.values()):
                    if clip["url"] not in self.status:
                        self.status[clip["url"]] = c.get(clip["url"]).status_code
                        for p in self.watch:
                            if p not in self.inodes and p.exists():
                                self.inodes[p] = p.stat().st_ino
                self._stop.wait(0.05)

    def close(self) -> None:
        self._stop.set()
        self._thread.join(60)
        self.schedule.close()


def test_previews_and_prepares_stay_under_the_bound_and_a_reading_keeps_its_clips(
        server: Server) -> None:
    cache = cache_of(server)
    bound = BOUND_MB * MB
    # the first preview: its files are the oldest in the folder
    before = files(cache)
    first = preview(server, speed=0.5, style="reader")
    assert first.status_code == 200, first.text
    first_files = files(cache) - before
    assert {p.suffix for p in first_files} == {".npy", ".ogg"}, first_files

    # channel a: a match prepared at 0.8, every render of it on disk
    prepare_rendered(server, "a", 0.8, seed=11)
    clips = match_clips(server, "a")
    voice = make_voice(VoiceConfig(engine="openjtalk", cache_dir=cache, speed=0.8), 48000)
    renders = {p for c in clips if (p := voice.cache_path(c)) is not None}
    assert renders and all(p.exists() for p in renders)
    render_inodes = {p: p.stat().st_ino for p in renders}
    encoded = {cache / "opus" / f"{voice.cache_key(c)[:40]}.ogg" for c in clips}
    pinned_mb = sum(p.stat().st_size for p in renders) / MB

    # it reads, a speaker page fetching its clips, while channel b previews and prepares at
    # new speeds and in both styles: far more than the bound
    fetcher = Fetcher(server, "a", encoded)
    try:
        api(server, "POST", "/api/channels/a/match/start")
        peak = 0
        for i, speed in enumerate((0.55, 0.6, 0.65, 0.7, 1.1, 1.2, 1.3, 1.4)):
            r = preview(server, speed=speed, style=("natural", "reader")[i % 2])
            assert r.status_code == 200, r.text
            peak = max(peak, folder_bytes(cache))
        for seed, speed in ((3, 0.75), (4, 0.85), (5, 0.9)):
            prepare_rendered(server, "b", speed, seed)
            peak = max(peak, folder_bytes(cache))
        wait_phase(server, "a", {"finished"})
    finally:
        fetcher.close()
    size = wait_under(cache, bound)
    print(f"cache folder: {size / MB:.2f} MB after the flood (peak seen {peak / MB:.2f} MB, "
          f"bound {BOUND_MB} MB; channel a's renders {pinned_mb:.2f} MB)")
    assert size <= bound, f"the folder holds {size / MB:.2f} MB over a bound of {BOUND_MB} MB"
    assert "render cache" in server.log() and "evicted" in server.log()

    # the match read to its end, every clip fetched, none of its files evicted and made again
    statuses = set(fetcher.status.values())
    assert fetcher.status and statuses == {200}, fetcher.status
    assert {p: p.stat().st_ino for p in renders if p.exists()} == render_inodes
    assert fetcher.inodes, "no encoded clip of the match was seen on disk"
    for p, ino in fetcher.inodes.items():
        assert p.exists() and p.stat().st_ino == ino, p

    # the first preview was evicted (the least recently used). Asked again of the server
    # started again (nothing of it in memory), it is rendered and encoded again: the same
    # audio, its files back in the folder
    assert not any(p.exists() for p in first_files), first_files
    server.stop()
    server.start()
    again = preview(server, speed=0.5, style="reader")
    assert again.status_code == 200, again.text
    x, y = pcm_of(first.content, server.tmp), pcm_of(again.content, server.tmp)
    assert len(x) == len(y) and np.allclose(x, y, atol=0.01)  # the same audio, made again
    assert all(p.exists() for p in first_files)
    assert wait_under(cache, bound) <= bound


@pytest.mark.parametrize("speed", ["1.23", "0.2", "3.05", "9", "nan", "0.333"])
def test_a_speed_the_console_does_not_offer_is_refused_with_the_speeds(
        server: Server, speed: str) -> None:
    for r in (preview(server, speed=speed),
              httpx2.post(f"{server.base}/api/channels/b/match", headers=server.op,
                          json={"seed": 1, "voice": {"speed": float(speed)}}, timeout=60)
              if speed != "nan" else None):
        if r is None:
            continue
        assert r.status_code == 422, r.text
        body = r.json()
        assert body["error"] == "speed_not_offered", body
        assert body["params"] == {"speed": f"{float(speed):g}", "min": "0.25", "max": "3",
                                  "step": "0.05"}
        assert "0.25 to 3 in steps of 0.05" in body["detail"] and body["hint"]
    # the words a page shows, in each language
    for lang, words in (("ja", "きざみ"), ("en", "steps of")):
        strings = json.loads((STATIC / f"strings.{lang}.json").read_text("utf-8"))
        assert words in strings["err_speed_not_offered"]
    # the speeds the console offers are read (0.3 and 2.95 among them)
    ok = httpx2.post(f"{server.base}/api/channels/b/match", headers=server.op,
                     json={"seed": 1, "voice": {"speed": 2.95}}, timeout=60)
    assert ok.status_code == 200, ok.text
    assert ok.json()["voice"]["speed"] == 2.95


def test_a_disk_without_room_for_the_cache_reads_on_from_memory(tmp_path: Path) -> None:
    cache = tmp_path / "cache"
    # more free space asked for than any disk has: every write of the cache is skipped; no
    # render processes, so one process writes (and says so once)
    cfg = config(cache, cache_min_free_mb=1_048_576)
    cfg["audio"]["render_workers"] = 0
    cfg["server"]["channels"] = [{"name": "b", "output": "device"}]
    s = Server(tmp_path, cfg, TOKEN).start()
    try:
        r = preview(s, speed=1.5, style="natural")
        assert r.status_code == 200 and len(r.content) > 1000, r.text
        assert preview(s, speed=1.5, style="natural").content == r.content  # from memory
        api(s, "POST", "/api/channels/b/match", json={"seed": 2, "voice": {"speed": 1.5}})
        api(s, "POST", "/api/channels/b/match/start")
        wait_phase(s, "b", {"finished"})
        log = api(s, "GET", "/api/channels/b/match/log")
    finally:
        s.stop()
    assert files(cache) == set()
    assert s.log().count("not writing") == 1, s.log()
    assert "voice.cache_min_free_mb" in s.log()
    # the journal was written whole: the match is there to its end
    assert replay(read_journal(log["journal"])).phase.value == "finished"
