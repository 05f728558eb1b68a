"""A channel's lease: the key `ch.<channel>` in the leases bucket, made by the one process that
takes it (a create fails while it exists) and renewed by it against its own revision (an
update fails if anyone else wrote the key since). The bucket's TTL removes a key nobody renews:
the owner died, or is frozen, or cannot reach the broker.

The lease is proven on the holder's own monotonic clock, never by asking the broker: a renewal
sent at `s` and confirmed by the broker proves the lease until `s + ttl − margin` (the broker
counts the key's age from when it stored it, which is after `s`). That instant is `deadline`;
past it the holder must act as if another process had taken the channel, whether or not a
call to the broker is still pending (cluster.node fences the channel's runtime at it). Each
call to the broker is bounded by a timeout well under the TTL, so a broker that does not answer
never holds a renewal for the JetStream client's 5 s.

A taker that finds the key expired (or never made) cannot know when the last holder's last
renewal was sent: it may read only `ttl + margin` after its own create was answered
(`Taken.reads_from`), by which time any earlier holder's deadline has passed by `2 × margin`
at least, whatever the broker's clock did. A key given back by its holder (`release`: a delete
marker) was given back after its holder stopped reading: the taker may read at once.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import TypeVar

from nats.js.errors import KeyNotFoundError, KeyWrongLastSequenceError
from nats.js.kv import KeyValue

log = logging.getLogger("yomite.cluster")

T = TypeVar("T")
DELETED = ("DEL", "PURGE")  # a KV operation that marks a key given back


@dataclass(frozen=True, slots=True)
class Taken:
    """A lease just taken: `reads_from` is when (this process's monotonic clock) it may first
    read the channel; `handed` when the key had been given back by its last holder."""

    reads_from: float
    handed: bool


class Lease:
    def __init__(self, kv: KeyValue, key: str, holder: bytes, ttl_s: float,
                 clock: Callable[[], float] = time.monotonic,
                 margin_s: float | None = None) -> None:
        self.kv = kv
        self.key = key
        self.holder = holder
        self.ttl_s = ttl_s
        # the share of the TTL kept back: a fence that acts late by up to this (a busy loop)
        # still acts before the key can expire, and a taker waits as much again
        self.margin_s = ttl_s / 4 if margin_s is None else margin_s
        # the longest a call to the broker is waited for (a renewal is tried again after it)
        self.call_s = min(ttl_s / 4, 1.0)
        self._clock = clock
        self.revision: int | None = None
        self._renewed_at = -1e18  # when the last confirmed write was sent
        self._lost_at = float("-inf")  # until when the lease was proven, once it is lost

    @property
    def held(self) -> bool:
        return self.revision is not None

    @property
    def deadline(self) -> float:
        """Until when (monotonic) the lease is proven: -inf when not held."""
        if self.revision is None:
            return float("-inf")
        return self._renewed_at + self.ttl_s - self.margin_s

    @property
    def proven_until(self) -> float:
        """Until when the lease is (or was, once lost) proven: its deadline while held, else
        the earlier of its last deadline and the moment it was given up."""
        return self.deadline if self.revision is not None else self._lost_at

    def proven(self) -> bool:
        return self._clock() < self.deadline

    async def acquire(self) -> Taken | None:
        """Take the lease if nobody holds it; None if someone does or the broker did not
        answer in time."""
        t = self._clock()
        handed = False
        try:
            try:
                rev = await self._call(self.kv.update(self.key, self.holder, last=0))
            except KeyWrongLastSequenceError:
                # the key exists: held, or a delete marker its last holder left (a release)
                try:
                    await self._call(self.kv.get(self.key))
                    return None  # held
                except KeyNotFoundError as e:
                    if e.op not in DELETED or e.entry is None:
                        return None  # expired meanwhile: the next round tries again
                    rev = await self._call(self.kv.update(self.key, self.holder,
                                                          last=e.entry.revision))
                    handed = True
        except KeyWrongLastSequenceError:
            return None  # another process took it first
        except Exception as e:
            log.debug("lease %s: cannot ask the broker: %s", self.key, e)
            return None
        answered = self._clock()
        self.revision = rev
        self._renewed_at = t
        reads_from = answered if handed else answered + self.ttl_s + self.margin_s
        return Taken(reads_from, handed)

    async def renew(self, *, again: bool = True) -> bool:
        """Renew the lease; False once it is lost (someone else wrote it, or it could not be
        proven: its deadline passed). A renewal the broker did not answer in time leaves the
        lease held until its deadline."""
        if self.revision is None:
            return False
        t = self._clock()
        if t >= self.deadline:
            return self._lose(f"not renewed for {t - self._renewed_at:.1f} s")
        try:
            rev = await self._call(self.kv.update(self.key, self.holder, last=self.revision),
                                   limit=self.deadline - t)
        except KeyWrongLastSequenceError:
            return await self._recheck() if again else self._lose("lost")
        except Exception as e:
            if self._clock() >= self.deadline:
                return self._lose(f"not renewed for {self._clock() - self._renewed_at:.1f} s "
                                  f"({type(e).__name__})")
            return True
        if self.revision is None:  # given up while the call was under way
            return False
        self.revision = rev
        self._renewed_at = t
        return True

    async def _recheck(self) -> bool:
        """The key's revision is not the one this process last saw confirmed: a renewal whose
        answer was lost (timed out here) may have been stored. If the key still names this
        holder (and is no delete marker), nobody else wrote it since: it is still ours, and
        is renewed again from its revision (the deadline stays the last confirmed one's)."""
        try:
            entry = await self._call(self.kv.get(self.key))
        except Exception:
            return self._lose("lost (it expired, or another process took it)")
        if entry.value != self.holder or entry.revision is None or self.revision is None:
            return self._lose("lost (it expired, or another process took it)")
        self.revision = entry.revision
        return await self.renew(again=False)

    def _lose(self, why: str) -> bool:
        if self.revision is not None:
            log.warning("lease %s: %s: given up", self.key, why)
            self._lost_at = min(self.deadline, self._clock())
        self.revision = None
        return False

    async def release(self) -> None:
        """Give the lease up (a drain): another process may take it at once (the delete
        marker says the holder stopped)."""
        if self.revision is not None:
            self._lost_at = min(self.deadline, self._clock())
        rev, self.revision = self.revision, None
        if rev is None:
            return
        try:
            await self._call(self.kv.delete(self.key, last=rev))
        except Exception as e:
            log.info("lease %s: not deleted (%s): it expires by itself", self.key, e)

    async def holder_now(self) -> bytes | None:
        try:
            entry = await self._call(self.kv.get(self.key))
        except KeyNotFoundError:
            return None
        return entry.value

    async def _call(self, aw: Awaitable[T], limit: float | None = None) -> T:
        """A call to the broker, waited for `call_s` at most (or `limit`, if shorter):
        TimeoutError after it."""
        wait = self.call_s if limit is None else max(0.01, min(self.call_s, limit))
        return await asyncio.wait_for(aw, wait)
