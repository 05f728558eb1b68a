"""How long the desk's database may keep a caller waiting, and what is done when it does.

The desk writes from one database thread (hall.deskthread); its callers are requests that must be
answered within seconds whatever the database does. A server that stopped answering (hung, cut
off by the network, its packets vanishing) keeps a driver waiting on an open socket for minutes:
no error comes. So each call is an `Attempt` the caller and the thread agree on under a lock:

- the caller gives up (`abandon`) when the database has been waited on past the allowance of
  the call the thread runs, or, its own call not begun, when a call made before it found the
  database not answering (`failures`), and answers "nothing was recorded" at once; the thread,
  when it comes to the call, or to its commit, sees that and writes nothing (a refused change
  is never applied later, when the database answers again);
- once the thread has begun a commit (`commit`), the caller cannot give up: the commit's fate
  is the answer, and if the database does not give it, the answer says it is unknown (the same
  change computed again finds the tournament's version moved and is not applied twice).

`Watch` is the thread's side: how long the database has been waited on (a session, a connect:
never the desk's own computing, a round's pairing), the options every PostgreSQL connection is
opened with (a connect timeout, TCP keepalives and a TCP user timeout, server-side statement
and idle-transaction timeouts), and `cut`: the sockets of the connections shut (not closed:
the driver's descriptor stays its own) so that a statement waiting on a silent server fails at
once and the thread is free for the next call.
"""

from __future__ import annotations

import contextlib
import enum
import logging
import math
import os
import socket
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

from ..errors import StorageError

log = logging.getLogger("yomite.desk")

# the database's own limits, a server-side net under the thread's: a statement (a lock waited
# on) and a transaction left open by a process that froze end there
SERVER_LIMIT_S = 15.0
# TCP: an idle connection to a machine that vanished is found dead in about 10 + 3 × 3 s; data
# not acknowledged for TCP_USER_TIMEOUT_S fails the connection (a cut network, not a slow one)
KEEPALIVE_IDLE_S, KEEPALIVE_INTERVAL_S, KEEPALIVE_COUNT = 10, 3, 3
TCP_USER_TIMEOUT_S = 10.0


class Abandoned(StorageError):
    """The call's caller gave up on it before its commit: nothing is written."""

    code = "storage_unreachable"


class Phase(enum.Enum):
    QUEUED = "queued"
    RUNNING = "running"
    COMMITTING = "committing"  # a commit has begun: the call's outcome is the database's
    ABANDONED = "abandoned"


class Attempt:
    """One call to the database thread. `allow_s`: how long the database may be waited on in
    it (a session, a connect) before its caller gives up."""

    def __init__(self, allow_s: float) -> None:
        self.allow_s = allow_s
        self.phase = Phase.QUEUED
        self._lock = threading.Lock()  # held for an assignment, never across a wait

    def start(self) -> None:
        """The thread comes to the call: Abandoned if its caller has already answered."""
        with self._lock:
            if self.phase is Phase.ABANDONED:
                raise Abandoned("the caller gave up on this call before it began")
            self.phase = Phase.RUNNING

    def commit(self) -> None:
        """The thread is about to commit: Abandoned (and nothing is committed) if the caller
        gave up; otherwise the caller waits for the commit's fate."""
        with self._lock:
            if self.phase is Phase.ABANDONED:
                raise Abandoned("the caller gave up on this call before its commit")
            self.phase = Phase.COMMITTING

    def check(self) -> None:
        """Abandoned if the caller gave up (a read ends there: nobody waits for it)."""
        if self.phase is Phase.ABANDONED:
            raise Abandoned("the caller gave up on this call")

    def abandon(self) -> bool:
        """The caller gives up: True if nothing of the call will be written (it had not begun
        a commit), False if a commit has begun (its fate is the answer)."""
        with self._lock:
            if self.phase is Phase.COMMITTING:
                return False
            self.phase = Phase.ABANDONED
            return True


