"""The render cache's folder under a bound (audio.voices.cachefolder, issue 47): the eviction's
plan as pure code on made-up files and a fake clock, then the folder itself on a tmp folder
(real files, a hand-set clock): least recently used first, never a pinned file, a file being
read or a write's temporary file; a read counts as a use; a write the disk has no room for is
skipped, said once, and the caller keeps its clip; a voice whose file was evicted renders it
again."""

from __future__ import annotations

import logging
import os
import time
from pathlib import Path

import numpy as np
import pytest

from audio.config import VoiceConfig
from audio.voices.cachefolder import (
    MB,
    STALE_TMP_S,
    CachedFile,
    CacheFolder,
    plan_eviction,
    scan,
)
from audio.voices.factory import cache_folder, make_voice
from audio.voices.voice import RenderedVoice

from .voice_fakes import CountingVoice, verse

KB = 1024


def files(*spec: tuple[str, int, float]) -> list[CachedFile]:
    return [CachedFile(Path("/c") / name, size, used) for name, size, used in spec]


def names(plan: list[CachedFile]) -> list[str]:
    return [f.path.name for f in plan]


# ---------------------------------------------------------------------- the plan, pure
def test_nothing_is_evicted_under_the_bound() -> None:
    fs = files(("a.npy", 400, 1.0), ("b.npy", 600, 2.0))
    assert plan_eviction(fs, max_bytes=1000, now_s=10.0) == []


def test_the_least_recently_used_go_first_down_to_the_low_water_mark() -> None:
    fs = files(("new.npy", 300, 30.0), ("old.npy", 300, 10.0), ("mid.ogg", 300, 20.0),
               ("newest.npy", 300, 40.0))
    # 1200 bytes over a bound of 1000: down to 900 (90 %), the oldest first
    assert names(plan_eviction(fs, max_bytes=1000, now_s=50.0)) == ["old.npy"]
    assert names(plan_eviction(fs, max_bytes=700, now_s=50.0)) == ["old.npy", "mid.ogg"]


def test_pinned_and_busy_files_are_never_evicted() -> None:
    fs = files(("pinned.npy", 500, 1.0), ("reading.npy", 500, 2.0), ("free.npy", 500, 3.0),
               ("late.npy", 500, 4.0))
    keep = {Path("/c/pinned.npy"), Path("/c/reading.npy")}
    plan = plan_eviction(fs, max_bytes=1000, now_s=10.0, keep=keep)
    assert names(plan) == ["free.npy", "late.npy"]
    # everything kept: over the bound, and nothing to do
    assert plan_eviction(fs[:2], max_bytes=100, now_s=10.0, keep=keep) == []


def test_a_write_under_way_is_left_alone_a_crashed_one_is_not() -> None:
    now = 100_000.0
    fs = files(("x.npy.1a2b3c4d.tmp", 800, now - 5), ("old.npy.99.tmp", 800, now - STALE_TMP_S - 1),
               ("a.npy", 800, now - 50))
    assert names(plan_eviction(fs, max_bytes=1000, now_s=now)) == ["old.npy.99.tmp", "a.npy"]


def test_a_pass_is_bounded_and_ties_go_by_name() -> None:
    fs = files(*((f"{i:03d}.npy", 10, 1.0) for i in range(50)))
    plan = plan_eviction(fs, max_bytes=100, now_s=2.0, max_deletions=7)
    assert names(plan) == [f"{i:03d}.npy" for i in range(7)]


# ---------------------------------------------------------------------- the folder, real files
class Wall:
    def __init__(self, t: float) -> None:
        self.t = t

    def __call__(self) -> float:
        return self.t


def npy(i: int) -> str:
    """A render's name, as the cache names it."""
    return f"verse-{i:03d}-kami-{i:024x}.npy"


def ogg(i: int) -> str:
    return f"{i:040x}.ogg"


def put(root: Path, rel: str, size: int, mtime: float) -> Path:
    p = root / rel
    p.parent.mkdir(parents=True, exist_ok=True)
    p.write_bytes(b"\0" * size)
    os.utime(p, (mtime, mtime))
    return p


def folder_bytes(root: Path) -> int:
    return sum(f.size for f in scan(root))


def test_the_folder_is_brought_under_its_bound_keeping_pins(tmp_path: Path) -> None:
    wall = Wall(1_000_000.0)
    old = [put(tmp_path, f"openjtalk/{npy(i)}", 100 * KB, 1000.0 + i) for i in range(10)]
    opus = put(tmp_path, f"opus/{ogg(1)}", 100 * KB, 999.0)
    # not named as the cache names its files (a pack's recording, notes): never touched
    others = [put(tmp_path, "opus/notes.txt", 100 * KB, 1.0),
              put(tmp_path, "pack/001-kami.ogg", 100 * KB, 1.0), put(tmp_path, "a.npy", 10, 1.0)]
    f = CacheFolder(tmp_path, max_bytes=500 * KB, wall=wall)
    f.pin("ch-a", [old[0], opus])
    gone = f.evict()
    assert old[0].exists() and opus.exists() and all(p.exists() for p in others)
    # the oldest unpinned ones went, down to 90 % of the bound (the pins count in it)
    assert sorted(p.path for p in gone) == old[1:8]
    assert folder_bytes(tmp_path) <= 450 * KB
    assert f.evicted == 7 and f.evicted_bytes == 700 * KB
    # the pin let go: its files are evicted like the others once they are the oldest
    f.unpin("ch-a")
    put(tmp_path, f"openjtalk/{npy(99)}", 200 * KB, 2000.0)
    f.evict()
    assert not opus.exists() and not old[0].exists()


