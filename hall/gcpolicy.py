"""When the server's garbage collector may run its full collections.

A full (generation 2) collection walks every tracked object the server made since start-up and
holds the event loop meanwhile: measured here, 46-94 ms in the middle of a cold five-colour
match, which is a hold (or any request) kept waiting that long. The audio is in a process of its
own (audio/output), so the collector cannot break the sound; this keeps it from delaying the
hall.

The policy:
- at start-up, after everything start-up made: one full collection, then `gc.freeze()` (those
  objects live as long as the server; later collections never walk them again);
- generations 0 and 1 collect as usual (short-lived cycles: they cost well under a
  millisecond), but generation 2 never runs by itself (its threshold is out of reach);
- instead, every `period_s`, if every channel is at rest (no match, or one that is ready,
  finished, closed or aborted) a full collection runs, then the survivors are frozen: the next
  one walks only what was made after it;
- a match that runs for a long time is never interrupted, unless the memory blocks allocated
  since the last full collection pass `pending_limit` (a bound on the memory a busy day can
  hold back; a match makes a few thousand). Counted by the allocator (`sys.getallocatedblocks`,
  0.3 ms for 1.5 million blocks), never by listing generation 2 (`gc.get_objects(2)`: 19 ms for
  600,000 objects, on the loop every period and every health read: a process of a cluster
  with 2,500 sockets held its rooms' states that long).
"""

from __future__ import annotations

import asyncio
import contextlib
import gc
import logging
import sys
import time
from collections.abc import Callable
from typing import Any

log = logging.getLogger("yomite.gc")

# generation 2's threshold: gen-1 collections before a full one; never reached
_NEVER = 1 << 30


class GcPolicy:
    def __init__(self, at_rest: Callable[[], bool], *, period_s: float = 10.0,
                 pending_limit: int = 2_000_000) -> None:
        self.at_rest = at_rest
        self.period_s = period_s
        self.pending_limit = pending_limit
        self.collections = 0
        self.forced = 0
        self.last_ms: float | None = None
        self.max_ms = 0.0
        self._task: asyncio.Task[None] | None = None
        self._thresholds = gc.get_threshold()
        self._blocks = 0  # the allocator's blocks after the last full collection

    def start(self) -> None:
        """Collect and freeze what start-up made, and take over generation 2."""
        self.collect()
        t0, t1, _ = self._thresholds
        gc.set_threshold(t0, t1, _NEVER)
        self._task = asyncio.get_running_loop().create_task(self._run(), name="gc-policy")

    async def stop(self) -> None:
        if self._task is not None:
            self._task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._task
            self._task = None
        gc.set_threshold(*self._thresholds)

    def collect(self) -> float:
        """A full collection now, then freeze the survivors; returns its milliseconds."""
        t = time.perf_counter()
        gc.collect()
        gc.freeze()
        self._blocks = sys.getallocatedblocks()
        ms = (time.perf_counter() - t) * 1000
        self.collections += 1
        self.last_ms = ms
        self.max_ms = max(self.max_ms, ms)
        return ms

    async def _run(self) -> None:
        while True:
            await asyncio.sleep(self.period_s)
            try:
                if self.at_rest():
                    self.collect()
                elif (pending := self.pending()) > self.pending_limit:
                    self.forced += 1
                    ms = self.collect()
                    log.warning("full garbage collection during a match (%d blocks allocated "
                                "since the last): %.0f ms", pending, ms)
            except Exception:  # never a reason to stop the policy (and so the server)
                log.exception("garbage collection policy")

    def pending(self) -> int:
        """Memory blocks allocated since the last full collection (what it would walk, roughly:
        an object is one block or a few)."""
        return max(0, sys.getallocatedblocks() - self._blocks)

    def report(self) -> dict[str, Any]:
        return {"full_collections": self.collections, "forced_during_match": self.forced,
                "last_ms": self.last_ms, "max_ms": self.max_ms,
                "waiting": self.pending(), "frozen": gc.get_freeze_count()}
