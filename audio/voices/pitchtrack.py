"""A voice's pitch, level and spectral envelope, frame by frame: what the pack shaping
(`audio.voices.packshape`) and the held end's splices (`audio.voices.heldend`) read a recording
by.

The pitch is an autocorrelation in numpy, normalised by the window's own (Boersma 1993), 40 ms
windows every 10 ms at 16 kHz, the shortest lag nearly as good as the best taken (a longer one
is a multiple of the period: no octave drops); the envelope 14 cepstral coefficients.
Deterministic arithmetic on the PCM it is given.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Final

import numpy as np
import numpy.typing as npt

from audio.pcm import Pcm, resample

TRACK_RATE: Final = 16000
HOP_S: Final = 0.01
WINDOW_S: Final = 0.04
F0_RANGE: Final = (75.0, 600.0)
VOICED_R: Final = 0.5  # the normalised autocorrelation's peak, voiced above this
OCTAVE_SHARE: Final = 0.85  # a shorter lag this nearly as good is the period
CEPSTRA: Final = 14  # the spectral envelope: this many cepstral coefficients


@dataclass(frozen=True, slots=True)
class Track:
    """Each analysis frame (HOP_S apart, WINDOW_S long): its pitch (Hz, 0 unvoiced), level
    (dB) and spectral envelope (`CEPSTRA` cepstral coefficients of the power, level left out)."""

    f0: npt.NDArray[np.float64]
    db: npt.NDArray[np.float64]
    envelope: npt.NDArray[np.float64]


def track(x: Pcm, rate: int) -> Track:
    """Pitch by autocorrelation, normalised by the window's own (Boersma 1993)."""
    y = resample(x, rate, TRACK_RATE).astype(np.float64)
    hop, win = round(HOP_S * TRACK_RATE), round(WINDOW_S * TRACK_RATE)
    count = max(0, 1 + (y.size - win) // hop)
    if count == 0:
        empty = np.zeros(0)
        return Track(empty, empty, np.zeros((0, CEPSTRA)))
    idx = np.arange(win)[None, :] + hop * np.arange(count)[:, None]
    frames = y[idx]
    frames = frames - frames.mean(axis=1, keepdims=True)
    w = np.hanning(win)
    nfft = 2 * 2 ** math.ceil(math.log2(win))
    spec = np.fft.rfft(frames * w, nfft)
    power = np.abs(spec) ** 2
    ac = np.fft.irfft(power, nfft)[:, :win]
    w_ac = np.fft.irfft(np.abs(np.fft.rfft(w, nfft)) ** 2, nfft)[:win]
    lo, hi = math.floor(TRACK_RATE / F0_RANGE[1]), math.ceil(TRACK_RATE / F0_RANGE[0])
    r = ac[:, : hi + 2] / np.maximum(ac[:, :1], 1e-20) / (w_ac[: hi + 2] / w_ac[0])
    # the shortest lag whose peak is nearly the best (a longer one is a multiple of the period)
    seg = r[:, lo: hi + 1]
    peak = np.zeros_like(seg, dtype=bool)
    peak[:, 1:-1] = (seg[:, 1:-1] >= seg[:, :-2]) & (seg[:, 1:-1] >= seg[:, 2:])
    good = peak & (seg >= OCTAVE_SHARE * seg.max(axis=1, keepdims=True))
    lag = lo + np.where(good.any(axis=1), np.argmax(good, axis=1), np.argmax(seg, axis=1))
    best = r[np.arange(count), lag]
    # a parabola through the peak and its neighbours for the lag between samples
    a, b, c = (r[np.arange(count), lag + k] for k in (-1, 0, 1))
    den = a - 2 * b + c
    fine = lag + np.where(np.abs(den) > 1e-12, 0.5 * (a - c) / np.where(den == 0, 1, den), 0.0)
    db = 10 * np.log10(np.mean(frames**2, axis=1) + 1e-12)
    voiced = (best > VOICED_R) & (db > db.max() - 35.0)
    f0 = np.where(voiced, TRACK_RATE / np.clip(fine, lo, hi), 0.0)
    # the spectral envelope as cepstral coefficients (the harmonics smoothed away)
    cep = np.fft.irfft(np.log(power + 1e-12), nfft)[:, 1:CEPSTRA + 1]
    return Track(f0, db, cep)


def envelope_db(a: npt.NDArray[np.float64], b: npt.NDArray[np.float64]) -> float:
    """The RMS distance in dB between two spectral envelopes (cepstral distance)."""
    return float(10 / math.log(10) * math.sqrt(2 * float(np.sum((a - b) ** 2))))
