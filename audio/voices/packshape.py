"""A recorded verse fitted to a pace the way a reader reads (issue 21), not by one ratio.

Fitting a pack to a pace by one time-stretch ratio scales everything alike: a slow reader
brought to Goshiki's pace has the non-final morae squeezed while the held last sound stays as
many morae long and the pauses between phrases stay pauses; a fast reader slowed down keeps
every pause, only longer. A reader at any pace joins the phrases and holds the end several
morae long. So a verse is fitted in parts (`plan`):

- its **pauses** (silences of `PAUSE_S` or more inside it) are cut to `pause_s`, the middle
  taken out (a reader joins the phrases);
- its **held sound** is shortened only down to `hold_upper` / `hold_lower` times the verse's
  median mora (the reader style's floor; never lengthened to it), its **release** (from 6 dB
  below the held level to the end) alike but not below `RELEASE_KEEP_S`;
- the **rest of the speech** is time-stretched by the one ratio that makes the verse as long as
  the fit asks: the reader's own rhythm inside it stays. A verse given more time than it has
  stretches speech, hold and release alike (its pauses still joined).

Without a transcript's timing the held end is found in the sound (`held_onset`): from its last
loud voiced frame back, as long as the pitch stays within `HOLD_ST` and the spectral envelope
within `HOLD_SPECTRUM_DB` of the sound `STEADY_S` later (a vowel change at the same pitch ends
it, a slow drift does not). The verse's median mora is the speech left, pauses and held sound
taken out, over its morae less one (counted from its kana); the pitch and envelope are
`audio.voices.pitchtrack`'s.

The speech is stretched by Rubber Band (`audio.voices.tempo`), one pass per run between pauses;
the held sound and its release never are (issue 48: a stretcher scales the vibrato's rate with
the time): `audio.voices.heldend` splices the held sound shorter or longer and lets the release
die faster. Everything here is arithmetic on the PCM it is given, and deterministic.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, replace
from typing import Final

import numpy as np
import numpy.typing as npt

from audio.pcm import Pcm, as_pcm, noise_floor_db
from audio.voices import heldend
from audio.voices.pitchtrack import HOP_S, WINDOW_S, envelope_db, track
from audio.voices.tempo import MAX_RATIO, MIN_RATIO, stretch

VERSION: Final = 2  # part of a shaped clip's cache key: bump when the shaping changes
PAUSE_S: Final = 0.1  # a silence this long inside a verse is a pause (the bench's measure)
SILENT_DB: Final = 45.0  # below the verse's loudest 5 ms: silence (as bench/reading_style.py)
ABOVE_FLOOR_DB: Final = 6.0  # or within this of a recording's own noise floor
HOLD_ST: Final = 1.0  # the held sound's pitch stays within this many semitones
HOLD_SPECTRUM_DB: Final = 6.0  # and its spectral envelope within this (cepstral distance)
HOLD_GLITCH: Final = 2  # analysis frames that may stray inside the held sound
LOUD_DB: Final = 20.0  # the held sound is within this of the verse's loudest frame
REFERENCE_S: Final = 0.3  # its pitch: the median over this long before its last loud frame
STEADY_S: Final = 0.05  # its envelope changes little over this long
XFADE_S: Final = 0.01  # parts stretched apart meet over this long
SEEK_S: Final = 0.005  # ± this far for the best-matching phase there
MIN_MORA_S: Final = 0.05  # a held end that leaves the other morae less than this is none
RELEASE_KEEP_S: Final = 0.6  # a release (6 dB below the held level to the end) kept this long


@dataclass(frozen=True, slots=True)
class ShapeStyle:
    """How a pack's verses are fitted (voice.pack_shape reader)."""

    pause_s: float = 0.06  # a pause inside a verse becomes this long (voice.pack_pause_s)
    hold_upper: float = 4.0  # the held end keeps at least this many median morae (upper verse)
    hold_lower: float = 4.7  # (lower verse): voice.chant.hold_upper / hold_lower


@dataclass(frozen=True, slots=True)
class Anatomy:
    """What a verse's recording holds, in frames: its pauses [start, stop), where its held end
    begins (`size`: none found) and where that sound's release begins (its level 6 dB below
    the held level, as the bench measures the last sound); `morae` its mora count."""

    size: int
    pauses: tuple[tuple[int, int], ...]
    hold: int
    release: int
    morae: int

    @property
    def held(self) -> int:
        """Frames of the held end, its release included."""
        return self.size - self.hold

    @property
    def sounded(self) -> int:
        """Frames of the held sound before its release (what the floor counts)."""
        return self.release - self.hold

    @property
    def speech(self) -> int:
        """Frames of speech: neither pause nor held end."""
        return self.hold - sum(b - a for a, b in self.pauses)

    @property
    def median_mora(self) -> float:
        """Frames a mora, estimated: the speech over the morae before the held one."""
        return self.speech / max(1, self.morae - 1 if self.held else self.morae)


