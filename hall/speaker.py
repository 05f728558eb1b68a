"""Browser speakers: a channel's reading played by the /speaker pages themselves.

The engine sends each clip ahead with the output frame its `offset` must sound at (`PlayClip`)
and cuts with `StopAudio`; the device plays them on its own frame clock. The speaker pages play
the same clips on the same timeline: the runtime hands every batch of commands to the channel's
`SpeakerFeed` after the device has carried them out (a hold's silence on the server's own
output never waits for the speakers), and the feed turns them into one *schedule* message for
the channel's "speaker" audience (`Hub.publish_speakers`), which no other page receives:

    {"type": "speaker", "seq", "epoch", "clips": [{"id", "url", "at_s", "offset_s",
     "duration_s", "segment"}], "stops", "stop_s", "prefetch": [url, ...], "volume_db",
     "fade_ms"}

Each message is the whole schedule (every clip until 15 s after its end: a page back from an
outage counts what it missed), like the state snapshots, so a page that joins late or
reconnects gets it at once and plays the clip under way from the sample that is due. A clip
is `id` (segment and frame: a verse read again after a hold is a new id); `at_s` is the
timeline time (seconds) at which its sample `offset_s` sounds. `stops` counts the stops so far
and `stop_s` is the last one's time: a page fades out, from that time (or at once if it is
past), every clip it plays that is no longer listed.

Time: a page keeps its own estimate of the timeline's time (`sync` messages: the page's clock
out, the timeline's `s` back, answered on receipt; see speaker.js for the offset and drift it
fits; `epoch` in both a sync answer and a schedule changes when the timeline jumps, and a
page then starts its estimate again). `SoundingClock.now()` is the timeline time whose frame
is sounding at this instant: for a wall-clock channel (output `browser`) the engine's clock
itself; for a channel whose engine follows a sound card (output `both`) the device's frame
clock, smoothed (it moves in blocks), less the audio still queued in the device, so the pages
sound with the device's speaker.

Clips are served at `/api/clips/{id}.ogg`: Ogg Opus (see `audio.codec.encode_opus` for why),
only to the channel's admitted speakers and the operator (hall.speakerlink). The id is a keyed
hash (a secret of this server) of the channel, a nonce of the match and the clip's render-cache
key, so a URL says nothing about which poem it holds, and the same verse has a new URL in every
match: no table learnt once names a poem again.
"""

from __future__ import annotations

import asyncio
import hashlib
import hmac
import logging
import math
import secrets
import time
from collections import OrderedDict, deque
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any, BinaryIO

from audio.voices.cachefolder import CacheFolder
from hall.voices import VoiceLike
from reader.clip import Clip
from reader.clock import Clock
from reader.commands import Command, PlayClip, StopAudio
from reader.engine import Engine

log = logging.getLogger("yomite.speaker")

# a clip stays in the schedule this long after its end: a speaker back from an outage this long
# still sees each clip it missed and counts it (speaker.js: missed)
KEEP_AFTER_END_S = 15.0
PREFETCH = 2  # clips beyond the scheduled ones a page fetches ahead (the next card)
JUMP_S = 0.25  # the timeline moving this much against the monotonic clock is a new epoch


def cache_key(voice: VoiceLike, clip: Clip) -> str:
    """The clip's render-cache key (voice, text and every setting), or a stand-in for a voice
    without one (test fakes)."""
    fn = getattr(voice, "cache_key", None)
    if callable(fn):
        return str(fn(clip))
    blob = f"{getattr(voice, 'name', type(voice).__name__)}|{clip.key}|{clip.text}"
    return hashlib.sha256(blob.encode("utf-8")).hexdigest()


@dataclass(frozen=True, slots=True)
class StoredClip:
    voice: VoiceLike
    clip: Clip
    key: str
    channel: str  # only this channel's speakers (and the operator) may fetch it


@dataclass(frozen=True, slots=True)
class ForeignClip:
    """A clip of a channel read by another process of a cluster: its bytes come from there."""

    channel: str
    fetch: Callable[[str], Awaitable[bytes]]  # the URL id -> the Ogg Opus bytes


