"""Does the voice read like a karuta reader? The style figures of issue 21, per verse.

For each verse rendered by the real voice (48 kHz PCM, as a match plays it):
- timing from the HTS engine's own durations (the method of the issue's table): the verse's
  median mora, and its last mora (to where its sound has fallen 6 dB below its held level);
- pitch by Praat's autocorrelation (parselmouth, 5 ms steps, 100-600 Hz): the range p10-p90 of
  the voiced frames, their share within ±1 st of the verse's median, the final sound's median
  re the verse median, and the vibrato on the held sound (a line and a sine fitted to its
  pitch by least squares at each rate in 3.5-8 Hz: the largest sine's rate, and its extent peak
  to peak);
- intensity in 5 ms frames: the release (from the last frame 6 dB below the held level to the
  last 26 dB below it: a dip inside the held sound is not its end) and the
  silences >= 100 ms inside the verse (more than 45 dB below its loudest frame).

`measure(x, rate, morae_s)` is pure arithmetic on what it is given: the tests use it on a few
verses, `python -m bench.voice_reading --styles` on all 200.
"""

from __future__ import annotations

import math
import statistics
from dataclasses import dataclass

import numpy as np
import numpy.typing as npt

FRAME_S = 0.005
# a frame this far below the verse's loudest is silence (a voiceless consonant, a devoiced
# mora, is 30-40 dB down and is speech)
SILENT_DB = 45.0


@dataclass(frozen=True)
class VerseFigures:
    median_mora_s: float
    last_mora_s: float
    pitch_range_st: float  # p10-p90 of the voiced frames
    within_1st: float  # share of voiced frames within ±1 st of the verse median
    final_st: float  # the final sound's median pitch re the verse median
    vibrato_st: float  # peak to peak (0 when no periodic movement in 3-8 Hz)
    vibrato_hz: float
    release_s: float  # -6 -> -26 dB
    pauses: int  # silences >= 100 ms inside the verse

    @property
    def last_ratio(self) -> float:
        return self.last_mora_s / self.median_mora_s


