"""Rendering ahead: a prepared match's clips rendered in reading order before they are due, the
progress that the channel's state shows, and the gate a start waits at until its first clips
are rendered."""

from __future__ import annotations

import asyncio
import logging
import threading
import time
from collections.abc import Callable
from concurrent.futures import Future
from dataclasses import dataclass
from typing import Any

from hall.voices import VoiceLike
from reader.clip import Clip
from reader.engine import Engine
from reader.programme import Phase

log = logging.getLogger("yomite.runtime")

# The clips a start needs at once: the first call, the one after it (sent one clip ahead), and
# the next (sent when the second starts, as soon as two seconds later when the bow call opens).
START_CLIPS = 3
START_RENDER_TIMEOUT_S = 60.0


@dataclass(frozen=True, slots=True)
class RenderProgress:
    """The clips of the match rendered so far, of how many, and why the rendering stopped."""

    done: int
    total: int
    error: str | None


class RenderAhead:
    """One channel's rendering ahead. `progress` is what the state's `render` shows
    (`{"done", "total", "error"}`, or None before a first match); `on_progress` is called on
    the event loop when it is worth publishing again (at most twice a second, and at the end
    or on an error)."""

    def __init__(self, channel: str, on_progress: Callable[[], None]) -> None:
        self.channel = channel
        self.progress: RenderProgress | None = None
        self._on_progress = on_progress
        self._published = 0.0
        self._future: asyncio.Future[Any] | None = None
        self._stop: threading.Event | None = None

    def start(self, voice: VoiceLike, engine: Engine) -> None:
        """Render the clips still to come, in reading order, from the moment the match is
        prepared (in the voice's render processes, or a worker thread)."""
        if self._stop is not None:
            self._stop.set()  # the previous match's clips are no longer needed
        clips = list(dict.fromkeys(engine.upcoming_clips()))
        loop = asyncio.get_running_loop()
        stop = self._stop = threading.Event()
        self.progress = RenderProgress(0, len(clips), None)

        def progress(done: int, total: int, _clip: Clip) -> None:
            loop.call_soon_threadsafe(self._progressed, stop, done, total, None)

        def run() -> Any:
            return voice.prefetch(clips, progress, stop=stop)

        self._future = loop.run_in_executor(None, run)
        self._future.add_done_callback(lambda f: self._finished(f, stop))

    def _finished(self, fut: asyncio.Future[Any], stop: threading.Event) -> None:
        if not fut.cancelled() and fut.exception() is not None:
            # the clip will be rendered (and fail loudly) on demand; say why now
            log.error("channel %s: rendering ahead failed: %s", self.channel, fut.exception())
            r = self.progress or RenderProgress(0, 0, None)
            self._progressed(stop, r.done, r.total, str(fut.exception()))

    def _progressed(self, stop: threading.Event, done: int, total: int,
                    error: str | None) -> None:
        if stop is not self._stop:
            return  # a previous match's
        self.progress = RenderProgress(done, total, error)
        now = time.monotonic()
        if done == total or error or now - self._published >= 0.5:
            self._published = now
            self._on_progress()

    @staticmethod
    def gate(voice: VoiceLike, engine: Engine | None) -> Future[None] | None:
        """A future that is done when the clips a start needs first are rendered, or None."""
        when_ready = getattr(voice, "when_ready", None)
        if engine is None or when_ready is None or engine.phase is not Phase.READY:
            return None
        gate: Future[None] | None = when_ready(engine.upcoming_clips()[:START_CLIPS])
        return gate