class ClipStore:
    """The clips the speaker pages may fetch (those published in a schedule), by URL id, and
    their encoded bytes: in memory (LRU), and on disk under `cache_dir` when given, read and
    written through `folder` (the render cache's, which bounds it: a file evicted is encoded
    again; by default one of the store's own, unbounded)."""

    def __init__(self, secret: bytes, encode: Callable[[VoiceLike, Clip], bytes],
                 cache_dir: Path | None = None, capacity: int = 4096,
                 memory_bytes: int = 64 << 20, workers: int = 2,
                 folder: CacheFolder | None = None) -> None:
        self._secret = secret
        self._encode = encode
        self.cache_dir = cache_dir
        self.folder = folder if folder is not None or cache_dir is None else CacheFolder(cache_dir)
        self.capacity = capacity
        self.memory_bytes = memory_bytes
        self._clips: OrderedDict[str, StoredClip | ForeignClip] = OrderedDict()
        self._bytes: OrderedDict[str, bytes] = OrderedDict()
        self._bytes_used = 0
        self._pending: dict[str, asyncio.Future[bytes]] = {}
        self._limit = asyncio.Semaphore(workers)
        self.encoded = 0

    def add(self, voice: VoiceLike, clip: Clip, channel: str, match: str) -> str:
        """Register a clip of `channel`'s match `match` (a nonce of the match); returns its
        URL id: a keyed hash of both and of the clip, so the same verse has a new URL in
        every match and no table of URLs learnt once names a poem again."""
        key = cache_key(voice, clip)
        scoped = f"{channel}|{match}|{key}"
        cid = hmac.new(self._secret, scoped.encode("utf-8"), hashlib.sha256).hexdigest()[:32]
        self._keep(cid, StoredClip(voice, clip, key, channel))
        return cid

    def add_foreign(self, cid: str, channel: str,
                    fetch: Callable[[str], Awaitable[bytes]]) -> None:
        """Register a clip that another process of the cluster published for `channel`."""
        if not isinstance(self._clips.get(cid), StoredClip):  # one of ours stays ours
            self._keep(cid, ForeignClip(channel, fetch))

    def _keep(self, cid: str, entry: StoredClip | ForeignClip) -> None:
        if cid in self._clips:
            self._clips.move_to_end(cid)
        else:
            self._clips[cid] = entry
            while len(self._clips) > self.capacity:
                self._clips.popitem(last=False)

    def path_of(self, voice: VoiceLike, clip: Clip) -> Path | None:
        """Where the clip's encoded bytes are kept on disk (what a prepared match pins)."""
        return None if self.cache_dir is None else self._path(cache_key(voice, clip))

    def _path(self, key: str) -> Path | None:
        return None if self.cache_dir is None else self.cache_dir / f"{key[:40]}.ogg"

    def known(self, cid: str) -> bool:
        return cid in self._clips

    def rendered_here(self, cid: str) -> bool:
        """A clip of a channel this process reads (not one fetched from another process)."""
        return isinstance(self._clips.get(cid), StoredClip)

    def channel_of(self, cid: str) -> str | None:
        stored = self._clips.get(cid)
        return None if stored is None else stored.channel

    async def data(self, cid: str) -> bytes | None:
        """The clip's Ogg Opus bytes (encoded once, in a worker thread), or None if unknown."""
        hit = self._bytes.get(cid)
        if hit is not None:
            self._bytes.move_to_end(cid)
            return hit
        stored = self._clips.get(cid)
        if stored is None:
            return None
        pending = self._pending.get(cid)
        if pending is None:
            pending = asyncio.ensure_future(self._fill(cid, stored))
            self._pending[cid] = pending
            pending.add_done_callback(lambda _f: self._pending.pop(cid, None))
        return await asyncio.shield(pending)

    async def _fill(self, cid: str, stored: StoredClip | ForeignClip) -> bytes:
        if isinstance(stored, ForeignClip):
            data = await stored.fetch(cid)
            self._remember(cid, data)
            return data
        path, folder = self._path(stored.key), self.folder
        kept: bytes | None = None
        if path is not None and folder is not None:  # None: never encoded, or evicted
            kept = await asyncio.to_thread(_read, folder, path)
        if kept is not None:
            data = kept
        else:
            async with self._limit:
                data = await asyncio.to_thread(self._encode, stored.voice, stored.clip)
            self.encoded += 1
            if path is not None and folder is not None:
                # skipped on a full disk (said once): the bytes stay in memory
                await asyncio.to_thread(folder.write, path, _writer(data), len(data))
        self._remember(cid, data)
        return data

    def _remember(self, cid: str, data: bytes) -> None:
        self._bytes[cid] = data
        self._bytes_used += len(data)
        while self._bytes_used > self.memory_bytes and len(self._bytes) > 1:
            _, old = self._bytes.popitem(last=False)
            self._bytes_used -= len(old)


