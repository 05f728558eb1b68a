"""Who is connected to a channel, said to its pages without a crowd's cost: referees and
speakers connecting and leaving are told in one state at most every `every_s` (a crowd
reconnecting is not a state per socket to every page), the first change at once. A state
for anything else (a hold) goes at once as ever, and carries who is connected too."""

from __future__ import annotations

import asyncio
from collections.abc import Callable

EVERY_S = 0.25


class Presence:
    def __init__(self, say: Callable[[], None], every_s: float = EVERY_S) -> None:
        self.say = say  # publishes a state
        self.every_s = every_s
        self._said_at = -1e18
        self._timer: asyncio.TimerHandle | None = None
        self.states = 0  # states published for a presence

    def changed(self) -> None:
        """Someone came or left: a state now, or when `every_s` has passed since the last."""
        if self._timer is not None:
            return
        loop = asyncio.get_running_loop()
        wait = self._said_at + self.every_s - loop.time()
        if wait <= 0:
            self._say()
        else:
            self._timer = loop.call_later(wait, self._say)

    def _say(self) -> None:
        self._timer = None
        self._said_at = asyncio.get_running_loop().time()
        self.states += 1
        self.say()
