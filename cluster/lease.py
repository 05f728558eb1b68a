"""A channel's lease: the key `ch.<channel>` in the leases bucket, made by the one process that
takes it (a create fails while it exists) and renewed by it against its own revision (an
update fails if anyone else wrote the key since). The bucket's TTL removes a key nobody renews:
the owner died, or is frozen, or cannot reach the broker.

An owner that cannot renew for the TTL must assume another took the channel: it stops reading
(cluster.node), whatever the broker's state, so that two processes never read one channel for
longer than a TTL.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable

from nats.js.errors import KeyNotFoundError, KeyWrongLastSequenceError
from nats.js.kv import KeyValue

log = logging.getLogger("yomite.cluster")


class Lease:
    def __init__(self, kv: KeyValue, key: str, holder: bytes, ttl_s: float,
                 clock: Callable[[], float] = time.monotonic) -> None:
        self.kv = kv
        self.key = key
        self.holder = holder
        self.ttl_s = ttl_s
        self._clock = clock
        self.revision: int | None = None
        self._renewed_at = 0.0

    @property
    def held(self) -> bool:
        return self.revision is not None

    async def acquire(self) -> bool:
        """Take the lease if nobody holds it."""
        t = self._clock()
        try:
            self.revision = await self.kv.create(self.key, self.holder)
        except KeyWrongLastSequenceError:
            return False
        except Exception as e:
            log.debug("lease %s: cannot ask the broker: %s", self.key, e)
            return False
        self._renewed_at = t
        return True

    async def renew(self) -> bool:
        """Renew the lease; False once it is lost (someone else wrote it, or it could not be
        renewed for its TTL: it may have expired and been taken)."""
        if self.revision is None:
            return False
        t = self._clock()
        try:
            self.revision = await self.kv.update(self.key, self.holder, last=self.revision)
        except KeyWrongLastSequenceError:
            log.warning("lease %s: lost (it expired, or another process took it)", self.key)
            self.revision = None
            return False
        except Exception as e:
            if self._clock() - self._renewed_at >= self.ttl_s:
                log.warning("lease %s: not renewed for %.1f s (%s): given up", self.key,
                            self._clock() - self._renewed_at, e)
                self.revision = None
                return False
            return True
        self._renewed_at = t
        return True

    async def release(self) -> None:
        """Give the lease up (a drain): another process may take it at once."""
        rev, self.revision = self.revision, None
        if rev is None:
            return
        try:
            await self.kv.delete(self.key, last=rev)
        except Exception as e:
            log.info("lease %s: not deleted (%s): it expires by itself", self.key, e)

    async def holder_now(self) -> bytes | None:
        try:
            entry = await self.kv.get(self.key)
        except KeyNotFoundError:
            return None
        return entry.value
