"""A recorded pack's own jokā: which poem it is, and how the recording reads it.

Shuffle100 reads 難波津 as its jokā, the lower verse twice: upper verse, lower verse, lower verse
again. Its one-file jokā (`序歌.m4a`) is that poem read so; a manifest says which poem its jokā
is with `joka: {poem: naniwazu}` (reader.joka.JOKA_POEMS), and `repeats_lower: true` when its
`000/shimo` holds the lower verse twice.

Whether a one-file jokā reads its lower verse twice is heard, not assumed: the recording is cut
into its speech at its longest pauses, and the last two parts are compared. The same verse said
twice lasts about as long both times, and its spectral envelope (mel-frequency cepstra, the
loudness and the channel taken out), aligned in time by dynamic time warping, lies far nearer to
itself than the upper verse lies to the lower one (even though 難波津's verses share a phrase).
numpy only.
"""

from __future__ import annotations

import itertools
import math
from dataclasses import dataclass
from typing import Final

import numpy as np
import numpy.typing as npt

from audio.errors import PackError
from audio.pcm import Pcm, as_pcm

# a pause between two verses (a reader's breath); shorter stops are inside a verse
MIN_PAUSE_S: Final = 0.25
MIN_VERSE_S: Final = 0.5
# the repeat lasts within this share of the first reading
SAME_LENGTH: Final = 0.75
# the repeat's distance to the first reading, at most this share of the upper verse's to
# either (measured on Open JTalk's 難波津, the repeat said at another speed and pitch: 0.26, in
# the reader style 0.20; another poem's lower verse in the repeat's place: 0.89-1.26)
SAME_VERSE: Final = 0.6
_CANDIDATES: Final = 5  # the longest pauses tried as the two cuts
_FRAME_MS: Final = 10.0

F64 = npt.NDArray[np.float64]


@dataclass(frozen=True)
class JokaInfo:
    """What a pack's jokā is. `poem`: a key of reader.joka.JOKA_POEMS, None when the pack does
    not say (the configured jokā's text is shown). `repeats_lower`: the recording reads the lower
    verse twice; None until heard from a one-file jokā (`PackVoice.joka`)."""

    poem: str | None
    repeats_lower: bool | None = None


@dataclass(frozen=True)
class JokaCut:
    """Where a one-file jokā is cut, in samples: the upper verse is `[0, upper_end)`, the lower
    verse `[upper_end, lower_end)`, its repeat `[lower_end, end)` (none when `repeats_lower` is
    false: `lower_end` is the end). `likeness`: the repeat's distance to the lower verse over the
    upper verse's to the lower verse (None when there were not three parts to compare)."""

    upper_end: int
    lower_end: int
    repeats_lower: bool
    likeness: float | None = None


