"""Exact room quotas over a cluster (hall.rooms.Seats on the broker).

Each quota is one key of the shared records bucket, `seats/<org>` (and `seats/_server` for
`rooms.max_open`): the rooms holding a seat, each with when it was taken. A seat is taken by a
compare-and-set on the key's revision (the broker refuses a write made on an older revision:
read again, decide again), so two rooms opened at the same instant through two processes can
never pass a quota, as they could when each process counted only the rooms it had heard of.

A seat is free again when its room's record says it is closed (or is gone), so a process
killed between taking a seat and giving it back loses nothing for long: a seat without a room
record is kept `OPENING_S` (the room is being opened), then taken back by the next open.
"""

from __future__ import annotations

import errno
import json
import logging
import time
from collections.abc import Callable
from typing import Any, TypeVar

from nats.js.errors import KeyDeletedError, KeyNotFoundError, KeyWrongLastSequenceError
from nats.js.kv import KeyValue

log = logging.getLogger("yomite.cluster")

SERVER_POOL = "_server"  # not an organisation id (hall.orgs.ID_ALPHABET)
OPENING_S = 60.0  # a seat with no room record yet: the room is being opened
T = TypeVar("T")
Seats = dict[str, float]  # room: when its seat was taken (wall clock)
TRIES = 50  # compare-and-set rounds lost to other processes before giving up (EAGAIN)


class KvSeats:
    def __init__(self, kv: KeyValue, records: Callable[[], dict[str, dict[str, Any]]],
                 wall: Callable[[], float] = time.time) -> None:
        """`records`: the bucket's documents as this process holds them (the rooms')."""
        self.kv = kv
        self.records = records
        self.wall = wall

    async def take(self, pool: str, room: str, most: int) -> bool:
        """A seat in `pool` (an organisation's id; "" is the server's) for `room`; False when
        `most` rooms hold one. OSError if the broker cannot say."""
        def step(seats: Seats) -> tuple[bool, Seats | None]:
            live = {n: t for n, t in seats.items() if self._held(n, t)}
            if room in live:
                return True, None
            if len(live) >= most:
                return False, None
            live[room] = self.wall()
            return True, live

        return await self._change(_key(pool), step)

    async def give_back(self, pool: str, room: str) -> None:
        """`room`'s seat freed (one it does not hold: nothing). OSError if the broker cannot
        keep it: the seat is free anyway once the room's record says it is closed."""
        def step(seats: Seats) -> tuple[None, Seats | None]:
            if room not in seats:
                return None, None
            del seats[room]
            return None, seats

        await self._change(_key(pool), step)

    async def _change(self, key: str, step: Callable[[Seats], tuple[T, Seats | None]]) -> T:
        """`step` on the key's seats, written by compare-and-set (read and computed again
        while another process wrote first); `step` says its answer and the seats to write
        (None: nothing to write)."""
        for _ in range(TRIES):
            seats, revision = await self._read(key)
            out, new = step(seats)
            if new is None or await self._write(key, new, revision):
                return out
        raise OSError(errno.EAGAIN, f"{key}: {TRIES} tries lost to other processes")

    def _held(self, room: str, taken: float) -> bool:
        doc = self.records().get(f"room/{room}")
        if doc is None:
            return self.wall() - taken < OPENING_S
        return doc.get("closed") is None

    async def _read(self, key: str) -> tuple[Seats, int]:
        try:
            entry = await self.kv.get(key)
        except (KeyNotFoundError, KeyDeletedError):  # never written, or deleted
            return {}, 0
        except Exception as e:
            raise OSError(errno.EIO, f"the broker did not answer: {e}") from None
        try:
            doc: Any = json.loads(entry.value or b"{}")
        except ValueError:
            log.warning("%s is not JSON: every seat in it is free", key)
            doc = {}
        seats = {str(k): float(v) for k, v in doc.items()
                 if isinstance(v, int | float)} if isinstance(doc, dict) else {}
        return seats, int(entry.revision or 0)

    async def _write(self, key: str, seats: Seats, revision: int) -> bool:
        """False when another process wrote the key since `revision` was read."""
        raw = json.dumps(seats, separators=(",", ":")).encode()
        try:
            if revision:
                await self.kv.update(key, raw, last=revision)
            else:
                await self.kv.create(key, raw)
        except KeyWrongLastSequenceError:
            return False
        except Exception as e:
            raise OSError(errno.EIO, f"the broker did not keep it: {e}") from None
        return True


def _key(pool: str) -> str:
    return f"seats/{pool or SERVER_POOL}"