def _read(folder: CacheFolder, path: Path) -> bytes | None:
    return folder.read(path, Path.read_bytes)


def _writer(data: bytes) -> Callable[[BinaryIO], None]:
    def write(fh: BinaryIO) -> None:
        fh.write(data)

    return write


class SoundingClock:
    """The timeline time whose frame is sounding now (see the module's docstring).

    `stepwise`: the clock moves in whole device blocks (a sound card's frame count). Its value
    then lags the true position by 0..1 block; the smallest lag seen over `window_s` (the upper
    envelope of clock - monotonic) is taken as the true one. `latency_s` is subtracted: the
    audio handed to the device but not yet heard.
    """

    def __init__(self, clock: Clock, *, stepwise: bool = False, latency_s: float = 0.0,
                 window_s: float = 10.0, mono: Callable[[], float] = time.monotonic) -> None:
        self.clock = clock
        self.stepwise = stepwise
        self.latency_s = latency_s
        self.window_s = window_s
        self._mono = mono
        self._samples: deque[tuple[float, float]] = deque(maxlen=256)

    def now(self) -> float:
        m = self._mono()
        c = self.clock.now()
        if not self.stepwise:
            return c - self.latency_s
        self._samples.append((m, c - m))
        while self._samples and self._samples[0][0] < m - self.window_s:
            self._samples.popleft()
        lead = max(d for _, d in self._samples)
        return m + lead - self.latency_s


@dataclass(slots=True)
class _Entry:
    id: str
    cid: str
    segment: int
    at_s: float
    offset_s: float
    duration_s: float

    @property
    def end_s(self) -> float:
        return self.at_s + self.duration_s - self.offset_s

    def message(self) -> dict[str, Any]:
        return {"id": self.id, "url": f"/api/clips/{self.cid}.ogg", "segment": self.segment,
                "at_s": self.at_s, "offset_s": self.offset_s, "duration_s": self.duration_s}


