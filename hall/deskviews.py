"""What the desk's pages and files are built from, once per version of a tournament.

The public standings are polled by every projector of the hall with no login, the desk's view
by the desk; both wake at every result. Built on the event loop for each request, fifty pages
on a 400-player day kept the loop (which applies the referees' holds) busy for seconds after
each result (issue 25). Here a view, a CSV file or a printed page is built once per version of
the tournament, by the first request that needs it, in a worker thread when the tournament is
large; every other request for it waits on that build and is answered with the same bytes.

A tournament is frozen data (desk.model): building from it in another thread is safe.
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import Callable, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from typing import Any, Literal, TypeVar

from desk.model import Round, Tournament
from desk.views import desk_view, public_view

T = TypeVar("T")
Kind = Literal["desk", "public"]
LARGE_VIEW = 100  # players: what is built from a larger tournament is built in a worker thread
PUBLIC_READING = ("state", "phase", "paused", "card", "cards_total")


def json_bytes(value: object) -> bytes:
    # as Starlette's JSONResponse writes it
    return json.dumps(value, ensure_ascii=False, allow_nan=False, separators=(",", ":")).encode()


@dataclass(frozen=True, slots=True)
class Built:
    """A view as JSON, with a place at the end of each item of one of its lists (each block,
    each round) for what changes without the version: that item's round's reading, live from
    its channel."""

    head: bytes  # the view up to its list: '{"id":...,"blocks":['
    items: tuple[bytes, ...]  # each item without its closing brace, ending '"reading":'
    rounds: tuple[Round | None, ...]  # whose reading goes into each item

    def fill(self, values: Sequence[object]) -> bytes:
        return (self.head + b",".join(item + json_bytes(v) + b"}"
                                      for item, v in zip(self.items, values, strict=True))
                + b"]}")


def build_view(kind: Kind, t: Tournament) -> Built:
    """The desk's whole view of `t` (each round's `live` to fill in), or the public one (each
    block's `reading`)."""
    if kind == "public":
        view, key, slot = public_view(t), "blocks", "reading"
        last = [t.rounds_of(b.name) for b in t.blocks]
        rounds: tuple[Round | None, ...] = tuple(rs[-1] if rs else None for rs in last)
    else:
        view, key, slot = desk_view(t), "rounds", "live"
        rounds = t.rounds
    listed = view.pop(key)
    head = json_bytes(view)[:-1] + b"," + json_bytes(key) + b":["
    items = tuple(json_bytes(x)[:-1] + b"," + json_bytes(slot) + b":" for x in listed)
    return Built(head, items, rounds)


@dataclass(frozen=True, slots=True)
class Made:
    version: int
    generation: int  # the tournament's in this server: a new one when imported or deleted
    value: Any


def _make(build: Callable[[Tournament], Any], t: Tournament, generation: int) -> Made:
    return Made(t.version, generation, build(t))


class Builds:
    """What is built from each tournament, by name, kept for its version."""

    def __init__(self, get: Callable[[str], Tournament]) -> None:
        self.get = get  # the tournament as it is now (raises NotFound)
        self.count: dict[str, int] = {}  # builds by name: for the tests and the bench
        self._pool = ThreadPoolExecutor(1, thread_name_prefix="desk-views")
        self._made: dict[tuple[str, str], Made] = {}
        self._making: dict[tuple[str, str], asyncio.Future[Made]] = {}
        self._generation: dict[str, int] = {}

    def close(self) -> None:
        self._pool.shutdown(wait=True)

    def forget(self, tid: str) -> None:
        """An imported (or deleted) tournament starts its versions again: what was built from
        it is another tournament's."""
        self._generation[tid] = self._generation.get(tid, 0) + 1
        for key in [k for k in self._made if k[0] == tid]:
            del self._made[key]

    def _keep(self, key: tuple[str, str], made: Made) -> None:
        cur = self._made.get(key)
        if made.generation == self._generation.get(key[0], 0) and (
                cur is None or cur.generation != made.generation or cur.version < made.version):
            self._made[key] = made

    async def made(self, tid: str, name: str, build: Callable[[Tournament], T],
                   version: int | None = None) -> T:
        """`build(tournament)` as of `version` or later (default: the version now), built once
        per version: one build at a time per name, and every request that needs it waits on
        that one (a page that leaves does not cancel it for the others)."""
        key = (tid, name)
        while True:
            t = self.get(tid)
            gen = self._generation.get(tid, 0)
            want = t.version if version is None else min(version, t.version)
            m = self._made.get(key)
            if m is not None and m.generation == gen and m.version >= want:
                return m.value  # type: ignore[no-any-return]
            pending = self._making.get(key)
            if pending is None:
                self.count[name] = self.count.get(name, 0) + 1
                if len(t.players) <= LARGE_VIEW:  # a few milliseconds: here
                    self._keep(key, Made(t.version, gen, build(t)))
                    continue
                pending = asyncio.get_running_loop().run_in_executor(self._pool, _make, build,
                                                                     t, gen)
                self._making[key] = pending

                def done(f: asyncio.Future[Made], key: tuple[str, str] = key) -> None:
                    if self._making.get(key) is f:
                        del self._making[key]

                pending.add_done_callback(done)
            made = await asyncio.shield(pending)
            if self._making.get(key) is pending:
                del self._making[key]
            self._keep(key, made)
