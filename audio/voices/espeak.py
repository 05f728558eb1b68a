"""pyttsx3 (espeak-ng on Linux): a fast, robotic fallback voice.

Rendering always goes through `save_to_file` + `runAndWait` into a temporary WAV, never
`say()`: on Linux `say()` plays through `aplay`, behind the sink's back, where it cannot be
stopped.
"""

import atexit
import contextlib
import io
import logging
import re
import tempfile
import threading
import time
import weakref
from collections.abc import Callable, Mapping
from importlib import metadata
from pathlib import Path
from typing import Any, Final

from audio.codec import read_wav
from audio.errors import CodecError, VoiceError
from audio.pcm import Pcm, peak
from audio.voices.readings import spoken_phrases
from audio.voices.voice import Param, read_phrase_by_phrase, speed_params
from reader.clip import Clip

log = logging.getLogger(__name__)

# espeak-ng keeps one synthesiser per process (one current voice, one output callback), so
# every pyttsx3 voice in the process shares it: this lock is module-wide on purpose.
_ENGINE_LOCK: Final = threading.Lock()
# ...and so is the engine. When a pyttsx3 engine is garbage-collected its espeak driver clears
# the process-wide output callback, silencing every other engine (seen here as random verses
# rendering as silence). So the process makes one engine, on first use, and keeps it.
_system_engine: Any = None
# pyttsx3 2.99's espeak driver returns from runAndWait about 10 ms after starting the
# synthesis, whether or not espeak-ng (which runs in its own thread) has finished: under load
# the WAV is still empty or half written (seen as random silent or clipped phrases). The file is
# complete when the driver announces "finished-utterance", so every render waits for that.
_UTTERANCE_DONE: Final = threading.Event()
_SYNTH_TIMEOUT_S: Final = 30.0


_ATTEMPTS: Final = 3
# Engines we listen to (each is connected to `finished-utterance` once).
_LISTENING: "weakref.WeakSet[Any]" = weakref.WeakSet()


def _on_finished(**_: Any) -> None:
    _UTTERANCE_DONE.set()


def _shared_engine() -> Any:
    """The process's pyttsx3 engine (call with _ENGINE_LOCK held). Only this module holds it,
    so it can be let go at exit, while the modules its finaliser needs are still loaded."""
    global _system_engine
    if _system_engine is None:
        import pyttsx3  # type: ignore[import-untyped]

        _system_engine = pyttsx3.init()
        _never_cancel(_system_engine)
        atexit.register(_release_shared_engine)
    return _system_engine


def _never_cancel(engine: Any) -> None:
    """Keep pyttsx3 from cancelling espeak-ng at the end of every `runAndWait`.

    pyttsx3 ends each `runAndWait` with its driver's `stop()`, and the espeak driver's `stop()`
    calls `espeak_Cancel()` whenever espeak-ng's command queue is busy, as it often is with the
    settings `runAndWait` has just queued. `espeak_ng_Cancel` empties the queue (a setting not
    yet applied is lost) and sets every parameter back to the value saved before the last one
    (`saved_parameters`): a phrase read at a rate we had changed, or our rate taken back after
    the render (the test that changes the rate behind the voice's back failed 1 run in 3 that
    way). A render never needs to stop a synthesis (a clip is rendered whole, into a file), so
    the process's engine does not cancel."""
    driver = getattr(getattr(engine, "proxy", None), "_driver", None)
    if driver is not None and type(driver).__module__ == "pyttsx3.drivers.espeak":
        driver.stop = lambda: None


def _release_shared_engine() -> None:
    global _system_engine
    _system_engine = None

# Words per minute, calibrated so that espeak-ng's jpx/ja voice reads the hundred poems at the
# same pace as Open JTalk (tests/test_espeak.py checks it). Every clip is synthesised at this
# rate; `speed` stretches the result in time, like every voice's (exactly linear, pitch kept).
BASE_WPM: Final = 175
_PITCH_PER_SEMITONE: Final = 50 / 12  # espeak pitch is 0..100 (50 = voice default): approximate


