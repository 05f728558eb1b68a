"""Open JTalk (pyopenjtalk-plus): the default voice, an HMM Japanese voice at 48 kHz."""

import contextlib
import io
import logging
import threading
from collections.abc import Mapping
from dataclasses import asdict
from importlib import metadata
from typing import Final

import numpy as np

with contextlib.redirect_stdout(io.StringIO()):
    # pyopenjtalk-plus prints (not warns) at import that the optional onnxruntime is missing;
    # on stdout that would corrupt `yomite voices list` output. Nothing else is printed.
    import pyopenjtalk
    from pyopenjtalk.htsengine import HTSEngine

from audio.errors import VoiceError
from audio.pcm import Pcm, resample, silence, trim_bounds, trim_silence
from audio.voices import kana
from audio.voices.chant import (
    ChantStyle,
    chant,
    for_verse,
    held_end,
    held_phonemes,
    lf0_target,
    morae,
    plan,
)
from audio.voices.hts import Hts
from audio.voices.readings import clip_readings
from audio.voices.voice import Param, mastered, read_phrase_by_phrase, speed_params
from reader.clip import Clip, ClipKind, Verse

__all__ = ["OpenJTalkVoice", "clip_readings", "spoken_kana"]

log = logging.getLogger(__name__)

# pyopenjtalk returns float64 on the int16 scale, with peaks well past 32767 (up to ~52000):
# divide, never cast or clip; normalisation brings the level down afterwards.
_INT16_SCALE: Final = 32768.0
RELEASE_TRIM_DB: Final = -55.0  # where a chanted verse's end is trimmed, re its peak
JOIN_TRIM_DB: Final = -35.0  # where its phrases are trimmed to meet
katakana = kana.katakana


def spoken_kana(phrase: str) -> str:
    """The morae Open JTalk will say for `phrase`, in katakana (for checking a yomi)."""
    said = pyopenjtalk.g2p(katakana(phrase), kana=True, use_read_as_pron=True)
    return said if isinstance(said, str) else "".join(said)


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
        chant: ChantStyle | None = None,
    ) -> None:
        self._rate = rate
        self.speed = speed
        self.pitch = pitch
        self.phrase_pause_s = phrase_pause_s
        self.loudness_lufs = loudness_lufs
        self.chant = chant
        self._local = threading.local()
        self._params: dict[str, Param] = {
            "engine": "openjtalk",
            "version": metadata.version("pyopenjtalk-plus"),
            "hts_voice": pyopenjtalk.DEFAULT_HTS_VOICE.rsplit(b"/", 1)[-1].decode(),
            "reading": "text-accent-yomi-morae-classical-words",
            "rate": rate,
            **speed_params(speed),
            "pitch": pitch,
            "phrase_pause_s": phrase_pause_s,
            "loudness_lufs": loudness_lufs,
            "style": "natural" if chant is None else "reader",
            **({} if chant is None else {f"chant_{k}": v for k, v in asdict(chant).items()}),
        }

    @property
    def rate(self) -> int:
        return self._rate

    @property
    def params(self) -> Mapping[str, Param]:
        return self._params

    def render(self, clip: Clip) -> Pcm:
        readings = clip_readings(clip)
        if self.chant is not None and clip.kind in (ClipKind.VERSE, ClipKind.PRELUDE):
            return self._chanted(clip, [r.labels for r in readings], self.chant)

        def synthesise(i: int, phrase: str, clip: Clip) -> tuple[Pcm, int]:
            return self._synthesise(list(readings[i].labels), phrase, clip)

        return read_phrase_by_phrase(
            synthesise, clip, engine="Open JTalk", voice=self.name, rate=self._rate,
            phrase_pause_s=self.phrase_pause_s, target_lufs=self.loudness_lufs,
            speed=self.speed,
        )

    def _chanted(self, clip: Clip, labels: list[tuple[str, ...]], style: ChantStyle) -> Pcm:
        """A verse in the reader's style (audio.voices.chant): phrases joined phrase_gap_s
        apart, the last sound held and let go."""
        hts: Hts | None = getattr(self._local, "hts", None)
        try:
            if hts is None:
                hts = self._local.hts = Hts()
            parts, _ = chant(hts, labels, style, lower=clip.verse is Verse.SHIMO,
                             pitch_st=self.pitch)
        except (RuntimeError, MemoryError, ValueError, IndexError) as e:
            raise VoiceError(f"Open JTalk failed on clip {clip.key}: {e}") from None
        gap = silence(round(style.phrase_gap_s * hts.rate))
        out: list[Pcm] = []
        for k, y in enumerate(parts):
            # phrases meet where they are still within JOIN_TRIM_DB of their peak (their
            # quiet ends would join into a pause); the release is kept to its end (it fades
            # 40 dB from a held sound that may be quieter than the verse's peak: a ン)
            y = (y / _INT16_SCALE).astype(np.float32)
            start, _ = trim_bounds(y, hts.rate, -45.0 if k == 0 else JOIN_TRIM_DB)
            _, stop = trim_bounds(y, hts.rate,
                                  RELEASE_TRIM_DB if k == len(parts) - 1 else JOIN_TRIM_DB)
            x = y[start:stop]
            if x.size == 0:
                raise VoiceError(f"Open JTalk said nothing for a phrase of clip {clip.key}")
            out += [gap, x] if out else [x]
        return mastered(resample(np.concatenate(out), hts.rate, self._rate), self._rate,
                        self.loudness_lufs, self.name, clip, stretch=1.0 / self.speed,
                        trim=lambda x, rate: trim_silence(x, rate, RELEASE_TRIM_DB))

    def timing(self, clip: Clip) -> tuple[list[float], float]:
        """How the voice times `clip` (for measuring it: bench/reading_style.py): each mora's
        seconds as the synthesis placed them, and how long before the clip's end its last mora
        begins. The HTS engine's own durations (with the reader style's hold where it reads)."""
        hts: Hts | None = getattr(self._local, "hts", None)
        if hts is None:
            hts = self._local.hts = Hts()
        labels = [r.labels for r in clip_readings(clip)]
        natural = [tuple(hts.durations(labs)) for labs in labels]
        if self.chant is not None and clip.kind in (ClipKind.VERSE, ClipKind.PRELUDE):
            style = for_verse(self.chant, labels)
            vp = plan(hts, labels, style, lower=clip.verse is Verse.SHIMO, pitch_st=self.pitch)
            p = vp.phrases[-1]
            x = held_end(hts.synthesize(p.labels, p.frames,
                                        lf0_target(p, vp.tone, style, len(labels) == 1),
                                        lf0_gv=False, no_gv=held_phonemes(vp)),
                         vp, style, hts)
            frames, first = p.frames, vp.final[1]
        else:
            x = hts.synthesize(labels[-1])
            frames, first = natural[-1], morae(labels[-1])[-1][0]
        frame_s = hts.fperiod / hts.rate / self.speed
        morae_s = [sum(f[i] for i in m) * frame_s
                   for labs, f in zip(labels, natural, strict=True) for m in morae(labs)]
        _, stop = trim_bounds(x / _INT16_SCALE, hts.rate,
                              RELEASE_TRIM_DB if self.chant is not None else -45.0)
        onset = sum(frames[:first]) * hts.fperiod
        return morae_s, (stop - onset) / hts.rate / self.speed

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
