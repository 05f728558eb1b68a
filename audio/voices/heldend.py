"""A recorded verse's held last sound and its release made shorter or longer without
time-stretching them (issue 48).

A time-stretcher keeps a sound's pitch but scales its pitch *movement* with the time: a reader's
held vowel (a vibrato of 4.5-6 Hz) squeezed to 45 % quivers at 10-12 Hz, and stretched it
drags. A reader who holds a sound longer holds the same quiver longer. So the held sound is
resized the way a tape editor would: a stretch of its middle is cut out (shorter) or played
twice (longer), at a place where the pitch and its direction of movement on both sides of the
splice agree (the vibrato runs on through it), the waveforms lined up to the sample there and
crossfaded over `XFADE_S`. Every frame heard is one the reader made, at the rate it was made.

The release (the sound dying away after the held level) is shortened by letting it die faster:
its first part kept and a decay in dB laid over it that reaches, at the new end, the level the
recording ends at (a reader's tail kept to the same depth, only steeper); never cut. A release
given more time than it has is left as recorded and the held sound takes the time.

Pure arithmetic on the PCM it is given, deterministic; the pitch is `audio.voices.pitchtrack`'s.
"""

from __future__ import annotations

import math
from typing import Final

import numpy as np
import numpy.typing as npt

from audio.pcm import Pcm, as_pcm
from audio.voices.pitchtrack import HOP_S, track

XFADE_S: Final = 0.02  # a splice crossfades over this long
EDGE_S: Final = 0.08  # and stays this far from either end of the held sound
SLOPE_S: Final = 0.05  # a semitone a second of pitch movement weighs as this many semitones
LEVEL_WEIGHT: Final = 0.05  # a dB of level difference across a splice, in semitones
LENGTH_WEIGHT: Final = 1.0  # a second off the length asked, in semitones
SLACK_S: Final = 0.12  # a splice's length may miss by this much (over half a 4.5 Hz cycle)
MAX_SPLICES: Final = 12  # a sound made many times longer is repeated this many times at most
LEVEL_S: Final = 0.02  # levels are the RMS over this long


def semitones(f0: npt.NDArray[np.float64]) -> npt.NDArray[np.float64]:
    """The pitch track in semitones, unvoiced frames filled from their voiced neighbours
    (all zeros when none is voiced)."""
    voiced = np.flatnonzero(f0 > 0)
    if voiced.size == 0:
        return np.zeros(f0.size)
    st = 12 * np.log2(np.where(f0 > 0, f0, 1.0))
    out: npt.NDArray[np.float64] = np.interp(np.arange(f0.size), voiced, st[voiced])
    return out


