"""The desk's tournaments: kept in memory, and written through one database thread, in order.

Every step runs in that thread (the desk's own inbox): load the tournament from memory, let
`desk.tournament` compute the change, write it in one transaction, keep the new tournament in
memory. The event loop never waits on the database, so a referee's hold is never slowed by a
result being written. Live pages wait on a tournament's version.
"""

from __future__ import annotations

import asyncio
import logging
import secrets
from collections.abc import Callable, Sequence
from concurrent.futures import ThreadPoolExecutor
from datetime import UTC, datetime
from functools import partial
from pathlib import Path
from typing import TYPE_CHECKING, Any, TypeVar

from desk import tournament as ops
from desk.errors import Conflict, Invalid, NotFound, StorageError
from desk.export import RESERVED_IDS, TOURNAMENT_ID
from desk.model import Settings, Tournament
from hall.config import Config

if TYPE_CHECKING:  # SQLAlchemy and Alembic are loaded when the database is first opened
    from desk.repository import Repository

log = logging.getLogger("yomite.desk")

T = TypeVar("T")
Op = Callable[[Tournament], "ops.Change | None"]


def now_iso() -> str:
    return datetime.now(UTC).isoformat(timespec="microseconds")


class DeskStore:
    """The tournaments. `on_replaced(tid)` is called when a tournament is stored whole or
    deleted (what was built from its earlier versions is forgotten)."""

    def __init__(self, config: Config, on_replaced: Callable[[str], None]) -> None:
        self.config = config
        self.repo: Repository | None = None
        self.fault: StorageError | None = None  # the database could not be opened
        self.cache: dict[str, Tournament] = {}
        self._db = ThreadPoolExecutor(1, thread_name_prefix="desk-db")
        self._changed: dict[str, asyncio.Event] = {}
        self._on_replaced = on_replaced
        self._opening = asyncio.Lock()

    # ------------------------------------------------------------------ life
    async def open(self) -> bool:
        """Open the database and load every tournament; False (and `fault` says why) if it
        cannot be opened.

        A SQLite file that does not exist yet holds no tournament: it is created at the
        first tournament (`_ready`), so a hall that never uses the desk starts without loading
        SQLAlchemy and Alembic (0.4 s of CPU, a sixth of a start)."""
        if _no_file_yet(self.config.desk.database_url):
            return True
        try:
            self.repo = await self._call(_open_repository, self.config.desk.database_url)
        except StorageError as e:
            # a full or read-only disk must not keep the hall from reading: the desk answers
            # 503 with the reason until the server is started again with room to write
            self.fault = e
            log.error("the desk is unavailable: %s", e)
            return False
        summaries = await self._call(self.repo.summaries)
        for s in summaries:
            t = await self._call(self.repo.load, s.id)
            if t is not None:
                self.cache[t.id] = t
        return True

    async def close(self) -> None:
        if self.repo is not None:
            await self._call(self.repo.close)
        self._db.shutdown(wait=True)

    async def _call(self, fn: Callable[..., T], *args: Any) -> T:
        loop = asyncio.get_running_loop()
        return await loop.run_in_executor(self._db, partial(fn, *args))

    async def _ready(self) -> Repository:
        """The open database: opened (and created) now if `open` left it for the first
        tournament. Opening it then can fail (a full disk): the error is the answer to this
        request, and the next one tries again."""
        if self.repo is None and self.fault is None:
            async with self._opening:
                if self.repo is None:
                    self.repo = await self._call(_open_repository,
                                                 self.config.desk.database_url)
        if self.repo is None:
            raise self.fault or StorageError("the desk's database is not open")
        return self.repo

    # ------------------------------------------------------------------ tournaments
    def get(self, tid: str) -> Tournament:
        if self.fault is not None:
            raise self.fault
        t = self.cache.get(tid)
        if t is None:
            raise NotFound(f"there is no tournament {tid!r}",
                           "GET /api/tournaments lists them" if self.cache
                           else "create one at the desk (/desk)")
        return t

    def tournaments(self) -> list[Tournament]:
        if self.fault is not None:
            raise self.fault
        return sorted(self.cache.values(), key=lambda t: t.created_at)

    async def create(self, tid: str | None, name: str, day: str, rounds: int | None,
                     cards: int | None, finalists: int = 2) -> Tournament:
        if tid is None:
            tid = "t" + secrets.token_hex(3)
        if not TOURNAMENT_ID.match(tid) or tid in RESERVED_IDS:
            raise Invalid(f"{tid!r} cannot be a tournament id",
                          "lower-case letters, digits and dashes, e.g. hiroshima-2025")
        t = Tournament(
            id=tid, name=name, day=day,
            settings=Settings(rounds=rounds or self.config.desk.rounds,
                              cards=cards or self.config.match.cards, finalists=finalists),
            created_at=now_iso(), lottery_seed=secrets.randbelow(1_000_000),
            pairing_seed=secrets.randbelow(1_000_000))
        return await self.store(t)

    async def store(self, t: Tournament, replace_existing: bool = False) -> Tournament:
        """A whole tournament (new or imported) into the database and memory."""
        repo = await self._ready()

        def work() -> Tournament:
            if t.id in self.cache and not replace_existing:
                raise Conflict(f"there is already a tournament {t.id!r}",
                               "choose another id, or import with replace=true")
            if replace_existing:
                repo.delete(t.id)
            repo.create(t)
            self.cache[t.id] = t
            return t

        out = await self._call(work)
        self._on_replaced(t.id)
        self._notify(t.id)
        return out

    async def delete(self, tid: str) -> None:
        self.get(tid)
        repo = await self._ready()

        def work() -> None:
            repo.delete(tid)
            self.cache.pop(tid, None)

        await self._call(work)
        self._on_replaced(tid)
        self._notify(tid)

    async def change(self, tid: str, op: Op) -> Tournament:
        """Apply one desk step: computed, written and kept in memory in the database thread."""
        repo = await self._ready()

        def work() -> tuple[Tournament, bool]:
            t = self.get(tid)
            ch = op(t)
            if ch is None:
                return t, False
            repo.apply(tid, t.version, ch)
            new = ops.apply(t, ch)
            self.cache[tid] = new
            return new, True

        t, changed = await self._call(work)
        if changed:
            self._notify(tid)
        return t

    async def changes(self, tid: str, make: Callable[[Tournament], Sequence[ops.Change]]
                      ) -> Tournament:
        """Several changes computed together (every block's pairing): all are checked before
        the first is written; each is its own transaction."""
        repo = await self._ready()

        def work() -> Tournament:
            t = self.get(tid)
            for ch in make(t):
                repo.apply(tid, t.version, ch)
                t = ops.apply(t, ch)
                self.cache[tid] = t
            return t

        out = await self._call(work)
        self._notify(tid)
        return out

    # ------------------------------------------------------------------ live pages
    def _notify(self, tid: str) -> None:
        ev = self._changed.pop(tid, None)
        if ev is not None:
            ev.set()

    async def wait(self, tid: str, after: int, timeout_s: float) -> Tournament:
        """The tournament once its version is past `after` (or as it is after `timeout_s`)."""
        t = self.get(tid)
        if t.version > after:
            return t
        ev = self._changed.setdefault(tid, asyncio.Event())
        try:
            async with asyncio.timeout(timeout_s):
                await ev.wait()
        except TimeoutError:
            pass
        return self.get(tid)


def _open_repository(url: str) -> Repository:
    from desk.repository import open_repository

    return open_repository(url)


def _no_file_yet(url: str) -> bool:
    """True for a SQLite URL whose file does not exist (relative paths from the working
    directory, as SQLAlchemy reads them)."""
    scheme, sep, rest = url.partition(":///")
    if not sep or scheme.split("+")[0] != "sqlite":
        return False
    path = rest.split("?")[0]
    return bool(path) and path != ":memory:" and not Path(path).exists()
