"""Fakes for the voice tests: a voice that counts its renders and can be held mid-render, and a
pyttsx3 engine that writes a tone instead of speaking."""

import threading
import wave
import zlib
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import numpy as np

from audio.pcm import Pcm
from audio.voices.voice import Param
from reader.clip import Clip, ClipKind, Verse


def tone(seconds: float, rate: int, freq: float = 440.0, amp: float = 0.3) -> Pcm:
    t = np.arange(round(seconds * rate)) / rate
    return (amp * np.sin(2 * np.pi * freq * t)).astype(np.float32)


class CountingVoice:
    """A tone per clip (0.20-0.39 s, from a hash of the key), counting renders per clip.

    `hold` (a clip key) makes that clip's render wait until `release` is set, so a test can
    look at the cache while a render is in progress.
    """

    def __init__(
        self, rate: int = 16000, name: str = "counting", params: Mapping[str, Param] | None = None
    ) -> None:
        self.name = name
        self.rate = rate
        self._params: dict[str, Param] = {"engine": "counting", "rate": rate, **(params or {})}
        self.renders: dict[str, int] = {}
        self._lock = threading.Lock()
        self.hold: str | None = None
        self.holding = threading.Event()
        self.release = threading.Event()
        self.output: Any = None  # force a bad render result

    @property
    def params(self) -> Mapping[str, Param]:
        return self._params

    @property
    def total(self) -> int:
        with self._lock:
            return sum(self.renders.values())

    def render(self, clip: Clip) -> Pcm:
        with self._lock:
            self.renders[clip.key] = self.renders.get(clip.key, 0) + 1
        if clip.key == self.hold:
            self.holding.set()
            self.release.wait(timeout=30)
        if self.output is not None:
            out: Pcm = self.output
            return out
        seconds = 0.2 + (zlib.crc32(clip.key.encode()) % 200) / 1000
        return tone(seconds, self.rate)


def verse(no: int, v: Verse = Verse.KAMI, yomi: str = "あきのたの") -> Clip:
    return Clip(ClipKind.VERSE, yomi, yomi, poem=no, verse=v)


def call(name: str = "end_call", yomi: str = "ありがとうございました") -> Clip:
    return Clip(ClipKind.CALL, yomi, yomi, name=name)


class FakeVoiceInfo:
    def __init__(self, ident: str, name: str, languages: list[str]) -> None:
        self.id = ident
        self.name = name
        self.languages = languages


class FakeTtsEngine:
    """Stands in for a pyttsx3 engine: `runAndWait` writes a 22050 Hz 16-bit tone WAV to the
    file `save_to_file` named, as espeak-ng does; `say` is recorded so tests can forbid it."""

    def __init__(self, voices: list[FakeVoiceInfo]) -> None:
        self.voices = voices
        self.properties: dict[str, Any] = {}
        self.calls: list[str] = []
        self._pending: tuple[str, Path] | None = None
        self._finished: list[Any] = []

    def connect(self, topic: str, cb: Any) -> None:
        assert topic == "finished-utterance"
        self._finished.append(cb)

    def isBusy(self) -> bool:
        return False

    def getProperty(self, name: str) -> Any:
        return self.voices if name == "voices" else self.properties.get(name)

    def setProperty(self, name: str, value: Any) -> None:
        self.properties[name] = value

    def save_to_file(self, text: str, path: str) -> None:
        self.calls.append("save_to_file")
        self._pending = (text, Path(path))

    def say(self, text: str) -> None:
        self.calls.append("say")

    def runAndWait(self) -> None:
        self.calls.append("runAndWait")
        assert self._pending is not None
        text, path = self._pending
        pcm = np.concatenate([np.zeros(2205), tone(0.1 * len(text), 22050), np.zeros(2205)])
        with wave.open(str(path), "wb") as w:
            w.setnchannels(1)
            w.setsampwidth(2)
            w.setframerate(22050)
            w.writeframes((pcm * 32767).astype("<i2").tobytes())
        print(f"Audio saved to {path}")  # what pyttsx3's espeak driver does
        self._pending = None
        for cb in self._finished:
            cb(name=None, completed=True)