class Watch:
    """The database thread's calls and its connections (one thread: `attempt` is the call it
    runs). `timeout_s`: how long a desk step may wait on the database."""

    def __init__(self, timeout_s: float = 2.5) -> None:
        self.timeout_s = timeout_s
        self.attempt: Attempt | None = None
        self._since: float | None = None  # the thread has waited on the database since
        self.failures = 0  # calls the database did not answer (the thread's count)
        self._sockets: dict[int, socket.socket] = {}  # a duplicate of each connection's
        self._lock = threading.Lock()

    @property
    def server_limit_s(self) -> float:
        """The server's statement and idle-transaction timeouts."""
        return max(SERVER_LIMIT_S, 3 * self.timeout_s)

    @property
    def settle_s(self) -> float:
        """How long after a commit in doubt the server may still carry it out (its statement
        timeout, and a margin): past that, what the database holds is its outcome."""
        return self.server_limit_s + 5.0

    # ------------------------------------------------------------------ the thread's side
    @contextmanager
    def waiting(self) -> Iterator[None]:
        """The thread waits on the database within this block (nested blocks count once)."""
        if self._since is not None:
            yield
            return
        self._since = time.monotonic()
        try:
            yield
        finally:
            self._since = None

    def failed(self) -> None:
        """A call the database did not answer (or failed on): those waiting behind it give
        up rather than try it again one after the other."""
        self.failures += 1

    def before_commit(self, writes: bool = True) -> None:
        """A transaction is about to commit: a write's commit is the call's point of no
        return (Attempt.commit); a read's is not."""
        if self.attempt is not None:
            if writes:
                self.attempt.commit()
            else:
                self.attempt.check()

    # ------------------------------------------------------------------ the caller's side
    def overdue(self) -> bool:
        """The database has been waited on for longer than the running call allows."""
        since, attempt = self._since, self.attempt
        allow = attempt.allow_s if attempt is not None else self.timeout_s
        return since is not None and time.monotonic() - since > allow

    def cut(self) -> int:
        """Shut every connection's socket (the thread's statement, a ping, a commit waiting on
        a silent server fail at once; each connection is then found broken and replaced).
        Quick, and safe from any thread: the sockets are duplicates this watch owns, so a
        descriptor the driver closed and the process reused is never touched. The number
        shut."""
        with self._lock:
            socks = list(self._sockets.values())
        for s in socks:
            with contextlib.suppress(OSError):  # (not connected any more)
                s.shutdown(socket.SHUT_RDWR)
        return len(socks)

    # ------------------------------------------------------------------ connections
    def server_options(self, cparams: dict[str, Any]) -> None:
        """A PostgreSQL (libpq) connection's limits, each unless the URL sets its own: the
        connect timeout (whole seconds, libpq's least 2), just over a step's allowance, so
        that a silent server is found overdue while the connect still waits and every call
        behind it is answered at once; keepalives, the TCP user timeout, and the server's
        statement and idle-transaction timeouts."""
        cparams.setdefault("connect_timeout", str(max(2, math.floor(self.timeout_s) + 1)))
        cparams.setdefault("keepalives", "1")
        cparams.setdefault("keepalives_idle", str(KEEPALIVE_IDLE_S))
        cparams.setdefault("keepalives_interval", str(KEEPALIVE_INTERVAL_S))
        cparams.setdefault("keepalives_count", str(KEEPALIVE_COUNT))
        cparams.setdefault("tcp_user_timeout", str(int(TCP_USER_TIMEOUT_S * 1000)))
        limit = int(self.server_limit_s * 1000)
        ours = (f"-c statement_timeout={limit} "
                f"-c idle_in_transaction_session_timeout={limit}")
        given = cparams.get("options")
        cparams["options"] = f"{given} {ours}" if given else ours

    def track(self, dbapi_connection: Any) -> None:
        """A new connection: a duplicate of its socket kept, to be shut by `cut`."""
        pgconn = getattr(dbapi_connection, "pgconn", None)  # psycopg's; others are not cut
        if pgconn is None:
            return
        try:
            dup = socket.socket(fileno=os.dup(pgconn.socket))
        except OSError as e:
            log.warning("desk database: a connection cannot be watched (%s)", e)
            return
        with self._lock:
            old = self._sockets.pop(id(dbapi_connection), None)
            self._sockets[id(dbapi_connection)] = dup
        if old is not None:
            old.close()

    def forget(self, dbapi_connection: Any) -> None:
        """A connection closed (or about to be): its duplicate closed."""
        with self._lock:
            dup = self._sockets.pop(id(dbapi_connection), None)
        if dup is not None:
            dup.close()

    def forget_all(self) -> None:
        with self._lock:
            socks = list(self._sockets.values())
            self._sockets.clear()
        for s in socks:
            s.close()