def test_a_file_being_read_is_not_evicted_and_a_read_is_a_use(tmp_path: Path) -> None:
    a = put(tmp_path, f"v/{npy(1)}", 400 * KB, 100.0)
    b = put(tmp_path, f"v/{npy(2)}", 400 * KB, 200.0)
    f = CacheFolder(tmp_path, max_bytes=500 * KB)
    seen: list[list[Path]] = []

    def load(p: Path) -> bytes:
        seen.append([x.path for x in f.evict()])  # a pass while `a` is being read
        return p.read_bytes()

    assert f.read(a, load) is not None
    assert seen == [[b]] and a.exists()  # the oldest is being read: the next one went
    assert a.stat().st_mtime > 200.0  # the read touched it: the most recent now
    assert f.read(b, Path.read_bytes) is None  # an evicted file is a miss, not an error


def test_a_write_leaves_the_disk_its_reserve_and_says_so_once(
        tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    free = os.statvfs(tmp_path).f_bavail * os.statvfs(tmp_path).f_frsize
    f = CacheFolder(tmp_path, min_free_bytes=free + 1024 * MB)
    with caplog.at_level(logging.WARNING, logger="yomite.cache"):
        for i in range(3):
            assert not f.write(tmp_path / "v" / npy(i), lambda fh: fh.write(b"x"), 1)
    assert f.skipped == 3 and list(tmp_path.rglob("*.npy")) == []
    warnings = [r for r in caplog.records if "not writing" in r.getMessage()]
    assert len(warnings) == 1 and "voice.cache_min_free_mb" in warnings[0].getMessage()


def test_a_failed_write_leaves_no_file_and_the_voice_keeps_its_clip(
        tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    blocker = tmp_path / "cache"
    blocker.write_text("a file where the folder should be")
    inner = CountingVoice()
    rv = RenderedVoice(inner, blocker)
    with caplog.at_level(logging.WARNING, logger="yomite.cache"):
        x = rv.pcm(verse(1))
        y = rv.pcm(verse(2))
    assert x.size > 0 and y.size > 0 and rv.pcm(verse(1)) is x  # from memory
    assert inner.total == 2
    assert sum("not writing" in r.getMessage() for r in caplog.records) == 1


def test_a_render_evicted_is_rendered_again(tmp_path: Path) -> None:
    f = CacheFolder(tmp_path, max_bytes=1)
    first = CountingVoice(params={"speed": 1.0})
    x = RenderedVoice(first, folder=f).pcm(verse(5))
    assert len(list(tmp_path.rglob("*.npy"))) == 1
    f.evict()
    assert list(tmp_path.rglob("*.npy")) == []
    again = CountingVoice(params={"speed": 1.0})
    y = RenderedVoice(again, folder=f).pcm(verse(5))
    assert again.total == 1 and np.array_equal(x, y)
    assert len(list(tmp_path.rglob("*.npy"))) == 1  # and kept again


def test_the_keeper_thread_evicts_after_writes(tmp_path: Path) -> None:
    f = CacheFolder(tmp_path, max_bytes=300 * KB)
    f.start()
    try:
        for i in range(8):
            assert f.write(tmp_path / "v" / npy(i), lambda fh: fh.write(b"\0" * 100 * KB),
                           100 * KB)
        for _ in range(400):  # bounded: the keeper runs within a pass interval
            if folder_bytes(tmp_path) <= 300 * KB:
                break
            time.sleep(0.05)
        assert folder_bytes(tmp_path) <= 300 * KB
        assert f.passes >= 1 and f.evicted >= 5
        assert (tmp_path / "v" / npy(7)).exists()  # the newest stays
    finally:
        f.close()


def test_the_server_and_the_workers_share_the_configured_folder(tmp_path: Path) -> None:
    cfg = VoiceConfig(engine="estimate", cache_dir=tmp_path, cache_max_mb=3,
                      cache_min_free_mb=7)
    f = cache_folder(cfg)
    assert f.max_bytes == 3 * MB and f.min_free_bytes == 7 * MB and f.root == tmp_path
    # a worker's (or the command line's) folder: the reserve, no bound of its own
    assert cache_folder(cfg, bounded=False).max_bytes is None
    ojt = VoiceConfig(engine="openjtalk", cache_dir=tmp_path)
    assert make_voice(ojt, 48000, f).folder is f
    other = make_voice(VoiceConfig(engine="openjtalk", cache_dir=tmp_path / "elsewhere"), 48000, f)
    assert other.folder is not f and other.folder is not None
    assert other.folder.max_bytes is None
