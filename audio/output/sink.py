"""The sink contract: where rendered speech goes (speakers, a file, nowhere) and whose clock the
engine reads.

A sink plays mono float32 PCM that is already rendered, at exact output frames, and is the
clock of the match: `now()` is the sink's own output position in seconds, so that the gaps the
engine plans in frames come out sample-exact and never drift against the audio.

Three sinks share one schedule (`audio.output.mixer.Mixer`), so a file rendered offline holds
exactly the samples the speakers would have played:

- `audio.output.device.DeviceSink`: a sound card through PortAudio (the only sounddevice importer);
- `audio.output.filesink.FileSink`: renders faster than real time into a WAV/FLAC/MP3/Ogg file;
- `NullSink` (below): discards the audio but keeps the bookkeeping, for dry runs.

Completions and faults are reported to one listener as small frozen dataclasses (`SinkEvent`).
"""

from __future__ import annotations

import asyncio
import contextlib
import math
import time
from typing import Protocol, runtime_checkable

import numpy as np
import numpy.typing as npt

from audio.errors import AudioError
from audio.output.events import (
    Listener,
    Pcm,
    SinkEvent,
    SinkStats,
)
from reader.clock import Clock


# ---------------------------------------------------------------------- the contract
class Sink(Protocol):
    """Where the engine's audio commands go, and the clock of the match.

    Timeline: output frames at `rate`, counted from 0 when the sink was made. Frames before
    `position()` have been handed to the output and can no longer change.

    - `now()`: `position() / rate` for a device, or the externally driven clock for file and
      null sinks. Monotonic: it never goes backwards (it stands still while a device is down).
    - `play(pcm, at_frame, offset, tag)`: make `pcm[offset]` sound at output frame `at_frame`,
      followed by the rest of `pcm`. Sent ahead of time; several clips may overlap (they are
      mixed). If `at_frame` has already been handed to the output the clip starts at once from
      the sample that is due now (a head cut, counted in `stats().late_frames`). `pcm` is mono
      float32 and is not copied: do not modify it afterwards.
    - `stop(at_frame)`: from `at_frame` (or the first frame not yet handed to the output, if that
      is later) fade out over `fade_ms` then stay silent, and forget every clip scheduled so far;
      clips played after the call are not affected. Repeating a stop is harmless. One `Stopped`
      event follows each call.
    - `position()`: frames handed to the output so far.
    - `set_listener(fn, loop)`: `fn` receives every `SinkEvent`. With a loop, events are
      delivered on that loop's thread via `loop.call_soon_threadsafe`; without one, `fn` is
      called directly (a device sink then calls it on its audio thread, so it must only hand the
      event on, e.g. to a `queue.SimpleQueue`).
    - `close()`: release the output; a closed sink refuses `play`.
    """

    rate: int

    def now(self) -> float: ...
    def play(self, pcm: Pcm, at_frame: int, offset: int, tag: int) -> None: ...
    def stop(self, at_frame: int) -> None: ...
    def position(self) -> int: ...
    def set_listener(
        self, fn: Listener | None, loop: asyncio.AbstractEventLoop | None = None
    ) -> None: ...
    def stats(self) -> SinkStats: ...
    def close(self) -> None: ...


@runtime_checkable
class Reopenable(Protocol):
    """A sink on a device that can fail and come back (`DeviceSink`, `ProcessSink`): after a
    `DeviceFault` it is `faulted` until `reopen()` (which may block, and raises AudioError
    while the device is still gone) succeeds."""

    @property
    def faulted(self) -> bool: ...
    def reopen(self) -> None: ...


def check_pcm(pcm: npt.ArrayLike, offset: int) -> Pcm:
    """`pcm` as a read-only contiguous float32 vector (a view when it already is one)."""
    a = np.asarray(pcm)
    if a.ndim != 1:
        raise ValueError(f"a sink plays mono PCM (1-D), got shape {a.shape}")
    if a.dtype != np.float32 or not a.flags.c_contiguous:
        a = np.ascontiguousarray(a, dtype=np.float32)
    if not 0 <= offset <= a.size:
        raise ValueError(f"offset {offset} is outside the clip (0..{a.size} frames)")
    view = a.view()
    view.flags.writeable = False  # the schedule reads it later, maybe from the audio thread
    return view


