"""The voices a channel reads with, as the hall sees them: what a voice must do, the hall's voices
by their settings, the device's volume wrapper, and the check that a voice covers a deck."""

from __future__ import annotations

import threading
from collections.abc import Callable
from pathlib import Path
from typing import Any, Protocol, runtime_checkable

import numpy as np

from audio.config import VoiceConfig
from reader.clip import Clip
from reader.deck import Deck
from reader.errors import BadDeck, ConfigError


class VoiceLike(Protocol):
    def lacks(self, poems: list[int]) -> list[int]: ...
    def frames(self, clip: Clip) -> int: ...
    def pcm(self, clip: Clip) -> np.ndarray: ...
    def prefetch(self, clips: list[Clip], progress: Any = None, *,
                 stop: threading.Event | None = None) -> Any: ...


VoiceFactory = Callable[[VoiceConfig], VoiceLike]


@runtime_checkable
class OnDisk(Protocol):
    """A voice whose renders are kept in the render cache's folder (what a match pins)."""

    def cache_path(self, clip: Clip) -> Path | None: ...


class Gained:
    """A voice whose samples are scaled by the channel's volume for the device (the speaker
    pages apply the volume themselves, to the same clips). Scaled copies are made off the
    audio thread, when a clip is sent, and the last few are kept."""

    def __init__(self, voice: VoiceLike, volume_db: float) -> None:
        self.voice = voice
        self.gain = 10 ** (volume_db / 20)
        self._scaled: dict[str, np.ndarray] = {}

    def frames(self, clip: Clip) -> int:
        return self.voice.frames(clip)

    def pcm(self, clip: Clip) -> np.ndarray:
        x = self.voice.pcm(clip)
        if self.gain == 1.0:
            return x
        hit = self._scaled.get(clip.key)
        if hit is None or hit.shape != x.shape:
            hit = (x * np.float32(self.gain)).astype(np.float32)
            hit.flags.writeable = False
            if len(self._scaled) >= 8:
                self._scaled.pop(next(iter(self._scaled)))
            self._scaled[clip.key] = hit
        return hit

    def prefetch(self, clips: list[Clip], progress: Any = None, *,
                 stop: threading.Event | None = None) -> Any:
        return self.voice.prefetch(clips, progress, stop=stop)

    def lacks(self, poems: list[int]) -> list[int]:
        return self.voice.lacks(poems)


def check_voice_covers(voice: VoiceLike, deck: Deck) -> None:
    """BadDeck (422) naming the deck's poems the voice cannot read (a partial pack)."""
    lacking = voice.lacks(list(deck.poems))
    if lacking:
        raise BadDeck(
            f"the voice pack lacks poems {', '.join(map(str, lacking))} of this deck: record "
            "them, choose a deck it covers, or set voice.pack_fallback: true (--pack-fallback "
            "on the command line)"
        )


class Voices:
    """The voices of the hall by their settings: the configured one, and those per-match
    settings ask for (made through `make`, i.e. `audio.voices.voice.make_voice`), the last few
    kept."""

    def __init__(self, config: VoiceConfig, default: VoiceLike,
                 make: Callable[[VoiceConfig], VoiceLike] | None, keep: int = 4) -> None:
        self._make = make
        self._keep = keep
        self._voices: dict[VoiceConfig, VoiceLike] = {config: default}
        self._default = config

    def get(self, cfg: VoiceConfig) -> VoiceLike:
        v = self._voices.pop(cfg, None)
        if v is None:
            if self._make is None:
                raise ConfigError("this server cannot change the voice per match")
            v = self._make(cfg)
        self._voices[cfg] = v  # most recent last
        while len(self._voices) > self._keep:
            old = next(k for k in self._voices if k != self._default)
            del self._voices[old]
        return v
