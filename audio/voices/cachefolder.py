"""The render cache's folder on disk (`voice.cache_dir`), kept under a size bound.

What it holds: the voices' renders (`<voice>/*.npy`, audio.voices.voice.RenderedVoice) and the
clips encoded for the speaker pages and the console's preview (`opus/*.ogg`,
hall.speaker.ClipStore). Every one of them can be made again: the folder only saves time, so
it must never cost the hall anything that matters.

- **A bound** (`voice.cache_max_mb`): when the folder holds more, its least recently used files
  are deleted until it holds `LOW_WATER` of the bound, except the files pinned (the clips of
  every match prepared or being read on a channel of this process: `pin`) and those in use (a
  read or a write of this process under way). A file evicted and needed again is rendered (or
  encoded) again.
- **Recency** is the file's mtime: a write sets it and a read touches it (`read`), so the order
  holds across restarts and across the processes that share a folder (the render pool's
  workers, a cluster's processes on one machine). Each process bounds the folder it is given;
  processes that share one each evict by the same order, and never a file they are using.
- **Off the reading's path**: writers only add to an estimate of the folder's size and, when it
  passes the bound, wake one keeper thread, which scans the folder (a few thousand entries),
  plans (`plan_eviction`, pure) and deletes. Nothing here ever runs on the event loop, and a
  write never waits for an eviction.
- **A full disk**: a write that would leave less than `voice.cache_min_free_mb` free, or that
  fails (ENOSPC, a read-only folder), is skipped and logged once (until a write succeeds
  again): the caller keeps the clip in memory and the reading goes on. The cache is never
  what fills the disk that the journals are written on.

Writes go through a temporary file and a rename (a half-written file never has a cache name);
a temporary file is never evicted while it may still be written (`STALE_TMP_S`).
"""

from __future__ import annotations

import contextlib
import logging
import os
import re
import secrets
import threading
import time
from collections import Counter
from collections.abc import Callable, Collection, Iterable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import BinaryIO, Final, TypeVar

log = logging.getLogger("yomite.cache")

T = TypeVar("T")

MB: Final = 1 << 20
LOW_WATER: Final = 0.9  # an eviction pass stops at this share of the bound
MAX_DELETIONS: Final = 2000  # files one pass may delete: bounded work, the next pass goes on
MAX_ENTRIES: Final = 200_000  # files one scan looks at
MIN_PASS_INTERVAL_S: Final = 0.5  # passes coalesce the writes of a burst
STALE_TMP_S: Final = 3600.0  # a temporary file this old is a crash's leftover
TMP: Final = ".tmp"
# the cache's own names (nothing else is ever deleted, whatever else the folder holds): a
# render `<clip>-<24 hex>.npy`, an encoded clip `<40 hex>.ogg`, a write's temporary file
# (`<name>.<8 hex>.tmp`; before issue 47 also `tmp<random>.tmp` and `<40 hex>.<8 hex>.tmp`)
CACHE_NAME: Final = re.compile(
    r"(?:.+-[0-9a-f]{24}\.npy|[0-9a-f]{40}\.ogg)"
    r"|(?:.+-[0-9a-f]{24}\.npy\.|[0-9a-f]{40}\.(?:ogg\.)?)[0-9a-f]{8}\.tmp"
    r"|tmp[A-Za-z0-9_]{4,}\.tmp")


@dataclass(frozen=True, slots=True)
class CachedFile:
    path: Path
    size: int
    used_s: float  # its mtime: when it was last written or read

    @property
    def temporary(self) -> bool:
        return self.path.suffix == TMP


def plan_eviction(files: Iterable[CachedFile], *, max_bytes: int, now_s: float,
                  keep: Collection[Path] = (), low_water: float = LOW_WATER,
                  max_deletions: int = MAX_DELETIONS) -> list[CachedFile]:
    """The files to delete, least recently used first: none while the folder holds at most
    `max_bytes`; else enough to bring it to `low_water` of it, never one in `keep` (pinned or
    in use) nor a temporary file younger than `STALE_TMP_S` (a write under way), at most
    `max_deletions`. Ties in recency go by name, so that a plan is the same every time."""
    every = list(files)
    total = sum(f.size for f in every)
    if total <= max_bytes:
        return []
    target = int(max_bytes * low_water)
    out: list[CachedFile] = []
    for f in sorted(every, key=lambda f: (f.used_s, str(f.path))):
        if total <= target or len(out) >= max_deletions:
            break
        if f.path in keep or (f.temporary and now_s - f.used_s < STALE_TMP_S):
            continue
        out.append(f)
        total -= f.size
    return out


