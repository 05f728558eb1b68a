"""Rendering ahead on every free core: worker processes that render clips into the shared disk
cache, in the order they will be needed, while the server keeps its one interpreter for the
hall.

Why processes: Open JTalk's front end holds the GIL, so a render thread in the server's
process stalls its event loop (a cold call rendered on demand held it for 350-430 ms and cut
the call's head). Each worker (`python -m audio.voices.renderpool FD`) builds its voice from the
`VoiceConfig` through `audio.voices.factory.make_voice`, exactly as the server does, so it
renders what the server would (the per-match settings included: every job carries its config)
into the same disk cache, keyed by the voice's params; the server then loads the file (a
millisecond). Workers run a little below the server's priority (`nice` 2), so the event loop
comes first.

Order: every job has a rank (its place in the reading order: the call 0, the next clip 1...);
a free worker takes the lowest rank of all channels' jobs, so a second channel preparing a
deck never delays the clip the first needs next.
"""

from __future__ import annotations

import contextlib
import heapq
import itertools
import logging
import os
import socket
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Iterable, Mapping
from concurrent.futures import Future
from dataclasses import dataclass, field
from multiprocessing.connection import Connection
from pathlib import Path

from audio.config import VoiceConfig
from audio.errors import VoiceError
from audio.pcm import Pcm
from audio.voices.factory import make_voice
from audio.voices.voice import Param, Progress, RenderedVoice
from reader.clip import Clip, ClipKind

log = logging.getLogger("yomite.render")


@dataclass(order=True)
class _Job:
    rank: float
    seq: int
    clip: Clip = field(compare=False)
    cfg: VoiceConfig = field(compare=False)
    rate: int = field(compare=False)
    done: Future[None] = field(compare=False)
    on_done: list[Callable[[Pcm], None]] = field(compare=False, default_factory=list)


