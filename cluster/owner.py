"""The owner's side of a channel on the bus: it answers the other processes' commands (applied
through the channel's own service, so a hold from any process takes the same path as one from
this process's pages, and is answered after its journal line is in the broker's stream), and
publishes every new state of the channel, whole, numbered within its epoch.

A command is applied once (its id: the same id again gets the first answer) and never after
its deadline (on this process's monotonic clock, as its sender bounded it: cluster.remote),
nor when it was stamped for another owner's clock. Every message says this process's clock
when sent. While this process does not reach the broker (cluster.link) it publishes nothing:
a state held in the client's socket would be delivered, late and out of turn, at a heal; the
latest is published again when the link is back.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections import OrderedDict
from typing import Any

from cluster.bus import Bus
from cluster.link import BrokerLink
from cluster.messages import (
    MONO,
    Output,
    ProtocolError,
    StaleOwner,
    decode,
    error_reply,
    read_item,
    read_press,
    reply,
)
from cluster.speakers import OwnerSpeakers
from hall.channel import ChannelService
from hall.errors import Expired
from hall.presses import ChannelPresses
from hall.seam import Latest
from hall.speaker import SpeakerFeed

log = logging.getLogger("yomite.cluster")

MAX_VOLUME_DB, MIN_VOLUME_DB = 0.0, -60.0
ANSWERS_KEPT = 512  # the last commands' answers, by id (a command sent twice is applied once)


class OwnerLink:
    def __init__(self, bus: Bus, svc: ChannelService, node: str, epoch: int,
                 link: BrokerLink | None = None, presses: ChannelPresses | None = None) -> None:
        self.bus = bus
        self.svc = svc
        self.presses = presses  # the channel's referees' moves, judged here for every process
        self.node = node
        self.epoch = epoch
        self.link = link
        self._answers: OrderedDict[str, asyncio.Future[bytes]] = OrderedDict()
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
        if self.link is not None:
            self.link.on_change.append(self._on_link)
        self._publish()
        if self._speakers is not None:
            await self._speakers.start()

    def _on_link(self, up: bool) -> None:
        if up:
            self._publish()

    async def stop(self) -> None:
        if self.link is not None and self._on_link in self.link.on_change:
            self.link.on_change.remove(self._on_link)
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
                "Yomite-N": str(self.n), MONO: f"{time.monotonic():.6f}"}

    def _on_latest(self, latest: Latest) -> None:
        state = latest.state.state
        key = (state.seq, state.journal, self.svc.volume_db)
        if key != self._last:  # a referee or a page connected here: nothing of the owner's
            self._publish()

    def _publish(self) -> None:
        state = self.svc.latest().state.state
        if self.link is not None and not self.link.up:
            self._last = None  # published again, whole, when the link is back
            return
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
            if body.get("op") == "latest":
                data = await self._apply(body, None)
            else:
                data = await self._once(body, self._deadline(body))
        except Exception as e:
            data = error_reply(e)
        await self._send(msg, data)

    def _deadline(self, body: dict[str, Any]) -> float:
        """A command's deadline, if it may still be applied here."""
        if body.get("epoch") != self.epoch:
            raise StaleOwner(f"the command was meant for another reader of channel "
                             f"{self.svc.name}: not applied")
        deadline = body.get("deadline")
        if not isinstance(deadline, int | float) or time.monotonic() > deadline:
            raise Expired(f"channel {self.svc.name}: the command reached its reader after its "
                          "deadline: not applied, and it never will be")
        return float(deadline)

    async def _once(self, body: dict[str, Any], deadline: float) -> bytes:
        """Applied once by its id: the same id again is answered as the first was."""
        cid = body.get("id")
        if not isinstance(cid, str) or not 0 < len(cid) <= 64:
            raise ProtocolError("a command without its id")
        first = self._answers.get(cid)
        if first is not None:
            return await asyncio.shield(first)
        fut: asyncio.Future[bytes] = asyncio.get_running_loop().create_future()
        self._answers[cid] = fut
        while len(self._answers) > ANSWERS_KEPT:
            self._answers.popitem(last=False)
        try:
            data = await self._apply(body, deadline)
        except BaseException as e:  # cancelled (this process stops): a retry is told so
            fut.set_result(error_reply(Expired(f"not applied: {type(e).__name__}")))
            raise
        fut.set_result(data)
        return data

    async def _send(self, msg: Any, data: bytes) -> None:
        try:
            await self.bus.nc.publish(msg.reply, data, headers=self._headers())
        except Exception as e:
            log.info("owner %s: an answer not sent: %s", self.svc.name, e)

    async def _apply(self, body: dict[str, Any], deadline: float | None) -> bytes:
        """A command applied (or refused): its answer."""
        try:
            op = body.get("op")
            verdict = None
            if op == "apply":
                await self.svc.apply(read_item(body), deadline)
            elif op == "press":
                if self.presses is None:
                    raise ProtocolError("presses are not judged by this reader")
                event, press, trusted = read_press(body)
                verdict = await self.presses.press(event, press, trusted=trusted,
                                                   deadline=deadline)
            elif op == "volume":
                v = body.get("volume_db")
                if not isinstance(v, int | float) or not MIN_VOLUME_DB <= v <= MAX_VOLUME_DB:
                    raise ProtocolError(f"volume_db {v!r} is not a number in -60..0")
                self.svc.set_volume(float(v))
            elif op != "latest":
                raise ProtocolError(f"unknown op {op!r}")
            return reply(self.svc.latest().state.state, self._output(), verdict)
        except Exception as e:
            return error_reply(e)