_JAPANESE = re.compile(r"(?:^|[^a-z])(?:ja|jpn|japanese)(?:[^a-z]|$)")


def japanese_voice_id(voices: list[Any]) -> str | None:
    """The id of the first voice whose language, id or name says Japanese: `ja`, `ja-JP`,
    `jpn` or `Japanese` as a whole token (espeak-ng's `jpx/ja`, SAPI5's `..._JA-JP_HARUKA...`,
    macOS's `....ja-JP.Kyoko`). None if there is none."""
    for v in voices:
        langs = [str(lang) for lang in (getattr(v, "languages", None) or [])]
        for text in [*langs, str(getattr(v, "id", "")), str(getattr(v, "name", ""))]:
            if _JAPANESE.search(text.lower()):
                return str(v.id)
    return None


class Pyttsx3Voice:
    """Reads a clip's kana (as written: espeak-ng's Japanese rules speak kana, not kanji)
    phrase by phrase like `OpenJTalkVoice`, with the system's Japanese pyttsx3 voice.

    The pyttsx3 engine is started on first render: the process's one shared engine, unless a
    test passes `engine_factory` to make a fake. If the system has no Japanese voice,
    `VoiceError` names the voices it does have. Every phrase is synthesised at `BASE_WPM`
    (`speed` stretches the clip afterwards); `pitch` in semitones maps roughly onto espeak's
    0-100 pitch scale. espeak-ng's rate, pitch and voice belong to the process, not to this
    object, so they are read back from the engine before every phrase and set again where they
    differ: something else in the process may have changed them.
    """

    name = "pyttsx3"

    def __init__(
        self,
        rate: int = 48000,
        speed: float = 1.0,
        pitch: float = 0.0,
        phrase_pause_s: float = 0.15,
        loudness_lufs: float = -20.0,
        *,
        engine_factory: Callable[[], Any] | None = None,
    ) -> None:
        self._rate = rate
        self._engine_factory = engine_factory
        self.speed = speed
        self.pitch = pitch
        self.phrase_pause_s = phrase_pause_s
        self.loudness_lufs = loudness_lufs
        self.wpm = BASE_WPM
        self.espeak_pitch = min(100, max(0, round(50 + pitch * _PITCH_PER_SEMITONE)))
        self._own_engine: Any = None  # a test's fake; the real engine is shared
        self._started = False
        self._voice_id: str | None = None
        self._params: dict[str, Param] = {
            "engine": "pyttsx3",
            "version": _version("pyttsx3"),
            "reading": "spoken-form",  # the morae as said, long vowels as ー
            "synth": _synth_version(),
            "rate": rate,
            "wpm": self.wpm,
            **speed_params(speed),
            "pitch": self.espeak_pitch,
            "phrase_pause_s": phrase_pause_s,
            "loudness_lufs": loudness_lufs,
        }

    @property
    def rate(self) -> int:
        return self._rate

    @property
    def params(self) -> Mapping[str, Param]:
        return self._params

    @property
    def voice_id(self) -> str:
        """The Japanese voice used (starts the engine if it is not running yet)."""
        with _ENGINE_LOCK:
            self._start()
            assert self._voice_id is not None
            return self._voice_id

    def render(self, clip: Clip) -> Pcm:
        spoken = spoken_phrases(clip)  # espeak-ng says おう as two vowels, オー long

        def synthesise(i: int, _phrase: str, clip: Clip) -> tuple[Pcm, int]:
            return self._synthesise(i, spoken[i], clip)

        return read_phrase_by_phrase(
            synthesise, clip, engine="pyttsx3", voice=self.name, rate=self._rate,
            phrase_pause_s=self.phrase_pause_s, target_lufs=self.loudness_lufs,
            speed=self.speed,
        )

    def _engine(self) -> Any:
        """The engine to speak with (call with _ENGINE_LOCK held)."""
        if self._engine_factory is None:
            return _shared_engine()
        if self._own_engine is None:
            self._own_engine = self._engine_factory()
        return self._own_engine

    def _start(self) -> None:
        """Start the engine and pick the Japanese voice; call with _ENGINE_LOCK held."""
        if self._started:
            return
        try:
            engine = self._engine()
            voices = list(engine.getProperty("voices"))
        except (ImportError, RuntimeError, OSError) as e:
            raise VoiceError(f"pyttsx3 cannot start a speech engine: {e}") from None
        if engine not in _LISTENING:  # first voice on this engine: listen once
            engine.connect("finished-utterance", _on_finished)
            _LISTENING.add(engine)
        voice_id = japanese_voice_id(voices)
        if voice_id is None:
            ids = sorted(str(v.id) for v in voices)
            shown = ", ".join(ids[:30]) + (f" and {len(ids) - 30} more" if len(ids) > 30 else "")
            raise VoiceError(
                f"pyttsx3 has no Japanese voice; it has {len(ids)}: {shown or 'none'}. "
                "On Debian install espeak-ng (its jpx/ja voice), or choose voice.engine openjtalk"
            )
        self._voice_id, self._started = voice_id, True

    def _synthesise(self, _index: int, phrase: str, clip: Clip) -> tuple[Pcm, int]:
        with _ENGINE_LOCK, tempfile.TemporaryDirectory(prefix="yomite-tts-") as tmp:
            self._start()
            self._apply({"voice": self._voice_id, "rate": self.wpm,
                         "pitch": self.espeak_pitch, "volume": 1.0}, clip)
            for attempt in range(1, _ATTEMPTS + 1):
                wav = Path(tmp) / f"phrase-{attempt}.wav"
                x, sr = self._utter(phrase, wav, clip)
                if peak(x) > 0.0:
                    return x, sr
                # espeak-ng now and then answers a synthesis with no audio at all, mostly just
                # after a parameter changed (its command queue runs in its own thread)
                log.info("pyttsx3 gave no audio for %r (%s), attempt %d", phrase, clip.key, attempt)
            raise VoiceError(
                f"pyttsx3 said nothing for {phrase!r} in clip {clip.key} ({_ATTEMPTS} attempts)"
            )

    def _apply(self, props: dict[str, Any], clip: Clip) -> None:
        """Set the engine properties whose real value (read back from the engine) differs
        from `props` (lock held). Only those: setting them all before every phrase makes
        espeak-ng drop about one synthesis in a hundred."""
        engine = self._engine()
        changed = False
        try:
            for key, value in props.items():
                if engine not in _APPLIED or not _same(_read_property(engine, key), value):
                    engine.setProperty(key, value)
                    changed = True
        except (RuntimeError, ValueError, KeyError, OSError) as e:
            raise VoiceError(f"pyttsx3 refused a setting for clip {clip.key}: {e}") from None
        _APPLIED.add(engine)
        if changed:
            # espeak-ng takes a new setting through its own command queue: on a busy machine
            # the next synthesis may still be spoken with the old one (seen: a first phrase at
            # the default rate, a verse 4 % short). One throwaway utterance takes it in.
            # (A setting also came back undone now and then: pyttsx3 cancelled espeak-ng at
            # the end of runAndWait, see `_never_cancel`.)
            with tempfile.TemporaryDirectory(prefix="yomite-tts-") as tmp:
                self._utter("あ", Path(tmp) / "settle.wav", clip)

    def _utter(self, phrase: str, wav: Path, clip: Clip) -> tuple[Pcm, int]:
        engine = self._engine()
        try:
            engine.save_to_file(phrase, str(wav))
            _UTTERANCE_DONE.clear()
            # pyttsx3's espeak driver prints "Audio saved to ..." for every file; that would
            # garble the CLI's progress bar. (A print from another thread in these ~20 ms
            # would be swallowed too; logging keeps its own stream and is unaffected.)
            with contextlib.redirect_stdout(io.StringIO()):
                engine.runAndWait()
                finished = _UTTERANCE_DONE.wait(_SYNTH_TIMEOUT_S)
                while finished and engine.isBusy():  # the driver's last bookkeeping
                    time.sleep(0.0005)
        except (RuntimeError, ValueError, KeyError, OSError) as e:
            raise VoiceError(f"pyttsx3 failed on {phrase!r} in clip {clip.key}: {e}") from None
        if not finished:
            raise VoiceError(
                f"pyttsx3 did not finish {phrase!r} in clip {clip.key} "
                f"within {_SYNTH_TIMEOUT_S:g} s"
            )
        if not wav.exists():
            raise VoiceError(f"pyttsx3 wrote no audio for {phrase!r} in clip {clip.key}")
        try:
            return read_wav(wav)
        except CodecError as e:
            raise VoiceError(f"pyttsx3 output for clip {clip.key}: {e}") from None


