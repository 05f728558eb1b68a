"""The desk in the hall service: the tournaments (hall.deskstore), their live views, and the tie
to the readers (hall.deskreaders).

The live pages' views (the desk's, and the public standings the projectors poll without a
login) are built once per version of the tournament (hall/deskviews.py), in a worker thread
when the tournament is large, and kept as JSON: fifty projectors waking at a result share one
build, and the event loop (which applies the referees' holds) only sends bytes. What changes
without the version (each round's reading, live from its channel) is filled in per request.

A round whose start was interrupted by a crash is matched with its channel's journal at the
next start (hall.roundstarts); a cluster's start another process may still be making, once the
grace is past.

A database that cannot be opened at the start (a server away) leaves the hall reading and the
desk answering 503; it is opened again every few seconds until it answers.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Callable, Coroutine, Sequence
from functools import partial
from typing import Any

from desk import tournament as ops
from desk.model import Round, Tournament
from hall.config import Config
from hall.deskreaders import DeskReaders
from hall.deskstore import DeskStore, Op
from hall.deskviews import PUBLIC_READING, Builds, Built, Kind, build_view, json_bytes
from hall.hall import Hall
from hall.roundstarts import START_GRACE_S, reconcile
from hall.states import RefereeView

log = logging.getLogger("yomite.desk")

# the database opened again after REOPEN_S, then twice as long each time up to REOPEN_MAX_S
REOPEN_S, REOPEN_MAX_S = 1.0, 10.0


class Desk:
    def __init__(self, config: Config, hall: Hall | None) -> None:
        self.config = config
        self.hall = hall
        self.tournament_store = DeskStore(config, self._forget)
        self.readers = DeskReaders(config, hall, self.tournament_store, self._spawn)
        self._later: asyncio.Task[None] | None = None  # starts reconciled after the grace
        self._tasks: set[asyncio.Task[None]] = set()  # the database opened, starts confirmed
        # the live pages' views and the public files: built once per version, shared
        self.views = Builds(self.get)
        self._filled: dict[tuple[str, Kind], tuple[Built, bytes, bytes]] = {}

    # ------------------------------------------------------------------ life
    async def start(self) -> None:
        if not await self.tournament_store.open():
            if self.tournament_store.reopens:
                self._spawn(self._open_later())
            return
        await self._opened()

    async def _opened(self) -> None:
        later = 0
        for t in list(self.tournament_store.cache.values()):
            later += await reconcile(t, self.change, self.readers.channel, self.config)
        if later:  # a cluster's: those another process may have been starting, once it is past
            self._later = asyncio.get_running_loop().create_task(self._reconcile_later())
        log.info("desk: %d tournament(s) loaded", len(self.tournament_store.cache))

    async def _open_later(self) -> None:
        """The database, which did not answer at the start, opened as soon as it does (a
        loop that ends with the server)."""
        wait = REOPEN_S
        while True:
            await asyncio.sleep(wait)
            if await self.tournament_store.open():
                log.info("desk: the database answers again")
                await self._opened()
                return
            wait = min(2 * wait, REOPEN_MAX_S)

    def _spawn(self, work: Coroutine[Any, Any, None]) -> None:
        task = asyncio.get_running_loop().create_task(work)
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)

    async def _reconcile_later(self) -> None:
        while True:
            await asyncio.sleep(START_GRACE_S)
            later = 0
            for t in self.tournaments():
                later += await reconcile(t, self.change, self.readers.channel, self.config)
            if not later:
                return

    async def stop(self) -> None:
        for task in [self._later, *self._tasks]:
            if task is not None:
                task.cancel()
                with contextlib.suppress(asyncio.CancelledError, Exception):
                    await task
        await self.tournament_store.close()
        self.views.close()

    # ------------------------------------------------------------------ tournaments
    def get(self, tid: str) -> Tournament:
        return self.tournament_store.get(tid)

    def tournaments(self) -> list[Tournament]:
        return self.tournament_store.tournaments()

    async def create(self, tid: str | None, name: str, day: str, rounds: int | None,
                     cards: int | None, finalists: int = 2) -> Tournament:
        return await self.tournament_store.create(tid, name, day, rounds, cards, finalists)

    async def store(self, t: Tournament, replace_existing: bool = False) -> Tournament:
        """A whole tournament (new or imported) into the database and memory."""
        return await self.tournament_store.store(t, replace_existing)

    async def delete(self, tid: str) -> None:
        await self.tournament_store.delete(tid)

    async def change(self, tid: str, op: Op) -> Tournament:
        """Apply one desk step (hall.deskstore.DeskStore.change)."""
        return await self.tournament_store.change(tid, op)

    async def changes(self, tid: str, make: Callable[[Tournament], Sequence[ops.Change]]
                      ) -> Tournament:
        return await self.tournament_store.changes(tid, make)

    async def wait(self, tid: str, after: int, timeout_s: float) -> Tournament:
        """The tournament once its version is past `after` (or as it is after `timeout_s`)."""
        return await self.tournament_store.wait(tid, after, timeout_s)

    # ------------------------------------------------------------------ the live views
    def _forget(self, tid: str) -> None:
        """A tournament stored whole or deleted: what was built from it is gone."""
        self.views.forget(tid)
        for kind in ("desk", "public"):
            self._filled.pop((tid, kind), None)

    async def view_json(self, tid: str, kind: Kind, after: int | None = None) -> bytes:
        """The desk's (`desk`) or the public (`public`) view of the tournament as JSON; with
        `after`, once the version is past it (or as it is after desk.long_poll_s). Built once
        per version (in a worker thread for a large tournament); each round's live reading
        filled in as it is now."""
        t = self.get(tid)
        if after is not None and t.version <= after:
            t = await self.wait(tid, after, self.config.desk.long_poll_s)
        b: Built = await self.views.made(tid, kind, partial(build_view, kind), t.version)
        values: list[object] = []
        for r in b.rounds:
            live = self.readers.reading_state(r) if r is not None else None
            if kind == "public" and live is not None:
                live = {k: live.get(k) for k in PUBLIC_READING}
            values.append(live)
        filled = json_bytes(values)
        kept = self._filled.get((tid, kind))
        if kept is not None and kept[0] is b and kept[1] == filled:
            return kept[2]
        body = b.fill(values)
        self._filled[(tid, kind)] = (b, filled, body)
        return body

    # ------------------------------------------------------------------ the readers
    # (the web edge's entry points; the work is hall.deskreaders')
    def reading_state(self, r: Round) -> dict[str, Any] | None:
        return self.readers.reading_state(r)

    async def start_round(self, tid: str, number: int, blocks: Sequence[str] | None,
                          again: bool = False) -> tuple[Tournament, list[dict[str, Any]]]:
        return await self.readers.start_round(tid, number, blocks, again)

    async def memorise(self, tid: str, number: int, blocks: Sequence[str] | None) -> list[str]:
        return await self.readers.memorise(tid, number, blocks)

    async def extra_card(self, tid: str, number: int, block: str) -> Tournament:
        return await self.readers.extra_card(tid, number, block)

    async def close_round(self, tid: str, number: int, blocks: Sequence[str] | None
                          ) -> list[str]:
        return await self.readers.close_round(tid, number, blocks)

    def block_of_channel_referee(self, channel: str) -> tuple[RefereeView, ...]:
        return self.readers.block_of_channel_referee(channel)
