"""A room's page quota over a cluster, exact (hall.pageseats on the broker).

Each room with a quota has one key of the `<prefix>_pages` bucket, `pages/<channel>`: each
process's count of the room's pages, with when it wrote it. A page joins only after its
process wrote its own count one higher by compare-and-set (cluster.kvcas) on a total that stays
within the quota, so pages joining at the same instant through several processes are let in
one after the other and never pass it, as they could when each process counted the others'
pages from their last word (cluster.census: a half second old near the quota, a heartbeat
away from it).

A page that leaves lowers its process's count at the next `EVERY_S` (until then the room looks
fuller by the pages that left: a page may be refused for a half second, never let in too
many). Another
process's count is what it wrote there, or for a process that wrote none (its pages let in
while the broker could not be asked), what it last said in the census; a killed process's
count is forgotten when the census forgets it and its write is three heartbeats old. When the
broker cannot say, a page is let in on the census's counts (logged), and the process's count
is written once the broker can keep it."""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from collections.abc import Callable
from typing import Any

from nats.js.kv import KeyValue

from cluster import kvcas
from cluster.census import SpeakerCensus
from hall.hall import Hall
from hall.pageseats import PageSeats

log = logging.getLogger("yomite.cluster")

EVERY_S = 0.5
Counts = dict[str, tuple[int, float]]  # node: (its pages, when it wrote them: wall clock)


class KvPageSeats(PageSeats):
    def __init__(self, hall: Hall, kv: KeyValue, node: str, census: SpeakerCensus,
                 connected: Callable[[], bool] = lambda: True,
                 wall: Callable[[], float] = time.time) -> None:
        """`connected`: whether the broker is in reach now (out of reach, a page is let in on
        the census's counts at once, not after the broker's timeout)."""
        super().__init__(hall)
        self.kv = kv
        self.connected = connected
        self.node = node
        self.census = census
        self.wall = wall
        self._locks: dict[str, asyncio.Lock] = {}
        self._written: dict[str, int] = {}  # a room's count as this process wrote it last
        self._broker_ok = True
        self._task: asyncio.Task[None] | None = None

    def start(self) -> None:
        self._task = asyncio.get_running_loop().create_task(self._run(), name="cluster-pages")

    async def stop(self) -> None:
        if self._task is not None:
            self._task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._task

    async def take(self, channel: str, most: int) -> bool:
        if channel not in self.hall.channels:
            return False
        lock = self._locks.setdefault(channel, asyncio.Lock())
        async with lock:  # this process's pages of a room let in one after the other
            if not self.connected():
                return await self._without_broker(channel, most, OSError("out of reach"))
            try:
                mine = await kvcas.change(self.kv, _key(channel),
                                          lambda doc: self._one_more(channel, most, doc))
            except OSError as e:
                return await self._without_broker(channel, most, e)
            self._broker_back()
            if mine is None:
                return False
            self._written[channel] = mine
            self._coming[channel] += 1
            return True

    def _one_more(self, channel: str, most: int, doc: Any) -> tuple[int | None, Any]:
        """The count written with one page more, or None (and nothing written) when the room
        has `most` pages."""
        kept, others = self._others(channel, _counts(doc))
        mine = self.here(channel) + 1
        if others + mine > most:
            return None, None
        return mine, _doc({**kept, self.node: (mine, self.wall())})

    def _others(self, channel: str, counts: Counts) -> tuple[Counts, int]:
        """The other processes' written counts that still hold (one neither recent nor in the
        census, a killed process's, left out), and their pages: each one's written count, or
        for a process that wrote none, what it last said in the census (its count alone
        waits for a heartbeat there: older than the written one, which is kept within
        `EVERY_S`)."""
        heard = {n: c for n, c in self.census.counts(channel).items() if n != self.node}
        stale = self.wall() - 3 * self.census.heartbeat_s
        kept = {n: (c, at) for n, (c, at) in counts.items()
                if n != self.node and (at > stale or n in heard)}
        pages = (sum(c for c, _at in kept.values())
                 + sum(c for n, c in heard.items() if n not in kept))
        return kept, pages

    # ------------------------------------------------------------------ pages that left
    async def _run(self) -> None:
        while True:
            await asyncio.sleep(EVERY_S)
            for channel in list(self._written):
                try:
                    await self._settle(channel)
                except OSError as e:
                    self._broker_trouble(e)
                except Exception:  # the next round tries again
                    log.exception("cluster: the pages of %s could not be written", channel)

    async def _settle(self, channel: str) -> None:
        """This process's count of the room written again when pages left, down to 0 (the
        census may still say an older count: the written one is what counts), or taken out
        when the room went."""
        gone = channel not in self.hall.channels
        lock = self._locks.setdefault(channel, asyncio.Lock())
        async with lock:
            now = 0 if gone else self.here(channel)
            if now == self._written.get(channel) and not gone:
                return

            def step(doc: Any) -> tuple[None, Any]:
                counts = _counts(doc)
                counts.pop(self.node, None)
                if not gone:
                    counts[self.node] = (now, self.wall())
                return None, _doc(counts)

            await kvcas.change(self.kv, _key(channel), step)
            if gone:
                self._written.pop(channel, None)
                self._locks.pop(channel, None)
            else:
                self._written[channel] = now

    async def _without_broker(self, channel: str, most: int, e: OSError) -> bool:
        """A page let in on the census's counts; this process's count of the room written
        once the broker can keep it."""
        self._broker_trouble(e)
        self._written.setdefault(channel, -1)
        return await super().take(channel, most)

    def _broker_trouble(self, e: OSError) -> None:
        if self._broker_ok:
            log.warning("cluster: the broker cannot count a room's pages (%s): pages are let "
                        "in on the census's counts until it can", e)
        self._broker_ok = False

    def _broker_back(self) -> None:
        if not self._broker_ok:
            log.info("cluster: the broker counts the rooms' pages again")
        self._broker_ok = True


def _key(channel: str) -> str:
    return f"pages/{channel}"


def _counts(doc: Any) -> Counts:
    out: Counts = {}
    if isinstance(doc, dict):
        for n, v in doc.items():
            if (isinstance(v, list) and len(v) == 2 and isinstance(v[0], int)
                    and isinstance(v[1], int | float)):
                out[str(n)] = (max(0, v[0]), float(v[1]))
    return out


def _doc(counts: Counts) -> dict[str, list[float]]:
    return {n: [c, at] for n, (c, at) in counts.items()}
