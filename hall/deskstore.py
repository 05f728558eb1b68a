"""The desk's tournaments: kept in memory, and written through one database thread, in order.

Every step runs in that thread (the desk's own inbox): load the tournament from memory, let
`desk.tournament` compute the change, write it in one transaction, keep the new tournament in
memory. The event loop never waits on the database, so a referee's hold is never slowed by a
result being written. Live pages wait on a tournament's version.

A database that does not answer (a server hung, or cut off by the network) keeps no caller
waiting: the thread answers 503 within `desk.database_timeout_s`, and a change whose commit's
fate it does not know is loaded again once the database answers (hall.deskthread). A database
that could not be opened is opened again (`Desk`).

Several processes on one database (a cluster's, on PostgreSQL): each change is written only if
the tournament's version is still the one it was computed from (desk.repository); when another
process wrote first (`Stale`), the latest is loaded and the change computed again from it, so
two desks entering results at once both land. `announce(tid, replaced)` tells the others
(cluster.deskwatch), which `reload` what changed; `refresh` compares every version with the
database's (what a lost announcement missed).
"""

from __future__ import annotations

import asyncio
import logging
import secrets
from collections.abc import Callable, Sequence
from datetime import UTC, datetime
from pathlib import Path
from typing import TYPE_CHECKING

from desk import tournament as ops
from desk.errors import Conflict, Invalid, NotFound, Stale, StorageError
from desk.export import RESERVED_IDS, TOURNAMENT_ID
from desk.model import Settings, Tournament
from desk.repository.watch import Watch
from hall.config import Config
from hall.deskthread import LONG_CALL_S, DeskThread

if TYPE_CHECKING:  # SQLAlchemy and Alembic are loaded when the database is first opened
    from desk.repository import Repository

log = logging.getLogger("yomite.desk")

