"""The desk's database thread: every call to the database runs there, one at a time and in order
(the desk's own inbox), and no caller waits on it for longer than the call allows.

A database that does not answer (a server hung, or cut off by the network) keeps no caller
waiting: once the thread has waited on it for `desk.database_timeout_s`, every call waiting
for it is answered 503 `storage_unreachable` (nothing was recorded: each call is an
`Attempt` the thread will not write once its caller gave up), and the connection is cut so
the thread is free for the next call (desk.repository.watch). A call whose commit had begun is
answered with the commit's fate, or 503 `storage_unsure`; a change answered so has its
tournament loaded again once the database answers (`guarded`: what the database holds is the
truth).
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Awaitable, Callable
from concurrent.futures import ThreadPoolExecutor
from functools import partial
from typing import Any, TypeVar

from desk.errors import StorageError
from desk.repository.watch import Abandoned, Attempt, Phase, Watch

log = logging.getLogger("yomite.desk")

T = TypeVar("T")
# how often a caller looks whether the database has been waited on too long
POLL_S = 0.1
# once a commit has begun and the connection is cut, how long its fate is waited for
VERDICT_S = 2.0
# opening the database (a migration, another process's migration waited for) and loading every
# tournament, or storing a whole one, may take longer than a step (and keeps the steps waiting
# behind it as long, if the database does not answer)
LONG_CALL_S = 20.0
# a tournament whose last change's fate is unknown is loaded again every RELOAD_S, at most
# RELOAD_TRIES times
RELOAD_S, RELOAD_TRIES = 2.0, 150


class DeskThread:
    """The thread and its watch (`timeout_s`: how long a desk step may wait on the database).
    `reload(tid)` loads a tournament again from the database (True if it changed there);
    `reloaded(tid)` is told when a change of unknown fate turns out to have been written."""

    def __init__(self, timeout_s: float, reload: Callable[[str], Awaitable[bool]],
                 reloaded: Callable[[str], None]) -> None:
        self._db = ThreadPoolExecutor(1, thread_name_prefix="desk-db")
        self.watch = Watch(timeout_s)
        self._reload = reload
        self._reloaded = reloaded
        self._reloads: dict[str, asyncio.Task[None]] = {}

    async def close(self, last: Callable[[], None] | None = None) -> None:
        """The thread stopped, after `last` (the database closed) if given; a call waiting on a
        silent server ends now."""
        for task in self._reloads.values():
            task.cancel()
        self.watch.cut()
        if last is not None:
            with contextlib.suppress(StorageError):
                await self.call(last)
        self._db.shutdown(wait=True)
        self.watch.forget_all()

    # ------------------------------------------------------------------ calls
    async def call(self, fn: Callable[..., T], *args: Any, allow_s: float | None = None) -> T:
        """`fn(*args)` in the database thread, given up (503, nothing recorded) once the
        database has been waited on for longer than the call running there allows (this one
        or one before it in the thread), or, not begun yet, once a call made before it found
        the database not answering; unless its commit had begun."""
        attempt = Attempt(allow_s if allow_s is not None else self.watch.timeout_s)
        seen = self.watch.failures
        loop = asyncio.get_running_loop()
        fut = loop.run_in_executor(self._db, partial(self._run, attempt, seen, fn, *args))
        while True:
            done, _ = await asyncio.wait({fut}, timeout=POLL_S)
            if done:
                return fut.result()
            overdue = self.watch.overdue()
            behind = attempt.phase is Phase.QUEUED and self.watch.failures != seen
            if not (overdue or behind):
                continue
            if overdue and (n := self.watch.cut()):
                log.warning("desk database: no answer in %g s: %d connection(s) cut",
                            self.watch.timeout_s, n)
            if attempt.abandon():
                fut.add_done_callback(_quietly)
                raise _unanswered(self.watch.timeout_s, behind)
            # its commit had begun: the commit's fate, once the cut connection gives it
            done, _ = await asyncio.wait({fut}, timeout=VERDICT_S)
            if done:
                return fut.result()
            fut.add_done_callback(_quietly)
            raise StorageError(
                "the desk's database stopped answering during the commit: the change may or "
                "may not have been recorded", "reload the desk to see whether it was; a "
                "result sent again is recorded once", code="storage_unsure")

    def _run(self, attempt: Attempt, seen: int, fn: Callable[..., T], *args: Any) -> T:
        """In the database thread: `fn`, unless its caller has given up already, or a call
        made before it found the database not answering (`seen`: the count of those when it
        was made; it is answered at once, not tried again after each). A database that did
        not answer is counted."""
        if self.watch.failures != seen and attempt.abandon():
            raise _unanswered(self.watch.timeout_s, True)
        attempt.start()
        self.watch.attempt = attempt
        try:
            return fn(*args)
        except Abandoned:
            raise
        except StorageError as e:
            if e.code in ("storage_unreachable", "storage_unsure"):
                self.watch.failed()
            raise
        finally:
            self.watch.attempt = None

    # ------------------------------------------------------------------ a commit in doubt
    async def guarded(self, tid: str, call: Awaitable[T]) -> T:
        """`call`, a change of `tid`: if its fate is unknown (`storage_unsure`), the
        tournament is loaded again once the database answers (what it holds is the truth)."""
        try:
            return await call
        except StorageError as e:
            if e.code == "storage_unsure" and tid not in self._reloads:
                task = asyncio.get_running_loop().create_task(self._reload_when_back(tid))
                self._reloads[tid] = task
                task.add_done_callback(lambda _t: self._reloads.pop(tid, None))
            raise

    async def _reload_when_back(self, tid: str) -> None:
        """Loaded again every RELOAD_S until its version moves, or until the database has
        answered for as long as its own limits let a transaction live (the commit in doubt
        may still be running on the server: it ends by then, one way or the other)."""
        answered = 0.0
        for _ in range(RELOAD_TRIES):
            await asyncio.sleep(RELOAD_S)
            try:
                changed = await self._reload(tid)
            except StorageError:
                continue
            if changed:
                self._reloaded(tid)
                return
            answered += RELOAD_S
            if answered > self.watch.settle_s:
                return
        log.error("desk: tournament %s could not be loaded again after a commit of unknown "
                  "fate: restart the server once the database answers", tid)


def _unanswered(timeout_s: float, behind: bool) -> StorageError:
    why = ("did not answer a call made before this one" if behind
           else f"did not answer within {timeout_s:g} s")
    return StorageError(f"the desk's database {why}: nothing was recorded",
                        "send it again in a few seconds; if this goes on, check the database "
                        "server and the network (desk.database_url)",
                        code="storage_unreachable")


def _quietly(fut: asyncio.Future[Any]) -> None:
    """A call given up on: its end (Abandoned, or the cut connection's error) is nobody's."""
    if not fut.cancelled() and (e := fut.exception()) is not None \
            and not isinstance(e, Abandoned):
        log.info("desk: a call given up on ended with %s", e)
