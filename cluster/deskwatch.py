"""The desk (大会本部) of a cluster: every process serves it from one database
(`desk.database_url` on a PostgreSQL server every process reaches), and keeps the
tournaments in memory. A process that wrote a tournament says so on `<prefix>.desk` (its id,
and whether it was stored whole or deleted); the others load it again from the database at
once and wake their live pages. An announcement lost on the way (the broker restarting) is
caught by `refresh` every `cluster.desk_refresh_s` (5 s): each tournament's version compared
with the database's. Two processes changing one tournament at once never lose a change: each is
written only on the version it was computed from, and computed again when another process
wrote first (hall.deskstore). Only a tournament's id travels on the bus.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
from typing import Any

from cluster.bus import Bus
from hall.deskstore import DeskStore

log = logging.getLogger("yomite.cluster")

MAX_MESSAGE = 1024


class DeskWatch:
    def __init__(self, bus: Bus, store: DeskStore, node: str,
                 refresh_s: float) -> None:
        self.bus = bus
        self.store = store
        self.node = node
        self.refresh_s = refresh_s
        self._sub: Any = None
        self._task: asyncio.Task[None] | None = None
        self._sends: set[asyncio.Task[None]] = set()
        self._inbox: asyncio.Queue[tuple[str, bool]] = asyncio.Queue()

    async def start(self) -> None:
        self._sub = await self.bus.nc.subscribe(self.bus.subjects.desk, cb=self._on_msg)
        self.store.announce = self._announce
        self._task = asyncio.get_running_loop().create_task(self._run(), name="cluster-desk")

    async def stop(self) -> None:
        self.store.announce = None
        if self._sub is not None:
            with contextlib.suppress(Exception):
                await self._sub.unsubscribe()
        for t in [self._task, *self._sends]:
            if t is not None:
                t.cancel()
                with contextlib.suppress(asyncio.CancelledError, Exception):
                    await t

    def _announce(self, tid: str, replaced: bool) -> None:
        data = json.dumps({"node": self.node, "tid": tid, "replaced": replaced}).encode()
        task = asyncio.get_running_loop().create_task(self._send(data))
        self._sends.add(task)
        task.add_done_callback(self._sends.discard)

    async def _send(self, data: bytes) -> None:
        try:
            await self.bus.nc.publish(self.bus.subjects.desk, data)
        except Exception as e:  # the others catch up at their next refresh
            log.info("desk: an announcement was not sent (%s)", e)

    async def _on_msg(self, msg: Any) -> None:
        if len(msg.data) > MAX_MESSAGE:
            return
        try:
            m = json.loads(msg.data)
            node, tid, replaced = str(m["node"]), str(m["tid"]), bool(m["replaced"])
        except (ValueError, KeyError, TypeError):
            log.warning("desk: an announcement that is not one was ignored")
            return
        if node != self.node:
            self._inbox.put_nowait((tid, replaced))

    async def _run(self) -> None:
        """One at a time, in order: the announcements, and every `refresh_s` the refresh (the
        first at once: what changed while this process was loading the tournaments)."""
        loop = asyncio.get_running_loop()
        next_refresh = loop.time()
        while True:
            now = loop.time()
            if now >= next_refresh:  # (due: before any announcement waiting)
                next_refresh = now + self.refresh_s
                try:
                    n = await self.store.refresh()
                except Exception as e:  # the database away: the next refresh tries again
                    log.warning("desk: the tournaments could not be compared with the "
                                "database (%s)", e)
                    continue
                if n:
                    log.info("desk: %d tournament(s) loaded again at the refresh", n)
                continue
            try:
                async with asyncio.timeout(next_refresh - now):
                    tid, replaced = await self._inbox.get()
            except TimeoutError:
                continue
            try:
                await self.store.reload(tid, replaced)
            except Exception as e:
                log.warning("desk: tournament %s could not be loaded again (%s)", tid, e)