def resize_held(x: Pcm, rate: int, n: int) -> Pcm:
    """The held sound `x` made about `n` frames long (within `SLACK_S`: a splice keeps the
    vibrato's phase, so it cuts or repeats whole cycles of it) by splices that cut out or repeat
    a stretch of its middle. A sound too short to splice keeps its length (`len(result) - n`
    says by how much it missed)."""
    a = as_pcm(x)
    slack = round(SLACK_S * rate)
    for _ in range(MAX_SPLICES):
        want = a.size - n  # frames to take out (negative: to add)
        if abs(want) <= slack:  # another splice only where one could not reach
            break
        t = track(a, rate)
        if t.f0.size < 3:
            break
        edge = max(round(EDGE_S * rate), round(XFADE_S * rate))
        span = a.size - 2 * edge  # where splices may go
        if span <= 2 * round(XFADE_S * rate):
            break
        jump = max(-(span // 2), min(want, span - 2 * round(XFADE_S * rate)))
        spliced = _splice(a, rate, semitones(t.f0), t.db, jump, edge, slack)
        if spliced is None:
            break
        if abs(spliced[0].size - n) >= abs(want):  # no nearer (whole cycles): as it was
            break
        a = spliced[0]
    return a


def _splice(a: Pcm, rate: int, st: npt.NDArray[np.float64], db: npt.NDArray[np.float64],
            jump: int, edge: int, slack: int) -> tuple[Pcm, int] | None:
    """`a` with one splice from a frame i to i + j, j within `slack` of `jump` (a positive j
    cuts j frames out, a negative one plays them again), at the (i, j) where the pitch, its
    slope and the level agree best on both sides (the vibrato's phase runs on) and j is
    nearest `jump`; the far side moved by up to half a period for the waveforms to line up.
    The result and the j done."""
    hop = round(HOP_S * rate)
    step = max(1, hop // 2)
    xf = round(XFADE_S * rate)
    jumps = np.arange(jump - slack, jump + slack + 1, step)
    jumps = jumps[(np.abs(jumps) >= xf) & (np.sign(jumps) == np.sign(jump))]
    if jumps.size == 0:
        return None
    i = np.arange(edge, a.size - edge, step)
    ii, jj = np.meshgrid(i, jumps, indexing="ij")
    dst = ii + jj
    ok = (dst >= edge) & (dst < a.size - edge) & (ii + np.minimum(jj, 0) >= edge)
    if not ok.any():
        return None

    def at(v: npt.NDArray[np.float64], f: npt.NDArray[np.int64]) -> npt.NDArray[np.float64]:
        # a frame's values at its centre (frame k covers [k hop, k hop + window))
        out: npt.NDArray[np.float64] = np.interp(f / hop - 2.0, np.arange(v.size), v)
        return out

    slope = np.gradient(st) / HOP_S
    cost = (np.abs(at(st, ii) - at(st, dst)) + SLOPE_S * np.abs(at(slope, ii) - at(slope, dst))
            + LEVEL_WEIGHT * np.abs(at(db, ii) - at(db, dst))
            + LENGTH_WEIGHT * np.abs(jj - jump) / rate)
    cost = np.where(ok, cost, np.inf)
    k = np.unravel_index(int(np.argmin(cost)), cost.shape)
    src, far = int(ii[k]), int(dst[k])
    f0 = 2 ** (float(at(st, np.array([src]))[0]) / 12) if st.any() else 200.0
    period = max(1, round(rate / max(50.0, f0)))
    h = xf // 2
    shift = best_shift(a[src - h: src + h], a, far, h, period // 2)
    far += shift
    ramp = np.linspace(0.0, 1.0, 2 * h, dtype=np.float32)
    joined = a[src - h: src + h] * (1 - ramp) + a[far - h: far + h] * ramp
    return as_pcm(np.concatenate([a[: src - h], joined, a[far + h:]])), far - src


def best_shift(ref: Pcm, z: Pcm, at: int, h: int, seek: int) -> int:
    """The d in ±`seek` where `z[at + d - h: at + d + h]` lines up best with `ref` (normalised
    correlation): where two waveforms are crossfaded without cancelling."""
    r = ref.astype(np.float64)
    best, shift = -math.inf, 0
    for d in range(-seek, seek + 1):
        if at + d - h < 0 or at + d + h > z.size:
            continue
        seg = z[at + d - h: at + d + h].astype(np.float64)
        c = float(np.dot(r, seg)) / (math.sqrt(float(np.dot(seg, seg) * np.dot(r, r))) + 1e-12)
        if c > best:
            best, shift = c, d
    return shift


def rms_db(x: npt.NDArray[np.floating]) -> float:
    return 10 * math.log10(float(np.mean(np.square(x, dtype=np.float64))) + 1e-20)


def shorten_release(x: Pcm, rate: int, n: int) -> Pcm:
    """The release `x` made `n` frames long by dying faster: its first `n` frames under a decay
    (linear in dB: exponential) that brings the level there down to the level `x` ends at."""
    a = as_pcm(x)
    if n >= a.size:
        return a.copy()
    if n <= 0:
        return a[:0].copy()
    w = max(1, min(round(LEVEL_S * rate), n, a.size - n))
    drop = min(0.0, rms_db(a[a.size - w:]) - rms_db(a[n - w: n]))
    gain = 10 ** (drop * np.arange(n, dtype=np.float64) / max(1, n - 1) / 20)
    return as_pcm(a[:n] * gain.astype(np.float32))
