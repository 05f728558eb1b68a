"""What every sink reports and shares: the events a sink delivers (a clip done, a stop taken
effect, a fault), its counters, the PCM type, and the fade every stop applies."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import numpy as np
import numpy.typing as npt

Pcm = npt.NDArray[np.float32]


# ---------------------------------------------------------------------- events
@dataclass(frozen=True, slots=True)
class ClipDone:
    """The clip played with `tag` has been handed to the output up to its last frame;
    `end_frame` is the output frame just after it. A clip cancelled by `stop()` is never done:
    its end is reported by `Stopped` instead."""

    tag: int
    end_frame: int


@dataclass(frozen=True, slots=True)
class Stopped:
    """One `stop()` has taken effect: `at_frame` is the first output frame at which every clip
    it cancelled is silent (the fade-out's end)."""

    at_frame: int


@dataclass(frozen=True, slots=True)
class DeviceFault:
    """The output failed (device gone, sound server down, stream stalled). The sink's clock
    stops until `reopen()` succeeds; the schedule is kept."""

    reason: str


SinkEvent = ClipDone | Stopped | DeviceFault


Listener = Callable[[SinkEvent], None]


@dataclass(frozen=True, slots=True)
class SinkStats:
    """Counters since the sink was made.

    late_clips / late_frames: clips that arrived after their `at_frame` had been handed to the
        output, and how many of their frames were cut from the head because of it.
    dropped_clips: clips refused because the schedule was full (see `Mixer.capacity`).
    underflows: device callbacks that reported an output underflow (device sinks only).
    faults: `DeviceFault`s reported.
    xruns: underruns ALSA recovered from ("underrun occurred"), counted from the audio
        process's stderr (`audio.output.process` only; PortAudio does not flag them all).
    """

    late_clips: int = 0
    late_frames: int = 0
    dropped_clips: int = 0
    underflows: int = 0
    faults: int = 0
    xruns: int = 0


# ---------------------------------------------------------------------- shared helpers
def fade_frames(rate: int, fade_ms: float) -> int:
    return max(0, round(fade_ms * rate / 1000.0))


def fade_ramp(frames: int) -> Pcm:
    """Gains for a fade-out of `frames` frames: a raised cosine from just below 1 to just above
    0, so the frame after the ramp is the first silent one. A cosine rather than a line because
    its slope is zero at both ends: no click where the fade starts."""
    k = np.arange(1, frames + 1, dtype=np.float64)
    return (0.5 * (1.0 + np.cos(np.pi * k / (frames + 1)))).astype(np.float32)
