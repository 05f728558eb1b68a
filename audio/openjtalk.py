"""Open JTalk (pyopenjtalk-plus): the default voice, an HMM Japanese voice at 48 kHz."""

import contextlib
import io
import threading
from collections.abc import Mapping
from importlib import metadata
from typing import Final

import numpy as np

with contextlib.redirect_stdout(io.StringIO()):
    # pyopenjtalk-plus prints (not warns) at import that the optional onnxruntime is missing;
    # on stdout that would corrupt `yomite voices list` output. Nothing else is printed.
    import pyopenjtalk
    from pyopenjtalk.htsengine import HTSEngine

from reader.clip import Clip

from .errors import VoiceError
from .pcm import Pcm
from .voice import Param, read_phrase_by_phrase

# pyopenjtalk returns float64 on the int16 scale, with peaks well past 32767 (up to ~52000):
# divide, never cast or clip; normalisation brings the level down afterwards.
_INT16_SCALE: Final = 32768.0
_HIRAGANA_TO_KATAKANA: Final = {c: c + 0x60 for c in range(0x3041, 0x3097)}


def katakana(kana: str) -> str:
    return kana.translate(_HIRAGANA_TO_KATAKANA)


def spoken_kana(phrase: str) -> str:
    """The morae Open JTalk will say for `phrase`, in katakana (for checking a yomi)."""
    said = pyopenjtalk.g2p(katakana(phrase), kana=True, use_read_as_pron=True)
    return said if isinstance(said, str) else "".join(said)


class OpenJTalkVoice:
    """Reads a clip's kana phrase by phrase: each phrase is synthesised alone, trimmed, and the
    phrases are joined with `phrase_pause_s` of silence, so the pause is the same everywhere.

    The kana go in as katakana with `use_read_as_pron`: the yomi is already written as it is
    said (わ for the particle は), and this way Open JTalk says exactly those morae. Fed
    hiragana, it re-analyses them and misreads three of the hundred poems (いまはた as
    イマワタ, はなぞ as ワナゾ, たつた as タッタ).

    `speed` is Open JTalk's own rate factor; `pitch` shifts F0 in semitones. Each thread that
    renders gets its own HTS engine (they release the GIL, so two threads render twice as fast
    on two cores), while the text front end is shared behind pyopenjtalk's own lock.
    """

    name = "openjtalk"

    def __init__(
        self,
        rate: int = 48000,
        speed: float = 1.0,
        pitch: float = 0.0,
        phrase_pause_s: float = 0.15,
        loudness_lufs: float = -20.0,
    ) -> None:
        self._rate = rate
        self.speed = speed
        self.pitch = pitch
        self.phrase_pause_s = phrase_pause_s
        self.loudness_lufs = loudness_lufs
        self._local = threading.local()
        self._params: dict[str, Param] = {
            "engine": "openjtalk",
            "version": metadata.version("pyopenjtalk-plus"),
            "hts_voice": pyopenjtalk.DEFAULT_HTS_VOICE.rsplit(b"/", 1)[-1].decode(),
            "rate": rate,
            "speed": speed,
            "pitch": pitch,
            "phrase_pause_s": phrase_pause_s,
            "loudness_lufs": loudness_lufs,
        }

    @property
    def rate(self) -> int:
        return self._rate

    @property
    def params(self) -> Mapping[str, Param]:
        return self._params

    def render(self, clip: Clip) -> Pcm:
        return read_phrase_by_phrase(
            self._synthesise, clip, engine="Open JTalk", voice=self.name, rate=self._rate,
            phrase_pause_s=self.phrase_pause_s, target_lufs=self.loudness_lufs,
        )

    def _engine(self) -> HTSEngine:
        engine: HTSEngine | None = getattr(self._local, "engine", None)
        if engine is None:
            engine = HTSEngine(pyopenjtalk.DEFAULT_HTS_VOICE)
            self._local.engine = engine
        return engine

    def _synthesise(self, phrase: str, clip: Clip) -> tuple[Pcm, int]:
        try:
            labels = pyopenjtalk.extract_fullcontext(katakana(phrase), use_read_as_pron=True)
            engine = self._engine()
            # synthesize() resets speed and pitch, so they are set before every call
            engine.set_speed(self.speed)
            engine.add_half_tone(self.pitch)
            wave = engine.synthesize(labels)
            sr = int(engine.get_sampling_frequency())
        except (RuntimeError, MemoryError, ValueError) as e:
            raise VoiceError(f"Open JTalk failed on {phrase!r} in clip {clip.key}: {e}") from None
        return (np.asarray(wave, dtype=np.float64) / _INT16_SCALE).astype(np.float32), sr