# a change computed again from the latest version at most this many times (each time another
# process wrote first: every try means someone's change landed)
MAX_TRIES = 50
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
        # (a change of unknown fate found written: the others may have missed it too)
        self._thread = DeskThread(config.desk.database_timeout_s, self.reload,
                                  lambda tid: self._announce(tid, False))
        self.watch = self._thread.watch  # (the call the thread runs, the connections cut)
        self._changed: dict[str, asyncio.Event] = {}
        self._on_replaced = on_replaced
        self._opening = asyncio.Lock()
        # told of every tournament written here: (id, stored whole or deleted)
        self.announce: Callable[[str, bool], None] | None = None

    # ------------------------------------------------------------------ life
    async def open(self) -> bool:
        """Open the database and load every tournament; False (and `fault` says why) if it
        cannot be opened. Called again while it fails to be (a server that did not answer).

        A SQLite file that does not exist yet holds no tournament: it is created at the
        first tournament (`_ready`), so a hall that never uses the desk starts without loading
        SQLAlchemy and Alembic (0.4 s of CPU, a sixth of a start)."""
        if _no_file_yet(self.config.desk.database_url):
            return True
        url = self.config.desk.database_url

        def work() -> tuple[Repository, dict[str, Tournament]]:
            repo = _open_repository(url, self.watch)
            try:
                loaded = {}
                for s in repo.summaries():
                    t = repo.load(s.id)
                    if t is not None:
                        loaded[t.id] = t
                self.watch.before_commit()  # (its caller gone: nothing kept)
            except BaseException:
                repo.close()
                raise
            return repo, loaded

        try:
            repo, loaded = await self._thread.call(work, allow_s=LONG_CALL_S)
        except StorageError as e:
            # a full or read-only disk, a database server away, must not keep the hall from
            # reading: the desk answers 503 with the reason until it opens
            self.fault = e
            log.error("the desk is unavailable: %s", e.detail)
            return False
        self.repo, self.fault = repo, None
        self.cache.update(loaded)
        return True

    @property
    def reopens(self) -> bool:
        """The database could not be opened for a reason that may pass (a server away)."""
        return self.fault is not None and self.fault.code == "storage_unreachable"

    async def close(self) -> None:
        await self._thread.close(self.repo.close if self.repo is not None else None)

    async def _ready(self) -> Repository:
        """The open database: opened (and created) now if `open` left it for the first
        tournament. Opening it then can fail (a full disk): the error is the answer to this
        request, and the next one tries again."""
        if self.repo is None and self.fault is None:
            async with self._opening:
                if self.repo is None:
                    self.repo = await self._thread.call(
                        _open_repository, self.config.desk.database_url, self.watch,
                        allow_s=LONG_CALL_S)
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
                               "choose another id, or import with replace=true",
                               code="tournament_exists")
            repo.create(t, replace=replace_existing)  # (the one it replaces: in the same
            self.cache[t.id] = t                      # transaction)
            return t

        # (a whole day imported may take longer to write than a step)
        out = await self._thread.guarded(t.id, self._thread.call(
            work, allow_s=LONG_CALL_S if t.players or t.rounds else None))
        self._on_replaced(t.id)
        self._notify(t.id)
        self._announce(t.id, True)
        return out

    async def delete(self, tid: str) -> None:
        self.get(tid)
        repo = await self._ready()

        def work() -> None:
            repo.delete(tid)
            self.cache.pop(tid, None)

        await self._thread.guarded(tid, self._thread.call(work))
        self._on_replaced(tid)
        self._notify(tid)
        self._announce(tid, True)

    async def change(self, tid: str, op: Op) -> Tournament:
        """Apply one desk step: computed, written and kept in memory in the database thread
        (computed again from the latest version while another process wrote first)."""
        repo = await self._ready()

        def work() -> tuple[Tournament, bool]:
            for _ in range(MAX_TRIES):
                t = self.get(tid)
                ch = op(t)
                if ch is None:
                    return t, False
                try:
                    repo.apply(tid, t.version, ch)
                except Stale:
                    self._load(repo, tid)
                    continue
                new = ops.apply(t, ch)
                self.cache[tid] = new
                return new, True
            raise Stale("the tournament was changed meanwhile, again and again",
                        "reload the desk and do it again")

        before = self.get(tid).version
        changed = False
        try:
            t, changed = await self._thread.guarded(tid, self._thread.call(work))
        finally:
            now = self.cache.get(tid)
            if changed or (now is not None and now.version != before):
                self._notify(tid)  # (or another process's change, loaded here)
        if changed:
            self._announce(tid, False)
        return t

    async def changes(self, tid: str, make: Callable[[Tournament], Sequence[ops.Change]]
                      ) -> Tournament:
        """Several changes computed together (every block's pairing), written in one
        transaction: all or none. If another process wrote first, they are computed again
        from the latest."""
        repo = await self._ready()

        def work() -> Tournament:
            for _ in range(MAX_TRIES):
                t = self.get(tid)
                chs = list(make(t))
                if not chs:
                    return t
                try:
                    repo.apply_all(tid, t.version, chs)
                except Stale:
                    self._load(repo, tid)
                    continue
                for ch in chs:
                    t = ops.apply(t, ch)
                self.cache[tid] = t
                return t
            raise Stale("the tournament was changed meanwhile, again and again",
                        "reload the desk and do it again")

        before = self.get(tid).version
        try:
            out = await self._thread.guarded(tid, self._thread.call(work))
        finally:
            if (t := self.cache.get(tid)) is not None and t.version != before:
                self._notify(tid)
                self._announce(tid, False)
        return out

    # ------------------------------------------------------------------ other processes
    def _load(self, repo: Repository, tid: str) -> Tournament | None:
        """The database's tournament into memory (in the database thread)."""
        t = repo.load(tid)
        if t is None:
            self.cache.pop(tid, None)
        else:
            self.cache[tid] = t
        return t

    async def reload(self, tid: str, replaced: bool = False) -> bool:
        """Another process wrote `tid` (`replaced`: stored whole or deleted): the database's
        version into memory, and the live pages told. True if it changed here."""
        if self.repo is None:
            return False
        repo = self.repo
        before = self.cache.get(tid)
        t = await self._thread.call(self._load, repo, tid)
        if t is not None and before is not None and t.version == before.version \
                and not replaced:
            return False
        if replaced or t is None or before is None or t.version < before.version:
            self._on_replaced(tid)
        self._notify(tid)
        return True

    async def refresh(self) -> int:
        """Every tournament whose version here is not the database's, loaded again (and those
        deleted, forgotten): what an announcement lost on the way would have said. The number
        that changed."""
        if self.repo is None:
            if self.fault is not None or _no_file_yet(self.config.desk.database_url):
                return 0
            await self._ready()  # another process made the first tournament
            assert self.repo is not None
        repo = self.repo
        summaries = await self._thread.call(repo.summaries)
        there = {s.id: s.version for s in summaries}
        stale = [tid for tid, v in there.items()
                 if (t := self.cache.get(tid)) is None or t.version != v]
        gone = [tid for tid in list(self.cache) if tid not in there]  # (the thread's dict)
        for tid in stale + gone:
            await self.reload(tid, replaced=tid in gone)
        return len(stale) + len(gone)

    def _announce(self, tid: str, replaced: bool) -> None:
        if self.announce is not None:
            try:
                self.announce(tid, replaced)
            except Exception:  # the others catch up at their next refresh
                log.exception("desk: telling the other processes of %s failed", tid)

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


def _open_repository(url: str, watch: Watch) -> Repository:
    from desk.repository import open_repository

    return open_repository(url, watch=watch)


def _no_file_yet(url: str) -> bool:
    """True for a SQLite URL whose file does not exist (relative paths from the working
    directory, as SQLAlchemy reads them)."""
    scheme, sep, rest = url.partition(":///")
    if not sep or scheme.split("+")[0] != "sqlite":
        return False
    path = rest.split("?")[0]
    return bool(path) and path != ":memory:" and not Path(path).exists()