class RenderPool:
    """`workers` render processes (0: one per core), started on first use."""

    def __init__(self, workers: int = 0, nice: int = 2) -> None:
        self.size = workers or os.cpu_count() or 1
        self.nice = nice
        self._warm: tuple[VoiceConfig, int] | None = None
        self._heap: list[_Job] = []
        self._jobs: dict[tuple[str, int, str], _Job] = {}  # queued or running, by what they make
        self._cv = threading.Condition()
        self._seq = itertools.count()
        self._threads: list[threading.Thread] = []
        self._procs: list[subprocess.Popen[bytes]] = []
        self._closed = False
        self.renders = 0
        self.failures = 0

    def submit(self, clip: Clip, cfg: VoiceConfig, rate: int, rank: float,
               on_done: Callable[[Pcm], None] | None = None) -> Future[None]:
        """Render `clip` with the voice `cfg` makes into the disk cache; `on_done` gets the
        samples (the worker sends them back: the server never reads a file that the cache's
        bound may have evicted meanwhile, or that a full disk kept from being written); the
        future is done after it (or fails with VoiceError). A clip already queued is not
        queued twice: it moves up to the better rank."""
        key = (cfg.model_dump_json(), rate, clip.key)
        with self._cv:
            if self._closed:
                raise VoiceError("the render pool is closed")
            job = self._jobs.get(key)
            if job is None:
                job = _Job(rank, next(self._seq), clip, cfg, rate, Future())
                self._jobs[key] = job
                heapq.heappush(self._heap, job)
                self._grow()
                self._cv.notify()
            elif rank < job.rank and job in self._heap:
                job.rank = rank
                heapq.heapify(self._heap)
            if on_done is not None:
                job.on_done.append(on_done)
            return job.done

    def start(self, cfg: VoiceConfig, rate: int) -> None:
        """Start every worker now and have it load the voice (Open JTalk's dictionary takes a
        second or more on a busy machine), so that the first start does not wait for that."""
        with self._cv:
            self._warm = (cfg, rate)
            while len(self._threads) < self.size:
                self._new_thread()

    def close(self) -> None:
        with self._cv:
            self._closed = True
            for job in self._heap:
                job.done.set_exception(VoiceError("the render pool was closed"))
            self._heap.clear()
            self._cv.notify_all()
        for p in self._procs:
            with contextlib.suppress(OSError):
                p.kill()
        for t in self._threads:
            t.join(timeout=2.0)
        for p in self._procs:
            with contextlib.suppress(subprocess.TimeoutExpired):
                p.wait(timeout=2.0)

    # ------------------------------------------------------------------ dispatching
    def _grow(self) -> None:
        """One more worker while there are more queued jobs than workers (cv held)."""
        if len(self._threads) < self.size and len(self._heap) > 0:
            self._new_thread()

    def _new_thread(self) -> None:
        t = threading.Thread(target=self._dispatch, name=f"yomite-render-{len(self._threads)}",
                             daemon=True)
        self._threads.append(t)
        t.start()

    def _dispatch(self) -> None:
        conn: Connection | None = None
        proc: subprocess.Popen[bytes] | None = None
        try:
            warm = self._warm
            if warm is not None:
                with contextlib.suppress(OSError, EOFError):
                    conn, proc = self._spawn()
                    conn.send(("warm", *warm))
                    conn.recv()
            while True:
                with self._cv:
                    while not self._heap and not self._closed:
                        self._cv.wait()
                    if self._closed:
                        return
                    job = heapq.heappop(self._heap)
                    self._grow()
                try:
                    if conn is None:
                        conn, proc = self._spawn()
                    conn.send((job.cfg, job.rate, job.clip))
                    ok, detail = conn.recv()
                except (OSError, EOFError) as e:  # the worker died: a new one for the next job
                    conn, proc = self._reap(conn, proc)
                    ok, detail = False, f"the render process failed ({e or type(e).__name__})"
                self._finish(job, ok, detail)
        finally:
            self._reap(conn, proc)

    def _finish(self, job: _Job, ok: bool, detail: str | Pcm) -> None:
        """`detail`: the samples rendered, or why it failed."""
        with self._cv:
            self._jobs.pop((job.cfg.model_dump_json(), job.rate, job.clip.key), None)
            if ok:
                self.renders += 1
            else:
                self.failures += 1
        if ok:
            for fn in job.on_done:
                try:
                    if isinstance(detail, str):
                        raise VoiceError(f"the render process sent no samples ({detail})")
                    fn(detail)
                except Exception as e:  # keeping the samples: the job still failed
                    ok, detail = False, f"{type(e).__name__}: {e}"
                    break
        if ok:
            job.done.set_result(None)
        else:
            job.done.set_exception(VoiceError(f"rendering {job.clip.key}: {detail}"))

    def _spawn(self) -> tuple[Connection, subprocess.Popen[bytes]]:
        ours, theirs = socket.socketpair()
        env = dict(os.environ)
        root = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
        env["PYTHONPATH"] = os.pathsep.join(p for p in (root, env.get("PYTHONPATH")) if p)
        proc = subprocess.Popen(
            [sys.executable, "-m", "audio.voices.renderpool", str(theirs.fileno()), str(self.nice)],
            pass_fds=(theirs.fileno(),), env=env, stdin=subprocess.DEVNULL)
        theirs.close()
        with self._cv:
            self._procs.append(proc)
        return Connection(ours.detach()), proc

    @staticmethod
    def _reap(conn: Connection | None, proc: subprocess.Popen[bytes] | None) -> tuple[None, None]:
        if conn is not None:
            conn.close()
        if proc is not None and proc.poll() is None:
            proc.kill()
            proc.wait()
        return None, None


