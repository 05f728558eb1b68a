"""Whether this process reaches the cluster's broker now, measured, not assumed.

The NATS client says it is disconnected only after its pings went unanswered (seconds), and
meanwhile queues what it is given into a socket nobody reads. This probe asks the broker for a
round trip (PING/PONG: `flush`) every `every_s`; the link is down as soon as no round trip was
answered for `stale_s`, or the client says it is disconnected. Down, a process sends nothing
that could be applied late (cluster.remote refuses a command at once, cluster.owner publishes
no state) and its pages say so (hall.channel's `broker` in every view); back up, it says so.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from collections.abc import Callable
from typing import Any

log = logging.getLogger("yomite.cluster")

EVERY_S = 0.25
STALE_S = 1.5  # the pages say the broker is out of reach within this and EVERY_S


class BrokerLink:
    def __init__(self, nc: Any, connected: Callable[[], bool], *, every_s: float = EVERY_S,
                 stale_s: float = STALE_S,
                 clock: Callable[[], float] = time.monotonic) -> None:
        """`nc`: the NATS client (its `flush(timeout)` is the round trip); `connected`: what the
        client says (cluster.bus.Bus.connected)."""
        self.nc = nc
        self.connected = connected
        self.every_s = every_s
        self.stale_s = stale_s
        self._clock = clock
        self._answered = clock()  # the last round trip answered
        self._up = True
        self.on_change: list[Callable[[bool], None]] = []
        self._task: asyncio.Task[None] | None = None
        self._probe: asyncio.Task[None] | None = None

    @property
    def up(self) -> bool:
        return self._up

    def start(self) -> None:
        self._task = asyncio.get_running_loop().create_task(self._run(), name="broker-link")

    async def stop(self) -> None:
        for task in (self._task, self._probe):
            if task is not None:
                task.cancel()
                with contextlib.suppress(asyncio.CancelledError, Exception):
                    await task

    async def _run(self) -> None:
        while True:
            if self._probe is None or self._probe.done():
                self._probe = asyncio.get_running_loop().create_task(self._round_trip())
            self._judge()
            await asyncio.sleep(self.every_s)

    async def _round_trip(self) -> None:
        with contextlib.suppress(Exception):
            await self.nc.flush(timeout=self.stale_s * 2)
            self._answered = self._clock()
            self._judge()

    def _judge(self) -> None:
        up = self.connected() and self._clock() - self._answered < self.stale_s
        if up == self._up:
            return
        self._up = up
        if up:
            log.info("the broker answers again")
        else:
            log.warning("the broker has not answered for %.1f s: commands through this "
                        "process are refused until it does", self._clock() - self._answered)
        for listener in list(self.on_change):
            try:
                listener(up)
            except Exception:
                log.exception("broker link: a listener failed")
