"""The clock the engine is given. The engine never reads the time any other way."""

from typing import Protocol


class Clock(Protocol):
    def now(self) -> float:
        """Monotonic seconds. On real audio this is the output device's frame count / rate."""
        ...


class ManualClock:
    """A clock that only moves when told to; it refuses to go backwards (like trio's MockClock).

    Used by tests and by offline rendering, where time jumps straight to the next deadline.
    """

    def __init__(self, start: float = 0.0) -> None:
        self._now = start

    def now(self) -> float:
        return self._now

    def set(self, t: float) -> None:
        if t < self._now:
            raise ValueError(f"clock cannot go backwards ({t} < {self._now})")
        self._now = t

    def advance(self, dt: float) -> None:
        if dt < 0:
            raise ValueError(f"clock cannot go backwards (advance by {dt})")
        self._now += dt


class OffsetClock:
    """Another clock plus a fixed offset: a match recovered from its journal goes on in its own
    timeline (its frames keep rising) on a new process's clock, which starts again at 0."""

    def __init__(self, base: Clock, offset_s: float) -> None:
        self._base = base
        self.offset_s = offset_s

    def now(self) -> float:
        return self._base.now() + self.offset_s
