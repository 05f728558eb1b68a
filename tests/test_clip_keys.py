"""The speaker pages' clips are stored (on disk, shared by every match and channel) under the
render cache's key: a verse rendered at one speed is never served where another speed is read.
Before the fix the pooled voice (what the hall's channels hold) had no key of its own, so the
store keyed its clips by the engine's name and the verse alone: a speaker page played poem 24's
upper verse rendered at speed 1.0 (2.6 s) in the timeline's 4.33 s slot of speed 0.6."""

from __future__ import annotations

from pathlib import Path
from typing import Any, cast

from audio.config import VoiceConfig
from audio.voices.renderpool import PooledVoice
from hall.speaker import cache_key
from reader.clip import Verse
from reader.programme import verse_clip

RATE = 48000


def pooled(tmp_path: Path, **settings: Any) -> PooledVoice:
    cfg = VoiceConfig(cache_dir=tmp_path, **settings)
    return PooledVoice(cfg, RATE, cast(Any, None))  # the pool is not asked for a key


def test_a_clip_at_another_speed_or_pitch_is_another_clip(tmp_path: Path) -> None:
    clip = verse_clip(24, Verse.KAMI)
    slow, normal = pooled(tmp_path, speed=0.6), pooled(tmp_path, speed=1.0)
    assert cache_key(slow, clip) != cache_key(normal, clip)
    assert cache_key(normal, clip) != cache_key(pooled(tmp_path, pitch=2.0), clip)
    # the same key as the voice's own render cache: one name for one rendering
    assert cache_key(slow, clip) == slow.local.cache_key(clip)
    assert cache_key(slow, clip) == cache_key(pooled(tmp_path, speed=0.6), clip)