class PooledVoice:
    """A `RenderedVoice` whose renders happen in a `RenderPool`: what the hall's runtimes hold.

    `frames` and `pcm` answer from memory; a clip not there yet is loaded from the disk cache
    once the pool has rendered it (waiting for that job if it is under way, rendering in this
    process only if the pool cannot). `prefetch` queues a match's clips in reading order and
    waits for them; `when_ready` is what a start awaits."""

    def __init__(self, cfg: VoiceConfig, rate: int, pool: RenderPool,
                 local: RenderedVoice | None = None) -> None:
        self.cfg = cfg
        self.pool = pool
        self.local = local if local is not None else make_voice(cfg, rate)
        self._rate = rate
        self._ready: set[str] = set()
        self._lock = threading.Lock()
        self.waits: list[tuple[str, float]] = []  # (clip, seconds) a caller waited for a render

    @property
    def name(self) -> str:
        return self.local.name

    @property
    def rate(self) -> int:
        return self._rate

    @property
    def params(self) -> Mapping[str, Param]:
        return self.local.params

    def lacks(self, poems: Iterable[int]) -> list[int]:
        return self.local.lacks(poems)

    def cache_key(self, clip: Clip) -> str:
        """The render cache's key: the voice and every setting (speed, pitch...). The speaker
        pages' encoded clips are stored under it (hall.speaker.ClipStore): without it they were
        keyed by the engine's name and the verse alone, and a page could be served the verse
        rendered at another speed (a 2.6 s clip in a 4.33 s slot of the timeline)."""
        return self.local.cache_key(clip)

    def cache_path(self, clip: Clip) -> Path | None:
        """Where the clip's render is kept on disk (what a prepared match pins)."""
        return self.local.cache_path(clip)

    def frames(self, clip: Clip) -> int:
        self._wait(clip)
        return self.local.frames(clip)

    def pcm(self, clip: Clip) -> Pcm:
        self._wait(clip)
        return self.local.pcm(clip)

    def render(self, clip: Clip) -> Pcm:
        return self.pcm(clip)

    def is_ready(self, clip: Clip) -> bool:
        return clip.key in self._ready

    def submit(self, clip: Clip, rank: float) -> Future[None]:
        if self.is_ready(clip):
            f: Future[None] = Future()
            f.set_result(None)
            return f

        def load(x: Pcm) -> None:
            self.local.adopt(clip, x)  # the worker wrote it into the disk cache too
            with self._lock:
                self._ready.add(clip.key)

        return self.pool.submit(clip, self.cfg, self._rate, rank, load)

    def when_ready(self, clips: Iterable[Clip]) -> Future[None] | None:
        """None if every clip is in memory, else a future done when they all are (failing
        with the first VoiceError). Clips not queued yet go first in the queue."""
        waits = [self.submit(c, -1.0) for c in clips if not self.is_ready(c)]
        if not waits:
            return None
        out: Future[None] = Future()
        left = [len(waits)]
        lock = threading.Lock()

        def one(f: Future[None]) -> None:
            with lock:
                left[0] -= 1
                last = left[0] == 0
            if out.done():
                return
            err = f.exception()
            if err is not None:
                with contextlib.suppress(Exception):
                    out.set_exception(err)
            elif last:
                with contextlib.suppress(Exception):
                    out.set_result(None)

        for f in waits:
            f.add_done_callback(one)
        return out

    def prefetch(self, clips: Iterable[Clip], progress: Progress | None = None, *,
                 stop: threading.Event | None = None) -> int:
        """Queue `clips` in order (the first needed first) and wait for them all."""
        todo = list(dict.fromkeys(clips))
        futures = [self.submit(c, i) for i, c in enumerate(todo)]
        n = 0
        for c, f in zip(todo, futures, strict=True):
            if stop is not None and stop.is_set():
                return n
            f.result()
            n += 1
            if progress is not None:
                progress(n, len(todo), c)
        return n

    def _wait(self, clip: Clip) -> None:
        if self.is_ready(clip):
            return
        t0 = time.perf_counter()
        try:
            self.submit(clip, -2.0).result(timeout=60.0)
            waited = time.perf_counter() - t0
            self.waits.append((clip.key, waited))
            if waited > 0.05:
                log.warning("waited %.0f ms for the render of %s", waited * 1000, clip.key)
        except Exception as e:  # the pool could not: this process renders it (slow, but sure)
            log.warning("render pool: %s; rendering %s here", e, clip.key)
            self.local.pcm(clip)
            with self._lock:
                self._ready.add(clip.key)


# ---------------------------------------------------------------------- the worker process
def _worker(fd: int, nice: int) -> None:
    with contextlib.suppress(OSError):  # absolute: not the server's niceness plus this
        os.setpriority(os.PRIO_PROCESS, 0, nice)
    conn = Connection(fd)
    voices: dict[tuple[str, int], RenderedVoice] = {}
    while True:
        try:
            msg = conn.recv()
        except (EOFError, OSError):
            return
        try:
            if msg[0] == "warm":  # load the voice: one mora, rendered and thrown away
                _, cfg, rate = msg
                voice = make_voice(cfg, rate)
                voices[(cfg.model_dump_json(), rate)] = voice
                voice.memory_bytes = 0
                voice.voice.render(Clip(ClipKind.CALL, "あ", "あ", name="warm-up"))
                conn.send((True, ""))
                continue
            cfg, rate, clip = msg
            key = (cfg.model_dump_json(), rate)
            known = voices.get(key)
            if known is None:
                known = voices[key] = make_voice(cfg, rate)
                known.memory_bytes = 0  # the server loads the file: keep (almost) nothing here
            # the samples go back: the server keeps them in memory without reading the file
            # (evicted meanwhile, or never written on a full disk)
            conn.send((True, known.pcm(clip)))
        except Exception as e:  # one clip's failure is reported, the worker goes on
            conn.send((False, f"{type(e).__name__}: {e}"))


if __name__ == "__main__":
    _worker(int(sys.argv[1]), int(sys.argv[2]))