def _frames_rms(x: Pcm, rate: int) -> tuple[F64, int]:
    n = max(1, round(_FRAME_MS * rate / 1000.0))
    frames = x[: x.size // n * n].astype(np.float64).reshape(-1, n)
    return np.sqrt(np.mean(frames * frames, axis=1)), n


def _quiet(rms: F64) -> npt.NDArray[np.bool_]:
    """Frames quieter than speech: within 12 dB of the recording's noise floor (its tenth
    percentile), or 30 dB under its loudest frame."""
    floor = float(np.sort(rms)[len(rms) // 10])
    return rms <= max(floor * 4.0, float(rms.max()) * 10 ** (-30 / 20))


def pauses(x: Pcm, rate: int, min_s: float = MIN_PAUSE_S) -> list[tuple[int, int]]:
    """The quiet stretches of at least `min_s` between the first and the last sound, as
    (start, stop) in samples."""
    a = as_pcm(x)
    rms, n = _frames_rms(a, rate)
    if rms.size < 10 or float(rms.max()) == 0.0:
        return []
    quiet = _quiet(rms)
    loud = np.flatnonzero(~quiet)
    out: list[tuple[int, int]] = []
    run: int | None = None
    for i in range(int(loud[0]), int(loud[-1]) + 1):
        if quiet[i]:
            run = i if run is None else run
        elif run is not None:
            if (i - run) * _FRAME_MS / 1000.0 >= min_s:
                out.append((run * n, i * n))
            run = None
    return out


def _speech_bounds(x: Pcm, rate: int) -> tuple[int, int]:
    rms, n = _frames_rms(x, rate)
    loud = np.flatnonzero(~_quiet(rms))
    return int(loud[0]) * n, (int(loud[-1]) + 1) * n


def _mel_bank(rate: int, n_fft: int, bands: int = 26, lo: float = 100.0,
              hi: float = 8000.0) -> F64:
    def mel(f: F64 | float) -> F64:
        return np.asarray(2595.0 * np.log10(1.0 + np.asarray(f) / 700.0), dtype=np.float64)

    hi = min(hi, rate / 2)
    edges = 700.0 * (10 ** (np.linspace(mel(lo), mel(hi), bands + 2) / 2595.0) - 1.0)
    bins = np.fft.rfftfreq(n_fft, 1.0 / rate)
    bank = np.zeros((bands, bins.size))
    for b in range(bands):
        left, mid, right = edges[b], edges[b + 1], edges[b + 2]
        up = (bins - left) / (mid - left)
        down = (right - bins) / (right - mid)
        bank[b] = np.clip(np.minimum(up, down), 0.0, None)
    return bank


def cepstra(x: Pcm, rate: int, coeffs: int = 12) -> F64:
    """Mel-frequency cepstral coefficients 1..`coeffs` of 25 ms frames every 10 ms (the 0th,
    the loudness, left out), one row a frame."""
    a = as_pcm(x).astype(np.float64)
    win = round(0.025 * rate)
    hop = round(_FRAME_MS * rate / 1000.0)
    if a.size < win:
        return np.zeros((0, coeffs))
    n_fft = 1 << (win - 1).bit_length()
    starts = np.arange(0, a.size - win + 1, hop)
    frames = a[starts[:, None] + np.arange(win)[None, :]] * np.hamming(win)
    power = np.abs(np.fft.rfft(frames, n_fft, axis=1)) ** 2
    logmel = np.log(power @ _mel_bank(rate, n_fft).T + 1e-10)
    bands = logmel.shape[1]
    k = np.arange(1, coeffs + 1)[:, None]
    dct = np.cos(math.pi / bands * k * (np.arange(bands)[None, :] + 0.5))
    return np.asarray(logmel @ dct.T, dtype=np.float64)


def dtw_distance(a: F64, b: F64) -> float:
    """The mean frame distance along the best time alignment of two cepstral sequences, each
    taken relative to its own mean (cepstral mean normalisation: a microphone or a room's
    colouring is a constant offset). Computed one anti-diagonal at a time."""
    if len(a) == 0 or len(b) == 0:
        return math.inf
    a = a - a.mean(axis=0)
    b = b - b.mean(axis=0)
    squared = (a * a).sum(axis=1)[:, None] + (b * b).sum(axis=1)[None, :] - 2.0 * (a @ b.T)
    cost = np.sqrt(np.maximum(squared, 0.0))
    n, m = cost.shape
    acc = np.full((n + 1, m + 1), np.inf)
    acc[0, 0] = 0.0
    for d in range(2, n + m + 1):  # cells (i, j), 1-based, with i + j == d
        i = np.arange(max(1, d - m), min(n, d - 1) + 1)
        j = d - i
        best = np.minimum(np.minimum(acc[i - 1, j - 1], acc[i - 1, j]), acc[i, j - 1])
        acc[i, j] = cost[i - 1, j - 1] + best
    return float(acc[n, m] / (n + m))


def cut_one_file(x: Pcm, rate: int) -> JokaCut:
    """Where a jokā recorded in one file is cut into its verses, and whether it reads the lower
    verse twice: of its longest pauses, the two that leave a tail most like the stretch before
    it (about as long, the same verse by `dtw_distance`) are the cuts. Without such a pair, the
    recording is the two verses, cut at the longest pause of its middle three fifths. PackError
    if it has no pause to cut at."""
    a = as_pcm(x)
    found = pauses(a, rate)
    if found:
        cut = _repeat_cut(a, rate, found)
        if cut is not None:
            return cut
    upper, _lower = split_at_pause(a, rate)
    return JokaCut(upper.size, a.size, False)


def _repeat_cut(a: Pcm, rate: int, found: list[tuple[int, int]]) -> JokaCut | None:
    start, stop = _speech_bounds(a, rate)
    longest = sorted(found, key=lambda p: p[0] - p[1])[:_CANDIDATES]
    hop = round(_FRAME_MS * rate / 1000.0)
    feats = cepstra(a, rate)

    def part(lo: int, hi: int) -> F64:
        return feats[lo // hop: max(lo // hop, (hi - round(0.025 * rate)) // hop + 1)]

    best: JokaCut | None = None
    for p, q in itertools.combinations(sorted(longest), 2):
        spans = [(start, p[0]), (p[1], q[0]), (q[1], stop)]
        lengths = [hi - lo for lo, hi in spans]
        if min(lengths) < MIN_VERSE_S * rate:
            continue
        if min(lengths[1:]) < SAME_LENGTH * max(lengths[1:]):
            continue
        upper, lower, again = (part(lo, hi) for lo, hi in spans)
        apart = min(dtw_distance(upper, lower), dtw_distance(upper, again))
        likeness = dtw_distance(lower, again) / apart if apart > 0 else math.inf
        if best is None or likeness < (best.likeness or math.inf):
            best = JokaCut((p[0] + p[1]) // 2, (q[0] + q[1]) // 2, likeness <= SAME_VERSE,
                           likeness)
    return best if best is not None and best.repeats_lower else None


def split_at_pause(x: Pcm, rate: int, frame_ms: float = _FRAME_MS) -> tuple[Pcm, Pcm]:
    """One recording of two verses (a jokā in one file, or a lower verse and its repeat) cut at
    its longest quiet stretch in the middle three fifths. PackError if there is none."""
    a = as_pcm(x)
    n = max(1, round(frame_ms * rate / 1000.0))
    frames = a[: a.size // n * n].astype("float64").reshape(-1, n)
    if frames.shape[0] < 10:
        raise PackError("the recording is too short to hold two verses")
    rms = np.sqrt((frames**2).mean(axis=1))
    quiet = _quiet(rms)
    lo, hi = len(rms) // 5, len(rms) * 4 // 5
    best, best_len, run_start = None, 0, None
    for i in range(lo, hi + 1):
        if i < hi and quiet[i]:
            run_start = i if run_start is None else run_start
            continue
        if run_start is not None:
            if i - run_start > best_len:
                best, best_len = (run_start + i) // 2, i - run_start
            run_start = None
    if best is None or best_len * frame_ms < 150:
        raise PackError("no pause of 150 ms or more between the two verses to split at")
    cut = best * n
    return a[:cut], a[cut:]