@dataclass(frozen=True, slots=True)
class Plan:
    """How one verse is fitted: each pause becomes `join` frames (or stays, if shorter), the
    speech is stretched `speech_ratio` times, the held sound `hold_ratio` times and its
    release `release_ratio` times."""

    anatomy: Anatomy
    join: int
    speech_ratio: float
    hold_ratio: float
    release_ratio: float

    def pieces(self) -> list[tuple[str, int, int, float]]:
        """(kind, source start, source stop, ratio) in order: "speech", "pause" (its ratio
        what the cut leaves), "held", "release"."""
        a = self.anatomy
        out: list[tuple[str, int, int, float]] = []
        at = 0
        for s, e in a.pauses:
            if s > at:
                out.append(("speech", at, s, self.speech_ratio))
            out.append(("pause", s, e, min(e - s, self.join) / (e - s)))
            at = e
        if a.hold > at:
            out.append(("speech", at, a.hold, self.speech_ratio))
        if a.release > a.hold:
            out.append(("held", a.hold, a.release, self.hold_ratio))
        if a.size > a.release:
            out.append(("release", a.release, a.size, self.release_ratio))
        return out

    def time_map(self) -> list[tuple[int, int]]:
        """Breakpoints (source frame, output frame), linear between them."""
        points, out = [(0, 0)], 0
        for _, start, stop, ratio in self.pieces():
            out += round((stop - start) * ratio)
            points.append((stop, out))
        return points

    def where(self, frame: float) -> float:
        """The output frame a source frame lands on."""
        src, dst = zip(*self.time_map(), strict=True)
        return float(np.interp(frame, src, dst))


