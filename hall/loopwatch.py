"""How long the event loop was kept from running: a task that asks to wake every `period_s`
and notes how late it woke. A late wake-up is time during which no request, WebSocket message
or hold was handled: either the loop's thread was busy (a long request, a render in this
process, a garbage collection: it used the CPU meanwhile, counted in `busy_over`), or it was not
given the CPU or the GIL (other programs, other threads: only in the wall-clock `lag`)."""

from __future__ import annotations

import asyncio
import contextlib
import time
from collections import deque
from typing import Any

import numpy as np


class LoopWatch:
    def __init__(self, period_s: float = 0.01, threshold_ms: float = 50.0) -> None:
        self.period_s = period_s
        self.threshold_ms = threshold_ms
        self.max_ms = 0.0
        self.over = 0  # wake-ups later than threshold_ms
        self.busy_over = 0  # ... during which the loop's thread itself ran that long
        self.busy_max_ms = 0.0
        self.recent: deque[float] = deque(maxlen=6000)  # the last minute of lags, ms
        self._task: asyncio.Task[None] | None = None

    def start(self) -> None:
        self._task = asyncio.get_running_loop().create_task(self._run(), name="loop-watch")

    async def stop(self) -> None:
        if self._task is not None:
            self._task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._task

    async def _run(self) -> None:
        while True:
            t, cpu = time.perf_counter(), time.thread_time()
            await asyncio.sleep(self.period_s)
            lag = (time.perf_counter() - t - self.period_s) * 1000
            busy = (time.thread_time() - cpu) * 1000
            self.recent.append(lag)
            self.max_ms = max(self.max_ms, lag)
            self.busy_max_ms = max(self.busy_max_ms, busy)
            if lag > self.threshold_ms:
                self.over += 1
                if busy > self.threshold_ms:
                    self.busy_over += 1

    def report(self) -> dict[str, Any]:
        """For `/api/health`: the p99 of the last minute by selection on a float array (a sort
        of the 6,000 lags as Python floats held the loop 0.7-3 ms an answer)."""
        p99 = 0.0
        if self.recent:
            v = np.array(self.recent, dtype=np.float64)
            k = min(len(v) - 1, int(len(v) * 0.99))
            p99 = float(v[np.argpartition(v, k)[k]])
        t = f"{self.threshold_ms:g}ms"
        return {"max_lag_ms": round(self.max_ms, 1), "p99_lag_ms_last_minute": round(p99, 1),
                f"lags_over_{t}": self.over, f"busy_over_{t}": self.busy_over,
                "max_busy_ms": round(self.busy_max_ms, 1)}
