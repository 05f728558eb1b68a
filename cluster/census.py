"""Every channel's pages on every process of a cluster: how many are connected, how many are
speakers, and what each speaker page says of itself.

A page counts where it is connected, but the console may be on another process: a teacher's
console on one process would say "no speaker page is open" while the classroom's Chromebook
plays through another, and show none of its trouble. So each process says, on
`<prefix>.pages.<channel>`, what it has of each channel: at once when its speaker pages changed
(checked every `EVERY_S`), and every `heartbeat_s` (5 s, `cluster.pages_heartbeat_s`) while it
has any page of it (a count of pages alone waits for that: 10,000 phones joining are not
10,000 messages). Every process keeps the others' last word (`elsewhere`), forgets a process
not heard from for three heartbeats (killed), and recomputes its consoles' view when what they
show changed. A room's page quota is kept on the broker (cluster.pageseats), which counts a
process's pages as it wrote them there (what it last said here only for a process that wrote
none). Only counts and a speaker's counters travel: nothing about a card.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
import time
from collections.abc import Callable
from dataclasses import asdict
from typing import Any
from urllib.parse import urlsplit

from cluster.bus import Bus
from hall.channel import ChannelService
from hall.hall import Hall
from hall.seam import NOWHERE, Elsewhere
from hall.states import SpeakerHealth

log = logging.getLogger("yomite.cluster")

EVERY_S = 0.5
HEARTBEAT_S = 5.0
MAX_MESSAGE = 64 * 1024
MAX_HEALTH = 64  # speaker pages' reports in one message (server.speakers.max_per_channel: 16)


def _health(h: dict[str, Any], where: str) -> SpeakerHealth:
    def ms(k: str) -> float | None:
        return float(h[k]) if h[k] is not None else None

    return SpeakerHealth(
        number=int(h["number"]), placed=int(h["placed"]), late=int(h["late"]),
        missed=int(h["missed"]), resyncs=int(h["resyncs"]), epochs=int(h["epochs"]),
        steps=int(h["steps"]), rtt_ms=ms("rtt_ms"), latency_ms=ms("latency_ms"), where=where)


class SpeakerCensus:
    def __init__(self, bus: Bus, hall: Hall, node: str, where: str | None = None,
                 clock: Callable[[], float] = time.monotonic,
                 heartbeat_s: float = HEARTBEAT_S) -> None:
        """`where`: how this process is named on the others' consoles (its address)."""
        self.heartbeat_s = heartbeat_s
        self.bus = bus
        self.hall = hall
        self.node = node
        self.where = (urlsplit(where).netloc or where) if where else node
        self.clock = clock
        self._heard: dict[str, dict[str, tuple[float, Elsewhere]]] = {}  # channel: node: ...
        self._said: dict[str, tuple[tuple[int, int, tuple[SpeakerHealth, ...]], float]] = {}
        self._sub: Any = None
        self._task: asyncio.Task[None] | None = None

    async def start(self) -> None:
        self.hall.census = self
        for svc in self.hall.channels.values():
            svc.census = self
        self._sub = await self.bus.nc.subscribe(self.bus.subjects.pages("*"),
                                                cb=self._on_msg)
        self._task = asyncio.get_running_loop().create_task(self._run(), name="cluster-census")

    async def stop(self) -> None:
        if self._task is not None:
            self._task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._task
        if self._sub is not None:
            with contextlib.suppress(Exception):
                await self._sub.unsubscribe()
        self.hall.census = None
        for svc in self.hall.channels.values():
            svc.census = None

    def elsewhere(self, channel: str) -> Elsewhere:
        heard = self._heard.get(channel)
        if not heard:
            return NOWHERE
        parts = [e for _at, e in heard.values()]
        return Elsewhere(clients=sum(e.clients for e in parts),
                         speakers=sum(e.speakers for e in parts),
                         health=tuple(h for e in parts for h in e.health))

    def counts(self, channel: str) -> dict[str, int]:
        """The channel's pages on each other process, as it last said (a process not heard
        from for three heartbeats forgotten)."""
        return {node: e.clients for node, (_at, e) in self._heard.get(channel, {}).items()}

    # ------------------------------------------------------------------ saying ours
    async def _run(self) -> None:
        while True:
            await asyncio.sleep(EVERY_S)
            try:
                await self._say()
                self._expire()
            except Exception:  # the census must live on: the next round tries again
                log.exception("cluster: the pages' census failed")

    async def _say(self) -> None:
        now = self.clock()
        for name, svc in list(self.hall.channels.items()):
            mine = (len(svc.hub.clients), len(svc.hub.speakers), svc.speaker_health())
            said = self._said.get(name)
            if said is None:
                if mine[0] == 0:
                    continue  # nothing to say of a channel nobody ever connected to here
            elif said[0][1:] == mine[1:]:  # its speakers as said: what consoles show
                if now - said[1] < self.heartbeat_s:
                    continue  # a count of pages alone waits for the heartbeat
                if said[0] == mine and mine[0] == 0:
                    continue  # said that nobody is here: silent from now on
            body = {"node": self.node, "where": self.where, "clients": mine[0],
                    "speakers": mine[1], "health": [asdict(h) for h in mine[2][:MAX_HEALTH]]}
            if not self.bus.connected.is_set():
                return
            await self.bus.nc.publish(self.bus.subjects.pages(name),
                                      json.dumps(body, separators=(",", ":")).encode())
            self._said[name] = (mine, now)
        for name in [n for n in self._said if n not in self.hall.channels]:
            del self._said[name]

    # ------------------------------------------------------------------ hearing theirs
    async def _on_msg(self, msg: Any) -> None:
        channel = msg.subject.rsplit(".", 1)[-1]
        try:
            if len(msg.data) > MAX_MESSAGE:
                raise ValueError(f"{len(msg.data)} bytes")
            body = json.loads(msg.data)
            node, where = str(body["node"]), str(body["where"])[:100]
            if node == self.node:
                return
            health = tuple(_health(h, where) for h in body["health"][:MAX_HEALTH])
            e = Elsewhere(clients=max(0, int(body["clients"])),
                          speakers=max(0, int(body["speakers"])), health=health)
        except (ValueError, KeyError, TypeError) as err:
            log.warning("cluster: a census of %s that is not ours: %s", channel, err)
            return
        heard = self._heard.setdefault(channel, {})
        before = heard.get(node)
        if e.clients == 0:
            heard.pop(node, None)
        else:
            heard[node] = (self.clock(), e)
        if not heard:
            self._heard.pop(channel, None)
        was = before[1] if before is not None else NOWHERE
        if (was.speakers, was.health) != (e.speakers, e.health):
            self._show(channel)  # a count of pages alone is in no view

    def _expire(self) -> None:
        now = self.clock()
        for channel in list(self._heard):
            heard = self._heard[channel]
            gone = [n for n, (at, _e) in heard.items() if now - at > 3 * self.heartbeat_s]
            shown = any(heard[n][1].speakers for n in gone)
            for n in gone:
                del heard[n]
            if not heard:
                del self._heard[channel]
            if shown:
                self._show(channel)

    def _show(self, channel: str) -> None:
        svc: ChannelService | None = self.hall.channels.get(channel)
        if svc is not None:
            svc.broadcast()