class Delivery:
    """Hands sink events to the listener: through the loop when one is given, else directly."""

    def __init__(self) -> None:
        self.fn: Listener | None = None
        self.loop: asyncio.AbstractEventLoop | None = None

    def set(self, fn: Listener | None, loop: asyncio.AbstractEventLoop | None) -> None:
        self.fn, self.loop = fn, loop

    def __call__(self, ev: SinkEvent) -> None:
        fn, loop = self.fn, self.loop  # one read each: the listener may be swapped meanwhile
        if fn is None:
            return
        if loop is None:
            fn(ev)
            return
        with contextlib.suppress(RuntimeError):  # a closed loop: nobody is listening any more
            loop.call_soon_threadsafe(fn, ev)


class WallClock:
    """Monotonic seconds since the clock was made (the null sink's clock for dry runs)."""

    def __init__(self) -> None:
        self._t0 = time.monotonic()

    def now(self) -> float:
        return time.monotonic() - self._t0


# ---------------------------------------------------------------------- the null sink
class ClockedSink:
    """What the null and file sinks share: a `Mixer` moved by a clock that someone else drives
    (a `ManualClock` jumped from deadline to deadline, or wall time). Every public method first
    brings the schedule up to the clock (`sync`, which a subclass defines) and reports what
    ended; `_changed` runs after the schedule changes."""

    kind = "sink"

    def __init__(self, rate: int, clock: Clock, *, fade_ms: float = 5.0) -> None:
        from audio.output.mixer import Mixer  # mixer imports this module for the event types

        self.rate = rate
        self.clock: Clock = clock
        self._deliver = Delivery()
        self._mixer = Mixer(rate, fade_ms=fade_ms, emit=self._deliver)
        self._closed = False

    def sync(self) -> None:
        raise NotImplementedError

    def _changed(self) -> None:
        pass

    def now(self) -> float:
        self.sync()
        return self.clock.now()

    def position(self) -> int:
        self.sync()
        return self._mixer.pos

    def play(self, pcm: Pcm, at_frame: int, offset: int, tag: int) -> None:
        if self._closed:
            raise AudioError(f"the {self.kind} is closed; make a new one")
        self.sync()
        self._mixer.play(check_pcm(pcm, offset), at_frame, offset, tag)
        self._changed()

    def stop(self, at_frame: int) -> None:
        self.sync()
        self._mixer.stop(at_frame)
        self._changed()

    def set_listener(
        self, fn: Listener | None, loop: asyncio.AbstractEventLoop | None = None
    ) -> None:
        self._deliver.set(fn, loop)
        self._changed()

    def stats(self) -> SinkStats:
        m = self._mixer
        return SinkStats(m.late_clips, m.late_frames, m.dropped_clips)

    def close(self) -> None:
        self._closed = True

    def _target(self) -> int:
        """The frame the clock has reached."""
        return math.floor(self.clock.now() * self.rate + 1e-6)


class NullSink(ClockedSink):
    """Discards the audio but keeps the schedule, so completions and stops are reported at the
    frames a real output would report them: for dry runs and tests.

    Its clock is the one given (e.g. a `reader.clock.ManualClock` the runtime moves) or, by
    default, monotonic wall time from creation. Whatever the clock says has been "played":
    every public method first brings the schedule up to the clock and reports what ended.
    With a listener loop and the wall clock, a timer on the loop also does this at each clip's
    end, so a dry run reports completions on time without being polled.
    """

    kind = "null sink"

    def __init__(self, rate: int, clock: Clock | None = None, *, fade_ms: float = 5.0) -> None:
        super().__init__(rate, clock if clock is not None else WallClock(), fade_ms=fade_ms)
        self._realtime = clock is None
        self._timer: asyncio.TimerHandle | None = None

    def close(self) -> None:
        super().close()
        if self._timer is not None:
            self._timer.cancel()
            self._timer = None

    def sync(self) -> None:
        """Bring the schedule up to the clock, reporting every clip and stop that ended."""
        target = self._target()
        if target > self._mixer.pos:
            self._mixer.advance(target - self._mixer.pos)

    def _changed(self) -> None:
        self._arm()

    def _arm(self) -> None:
        loop = self._deliver.loop
        if not self._realtime or loop is None or self._closed:
            return
        nxt = self._mixer.next_event_frame()
        if self._timer is not None:
            self._timer.cancel()
            self._timer = None
        if nxt is not None:
            delay = max(0.0, nxt / self.rate - self.clock.now())
            self._timer = loop.call_later(delay, self._on_timer)

    def _on_timer(self) -> None:
        self._timer = None
        self.sync()
        self._arm()
