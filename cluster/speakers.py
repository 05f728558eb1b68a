"""Browser speakers of a channel on any process of a cluster.

The process that reads a channel (its owner) has the channel's speaker feed (hall.speaker):
the schedule of clips, the timeline's clock, the clips' bytes. `OwnerSpeakers` puts every
schedule it publishes on the bus (`schedule.<channel>`) and answers three requests
(`speakers.<channel>`): the latest schedule, the timeline's time now, a clip's bytes by its URL
id. On every other process `RemoteSpeakers` stands in for the feed (hall.seam.SpeakersPort): it
relays each schedule to the speaker pages connected there, registers the schedule's clip ids
in that process's clip store as fetched from the owner (encoded once, by the owner, then kept
in memory here), and answers the pages' clock probes from its own estimate of the owner's
timeline: probes of the owner every `SYNC_EVERY_S` while a speaker page is connected (every
`SYNC_IDLE_S` while none is), the answer with the shortest round trip of the last `SYNC_KEEP`
younger than `SYNC_FRESH_S` taken (timeline = monotonic + offset, as a page estimates it of its
server). A page on another process thus plays the same
clips on the same timeline as one on the owner, within the error of that estimate (half the
shortest round trip through the broker).

Card secrecy is as on one process: the schedule (opaque URL ids) goes to admitted speaker
pages only, and a clip to a speaker of its channel or the operator (api/routes/clips.py); the
bus carries no more than the owner's own pages get.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
import math
import time
from collections import deque
from collections.abc import Callable
from typing import Any

from audio.errors import AudioError
from cluster.bus import Bus
from hall.speaker import JUMP_S, ClipStore, SpeakerFeed

log = logging.getLogger("yomite.cluster")

SYNC_EVERY_S = 1.0  # while a speaker page is connected here
SYNC_IDLE_S = 30.0  # while none is: the estimate kept fresh for the next one
SYNC_KEEP = 8  # probes of the owner kept; the fastest of those younger than SYNC_FRESH_S
SYNC_FRESH_S = 10.0  # gives the offset (two machines' clocks drift apart: ~50 ppm)
ASK_TIMEOUT_S = 3.0
MAX_SCHEDULE = 256 * 1024
_CLIP_PREFIX = "/api/clips/"


def _dumps(obj: dict[str, Any]) -> bytes:
    return json.dumps(obj, ensure_ascii=False, separators=(",", ":")).encode("utf-8")


def _loads(data: bytes) -> dict[str, Any]:
    if len(data) > MAX_SCHEDULE:
        raise ValueError(f"{len(data)} bytes")
    out = json.loads(data)
    if not isinstance(out, dict):
        raise ValueError("not an object")
    return out


class OwnerSpeakers:
    """The owner's side: its feed's schedules onto the bus, and the answers about them."""

    def __init__(self, bus: Bus, channel: str, feed: SpeakerFeed) -> None:
        self.bus = bus
        self.channel = channel
        self.feed = feed
        self._sub: Any = None
        self._tasks: set[asyncio.Task[Any]] = set()

    async def start(self) -> None:
        self._sub = await self.bus.nc.subscribe(self.bus.subjects.speakers(self.channel),
                                                cb=self._on_request)
        self.feed.taps.append(self._relay)
        self._relay(self.feed.message())

    async def stop(self) -> None:
        with contextlib.suppress(ValueError):
            self.feed.taps.remove(self._relay)
        if self._sub is not None:
            with contextlib.suppress(Exception):
                await self._sub.unsubscribe()
            self._sub = None

    def _spawn(self, coro: Any) -> None:
        task = asyncio.get_running_loop().create_task(coro)
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)

    def _relay(self, message: dict[str, Any]) -> None:
        self._spawn(self._publish(_dumps(message)))

    async def _publish(self, data: bytes) -> None:
        try:
            await self.bus.nc.publish(self.bus.subjects.schedule(self.channel), data)
        except Exception as e:
            log.info("owner %s: a speaker schedule not relayed: %s", self.channel, e)

    async def _on_request(self, msg: Any) -> None:
        self._spawn(self._answer(msg))

    async def _answer(self, msg: Any) -> None:
        headers: dict[str, str] = {}
        try:
            body = _loads(msg.data)
            op = body.get("op")
            if op == "schedule":
                data = _dumps(self.feed.message())
            elif op == "sync":
                data = _dumps({"s": self.feed.now(), "epoch": self.feed.epoch})
            elif op == "clip":
                cid = str(body.get("id", ""))
                store = self.feed.store
                # (only one rendered here: one fetched from the process that read the channel
                # before would be asked of this process again)
                clip = (await store.data(cid) if store.rendered_here(cid)
                        and store.channel_of(cid) == self.channel else None)
                if clip is None:
                    headers["Yomite-Error"] = f"no clip {cid[:40]!r} in channel {self.channel}"
                data = clip or b""
            else:
                raise ValueError(f"unknown op {op!r}")
        except Exception as e:
            headers["Yomite-Error"] = str(e)[:300] or type(e).__name__
            data = b""
        with contextlib.suppress(Exception):
            await self.bus.nc.publish(msg.reply, data, headers=headers)


class RemoteSpeakers:
    """A channel's speakers on a process that does not read it (hall.seam.SpeakersPort)."""

    def __init__(self, bus: Bus, channel: str, store: ClipStore,
                 publish: Callable[[dict[str, Any]], None],
                 listening: Callable[[], bool],
                 mono: Callable[[], float] = time.monotonic) -> None:
        self.bus = bus
        self.channel = channel
        self.store = store
        self._publish = publish
        self._listening = listening  # a speaker page is connected here
        self._mono = mono
        self._last: dict[str, Any] = {"type": "speaker", "seq": 0, "epoch": 0, "clips": [],
                                      "stops": 0, "stop_s": None, "prefetch": []}
        # (round trip, offset, when): the probes of the owner's timeline kept
        self._probes: deque[tuple[float, float, float]] = deque(maxlen=SYNC_KEEP)
        self._epoch = 0  # ours: it changes whenever the estimate starts again
        self._owner_epoch = 0
        self._sub: Any = None
        self._task: asyncio.Task[None] | None = None

    async def start(self) -> None:
        self._sub = await self.bus.nc.subscribe(self.bus.subjects.schedule(self.channel),
                                                cb=self._on_schedule)
        with contextlib.suppress(Exception):  # no owner yet: its first schedule will come
            self._take(_loads(await self._ask({"op": "schedule"}, 1.0)))
        self._task = asyncio.get_running_loop().create_task(self._keep_time())

    async def stop(self) -> None:
        if self._task is not None:
            self._task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._task
            self._task = None
        if self._sub is not None:
            with contextlib.suppress(Exception):
                await self._sub.unsubscribe()
            self._sub = None

    # ------------------------------------------------------------- hall.seam.SpeakersPort
    def message(self) -> dict[str, Any]:
        return {**self._last, "epoch": self._epoch}

    def sync(self, probe: dict[str, Any]) -> dict[str, Any]:
        out = SpeakerFeed.echo(probe)
        s = self.now()
        if math.isfinite(s):  # (none before the first probe of the owner: the page asks again)
            out["s"] = s
        out["epoch"] = self._epoch
        return out

    def set_volume(self, volume_db: float) -> None:
        """Nothing here: the owner's feed says the new volume in its next schedule."""

    # ------------------------------------------------------------------------------------
    def now(self) -> float:
        """The owner's timeline now, as estimated here (NaN before the first probe: a page
        then waits for the next answer)."""
        if not self._probes:
            return math.nan
        return self._mono() + self._offset()

    def _offset(self) -> float:
        """The offset of the fastest fresh probe (the latest if none is fresh)."""
        fresh = [p for p in self._probes if self._mono() - p[2] <= SYNC_FRESH_S]
        return min(fresh)[1] if fresh else self._probes[-1][1]

    async def _ask(self, body: dict[str, Any], timeout_s: float = ASK_TIMEOUT_S) -> bytes:
        msg = await self.bus.nc.request(self.bus.subjects.speakers(self.channel),
                                        _dumps(body), timeout=timeout_s)
        error = (msg.headers or {}).get("Yomite-Error")
        if error:
            raise AudioError(f"channel {self.channel}'s reader process: {error}")
        data: bytes = msg.data
        return data

    async def _fetch(self, cid: str) -> bytes:
        try:
            return await self._ask({"op": "clip", "id": cid})
        except AudioError:
            raise
        except Exception as e:
            raise AudioError(f"channel {self.channel}'s reader process did not send the "
                             f"clip ({e or type(e).__name__})") from None

    async def refresh(self) -> None:
        """The owner's latest schedule again, to the pages here (the broker back: a speaker
        page stops while its process does not reach the broker, hall's `broker` flag)."""
        with contextlib.suppress(Exception):
            self._take(_loads(await self._ask({"op": "schedule"}, 1.0)))
            self._publish(self.message())

    async def _on_schedule(self, msg: Any) -> None:
        try:
            self._take(_loads(msg.data))
        except Exception as e:
            log.warning("remote %s: a speaker schedule that is not ours: %s", self.channel, e)
            return
        self._publish(self.message())

    def _take(self, message: dict[str, Any]) -> None:
        urls = [c.get("url") for c in message.get("clips", []) if isinstance(c, dict)]
        for url in [*urls, *message.get("prefetch", [])]:
            cid = str(url).removeprefix(_CLIP_PREFIX).removesuffix(".ogg")
            self.store.add_foreign(cid, self.channel, self._fetch)
        self._last = message

    async def _keep_time(self) -> None:
        last = -math.inf
        while True:
            every = SYNC_EVERY_S if self._listening() or not self._probes else SYNC_IDLE_S
            if self._mono() - last >= every:
                last = self._mono()
                await self._probe()
            await asyncio.sleep(SYNC_EVERY_S)

    async def _probe(self) -> None:
        t0 = self._mono()
        try:
            answer = _loads(await self._ask({"op": "sync"}, 1.0))
            s, epoch = float(answer["s"]), int(answer["epoch"])
        except Exception as e:
            log.debug("remote %s: a clock probe failed: %s", self.channel, e)
            return
        t1 = self._mono()
        offset = s - (t0 + t1) / 2
        if epoch != self._owner_epoch or (
                self._probes and abs(offset - self._offset()) > JUMP_S):
            # the owner's timeline jumped, or another process reads the channel now: the
            # estimate starts again, and the pages here are told so (a new epoch of ours)
            self._probes.clear()
            self._owner_epoch = epoch
            self._epoch += 1
        self._probes.append((t1 - t0, offset, t1))
