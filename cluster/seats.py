"""Exact room quotas over a cluster (hall.rooms.Seats on the broker).

Each quota is one key of the shared records bucket, `seats/<org>` (and `seats/_server` for
`rooms.max_open`): the rooms holding a seat, each with when it was taken. A seat is taken by a
compare-and-set on the key's revision (the broker refuses a write made on an older revision:
read again, decide again), so two rooms opened at the same instant through two processes can
never pass a quota, as they could when each process counted only the rooms it had heard of.

A seat is free again when its room's record says it is closed (or is gone), so a process
killed between taking a seat and giving it back loses nothing for long: a seat without a room
record is kept `OPENING_S` (the room is being opened) from when this process first saw it so,
on its own monotonic clock (the time written with the seat is the taker's wall clock, which
another machine's need not agree with: it is never compared), then taken back by the next
open.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any, TypeVar

from nats.js.kv import KeyValue

from cluster import kvcas

SERVER_POOL = "_server"  # not an organisation id (hall.orgs.ID_ALPHABET)
OPENING_S = 60.0  # a seat with no room record yet: the room is being opened
T = TypeVar("T")
Seats = dict[str, float]  # room: when its seat was taken (the taker's wall clock: shown only)


class KvSeats:
    def __init__(self, kv: KeyValue, records: Callable[[], dict[str, dict[str, Any]]],
                 wall: Callable[[], float] = time.time,
                 clock: Callable[[], float] = time.monotonic) -> None:
        """`records`: the bucket's documents as this process holds them (the rooms')."""
        self.kv = kv
        self.records = records
        self.wall = wall
        self.clock = clock
        self._unrecorded: dict[str, float] = {}  # a seat seen without its room's record: since

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
        """`step` on the key's seats, written by compare-and-set (cluster.kvcas); `step` says
        its answer and the seats to write (None: nothing to write)."""
        return await kvcas.change(self.kv, key, lambda doc: step(_seats(doc)))

    def _held(self, room: str, _taken: float) -> bool:
        doc = self.records().get(f"room/{room}")
        if doc is None:
            now = self.clock()
            if len(self._unrecorded) > 4096:
                self._unrecorded.clear()
            return now - self._unrecorded.setdefault(room, now) < OPENING_S
        self._unrecorded.pop(room, None)
        return doc.get("closed") is None


def _seats(doc: Any) -> Seats:
    return {str(k): float(v) for k, v in doc.items()
            if isinstance(v, int | float)} if isinstance(doc, dict) else {}


def _key(pool: str) -> str:
    return f"seats/{pool or SERVER_POOL}"
