"""A room's page quota over a cluster, exact (hall.pageseats on the broker).

Each room has one key of the `<prefix>_pages` bucket, `pages/<channel>`: each process's count
of the room's pages, with a mark of the write. A page joins only after its process wrote its
own count one higher by compare-and-set (cluster.kvcas) on a total that stays within the
quota, so pages joining at the same instant through several processes are let in one after
the other and never pass it, as they could when each process counted the others' pages from
their last word in the census.

A page that leaves lowers its process's count at the next `EVERY_S` (until then the room looks
fuller by the pages that left: a page may be refused for a half second, never one too many).
Another process's count is what it wrote there, down to 0, or for a process that wrote none
(its pages let in while the broker could not be asked, or only operators' consoles, which the
quota lets in) what it last said in the census. A count is dropped when its process is not in
the census and the count has not changed for three heartbeats as this process saw it (its own
monotonic clock: the processes' wall clocks need not agree): a killed process's pages free
again. When the broker is out of reach, or did not answer within `ASK_S`, pages are let in on
the census's counts at once for `BACK_OFF_S` (logged), and the process's count is written again
once the broker keeps it; a process stopping writes its counts 0."""

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
ASK_S = 2.0  # a page waits this long for the broker, then is let in on the census's counts
BACK_OFF_S = 2.0  # after the broker failed, pages let in on the census's counts this long
Counts = dict[str, tuple[int, float]]  # node: (its pages, a mark of the write: its wall clock)


class KvPageSeats(PageSeats):
    def __init__(self, hall: Hall, kv: KeyValue, node: str, census: SpeakerCensus,
                 connected: Callable[[], bool] = lambda: True,
                 wall: Callable[[], float] = time.time,
                 clock: Callable[[], float] = time.monotonic) -> None:
        """`connected`: whether the broker is in reach now."""
        super().__init__(hall)
        self.kv = kv
        self.connected = connected
        self.node = node
        self.census = census
        self.wall = wall
        self.clock = clock
        self._locks: dict[str, asyncio.Lock] = {}
        self._written: dict[str, int] = {}  # a room's count as this process wrote it last (-1:
        # to be written)
        self._seen: dict[tuple[str, str], tuple[float, float]] = {}  # (room, node): (its
        # write's mark, when this process first read it)
        self._broker_ok = True
        self._not_before = 0.0  # the broker asked again from then on (after a failure)
        self._task: asyncio.Task[None] | None = None

    def start(self) -> None:
        self._task = asyncio.get_running_loop().create_task(self._run(), name="cluster-pages")

    async def stop(self) -> None:
        """The loop stopped, and this process's counts written 0 (best effort, briefly): its
        pages go to other processes, where they count again; a 0 written is what counts, not
        the census's older word."""
        if self._task is not None:
            self._task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._task
        with contextlib.suppress(OSError, TimeoutError):
            async with asyncio.timeout(ASK_S):
                for channel in [c for c, n in self._written.items() if n != 0]:
                    await kvcas.change(self.kv, _key(channel), self._mine(0))

    async def take(self, channel: str, most: int) -> bool:
        if channel not in self.hall.channels:
            return False
        if not self._broker_usable():
            return await self._without_broker(channel, most, OSError("out of reach"))
        lock = self._locks.setdefault(channel, asyncio.Lock())
        async with lock:  # this process's pages of a room let in one after the other
            try:
                async with asyncio.timeout(ASK_S):
                    mine = await kvcas.change(self.kv, _key(channel),
                                              lambda doc: self._one_more(channel, most, doc))
            except (OSError, TimeoutError) as e:
                return await self._without_broker(channel, most, e)
            except BaseException:  # cancelled: the write may have landed: written again
                self._written[channel] = -1
                raise
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
        """The other processes' written counts that still hold, and their pages: each one's
        written count, or for a process that wrote none, what it last said in the census."""
        heard = {n: c for n, c in self.census.counts(channel).items() if n != self.node}
        kept = {n: (c, at) for n, (c, at) in counts.items()
                if n != self.node and (n in heard or self._recent(channel, n, at))}
        for gone in [k for k in self._seen if k[0] == channel and k[1] not in counts]:
            del self._seen[gone]
        pages = (sum(c for c, _at in kept.values())
                 + sum(c for n, c in heard.items() if n not in kept))
        return kept, pages

    def _recent(self, channel: str, node: str, mark: float) -> bool:
        """A count that changed within three heartbeats, as this process saw it."""
        now = self.clock()
        seen = self._seen.get((channel, node))
        if seen is None or seen[0] != mark:
            self._seen[(channel, node)] = (mark, now)
            return True
        return now - seen[1] < 3 * self.census.heartbeat_s

    def _mine(self, count: int) -> Callable[[Any], tuple[None, Any]]:
        """A step writing this process's count of a room."""
        def step(doc: Any) -> tuple[None, Any]:
            return None, _doc({**_counts(doc), self.node: (count, self.wall())})
        return step

    def _without_me(self, doc: Any) -> tuple[None, Any]:
        counts = _counts(doc)
        if self.node not in counts:
            return None, None
        del counts[self.node]
        return None, _doc(counts)

    # ------------------------------------------------------------------ pages that left
    async def _run(self) -> None:
        while True:
            await asyncio.sleep(EVERY_S)
            for channel in list(self._written):
                if not self._broker_usable():
                    break
                try:
                    async with asyncio.timeout(ASK_S):
                        await self._settle(channel)
                    self._broker_back()
                except (OSError, TimeoutError) as e:
                    self._broker_trouble(e)
                except Exception:  # the next round tries again
                    log.exception("cluster: the pages of %s could not be written", channel)
            for channel in [c for c, lock in self._locks.items()
                            if c not in self.hall.channels and c not in self._written
                            and not lock.locked()]:
                del self._locks[channel]

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
            self._written[channel] = -1  # until it is written (a write cut short may land)

            await kvcas.change(self.kv, _key(channel),
                               self._without_me if gone else self._mine(now))
            if gone:
                self._written.pop(channel, None)
                for k in [k for k in self._seen if k[0] == channel]:
                    del self._seen[k]
            else:
                self._written[channel] = now

    async def _without_broker(self, channel: str, most: int, e: BaseException) -> bool:
        """A page let in on the census's counts; this process's count of the room written
        again once the broker can keep it (a write that timed out may land later)."""
        self._broker_trouble(e)
        self._written[channel] = -1
        return await super().take(channel, most)

    def _broker_usable(self) -> bool:
        return self.connected() and self.clock() >= self._not_before

    def _broker_trouble(self, e: BaseException) -> None:
        self._not_before = self.clock() + BACK_OFF_S
        if self._broker_ok:
            log.warning("cluster: the broker cannot count a room's pages (%s): pages are let "
                        "in on the census's counts until it can", str(e) or type(e).__name__)
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