# Engines this module has set every property on once. Before that, what an engine reports is
# not trusted: it may be the driver's default, not what is in use (below).
_APPLIED: "weakref.WeakSet[Any]" = weakref.WeakSet()
# espeak-ng's parameter numbers (speak_lib.h), for the properties read back below
_ESPEAK_PARAMS: Final = {"rate": 1, "volume": 2, "pitch": 3}
_espeak_get: Any = None


def _read_property(engine: Any, key: str) -> Any:
    """The value of `key` the engine really uses.

    pyttsx3 2.99's espeak driver calls `espeak_GetParameter(parameter, current)` with the
    first argument only, so `current` is whatever the register holds: now and then 0, and then
    espeak-ng answers its default (175 wpm, the same as BASE_WPM) instead of the rate in use
    (pyttsx3's 200). The rate was then taken as set and a first phrase read at 200 wpm: a verse
    4 % short (1 process start in 30 under load). On espeak, ask with both arguments."""
    param = _ESPEAK_PARAMS.get(key)
    driver = getattr(getattr(getattr(engine, "proxy", None), "_module", None), "__name__", "")
    if param is None or driver != "pyttsx3.drivers.espeak":
        return engine.getProperty(key)
    value = _espeak_current(param)
    return value / 100.0 if key == "volume" else value


