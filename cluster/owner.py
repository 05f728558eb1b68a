"""The owner's side of a channel on the bus: it answers the other processes' commands (applied
through the channel's own service, so a hold from any process takes the same path as one from
this process's pages, and is answered after its journal line is in the broker's stream), and
publishes every new state of the channel, whole, numbered within its epoch.
"""

from __future__ import annotations

import asyncio
import logging
from typing import Any

from cluster.bus import Bus
from cluster.messages import (
    Output,
    ProtocolError,
    decode,
    error_reply,
    read_item,
    reply,
)
from cluster.speakers import OwnerSpeakers
from hall.channel import ChannelService
from hall.seam import Latest
from hall.speaker import SpeakerFeed

log = logging.getLogger("yomite.cluster")

MAX_VOLUME_DB, MIN_VOLUME_DB = 0.0, -60.0


class OwnerLink:
    def __init__(self, bus: Bus, svc: ChannelService, node: str, epoch: int) -> None:
        self.bus = bus
        self.svc = svc
        self.node = node
        self.epoch = epoch
        self.n = 0  # publications in this epoch
        self._sub: Any = None
        self._unsubscribe: Any = None
        self._last: tuple[int, str, float] | None = None  # what was last published
        self._tasks: set[asyncio.Task[Any]] = set()
        feed = svc.speakers
        self._speakers = (OwnerSpeakers(bus, svc.name, feed)
                          if isinstance(feed, SpeakerFeed) else None)

    async def start(self) -> None:
        self._sub = await self.bus.nc.subscribe(self.bus.subjects.cmd(self.svc.name),
                                                cb=self._on_request)
        self._unsubscribe = self.svc.subscribe(self._on_latest)
        self._publish()
        if self._speakers is not None:
            await self._speakers.start()

    async def stop(self) -> None:
        if self._speakers is not None:
            await self._speakers.stop()
        if self._unsubscribe is not None:
            self._unsubscribe()
            self._unsubscribe = None
        if self._sub is not None:
            try:
                await self._sub.unsubscribe()
            except Exception as e:
                log.debug("owner %s: unsubscribe failed: %s", self.svc.name, e)
            self._sub = None

    def _output(self) -> Output:
        s = self.svc
        return Output(s.audio, dict(s.output_info), s.output, s.volume_db)

    def _headers(self) -> dict[str, str]:
        return {"Yomite-Owner": self.node, "Yomite-Epoch": str(self.epoch),
                "Yomite-N": str(self.n)}

    def _on_latest(self, latest: Latest) -> None:
        state = latest.state.state
        key = (state.seq, state.journal, self.svc.volume_db)
        if key != self._last:  # a referee or a page connected here: nothing of the owner's
            self._publish()

    def _publish(self) -> None:
        state = self.svc.latest().state.state
        self._last = (state.seq, state.journal, self.svc.volume_db)
        self.n += 1
        data = reply(state, self._output())
        task = asyncio.get_running_loop().create_task(
            self.bus.nc.publish(self.bus.subjects.state(self.svc.name), data,
                                headers=self._headers()))
        self._tasks.add(task)
        task.add_done_callback(self._done)

    def _done(self, task: asyncio.Task[Any]) -> None:
        self._tasks.discard(task)
        if not task.cancelled() and task.exception() is not None:
            log.info("owner %s: a state not published: %s", self.svc.name, task.exception())

    async def _on_request(self, msg: Any) -> None:
        # each request in its own task: a start that waits for its clips must not hold up a
        # hold behind it (the service orders them in the channel's one inbox)
        task = asyncio.get_running_loop().create_task(self._answer(msg))
        self._tasks.add(task)
        task.add_done_callback(self._done)

    async def _answer(self, msg: Any) -> None:
        try:
            body = decode(msg.data)
            op = body.get("op")
            if op == "apply":
                await self.svc.apply(read_item(body))
            elif op == "volume":
                v = body.get("volume_db")
                if not isinstance(v, int | float) or not MIN_VOLUME_DB <= v <= MAX_VOLUME_DB:
                    raise ProtocolError(f"volume_db {v!r} is not a number in -60..0")
                self.svc.set_volume(float(v))
            elif op != "latest":
                raise ProtocolError(f"unknown op {op!r}")
            data = reply(self.svc.latest().state.state, self._output())
        except Exception as e:
            data = error_reply(e)
        try:
            await self.bus.nc.publish(msg.reply, data, headers=self._headers())
        except Exception as e:
            log.info("owner %s: an answer not sent: %s", self.svc.name, e)
