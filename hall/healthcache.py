"""The service's health as monitoring reads it, off the hold path (a hold must never wait on a
monitoring call: `/api/health` at 64 channels held the loop 60-215 ms a call; polled every
5 s, that was 12 loop stalls over 50 ms a minute and a hold's p99 92 ms).

Two keeps: each channel's part of the answer (`ChannelParts`), made again only when what it
says of that channel changed, so a call costs the channels that changed since the last, not
all of them; and the whole answer (`HealthCache`), made again only when a channel changed or
a second has passed, whoever asks and however often."""

from __future__ import annotations

import asyncio
import time
from collections.abc import Awaitable, Callable, Hashable


class ChannelParts:
    """Each channel's part as JSON, with the key it was made for (what the part says of the
    channel that can change: its state's number, its clients, its output's counters...)."""

    def __init__(self) -> None:
        self.made = 0  # parts made since start: what a call cost (the answer shows it)
        self._parts: dict[str, tuple[Hashable, bytes]] = {}

    async def part(self, name: str, key: Hashable,
                   make: Callable[[], Awaitable[bytes]]) -> bytes:
        kept = self._parts.get(name)
        if kept is not None and kept[0] == key:
            return kept[1]
        body = await make()
        self._parts[name] = (key, body)
        self.made += 1
        return body

    def keep_only(self, names: set[str]) -> None:
        """Forget the parts of channels that are gone."""
        for name in self._parts.keys() - names:
            del self._parts[name]


class HealthCache:
    def __init__(self, max_age_s: float = 1.0, clock: Callable[[], float] = time.monotonic):
        self.max_age_s = max_age_s
        self.clock = clock
        self.made = 0  # how many times the answer was made (the answer shows it)
        self.parts = ChannelParts()
        self._body: bytes | None = None
        self._key: object = None
        self._at = 0.0
        self._making: asyncio.Task[tuple[bytes, object]] | None = None

    async def get(self, make: Callable[[], Awaitable[bytes]], key: object = None) -> bytes:
        """The latest answer if it was made for the same `key` (e.g. every channel's state
        number) less than `max_age_s` ago, else a new one; callers that ask while one is made
        wait for that one."""
        if (self._body is not None and key == self._key
                and self.clock() - self._at < self.max_age_s):
            return self._body
        while True:
            if self._making is None:
                self._making = asyncio.get_running_loop().create_task(self._make(make, key))
            making = self._making
            body, made_for = await asyncio.shield(making)
            if made_for == key:
                return body
            # that one was begun before what this caller asks after: one more, for it

    async def _make(self, make: Callable[[], Awaitable[bytes]],
                    key: object) -> tuple[bytes, object]:
        try:
            self.made += 1
            body = await make()
            self._body, self._key, self._at = body, key, self.clock()
            return body, key
        finally:
            self._making = None
