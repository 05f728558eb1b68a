"""A channel's inbox: what it takes (the engine's events, and the channel's own items: preparing
a match, an audio fault, the render gate before a start), each with the future its sender
waits on, if it waits."""

from __future__ import annotations

import asyncio
from dataclasses import dataclass, field
from typing import Any

from reader.events import Event


@dataclass(frozen=True, slots=True)
class PrepareMatch:
    """Prepare the next match: the deck (colours or poems, a seed or a new one), a preset,
    then per-match overrides of `match` and of the voice (config.VOICE_MATCH_KEYS) on top.
    `replay`: the last match again, deck, order, settings and voice (感想戦); nothing else
    may be given with it."""

    colors: tuple[str, ...] = ()
    poems: tuple[int, ...] = ()
    seed: int | None = None
    overrides: dict[str, Any] = field(default_factory=dict)
    voice: dict[str, Any] = field(default_factory=dict)
    preset: str | None = None
    replay: bool = False


@dataclass(frozen=True, slots=True)
class AudioFault:
    reason: str


@dataclass(frozen=True, slots=True)
class RenderGate:
    """Internal, queued by `submit` before a start: which of the first clips are not rendered
    yet (seen in inbox order, so after a prepare sent just before the start)."""


Item = PrepareMatch | AudioFault | RenderGate | Event


Waiter = asyncio.Future[Any] | None
# an item, the future its sender waits on, and the instant (time.monotonic) after which it
# must not be applied (a cluster's command: its sender has given up by then; None: no limit)
Entry = tuple[Item, Waiter, float | None]


class Inbox:
    """Items in the order they came, for one task to apply. `put` gives the future the
    sender awaits; `post` is for senders that do not wait (audio callbacks, dropped
    clients)."""

    def __init__(self) -> None:
        self._queue: asyncio.Queue[Entry] = asyncio.Queue()

    def put(self, item: Item, deadline: float | None = None) -> asyncio.Future[Any]:
        fut: asyncio.Future[Any] = asyncio.get_running_loop().create_future()
        self._queue.put_nowait((item, fut, deadline))
        return fut

    def post(self, item: Item) -> None:
        self._queue.put_nowait((item, None, None))

    async def get(self) -> Entry:
        return await self._queue.get()

    def drain(self) -> list[Waiter]:
        """Take every queued item off; returns their waiters (to be answered)."""
        waiting: list[Waiter] = []
        while not self._queue.empty():
            waiting.append(self._queue.get_nowait()[1])
        return waiting
