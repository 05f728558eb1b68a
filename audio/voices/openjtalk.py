"""Open JTalk (pyopenjtalk-plus): the default voice, an HMM Japanese voice at 48 kHz."""

import contextlib
import io
import logging
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

from audio.errors import VoiceError
from audio.pcm import Pcm
from audio.voices import pronunciation
from audio.voices.pronunciation import Reading
from audio.voices.voice import Param, phrases, read_phrase_by_phrase, speed_params
from reader.clip import Clip, ClipKind, Verse
from reader.poems import poem

log = logging.getLogger(__name__)

# pyopenjtalk returns float64 on the int16 scale, with peaks well past 32767 (up to ~52000):
# divide, never cast or clip; normalisation brings the level down afterwards.
_INT16_SCALE: Final = 32768.0
katakana = pronunciation.katakana


def spoken_kana(phrase: str) -> str:
    """The morae Open JTalk will say for `phrase`, in katakana (for checking a yomi)."""
    said = pyopenjtalk.g2p(katakana(phrase), kana=True, use_read_as_pron=True)
    return said if isinstance(said, str) else "".join(said)


def clip_readings(clip: Clip) -> list[Reading]:
    """How each phrase of `clip` is said (see `audio.voices.pronunciation`): its text analysed by
    the dictionary, its morae the yomi's. A verse of the hundred also gives its historical kana
    (long vowels in misread words). Text and yomi with different phrase counts are read from
    the kana alone, and logged."""
    yomi = phrases(clip)
    text = clip.text.split()
    kana: list[str | None] = [None] * len(yomi)
    if clip.kind is ClipKind.VERSE and clip.poem is not None and 1 <= clip.poem <= 100:
        p = poem(clip.poem)
        own_yomi, own_kana = ((p.kami_yomi, p.kami_kana) if clip.verse is Verse.KAMI
                              else (p.shimo_yomi, p.shimo_kana))
        if own_yomi.split() == yomi and len(own_kana.split()) == len(yomi):
            kana = list(own_kana.split())
    if len(text) != len(yomi):
        log.warning("clip %s: text %r has %d phrases, yomi %r has %d: reading from the kana "
                    "alone", clip.key, clip.text, len(text), clip.yomi, len(yomi))
        text = yomi
    out = [pronunciation.read(t, y, k) for t, y, k in zip(text, yomi, kana, strict=True)]
    for i, r in enumerate(out):
        if r.fallback is not None:
            log.info("clip %s phrase %d (%s): read from the kana alone: %s",
                     clip.key, i + 1, r.yomi, r.fallback)
    return out


class OpenJTalkVoice:
    """Reads a clip phrase by phrase: each phrase is synthesised alone, trimmed, and the
    phrases are joined with `phrase_pause_s` of silence, so the pause is the same everywhere.

    What each phrase says comes from `audio.voices.pronunciation`: the yomi's morae with the words,
    accents and long vowels of Open JTalk's dictionary analysis of the text. (Fed the kana
    alone, every phrase would be one unknown noun with one contour, おう two vowels.)

    `speed` stretches the whole clip in time (Rubber Band, pitch kept: exactly linear, unlike
    Open JTalk's own rate factor); `pitch` shifts F0 in semitones. Each thread that renders gets
    its own HTS engine (they release the GIL, so two threads render twice as fast on two cores),
    while the text front end is shared behind its own lock.
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
            "reading": "text-accent-yomi-morae",
            "rate": rate,
            **speed_params(speed),
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
        readings = clip_readings(clip)

        def synthesise(i: int, phrase: str, clip: Clip) -> tuple[Pcm, int]:
            return self._synthesise(list(readings[i].labels), phrase, clip)

        return read_phrase_by_phrase(
            synthesise, clip, engine="Open JTalk", voice=self.name, rate=self._rate,
            phrase_pause_s=self.phrase_pause_s, target_lufs=self.loudness_lufs,
            speed=self.speed,
        )

    def _engine(self) -> HTSEngine:
        engine: HTSEngine | None = getattr(self._local, "engine", None)
        if engine is None:
            engine = HTSEngine(pyopenjtalk.DEFAULT_HTS_VOICE)
            self._local.engine = engine
        return engine

    def _synthesise(self, labels: list[str], phrase: str, clip: Clip) -> tuple[Pcm, int]:
        try:
            engine = self._engine()
            # synthesize() resets speed and pitch, so they are set before every call
            engine.set_speed(1.0)
            engine.add_half_tone(self.pitch)
            wave = engine.synthesize(labels)
            sr = int(engine.get_sampling_frequency())
        except (RuntimeError, MemoryError, ValueError) as e:
            raise VoiceError(f"Open JTalk failed on {phrase!r} in clip {clip.key}: {e}") from None
        return (np.asarray(wave, dtype=np.float64) / _INT16_SCALE).astype(np.float32), sr
