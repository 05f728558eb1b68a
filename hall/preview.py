"""The voice preview: a reading style heard on the operator's console before a match is prepared.

Only ever the jokā, `match.prelude`'s upper and lower verse (the Goshiki 東海の…, no card of
the hundred): card secrecy allows nothing about a card to reach a client before its upper verse
begins, and a preview is asked for at any time, a match prepared or under way. It is the hall's
configured voice with the asked style (and speed), read as a match reads the jokā: the upper
verse, the gap between the verses less the held sound, the lower verse.

It never touches a channel's runtime or output: the audio goes to the operator's browser alone.
Its two verses are rendered through the hall's voices (the render pool's processes, queued
behind the clips any channel's start waits for, so a preview during a match never delays its
reading), then encoded once and kept by the clip store (in memory, and on disk under
`voice.cache_dir/opus`), like the speaker pages' clips: a second request costs a file read
(until the render cache's bound evicts it: then it is rendered again). Only the speeds the
console offers are previewed (audio.config.offered_speed: each new one is a new render).
"""

from __future__ import annotations

import asyncio
import hashlib
import threading
from concurrent.futures import Future
from dataclasses import dataclass
from typing import Any, Final, Protocol, runtime_checkable

import numpy as np

from audio.config import VoiceConfig, VoiceEngine, held_s, with_voice_overrides
from hall.config import Config
from hall.rendering import START_CLIPS
from hall.speaker import ClipStore, cache_key
from hall.voices import VoiceLike, Voices
from reader.clip import Clip, Verse
from reader.programme import MIN_GAP_SHARE, prelude_clip

# the place in the render pool's queue: behind every clip a start waits for (ranks below
# START_CLIPS, and the clips a playing channel needs at once, which go first of all)
PREVIEW_RANK: Final = float(START_CLIPS)
MATCH_NONCE: Final = "voice-preview"  # the clip store's "match" of every preview clip


@runtime_checkable
class Queued(Protocol):
    """A voice that renders in the pool, a clip at a chosen place in its queue."""

    def submit(self, clip: Clip, rank: float) -> Future[None]: ...


class JokaReading:
    """A voice that says one thing: the jokā, upper verse, gap, lower verse, as one clip (the
    clip store encodes and keeps it as it does a verse)."""

    def __init__(self, voice: VoiceLike, kami: Clip, shimo: Clip, gap_s: float,
                 rate: int) -> None:
        self.voice = voice
        self.kami, self.shimo = kami, shimo
        self.gap_frames = round(gap_s * rate)

    def cache_key(self, _clip: Clip) -> str:
        parts = (cache_key(self.voice, self.kami), cache_key(self.voice, self.shimo),
                 str(self.gap_frames))
        return hashlib.sha256("|".join(parts).encode()).hexdigest()

    def pcm(self, _clip: Clip) -> np.ndarray:
        kami, shimo = self.voice.pcm(self.kami), self.voice.pcm(self.shimo)
        gap = np.zeros(self.gap_frames, np.float32)
        return np.concatenate([kami, gap, shimo]).astype(np.float32, copy=False)

    def frames(self, clip: Clip) -> int:
        return len(self.pcm(clip))

    def lacks(self, _poems: list[int]) -> list[int]:
        return []

    def prefetch(self, _clips: list[Clip], progress: Any = None, *,
                 stop: threading.Event | None = None) -> Any:
        return self.voice.prefetch([self.kami, self.shimo], progress, stop=stop)

    async def rendered(self) -> None:
        """Both verses rendered (in the pool, behind any start's clips), when the voice has a
        pool; else they are rendered when the store encodes them, in its worker thread."""
        if isinstance(self.voice, Queued):
            for clip in (self.kami, self.shimo):
                await asyncio.wrap_future(self.voice.submit(clip, PREVIEW_RANK))


def heard_style(voice: VoiceConfig) -> str:
    """The style a voice reads in: Open JTalk's `reader` or `natural`; `none` for the other
    engines (a recorded pack reads as it was recorded)."""
    return voice.style if voice.engine is VoiceEngine.OPENJTALK else "none"


@dataclass(frozen=True, slots=True)
class Preview:
    """A preview's voice, its id in the clip store (the response's ETag: it changes with every
    setting, the jokā's text included) and how to get its Ogg Opus bytes."""

    voice: VoiceConfig
    clip_id: str
    reading: JokaReading
    store: ClipStore

    @property
    def style(self) -> str:
        return heard_style(self.voice)

    async def data(self) -> bytes:
        await self.reading.rendered()
        data = await self.store.data(self.clip_id)
        assert data is not None  # added to the store by plan_preview, just now
        return data


def preview_voice(config: Config, style: str | None, speed: float | None) -> VoiceConfig:
    """The configured voice with the style and speed a match would ask for (ConfigError, a
    422, for a value a match could not have)."""
    over: dict[str, Any] = {}
    if style is not None:
        over["style"] = style
    if speed is not None:
        over["speed"] = speed
    return with_voice_overrides(config.voice, over)


def plan_preview(config: Config, voices: Voices, store: ClipStore, channel: str,
                 style: str | None = None, speed: float | None = None) -> Preview:
    """The preview of the jokā for `channel` in `style` at `speed` (None: as configured). No
    rendering here: the caller awaits `Preview.data` unless the browser has it already."""
    cfg = preview_voice(config, style, speed)
    voice = voices.get(cfg)
    match = config.match
    gap = match.gaps.between_verses_s
    gap = max(gap * MIN_GAP_SHARE, gap - held_s(cfg)[0])  # as a match reads it
    kami = prelude_clip(match, Verse.KAMI)
    reading = JokaReading(voice, kami, prelude_clip(match, Verse.SHIMO), gap, config.audio.rate)
    return Preview(cfg, store.add(reading, kami, channel, MATCH_NONCE), reading, store)