def frame_db(x: npt.NDArray[np.floating], n: int) -> npt.NDArray[np.float64]:
    f = x[: x.size // n * n].astype(np.float64).reshape(-1, n)
    db: npt.NDArray[np.float64] = 10 * np.log10(np.mean(f * f, axis=1) + 1e-12)
    return db


def pauses(x: Pcm, rate: int, min_s: float = PAUSE_S) -> list[tuple[int, int]]:
    """The silences of `min_s` or more between the first and the last sound of `x`, in
    frames: 5 ms steps `SILENT_DB` below the loudest (or near the noise floor)."""
    n = max(1, round(0.005 * rate))
    db = frame_db(x, n)
    if db.size == 0:
        return []
    floor = noise_floor_db(x, rate)
    gate = float(db.max()) - SILENT_DB
    if math.isfinite(floor):
        gate = max(gate, floor + ABOVE_FLOOR_DB)
    loud = np.flatnonzero(db >= gate)
    if loud.size == 0:
        return []
    out, start = [], None
    for i in range(int(loud[0]), int(loud[-1]) + 1):
        if db[i] < gate:
            start = i if start is None else start
        elif start is not None:
            if (i - start) * n >= min_s * rate:
                out.append((start * n, i * n))
            start = None
    return out


def held_onset(x: Pcm, rate: int, after: int = 0) -> int:
    """Where the held end of `x` begins (its frame; `x.size` when there is none), not before
    `after`: the held sound's pitch is the median of the loud voiced frames in its last
    `REFERENCE_S`; from the last of them on it, back as long as each frame's pitch stays
    within `HOLD_ST` and its envelope within `HOLD_SPECTRUM_DB` of the frame `STEADY_S` later
    (a held vowel drifts slowly, if at all; a consonant or the next mora changes them fast)."""
    t = track(x, rate)
    loud = np.flatnonzero((t.f0 > 0) & (t.db >= (t.db.max() if t.db.size else 0) - LOUD_DB))
    if loud.size == 0:
        return x.size
    recent = loud[loud > loud[-1] - round(REFERENCE_S / HOP_S)]
    ref_f0 = float(np.median(t.f0[recent]))

    def near(i: int, f0: float) -> bool:
        return bool(t.f0[i] > 0) and abs(12 * math.log2(t.f0[i] / f0)) <= HOLD_ST

    last = max(int(i) for i in recent if near(int(i), ref_f0))
    hop, later = round(HOP_S * rate), round(STEADY_S / HOP_S)
    first = max(0, math.ceil(after / hop))
    onset, strays = last, 0
    for i in range(last, first - 1, -1):
        k = min(i + later, last)
        if near(i, float(t.f0[k]) or ref_f0) and \
                envelope_db(t.envelope[i], t.envelope[k]) <= HOLD_SPECTRUM_DB:
            onset, strays = i, 0
        else:
            strays += 1
            if strays > HOLD_GLITCH:
                break
    if onset == last:
        return x.size
    # a frame covers [i*hop, i*hop + window): the hold begins at its first frame's centre
    return min(x.size, max(after, onset * hop + round(WINDOW_S * rate / 2)))


def anatomy(x: Pcm, rate: int, morae: int, min_pause_s: float = PAUSE_S) -> Anatomy:
    """A verse's pauses (silences of `min_pause_s` or more) and held end (`morae`: how many
    it says)."""
    a = as_pcm(x)
    inside = pauses(a, rate, min_pause_s)
    after = inside[-1][1] if inside else 0
    hold = held_onset(a, rate, after)
    body = Anatomy(a.size, tuple(p for p in inside if p[1] <= hold), hold,
                   release_onset(a, rate, hold), morae)
    if body.held and body.median_mora < MIN_MORA_S * rate:  # no room left for the morae:
        return Anatomy(a.size, body.pauses, a.size, a.size, morae)  # not a held end
    return body


def fit(x: Pcm, rate: int, morae: int, ratio: float, style: ShapeStyle, *, lower: bool) -> Plan:
    """How the verse `x` (of `morae` morae) is made `ratio` times as long. Slowed down, a
    silence shorter than `PAUSE_S` (a stop's closure) would become one when the speech is
    stretched: the silences that would are joined too (found again at the speech's ratio)."""
    body = anatomy(x, rate, morae, PAUSE_S / max(1.0, ratio))
    p = plan(body, ratio, rate, style, lower=lower)
    if p.speech_ratio > max(1.0, ratio):
        inside = pauses(as_pcm(x), rate, PAUSE_S / p.speech_ratio)
        body = replace(body, pauses=tuple(q for q in inside if q[1] <= body.hold))
        p = plan(body, ratio, rate, style, lower=lower)
    return p


def release_onset(x: Pcm, rate: int, hold: int) -> int:
    """Where the held sound from `hold` has fallen 6 dB below its held level for good (the
    level its loudest quarter of 5 ms steps reaches)."""
    n = max(1, round(0.005 * rate))
    db = frame_db(x[hold:], n)
    if db.size == 0:
        return hold
    above = np.flatnonzero(db >= float(np.percentile(db, 75)) - 6.0)
    return min(x.size, hold + (int(above[-1]) + 1) * n)


def plan(a: Anatomy, ratio: float, rate: int, style: ShapeStyle, *, lower: bool) -> Plan:
    """The fit that makes the verse `ratio` times as long: pauses to `style.pause_s`, then the
    held sound down to its floor (`style.hold_upper` / `hold_lower` median morae, or what it
    holds if less; its release shortened alike down to `RELEASE_KEEP_S`), then the speech; a
    verse with time to spare stretches speech and held end alike."""
    join = round(style.pause_s * rate)
    rest = ratio * a.size - sum(min(e - s, join) for s, e in a.pauses)
    speech, held, fade = a.speech, a.sounded, a.size - a.release
    if speech <= 0 or rest <= 0:  # nothing to shape: one ratio
        return Plan(Anatomy(a.size, (), a.size, a.size, a.morae), join, ratio, ratio, ratio)
    if rest >= speech + held + fade:  # time to spare: all alike
        q = rest / (speech + held + fade)
        return _bounded(a, join, q, q, q)
    fade_out = min(fade, max(RELEASE_KEEP_S * rate, ratio * fade))
    rest -= fade_out
    floor = min(style.hold_lower if lower else style.hold_upper, held / a.median_mora)
    floor_frames = floor * a.median_mora
    if rest >= speech + held:  # the release gives what is asked
        return _bounded(a, join, 1.0, 1.0, (rest - speech - held + fade_out) / fade)
    if rest >= speech + floor_frames:  # and the held sound
        return _bounded(a, join, 1.0, (rest - speech) / held, fade_out / max(1, fade))
    q = rest / (speech + floor_frames)  # and the speech, the held sound at its floor
    return _bounded(a, join, q, q * floor_frames / held if held else q, fade_out / max(1, fade))


def _bounded(a: Anatomy, join: int, *ratios: float) -> Plan:
    """A plan within what the stretcher takes (the length a little off at the extremes)."""
    q, h, r = (min(MAX_RATIO, max(MIN_RATIO, x)) for x in ratios)
    return Plan(a, join, q, h, r)


def render(x: Pcm, rate: int, p: Plan) -> Pcm:
    """`x` fitted as `p` says: the held sound and its release resized (`_end_resized`), then
    each run of speech between pauses stretched on its own, the last joined to the held end."""
    a, p = _end_resized(as_pcm(x), rate, p)
    out: list[Pcm] = []
    pieces = p.pieces()
    k = 0
    while k < len(pieces):
        kind, s, e, ratio = pieces[k]
        if kind == "pause":
            out.append(_cut(a[s:e], round((e - s) * ratio), rate))
            k += 1
            continue
        group = [pieces[k]]
        while k + len(group) < len(pieces) and pieces[k + len(group)][0] != "pause":
            group.append(pieces[k + len(group)])
        cuts = [g[1] for g in group] + [group[-1][2]]
        out.append(stretch_parts(a, rate, cuts, [g[3] for g in group]))
        k += len(group)
    return as_pcm(np.concatenate(out)) if out else a[:0].copy()


def _end_resized(a: Pcm, rate: int, p: Plan) -> tuple[Pcm, Plan]:
    """`a` with its held sound and release made as long as `p` asks without stretching them
    (`heldend`), and the plan that renders the result: theirs now ratio 1. A release given more
    time than it has stays as recorded, the held sound taking the time; a held sound too short
    to splice is stretched."""
    b = p.anatomy
    if b.release == b.hold and b.size == b.release:
        return a, p
    held_n = round(b.sounded * p.hold_ratio)
    fade_n = round((b.size - b.release) * p.release_ratio)
    if fade_n > b.size - b.release:
        held_n, fade_n = held_n + fade_n - (b.size - b.release), b.size - b.release
    held = a[b.hold:b.release]
    if held.size and held_n != held.size:
        spliced = heldend.resize_held(held, rate, held_n)
        if abs(spliced.size - held_n) > round(heldend.SLACK_S * rate):  # too short to splice
            spliced = stretch(held, rate, held_n / held.size)
        fade_n = max(0, fade_n + held_n - spliced.size)
        held = spliced
    fade = heldend.shorten_release(a[b.release:], rate, fade_n)
    out = as_pcm(np.concatenate([a[:b.hold], held, fade]))
    body = replace(b, size=out.size, release=b.hold + held.size)
    return out, replace(p, anatomy=body, hold_ratio=1.0, release_ratio=1.0)


def _cut(x: Pcm, n: int, rate: int) -> Pcm:
    """A pause made `n` frames long: its two ends kept, crossfaded where they meet."""
    if n >= x.size:
        return x.copy()
    fade = min(round(0.005 * rate), n // 2)
    head, tail = x[: n // 2 + fade], x[x.size - (n - n // 2):].copy()
    ramp = np.linspace(0.0, 1.0, fade, dtype=np.float32)
    tail[:fade] = tail[:fade] * ramp + head[head.size - fade:] * (1 - ramp)
    return as_pcm(np.concatenate([head[: head.size - fade], tail]))


def stretch_parts(x: Pcm, rate: int, cuts: list[int], ratios: list[float]) -> Pcm:
    """`x[cuts[0]:cuts[-1]]`, its part between `cuts[k]` and `cuts[k + 1]` stretched
    `ratios[k]` times: each by its own Rubber Band pass reaching a little into its neighbours,
    the parts crossfaded over `XFADE_S` where their waveforms line up best (±`SEEK_S`)."""
    a = as_pcm(x)
    bounds, rs = [cuts[0]], list[float]()
    for k, r in enumerate(ratios):  # neighbours alike are one part
        if rs and r == rs[-1]:
            bounds[-1] = cuts[k + 1]
        else:
            rs.append(r)
            bounds.append(cuts[k + 1])
    if len(rs) == 1:
        return stretch(a[bounds[0]:bounds[1]], rate, rs[0])
    xf, seek = round(XFADE_S * rate), round(SEEK_S * rate)
    parts = []  # (stretched, where its own part begins in it, where it ends)
    for k, r in enumerate(rs):
        s, e = bounds[k], bounds[k + 1]
        reach = math.ceil((xf / 2 + seek) / r) + 8
        left = min(reach, s - bounds[0]) if k else 0
        right = min(reach, bounds[-1] - e) if k < len(rs) - 1 else 0
        parts.append((stretch(a[s - left: e + right], rate, r), round(left * r),
                      round((e - s + left) * r)))
    out, start = [], 0
    for k in range(len(parts) - 1):
        (y, _, a_cut), (z, b_cut, b_end) = parts[k], parts[k + 1]
        h = min(xf // 2, a_cut - start, y.size - a_cut, b_cut - seek, (b_end - b_cut) // 2,
                z.size - b_cut - seek)  # a part a few frames long (a verse cut off in its hold)
        if h <= 0:
            out.append(y[start:a_cut])
            start = b_cut
            continue
        shift = heldend.best_shift(y[a_cut - h: a_cut + h], z, b_cut, h, seek)
        ramp = np.linspace(0.0, 1.0, 2 * h, dtype=np.float32)
        b = b_cut + shift
        joined = y[a_cut - h: a_cut + h] * (1 - ramp) + z[b - h: b + h] * ramp
        out += [y[start: a_cut - h], joined]
        start = b_cut + h + shift
    y, _, end = parts[-1]
    out.append(y[start:end])
    return as_pcm(np.concatenate(out))
