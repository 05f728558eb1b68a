"""The owner's journal lines sent to the broker's stream, in order, each acknowledged by the
broker (on its disk) before the command that made it is answered (`flushed`).

The runtime writes its journal file as on one machine (hall.journalkeeper); each line is also
handed here (`tap`, on the event loop, never waiting) and one task sends them in order, trying
a line again until the broker takes it (a line sent twice within the stream's window is stored
once: its message id). A broker out of reach holds the answers, never the reading: a hold
stops the sound at once and is answered when its line is stored, or with an error after
`timeout_s`, saying that it was applied but is not yet in the cluster's journal.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import secrets
from collections import deque
from collections.abc import Callable
from typing import Any

from nats.js.errors import APIError

from cluster import journalline
from cluster.bus import Bus
from cluster.lease import Lease
from hall.errors import JournalUnavailable

log = logging.getLogger("yomite.cluster")

ORIGIN = "Yomite-Origin"
EXPECTED_LAST = "Nats-Expected-Last-Subject-Sequence"
WRONG_LAST_SEQUENCE = 10071  # JetStream: the subject's last sequence is not the one expected


class JournalStream:
    """`last_seq`: the stream's sequence number of the channel's last line when this process
    took the channel. Each line is stored only if the channel's last line is still the one this
    process stored before it (JetStream's expected last subject sequence): a process that lost
    its lease without knowing it (frozen, cut off) can never add a line after the new owner's.
    `on_fenced` is called when that happens."""

    def __init__(self, bus: Bus, channel: str, node: str, *, last_seq: int = 0,
                 timeout_s: float = 5.0,
                 on_fenced: Callable[[], None] | None = None) -> None:
        self.bus = bus
        self.channel = channel
        self.node = node
        # a line's message id (its duplicates within the stream's window are stored once) is
        # this stream's own: the stream deduplicates across every channel, and a process that
        # owned a channel before counts its lines from 1 again
        self._ids = f"{node}:{channel}:{secrets.token_hex(4)}"
        self.timeout_s = timeout_s
        self.last_seq = last_seq
        self.fenced = False
        self._on_fenced = on_fenced
        self._lines: deque[tuple[int, bytes]] = deque()
        self._made = 0  # lines handed over
        self._stored = 0  # lines the broker has acknowledged
        self._changed = asyncio.Event()
        self._stored_changed = asyncio.Event()
        self._task: asyncio.Task[None] | None = None
        # the channel's lease: a command is acknowledged only while it is proven (its line
        # stored after the lease's deadline would be the line of a process that may have lost
        # the channel already)
        self.lease: Lease | None = None

    def start(self) -> None:
        self._task = asyncio.get_running_loop().create_task(
            self._run(), name=f"journal-stream-{self.channel}")

    async def stop(self) -> None:
        if self._task is not None:
            self._task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._task

    def tap(self, file: str, line: dict[str, Any]) -> None:
        self._made += 1
        data = journalline.encode(self.bus, self.bus.subjects.journal(self.channel), file, line)
        self._lines.append((self._made, data))
        self._changed.set()

    @property
    def pending(self) -> int:
        return self._made - self._stored

    async def flushed(self, until: float | None = None) -> None:
        """Wait until every line handed over so far is stored by the broker; JournalUnavailable
        after `timeout_s`, at the lease's deadline, or at `until` (time.monotonic: a command's
        deadline: its sender is answered in time that it was applied, not that it failed)."""
        target = self._made
        loop = asyncio.get_running_loop()
        limit = self.timeout_s
        if self.lease is not None:
            limit = min(limit, self.lease.deadline - loop.time())
        if until is not None:
            limit = min(limit, until - loop.time())
        try:
            async with asyncio.timeout(max(0.0, limit)):
                while self._stored < target:
                    if self.fenced:
                        raise JournalUnavailable(
                            "applied, but this process no longer owns the channel: its "
                            "journal is another process's now; try again")
                    self._stored_changed.clear()
                    await self._stored_changed.wait()
        except TimeoutError:
            if self._stored >= target:
                return
            if self.lease is not None and loop.time() >= self.lease.deadline:
                raise JournalUnavailable(
                    "not acknowledged: this process could not renew its lease on the channel "
                    "while the command's journal line waited for the broker, so another "
                    "process may read the channel now; look at its state before trying "
                    "again") from None
            raise JournalUnavailable(
                "applied, but not yet in the cluster's journal: the broker has not stored it "
                f"yet ({self.pending} lines wait); it is sent as soon as the broker takes it"
                ) from None

    async def _run(self) -> None:
        subject = self.bus.subjects.journal(self.channel)
        while True:
            if not self._lines:
                self._changed.clear()
                await self._changed.wait()
                continue
            n, data = self._lines[0]
            try:
                ack = await self.bus.js.publish(subject, data, timeout=2.0, headers={
                    "Nats-Msg-Id": f"{self._ids}:{n}", ORIGIN: self.node,
                    EXPECTED_LAST: str(self.last_seq)})
            except asyncio.CancelledError:
                raise
            except APIError as e:
                if e.err_code != WRONG_LAST_SEQUENCE:
                    log.info("channel %s: journal line %d refused (%s)", self.channel, n, e)
                    await asyncio.sleep(0.2)
                    continue
                try:
                    seq = await self._stored_before(subject, n)
                except Exception as e2:  # the broker cannot say yet: the same line again
                    log.info("channel %s: journal line %d not known yet (%s)", self.channel,
                             n, e2)
                    await asyncio.sleep(0.2)
                    continue
                if not seq:
                    log.warning("channel %s: another process wrote its journal since: this "
                                "process no longer owns it", self.channel)
                    self.fenced = True
                    self._lines.clear()
                    self._stored_changed.set()
                    if self._on_fenced is not None:
                        self._on_fenced()
                    return
            except Exception as e:  # the broker away: the same line again
                log.info("channel %s: journal line %d not stored yet (%s)", self.channel, n, e)
                await asyncio.sleep(0.2)
                continue
            else:
                seq = ack.seq  # (a line sent again: the seq it was stored with)
            self.last_seq = seq
            self._lines.popleft()
            self._stored = n
            self._stored_changed.set()

    async def _stored_before(self, subject: str, n: int) -> int:
        """The stream's sequence of line `n` if the channel's last line is that very line
        (its message id), else 0. A line sent again after its answer was lost (a broker node
        killed between storing it and answering, or an answer later than the timeout) is
        answered as a duplicate by a single server, but as a wrong last sequence by a broker
        cluster (nats-server 2.9 checks the expected sequence first): that is no fence."""
        last = await self.bus.js.get_last_msg(self.bus.subjects.stream, subject)
        if (last.headers or {}).get("Nats-Msg-Id") == f"{self._ids}:{n}" and last.seq:
            return last.seq
        return 0
