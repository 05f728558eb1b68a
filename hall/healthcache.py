"""The service's health as monitoring reads it: made again only when something it says of a
channel changed or a second has passed, whoever asks and however often, and made without
holding the event loop for long (a hold must never wait on a monitoring call: `/api/health` at
64 channels held the loop 60-215 ms a call; polled every 5 s, that was 12 loop stalls over
50 ms a minute and a hold's p99 92 ms)."""

from __future__ import annotations

import asyncio
import time
from collections.abc import Awaitable, Callable


class HealthCache:
    def __init__(self, max_age_s: float = 1.0, clock: Callable[[], float] = time.monotonic):
        self.max_age_s = max_age_s
        self.clock = clock
        self.made = 0  # how many times the answer was made (for tests)
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
            body = await make()
            self._body, self._key, self._at = body, key, self.clock()
            self.made += 1
            return body, key
        finally:
            self._making = None