class SpeakerFeed:
    """The schedule of one channel's speaker pages, built from the engine's audio commands."""

    def __init__(self, rate: int, store: ClipStore, clock: SoundingClock,
                 publish: Callable[[dict[str, Any]], None], *, volume_db: float = 0.0,
                 fade_ms: float = 5.0, channel: str = "main",
                 mono: Callable[[], float] = time.monotonic) -> None:
        self.rate = rate
        self.channel = channel
        self._engine: Engine | None = None
        self._match = secrets.token_hex(16)  # this match's part of every clip URL
        self.store = store
        self.clock = clock
        self._publish = publish
        # also told every schedule (a cluster's owner relays it to the other processes)
        self.taps: list[Callable[[dict[str, Any]], None]] = []
        self.volume_db = volume_db
        self.fade_ms = fade_ms
        self._entries: list[_Entry] = []
        self._prefetch: list[str] = []
        self._stops = 0
        self._stop_s: float | None = None
        self._seq = 0
        # the timeline's epoch: it changes when the timeline jumps against the monotonic clock
        # (it should not: a new match goes on from the last one's time; a stalled sound card
        # or anything else that moves it is said to the pages, which then start their estimate
        # of the timeline again instead of trusting samples of the old one)
        self.epoch = 0
        self._lead: float | None = None
        self._mono = mono
        self._message: dict[str, Any] = self._build()

    def carry_out(self, commands: list[Command], engine: Engine | None,
                  voice: VoiceLike) -> None:
        """Take the audio commands of one batch (already carried out by the device)."""
        changed = False
        self._follow(engine)
        for c in commands:
            match c:
                case PlayClip(clip=clip, at_frame=at, offset=off, segment=seg):
                    frames = int(voice.frames(clip))
                    cid = self.store.add(voice, clip, self.channel, self._match)
                    self._entries.append(_Entry(f"{seg}@{at}", cid, seg, at / self.rate,
                                                off / self.rate, frames / self.rate))
                    changed = True
                case StopAudio(at_frame=at):
                    self._entries = [e for e in self._entries if e.end_s <= at / self.rate]
                    self._stops += 1
                    self._stop_s = at / self.rate
                    changed = True
                case _:
                    pass
        if changed:
            self._prefetch = self._upcoming(engine, voice)
            self._seq += 1
            self._message = self._build()
            self._send()

    def refresh(self, engine: Engine | None, voice: VoiceLike) -> None:
        """A match was prepared or recovered: tell the pages what to fetch first."""
        self._follow(engine)
        self._prefetch = self._upcoming(engine, voice)
        self._seq += 1
        self._message = self._build()
        self._send()

    def set_volume(self, volume_db: float) -> None:
        self.volume_db = volume_db
        self._seq += 1
        self._message = self._build()
        self._send()

    def _send(self) -> None:
        self._publish(self._message)
        for tap in self.taps:
            tap(self._message)

    def message(self) -> dict[str, Any]:
        """The current schedule, for a page that connects."""
        self._prune()  # (notes a jump of the timeline since the last message: its epoch)
        return {**self._message, "epoch": self.epoch,
                "clips": [e.message() for e in self._entries]}

    def sync(self, payload: dict[str, Any]) -> dict[str, Any]:
        """The answer to a page's clock probe: its own fields back, with the timeline's time."""
        out = self.echo(payload)
        out["s"] = self.now()
        out["epoch"] = self.epoch
        return out

    def now(self) -> float:
        """The timeline's time, noting a jump of it (a new epoch)."""
        s = self.clock.now()
        lead = s - self._mono()
        if self._lead is not None and abs(lead - self._lead) > JUMP_S:
            self.epoch += 1
            log.warning("channel %s: the timeline jumped by %+.3f s (epoch %d)",
                        self.channel, lead - self._lead, self.epoch)
        self._lead = lead
        return s

    @staticmethod
    def echo(payload: dict[str, Any]) -> dict[str, Any]:
        out: dict[str, Any] = {"type": "sync"}
        for k in ("id", "c"):
            v = payload.get(k)
            if isinstance(v, int | float) and not isinstance(v, bool) and math.isfinite(v):
                out[k] = v
        return out

    def _follow(self, engine: Engine | None) -> None:
        """A new match (engine) gets new clip URLs, and the last match's clips that are over
        leave the schedule at once."""
        if engine is not None and engine is not self._engine:
            self._engine = engine
            self._match = secrets.token_hex(16)
            now = self.now()
            self._entries = [e for e in self._entries if e.end_s > now]

    def _upcoming(self, engine: Engine | None, voice: VoiceLike) -> list[str]:
        if engine is None:
            return []
        scheduled = {e.cid for e in self._entries}
        out: list[str] = []
        for clip in engine.upcoming_clips():
            cid = self.store.add(voice, clip, self.channel, self._match)
            if cid in scheduled or cid in out:
                continue
            out.append(cid)
            if len(out) >= PREFETCH:
                break
        return [f"/api/clips/{cid}.ogg" for cid in out]

    def _prune(self) -> None:
        now = self.now()
        self._entries = [e for e in self._entries if e.end_s > now - KEEP_AFTER_END_S]

    def _build(self) -> dict[str, Any]:
        self._prune()
        return {"type": "speaker", "seq": self._seq, "rate": self.rate, "epoch": self.epoch,
                "clips": [e.message() for e in self._entries], "stops": self._stops,
                "stop_s": self._stop_s, "prefetch": list(self._prefetch),
                "volume_db": self.volume_db, "fade_ms": self.fade_ms}