def _espeak_current(param: int) -> int:
    """espeak_GetParameter(param, current=1), through a binding of our own."""
    global _espeak_get
    if _espeak_get is None:
        import ctypes
        import importlib

        dll = importlib.import_module("pyttsx3.drivers._espeak").dll
        proto = ctypes.CFUNCTYPE(ctypes.c_int, ctypes.c_int, ctypes.c_int)
        _espeak_get = proto(("espeak_GetParameter", dll))
    return int(_espeak_get(param, 1))


def _same(real: Any, wanted: Any) -> bool:
    if isinstance(wanted, float) and isinstance(real, int | float):
        return abs(float(real) - wanted) < 0.01
    return bool(real == wanted)


def _version(dist: str) -> str:
    try:
        return metadata.version(dist)
    except metadata.PackageNotFoundError:
        return "unknown"


def _synth_version() -> str:
    """espeak-ng's version, which changes the sound as much as pyttsx3's does.

    pyttsx3 has no public way to ask; its ctypes binding does, so ask it and accept not knowing.
    """
    try:
        from pyttsx3.drivers import _espeak  # type: ignore[import-untyped]

        info = _espeak.Info()
        return f"espeak-ng {info.decode() if isinstance(info, bytes) else info}"
    except (ImportError, AttributeError, OSError, TypeError, RuntimeError):
        # RuntimeError: pyttsx3's espeak driver, imported without espeak-ng installed
        return "unknown"
