"""Broadcast to every connected page without waiting on the slowest phone.

Each client has a bounded queue and its own writer task. Publishing serialises a state once per
audience (operator, public) and offers the text to every queue without awaiting; a client whose
queue is full is too slow to follow the match and is dropped: when it reconnects it gets the
full current state at once (snapshots carry everything, with a rising `seq`).
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
import time
from collections import deque
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from typing import Any

log = logging.getLogger("yomite.hub")

Send = Callable[[str], Awaitable[None]]
Close = Callable[[int, str], Awaitable[None]]


@dataclass(eq=False)
class Client:
    send: Send
    close: Close
    operator: bool
    queue_size: int
    referee: str | None = None
    name: str = ""
    speaker: bool = False  # a /speaker page: also gets the channel's audio schedule
    lags: deque[float] | None = None  # the hub's: publish -> handed to this socket, seconds
    queue: asyncio.Queue[tuple[str, float]] = field(init=False)
    task: asyncio.Task[None] | None = None
    dropped: bool = False
    sending_since: float | None = None  # set while a write waits on the socket

    def __post_init__(self) -> None:
        self.queue = asyncio.Queue(self.queue_size)

    async def writer(self) -> None:
        try:
            while True:
                text, t_published = await self.queue.get()
                self.sending_since = time.perf_counter()
                await self.send(text)
                self.sending_since = None
                if self.lags is not None:
                    self.lags.append(time.perf_counter() - t_published)
        except asyncio.CancelledError:
            raise
        except Exception as e:  # a per-client edge: one broken socket must not touch others
            log.info("client writer ended: %s", e)


def _dumps(message: dict[str, Any]) -> str:
    return json.dumps(message, ensure_ascii=False, separators=(",", ":"))


class Hub:
    """The clients of one channel."""

    def __init__(self, queue_size: int = 64, send_timeout_s: float = 10.0) -> None:
        self.queue_size = queue_size
        self.send_timeout_s = send_timeout_s
        self.clients: set[Client] = set()
        self.speakers: set[Client] = set()  # the speaker audience, a subset of clients
        self.dropped = 0
        self.lags: deque[float] = deque(maxlen=20000)

    def add(self, send: Send, close: Close, *, operator: bool, referee: str | None = None,
            name: str = "", speaker: bool = False) -> Client:
        c = Client(send, close, operator, self.queue_size, referee, name, speaker, self.lags)
        self.clients.add(c)
        if speaker:
            self.speakers.add(c)
        c.task = asyncio.create_task(c.writer(), name="ws-writer")
        c.task.add_done_callback(lambda _t: self._writer_done(c))
        return c

    def remove(self, c: Client) -> None:
        self.clients.discard(c)
        self.speakers.discard(c)
        if c.task is not None and not c.task.done():
            c.task.cancel()

    def publish(self, operator_view: dict[str, Any], public_view: dict[str, Any]) -> None:
        texts = {
            True: _dumps({"type": "state", **operator_view}),
            False: _dumps({"type": "state", **public_view}),
        }
        now = time.perf_counter()
        for c in list(self.clients):
            # a socket whose peer stopped reading blocks its writer once the OS buffer is
            # full: checked here rather than with a timer on every send (1,000 phones)
            if c.sending_since is not None and now - c.sending_since > self.send_timeout_s:
                self._drop(c, "stalled: a write has waited too long")
                continue
            try:
                c.queue.put_nowait((texts[c.operator], now))
            except asyncio.QueueFull:
                self._drop(c, "too slow: the state queue is full")

    def publish_speakers(self, message: dict[str, Any]) -> None:
        """The audio schedule, to the speaker audience only: other pages pay nothing for it."""
        if not self.speakers:
            return
        text = _dumps(message)
        now = time.perf_counter()
        for c in list(self.speakers):
            try:
                c.queue.put_nowait((text, now))
            except asyncio.QueueFull:
                self._drop(c, "too slow: the state queue is full")

    def send_to(self, c: Client, message: dict[str, Any]) -> None:
        try:
            c.queue.put_nowait((_dumps(message), time.perf_counter()))
        except asyncio.QueueFull:
            self._drop(c, "too slow: the state queue is full")

    def lag_ms(self) -> dict[str, float] | None:
        """Publish -> written to each socket, over the last 20,000 sends (p50, p99, max)."""
        if not self.lags:
            return None
        v = sorted(self.lags)
        return {"n": len(v), "p50": v[len(v) // 2] * 1000,
                "p99": v[min(len(v) - 1, int(len(v) * 0.99))] * 1000, "max": v[-1] * 1000}

    def _writer_done(self, c: Client) -> None:
        if c in self.clients:
            self._drop(c, "the connection failed")

    def _drop(self, c: Client, reason: str) -> None:
        if c.dropped:
            return
        c.dropped = True
        self.dropped += 1
        self.remove(c)
        log.info("dropping a client: %s", reason)

        async def close() -> None:
            with contextlib.suppress(Exception):
                async with asyncio.timeout(2):
                    await c.close(1013, reason[:120])

        asyncio.get_running_loop().create_task(close())