def scan(root: Path, limit: int = MAX_ENTRIES) -> Iterator[CachedFile]:
    """The cache's files under `root` (two levels: `<voice>/x.npy`, `opus/x.ogg`), and the
    temporary files of its writes: named as the cache names them (`CACHE_NAME`), nothing
    else."""
    seen = 0

    def entries(folder: Path, depth: int) -> Iterator[CachedFile]:
        nonlocal seen
        try:
            it = os.scandir(folder)
        except OSError:
            return
        with it:
            for e in it:
                seen += 1
                if seen > limit:
                    return
                try:
                    if e.is_dir(follow_symlinks=False):
                        if depth < 1:
                            yield from entries(Path(e.path), depth + 1)
                        continue
                    if not CACHE_NAME.fullmatch(e.name):
                        continue
                    st = e.stat(follow_symlinks=False)
                except OSError:  # gone meanwhile
                    continue
                yield CachedFile(Path(e.path), st.st_size, st.st_mtime)

    yield from entries(root, 0)


class CacheFolder:
    """One folder of the render cache, as this process uses it: reads and writes that the
    eviction never pulls a file from under, pins, and the keeper thread that holds it under
    `max_bytes` (None: no bound; `start` is then not needed). `min_free_bytes`: the free space
    a write must leave on the disk. `wall`: the clock the files' mtimes are compared with."""

    def __init__(self, root: Path, *, max_bytes: int | None = None,
                 min_free_bytes: int = 0, wall: Callable[[], float] = time.time) -> None:
        self.root = Path(root)
        self.max_bytes = max_bytes
        self.min_free_bytes = min_free_bytes
        self._wall = wall
        self._cv = threading.Condition()
        self._pins: dict[str, frozenset[Path]] = {}
        self._busy: Counter[Path] = Counter()  # reads and writes under way, by file
        self._estimate = 0  # the folder's bytes: the last scan's, plus the writes since
        self._dirty = True  # something changed since the last pass (a write, a pin let go)
        self._thread: threading.Thread | None = None
        self._closed = False
        self._failing: str | None = None  # why writes are being skipped (logged once)
        self._over_pinned = False  # the pinned files alone are over the bound (logged once)
        self.evicted = 0  # files deleted so far
        self.evicted_bytes = 0
        self.skipped = 0  # writes skipped (no room, or they failed)
        self.passes = 0

    # ------------------------------------------------------------------ readers and writers
    def read(self, path: Path, load: Callable[[Path], T]) -> T | None:
        """`load(path)`, or None if the file is not there; the eviction leaves it alone
        meanwhile, and the read counts as a use (its mtime is touched). Any other error of
        `load` is the caller's."""
        with self._using(path):
            try:
                out = load(path)
            except FileNotFoundError:
                return None
            with contextlib.suppress(OSError):
                os.utime(path)
            return out

    def write(self, path: Path, dump: Callable[[BinaryIO], None], nbytes: int) -> bool:
        """Write the file through a temporary one and a rename; False if it was skipped: the
        disk would keep less than `min_free_bytes` free, or the write failed (logged once,
        until a write succeeds again). The caller keeps what it wrote in memory either way."""
        with self._using(path):
            try:
                path.parent.mkdir(parents=True, exist_ok=True)
                if self.min_free_bytes > 0:
                    st = os.statvfs(path.parent)
                    free = st.f_bavail * st.f_frsize
                    if free - nbytes < self.min_free_bytes:
                        self._skipped(path, f"{free // MB} MB free on its disk, and "
                                            f"voice.cache_min_free_mb keeps "
                                            f"{self.min_free_bytes // MB} MB for the journals")
                        return False
                tmp = path.with_name(f"{path.name}.{secrets.token_hex(4)}{TMP}")
                try:
                    with open(tmp, "wb") as fh:
                        dump(fh)
                    os.replace(tmp, path)
                except BaseException:
                    tmp.unlink(missing_ok=True)
                    raise
            except OSError as e:
                self._skipped(path, f"{type(e).__name__}: {e}")
                return False
        with self._cv:
            again = self._failing is not None
            self._failing = None
        if again:
            log.info("render cache %s: writing again", self.root)
        self.noted(nbytes)
        return True

    def noted(self, nbytes: int) -> None:
        """A file of about `nbytes` was written into the folder (by this process or by one of
        its render workers): the keeper looks once the folder may be over the bound."""
        with self._cv:
            self._estimate += nbytes
            self._dirty = True
            if self.max_bytes is not None and self._estimate > self.max_bytes:
                self._cv.notify_all()

    @contextlib.contextmanager
    def _using(self, path: Path) -> Iterator[None]:
        with self._cv:
            self._busy[path] += 1
        try:
            yield
        finally:
            with self._cv:
                self._busy[path] -= 1
                if self._busy[path] <= 0:
                    del self._busy[path]

    def _skipped(self, path: Path, why: str) -> None:
        with self._cv:
            self.skipped += 1
            first = self._failing is None
            self._failing = why
        if first:
            log.warning("render cache %s: not writing %s (%s); the clips are kept in memory "
                        "and the reading goes on (said once, until a write succeeds)",
                        self.root, path.name, why)

    # ------------------------------------------------------------------ pins
    def pin(self, owner: str, paths: Iterable[Path]) -> None:
        """Keep `paths` (those of `owner`: a channel's prepared match) whatever their age; a
        new pin of the same owner replaces its last."""
        with self._cv:
            self._pins[owner] = frozenset(paths)
            self._dirty = True

    def unpin(self, owner: str) -> None:
        with self._cv:
            if self._pins.pop(owner, None) is not None:
                self._dirty = True
                self._cv.notify_all()

    def pinned(self) -> frozenset[Path]:
        with self._cv:
            return frozenset().union(*self._pins.values())

    # ------------------------------------------------------------------ the keeper
    def start(self) -> None:
        """Start the keeper thread (it first looks at the folder as it was left)."""
        if self.max_bytes is None or self._thread is not None:
            return
        self._thread = threading.Thread(target=self._run, name="yomite-cache", daemon=True)
        self._thread.start()

    def close(self) -> None:
        with self._cv:
            self._closed = True
            self._cv.notify_all()
        if self._thread is not None:
            self._thread.join(timeout=5.0)

    def _run(self) -> None:
        assert self.max_bytes is not None
        try:
            self.evict()  # the folder as it was left (the bound may be lower than it was)
        except Exception:
            log.exception("render cache %s: an eviction pass failed", self.root)
        while True:
            with self._cv:
                while not self._closed and not (
                        self._dirty and self._estimate > self.max_bytes):
                    self._cv.wait()
                if self._closed:
                    return
                self._dirty = False
            try:
                self.evict()
            except Exception:  # the keeper must live on: the next write wakes it again
                log.exception("render cache %s: an eviction pass failed", self.root)
            with self._cv:  # a burst of writes is one pass, not one each
                self._cv.wait_for(lambda: self._closed, timeout=MIN_PASS_INTERVAL_S)

    def evict(self) -> list[CachedFile]:
        """One pass: scan, plan, delete (the keeper's; a test or a bench may call it). Returns
        the files deleted."""
        if self.max_bytes is None:
            return []
        files = list(scan(self.root))
        with self._cv:
            keep = set(self._busy).union(*self._pins.values())
        plan = plan_eviction(files, max_bytes=self.max_bytes, now_s=self._wall(), keep=keep)
        done: list[CachedFile] = []
        for f in plan:
            with self._cv:  # no read or write of this process can begin on it meanwhile
                if f.path in self._busy or any(f.path in p for p in self._pins.values()):
                    continue
                try:
                    if os.stat(f.path).st_mtime != f.used_s:
                        continue  # used since the scan (by another process): recent now
                    os.unlink(f.path)
                except OSError:
                    continue
            done.append(f)
        freed = sum(f.size for f in done)
        total = sum(f.size for f in files) - freed
        with self._cv:
            self.passes += 1
            self.evicted += len(done)
            self.evicted_bytes += freed
            self._estimate = total
            over = total > self.max_bytes and len(done) < MAX_DELETIONS
            first_over = over and not self._over_pinned
            self._over_pinned = over
            if total > self.max_bytes and len(done) >= MAX_DELETIONS:
                self._dirty = True  # more to do: the next pass goes on
        if done:
            log.info("render cache %s: evicted %d files (%.1f MB), %.1f MB left of %.1f MB",
                     self.root, len(done), freed / MB, total / MB, self.max_bytes / MB)
        if first_over:
            log.warning("render cache %s holds %.1f MB that the prepared matches need or that "
                        "are in use, over voice.cache_max_mb (%.1f MB): raise it for this many "
                        "rooms", self.root, total / MB, self.max_bytes / MB)
        return done