def intensity_db(x: npt.NDArray[np.floating], rate: int) -> npt.NDArray[np.float64]:
    n = int(rate * FRAME_S)
    frames = x[: len(x) // n * n].astype(np.float64).reshape(-1, n)
    return 10 * np.log10(np.mean(frames**2, axis=1) + 1e-12)


def pitch_st(x: npt.NDArray[np.floating], rate: int) -> npt.NDArray[np.float64]:
    """Praat's pitch each 5 ms (Hz; 0 where unvoiced)."""
    import parselmouth

    snd = parselmouth.Sound(x.astype(np.float64), rate)
    p = snd.to_pitch_ac(time_step=FRAME_S, pitch_floor=100.0, pitch_ceiling=600.0)
    f: npt.NDArray[np.float64] = p.selected_array["frequency"]
    return f


def measure(x: npt.NDArray[np.floating], rate: int, morae_s: list[float],
            last_onset_s: float) -> VerseFigures:
    """The figures of one verse: `morae_s` its morae's durations (from the synthesis), the
    last mora starting `last_onset_s` before the verse's audio ends."""
    db = intensity_db(x, rate)
    loud = float(db.max())
    end = len(db)
    onset = max(0, end - round(last_onset_s / FRAME_S))
    # the held level: the loudest quarter of the last mora's frames (its steady part)
    tail = db[onset:]
    held = float(np.percentile(tail, 75)) if tail.size else loud

    def last_above(level: float) -> int:  # a dip inside the held sound is no release
        above = np.flatnonzero(tail >= held - level)
        return onset + int(above[-1]) + 1 if above.size else end

    t6, t26 = last_above(6.0), last_above(26.0)
    last_mora = (t6 - onset) * FRAME_S
    # silences inside the verse (after its first and before its last loud frame)
    quiet = db < loud - SILENT_DB
    inside = np.flatnonzero(~quiet)
    pauses = run = 0
    for q in quiet[inside[0]: inside[-1]] if inside.size else []:
        run = run + 1 if q else 0
        if run == int(0.1 / FRAME_S):
            pauses += 1
    f = pitch_st(x, rate)
    voiced = f > 0
    st = np.full(f.shape, np.nan)
    if voiced.any():
        st[voiced] = 12 * np.log2(f[voiced] / np.median(f[voiced]))
    vs = st[voiced]
    # the sound held (its last 0.4 s, past its onset: the consonant, the vibrato's fade-in)
    # and its release
    held_pitch = st[max(onset + int(0.15 / FRAME_S), t6 - int(0.4 / FRAME_S)):t26]
    final = float(np.nanmedian(held_pitch)) if (~np.isnan(held_pitch)).any() else math.nan
    vib_st, vib_hz = vibrato(longest_voiced(held_pitch))  # a gap would break the fit
    return VerseFigures(
        median_mora_s=statistics.median(morae_s), last_mora_s=last_mora,
        pitch_range_st=float(np.percentile(vs, 90) - np.percentile(vs, 10)) if vs.size else 0,
        within_1st=float(np.mean(np.abs(vs) <= 1.0)) if vs.size else 0.0,
        final_st=final, vibrato_st=vib_st, vibrato_hz=vib_hz,
        release_s=(t26 - t6) * FRAME_S, pauses=pauses)


def longest_voiced(st: npt.NDArray[np.float64]) -> npt.NDArray[np.float64]:
    """The longest run of `st` without a NaN (an unvoiced frame)."""
    best, start = (0, 0), None
    for i, v in enumerate([*st, math.nan]):
        if math.isnan(v):
            if start is not None and i - start > best[1] - best[0]:
                best = (start, i)
            start = None
        elif start is None:
            start = i
    return st[best[0]:best[1]]


def vibrato(st: npt.NDArray[np.float64]) -> tuple[float, float]:
    """(extent peak to peak in st, rate in Hz) of the strongest periodic movement in 3.5-8 Hz
    of a pitch track (5 ms steps): at each rate (0.05 Hz steps) a least-squares fit of a line
    (the drift) and a sine, the rate whose sine is largest kept; (0, 0) when shorter than 0.3 s
    or when that movement is under 0.1 st."""
    if st.size < int(0.3 / FRAME_S):
        return 0.0, 0.0
    t = np.arange(st.size) * FRAME_S
    best = (0.0, 0.0)
    for rate in np.arange(3.5, 8.0001, 0.05):  # (below 3.5 a sine of 0.6 s fits its drift)
        w = 2 * math.pi * rate * t
        basis = np.column_stack([np.ones_like(t), t, np.sin(w), np.cos(w)])
        coef, *_ = np.linalg.lstsq(basis, st, rcond=None)
        amp = math.hypot(coef[2], coef[3])
        if amp > best[0]:
            best = (amp, float(rate))
    extent = 2 * best[0]
    return (extent, round(best[1], 2)) if extent >= 0.1 else (0.0, 0.0)


def cell(vals: list[float], fmt: str = "{:.2f}") -> str:
    """median (p10-p90) of `vals`, NaN left out; "-" for none."""
    v = np.array([x for x in vals if not math.isnan(x)])
    if v.size == 0:
        return "-"
    return (f"{fmt.format(np.median(v))} ({fmt.format(np.percentile(v, 10))}-"
            f"{fmt.format(np.percentile(v, 90))})")


def summary(rows: list[VerseFigures]) -> dict[str, str]:
    """The table's cells: median (p10-p90)."""
    return {
        "last sound ÷ median mora": cell([r.last_ratio for r in rows]),
        "pitch range p10-p90 (st)": cell([r.pitch_range_st for r in rows]),
        "voiced frames within ±1 st": cell([100 * r.within_1st for r in rows], "{:.0f} %"),
        "final sound re verse median (st)": cell([r.final_st for r in rows]),
        "vibrato on the final sound (st p-p)": cell([r.vibrato_st for r in rows]),
        "vibrato rate (Hz)": cell([r.vibrato_hz for r in rows if r.vibrato_hz]),
        "release -6 -> -26 dB (s)": cell([r.release_s for r in rows]),
        "pauses >= 100 ms inside a verse": f"{sum(r.pauses for r in rows)} in {len(rows)}",
    }
