"""Broadcast to every connected page without waiting on the slowest phone.

Publishing serialises a state once per audience (operator, public). Then, for each client:

- Where the edge gives a client's socket (`Transport`: on uvicorn's sans-I/O WebSocket
  protocol without compression, how `yomite serve` runs; see api/serverglue.py), the
  text is framed once per audience (a server frame is not masked, so every client gets the very
  same bytes) and written straight to each client's transport: no task, queue or protocol
  object per send, which is what a thousand phones cost (about 50 µs each through ASGI). The
  transport's own buffer is the client's queue: a client with more than `queue_size` states
  unsent is too slow to follow the match and is dropped.
- Otherwise (another server, a test client) each client has a bounded queue and its own writer
  task that sends through ASGI; a client whose queue is full is dropped.

Either way nobody waits for anybody, and a client that reconnects gets the full current state
at once (snapshots carry everything, with a rising `seq`). Every message to a client goes the
same way, so its order is kept.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
import struct
import time
from collections import OrderedDict, deque
from collections.abc import Awaitable, Callable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Protocol

import numpy as np

from hall.wire import to_wire

if TYPE_CHECKING:
    from hall.states import OperatorView
    from hall.views import PublicView

log = logging.getLogger("yomite.hub")

# the hub drops a direct client that has queue_size states unsent past this much in its
# transport's buffer: where uvicorn's ASGI flow control pauses a writer (the contract test,
# tests/test_serverglue.py, checks they agree)
FLOW_HIGH_WATER = 64 << 10
MAX_PAGES = 256  # speaker pages whose number a hub remembers


class Transport(Protocol):
    """A client's socket, written to directly: the edge finds it under an accepted WebSocket
    when a frame may go straight to it (api/serverglue.py's `direct_transport`)."""

    def write(self, data: bytes) -> None: ...
    def is_closing(self) -> bool: ...
    def get_write_buffer_size(self) -> int: ...
    def abort(self) -> None: ...


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
    viewer: bool = False  # counted in a room's viewers (not one of its class's own pages)
    projector: bool = False  # a page of the channel's projector link
    lags: deque[float] | None = None  # the hub's: publish -> handed to this socket, seconds
    transport: Transport | None = None  # the direct path (see the module doc)
    queue: asyncio.Queue[tuple[str, float]] = field(init=False)
    task: asyncio.Task[None] | None = None
    dropped: bool = False
    sending_since: float | None = None  # set while a write waits on the socket
    # the direct path: bytes written so far, and where each state still unsent ends
    written: int = 0
    unsent: deque[int] = field(default_factory=deque)
    number: int = 0  # a speaker page's number, 1.. in the order they joined the hub
    report: dict[str, Any] | None = None  # a speaker page's last report of itself

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


def state_message(view: OperatorView | PublicView) -> dict[str, Any]:
    """The `state` message of a channel's view, as its sockets get it."""
    return {"type": "state", **to_wire(view)}


def _dumps(message: dict[str, Any]) -> str:
    return json.dumps(message, ensure_ascii=False, separators=(",", ":"))


def text_frame(text: str) -> bytes:
    """One unfragmented, unmasked WebSocket text frame (RFC 6455 5.2), as a server sends it."""
    payload = text.encode("utf-8")
    n = len(payload)
    if n < 126:
        head = struct.pack("!BB", 0x81, n)
    elif n < 1 << 16:
        head = struct.pack("!BBH", 0x81, 126, n)
    else:
        head = struct.pack("!BBQ", 0x81, 127, n)
    return head + payload


# the fan-out lags' summaries, sorted here for every channel (Hub.lag_summary)
_LAGS = ThreadPoolExecutor(1, thread_name_prefix="hub-lags")

class Hub:
    """The clients of one channel."""

    def __init__(self, queue_size: int = 64, send_timeout_s: float = 10.0) -> None:
        self.queue_size = queue_size
        self.send_timeout_s = send_timeout_s
        self.clients: set[Client] = set()
        self.speakers: set[Client] = set()  # the speaker audience, a subset of clients
        self.viewers = 0  # clients that are viewers (a room's quota counts them)
        self._speaker_numbers = 0
        # a speaker page's own id (kept by its tab) -> its number and latest connection: a page
        # that reconnects keeps its number on the console (bounded: the oldest are forgotten)
        self._pages: OrderedDict[str, tuple[int, Client]] = OrderedDict()
        self.dropped = 0
        self.lags: deque[float] = deque(maxlen=20000)
        # the lags' summary and what it was made from (see lag_summary)
        self._lag_summary: tuple[tuple[int, float], dict[str, float] | None] = ((0, 0.0), None)
        # (seq, time.monotonic()) of the latest publications: a benchmark on this machine
        # measures publish -> received with it (bench/ws_fanout.py)
        self.published: deque[tuple[int, float]] = deque(maxlen=64)

    def add(self, send: Send, close: Close, *, operator: bool, referee: str | None = None,
            name: str = "", speaker: bool = False, viewer: bool = False,
            projector: bool = False, transport: Transport | None = None) -> Client:
        """A client; with `transport` (see `direct_transport`), states are written straight to
        it, else through `send` by a writer task. A `speaker` also gets the audio schedule."""
        c = Client(send, close, operator, self.queue_size, referee, name, speaker, viewer,
                   projector, self.lags, transport)
        self.clients.add(c)
        self.viewers += viewer
        if speaker:
            self._speaker_numbers += 1
            c.number = self._speaker_numbers
            self.speakers.add(c)
        if transport is None:
            c.task = asyncio.create_task(c.writer(), name="ws-writer")
            c.task.add_done_callback(lambda _t: self._writer_done(c))
        return c

    def claim_page(self, c: Client, page: str) -> None:
        """Speaker `c` is page `page`: it takes the number the page had before (a reconnect),
        and an earlier connection of the same page that has not dropped yet stops reporting."""
        known = self._pages.pop(page, None)
        if known is not None:
            number, earlier = known
            if earlier is not c:
                c.number = number
                earlier.report = None
        self._pages[page] = (c.number, c)
        while len(self._pages) > MAX_PAGES:
            self._pages.popitem(last=False)

    def remove(self, c: Client) -> None:
        if c in self.clients:
            self.viewers -= c.viewer
        self.clients.discard(c)
        self.speakers.discard(c)
        if c.task is not None and not c.task.done():
            c.task.cancel()

    def publish(self, operator_view: OperatorView,
                public_view: Callable[[], PublicView]) -> None:
        """A state to every client: each audience's made into JSON once (hall.wire), and only
        if the audience has a client here (a process of a cluster serves every room's state,
        most with no one on this process)."""
        self.published.append((operator_view.seq, time.monotonic()))
        if not self.clients:
            return
        texts: dict[bool, str] = {}

        def text(operator: bool) -> str:
            t = texts.get(operator)
            if t is None:
                view = operator_view if operator else public_view()
                t = texts[operator] = _dumps(state_message(view))
            return t

        frames: dict[bool, bytes] = {}
        now = time.perf_counter()
        lags = self.lags
        for c in list(self.clients):
            if c.transport is not None:
                frame = frames.get(c.operator)
                if frame is None:
                    frame = frames[c.operator] = text_frame(text(c.operator))
                if self._write(c, frame):
                    lags.append(time.perf_counter() - now)
                continue
            # a socket whose peer stopped reading blocks its writer once the OS buffer is
            # full: checked here rather than with a timer on every send (1,000 phones)
            if c.sending_since is not None and now - c.sending_since > self.send_timeout_s:
                self._drop(c, "stalled: a write has waited too long")
                continue
            try:
                c.queue.put_nowait((text(c.operator), now))
            except asyncio.QueueFull:
                self._drop(c, "too slow: the state queue is full")

    def publish_speakers(self, message: dict[str, Any]) -> None:
        """The audio schedule, to the speaker audience only: other pages pay nothing for it."""
        if not self.speakers:
            return
        text = _dumps(message)
        frame: bytes | None = None
        now = time.perf_counter()
        for c in list(self.speakers):
            if c.transport is not None:
                if frame is None:
                    frame = text_frame(text)
                self._write(c, frame)
                continue
            try:
                c.queue.put_nowait((text, now))
            except asyncio.QueueFull:
                self._drop(c, "too slow: the state queue is full")

    def send_to(self, c: Client, message: dict[str, Any]) -> None:
        if c.transport is not None:
            self._write(c, text_frame(_dumps(message)))
            return
        try:
            c.queue.put_nowait((_dumps(message), time.perf_counter()))
        except asyncio.QueueFull:
            self._drop(c, "too slow: the state queue is full")

    def _write(self, c: Client, frame: bytes) -> bool:
        t = c.transport
        assert t is not None
        if t.is_closing():
            self._drop(c, "the connection failed")
            return False
        # the transport keeps what the kernel would not take: the states that end in it are
        # this client's queue. More than queue_size of them beyond what ASGI's flow control
        # lets through is a phone that stopped reading (the rule of the queued path).
        buffered = t.get_write_buffer_size()
        sent = c.written - buffered
        unsent = c.unsent
        while unsent and unsent[0] <= sent:
            unsent.popleft()
        if len(unsent) >= self.queue_size and buffered > FLOW_HIGH_WATER:
            self._drop(c, "too slow: the state queue is full")
            return False
        t.write(frame)
        c.written += len(frame)
        unsent.append(c.written)
        return True

    def lag_key(self) -> tuple[int, float]:
        """What the lags' summary is made from: their count and the newest, so that no send
        pays for keeping it."""
        return (len(self.lags), self.lags[-1] if self.lags else 0.0)

    async def lag_summary(self) -> dict[str, float] | None:
        """Publish -> written to each socket, over the last 20,000 sends (p50, p99, max), for
        monitoring and off the hold path: made again only when a send was measured since the
        last (20,000 sorted on the event loop at 64 channels held it 60-215 ms a health call),
        sorted in a thread of its own on a copy taken here (a copy of 20,000 floats: ~0.1 ms).
        Its own thread, not the loop's default pool: matches being rendered hold those."""
        key = self.lag_key()
        made_from, summary = self._lag_summary
        if key != made_from:
            loop = asyncio.get_running_loop()
            summary = await loop.run_in_executor(_LAGS, summarise_lags, list(self.lags))
            self._lag_summary = (key, summary)
        return summary

    def _writer_done(self, c: Client) -> None:
        if c in self.clients:
            self._drop(c, "the connection failed")

    def _drop(self, c: Client, reason: str) -> None:
        if c.dropped:
            return
        c.dropped = True
        self.dropped += 1
        self.remove(c)
        who = "the operator" if c.operator else c.name or c.referee or "a viewer"
        log.info("dropping a client (%s): %s", who, reason)

        async def close() -> None:
            with contextlib.suppress(Exception):
                async with asyncio.timeout(2):
                    await c.close(1013, reason[:120])
            t = c.transport
            if t is not None and not t.is_closing():
                # the close frame waits behind what the phone never read: cut the connection
                t.abort()

        asyncio.get_running_loop().create_task(close())


def summarise_lags(v: list[float]) -> dict[str, float] | None:
    """p50, p99 and max of lags in seconds, in milliseconds: the order statistics a sort would
    give, found by NumPy's selection on a float array (20,000 lags: ~0.8 ms; `list.sort`
    compared them as Python objects, 2.5-5 ms holding the GIL, which the event loop needs: at
    64 channels a busy hall's health call took 170-340 ms of it)."""
    if not v:
        return None
    n = len(v)
    k50, k99 = n // 2, min(n - 1, int(n * 0.99))
    a = np.array(v, dtype=np.float64)
    a.partition((k50, k99))
    return {"n": n, "p50": float(a[k50]) * 1000, "p99": float(a[k99]) * 1000,
            "max": float(a[k99:].max()) * 1000}
