"""Builders for tiny voice packs in a temporary folder, one tone per verse (its pitch says which
poem and verse, so a test can hear which file was played)."""

from collections.abc import Iterable
from pathlib import Path

import numpy as np

from audio.codec import write_wav
from audio.voices.pack import MANIFEST
from reader.clip import Verse

from .voice_fakes import tone

RATE = 16000  # small files, fast tests; decode resamples to whatever the voice asks
ALL = [(n, v) for n in range(0, 101) for v in Verse]


def recording(no: int, v: Verse) -> np.ndarray:
    """0.1 s of silence, a tone whose pitch encodes the slot, 0.1 s of silence."""
    freq = 200 + 7 * no + (3 if v is Verse.SHIMO else 0)
    pad = np.zeros(RATE // 10, dtype=np.float32)
    return np.concatenate([pad, tone(0.3, RATE, freq, amp=0.2), pad])


def wasuramoti(folder: Path, slots: Iterable[tuple[int, Verse]] = ALL,
               reader: str = "yomite_reader") -> Path:
    folder.mkdir(parents=True, exist_ok=True)
    for no, v in slots:
        half = 1 if v is Verse.KAMI else 2
        write_wav(folder / f"{reader}_{no:03d}_{half}.wav", recording(no, v), RATE)
    return folder


def shuffle100(folder: Path, slots: Iterable[tuple[int, Verse]] = ALL,
               joka: str = "000{}") -> Path:
    folder.mkdir(parents=True, exist_ok=True)
    for no, v in slots:
        half = "a" if v is Verse.KAMI else "b"
        name = joka.format(half) if no == 0 else f"{no:03d}{half}"
        write_wav(folder / f"{name}.wav", recording(no, v), RATE)
    return folder


def manifest(folder: Path, text: str) -> Path:
    folder.mkdir(parents=True, exist_ok=True)
    (folder / MANIFEST).write_text(text, "utf-8")
    return folder


def dominant_hz(x: np.ndarray, rate: int) -> float:
    spectrum = np.abs(np.fft.rfft(x * np.hanning(x.size)))
    return float(np.argmax(spectrum) * rate / x.size)
