"""The reader's style: a verse chanted as one breath on one reciting tone, its last sound held
and let go (issue 21).

A karuta reader does not speak a verse like a sentence. Measured on a human reader's pack: the
verse sits on one tone (p10-p90 about 1 st), the phrases follow each other without a stop, and
the last sound is held 4-6 times as long as the others, on the same pitch with a gentle vibrato
(0.7-0.9 st at about 5 Hz), then fades into the gap over half a second to a second.

Open JTalk is made to read that way in the synthesis itself (`audio.voices.hts`), not by
processing its output: the models' own phoneme durations are read first (`plan`), then each
phrase is synthesised again with
- its durations, except the verse's last vowel, held `hold` times the verse's median mora plus
  the release;
- every state's log-F0 target moved onto the reciting tone, keeping `accent` of the dictionary's
  word accent around it, with a scoop up into the first mora; the pitch's global variance off
  (it would widen the flattened contour again).
The waveform then gets the vibrato on the held vowel (a modulated delay: a frequency change
without touching the spectrum) and the release (a fade linear in dB), and the phrases are joined
`phrase_gap_s` apart. Everything here but `Hts` is arithmetic on numbers it is given.
"""

from __future__ import annotations

import hashlib
import math
import random
from collections.abc import Sequence
from dataclasses import dataclass, replace
from typing import Final

import numpy as np

from audio.voices.hts import Hts, Lf0Plan, phoneme

VOWELS: Final = frozenset("aiueoAIUEO")  # upper case: devoiced
MORA_ENDS: Final = VOWELS | {"N", "cl"}
SILENT: Final = frozenset({"sil", "pau"})
UNVOICED: Final = frozenset({"k", "ky", "s", "sh", "t", "ts", "ch", "h", "hy", "f", "p", "py",
                             "cl", "A", "I", "U", "E", "O"}) | SILENT
ST: Final = math.log(2.0) / 12.0  # one semitone in natural log-F0
RELEASE_DB: Final = 40.0  # the release's fade, over release_s, linear in dB
# a held sound is levelled to no quieter than this below the phrase's peak; a held ン (a hum
# through the nose, some 13 dB under the vowel before it as synthesised) to this: a reader's
# held ン carries as a vowel does, and at -18 dB its release sank into the vowel's level
HELD_FLOOR_DB: Final = -18.0
HELD_N_FLOOR_DB: Final = -10.0


@dataclass(frozen=True, slots=True)
class ChantStyle:
    """How the `reader` style reads (voice.chant in config.yaml)."""

    hold_upper: float = 4.0  # the last mora of an upper verse, times the verse's median mora
    hold_lower: float = 4.7  # of a lower verse
    release_s: float = 0.7  # then faded out over this long (-40 dB)
    vibrato_st: float = 0.8  # peak to peak, on the held sound (0: none)
    vibrato_hz: float = 5.2
    vibrato_delay_s: float = 0.0  # after the last vowel begins; full depth 0.1 s later
    accent: float = 0.1  # share of the dictionary's word accent kept around the tone (0: flat)
    scoop_st: float = 2.0  # the verse's first mora rises into the tone from this far below
    phrase_gap_s: float = 0.0  # between the phrases (a reader joins them without stopping)
    tone_hz: float | None = 345.0  # the reciting tone (None: each verse's own median)
    vary: bool = True  # each verse its own vibrato and hold, within a reader's ranges


@dataclass(frozen=True, slots=True)
class PhrasePlan:
    labels: tuple[str, ...]
    frames: tuple[int, ...]  # each phoneme's frames, as the chant reads it
    natural: tuple[int, ...]  # as the models chose them
    means: np.ndarray  # (phonemes, states) log-F0 means the models chose


@dataclass(frozen=True, slots=True)
class VersePlan:
    phrases: tuple[PhrasePlan, ...]
    tone: float  # log-F0 of the reciting tone
    final: tuple[int, int, int]  # (phrase, first phoneme of the last mora, its vowel)
    release_frames: int


def morae(labels: Sequence[str]) -> list[list[int]]:
    """The phoneme indices of each mora (consonants join the vowel after them; silences are no
    mora; a consonant with no vowel after it is one)."""
    out: list[list[int]] = []
    cur: list[int] = []
    for i, lab in enumerate(labels):
        p = phoneme(lab)
        if p in SILENT:
            if cur:  # a consonant before a silence is a mora of its own
                out.append(cur)
            cur = []
            continue
        cur.append(i)
        if p in MORA_ENDS:
            out.append(cur)
            cur = []
    return out + ([cur] if cur else [])


def quinphone(label: str) -> tuple[list[str], str]:
    """A full-context label's five phonemes (p1^p2-p3+p4=p5) and the rest after them."""
    head, rest = label.split("/", 1)
    p1, r = head.split("^", 1)
    p2, r = r.split("-", 1)
    p3, r = r.split("+", 1)
    p4, p5 = r.split("=", 1)
    return [p1, p2, p3, p4, p5], rest


def _label(q: list[str], rest: str) -> str:
    return f"{q[0]}^{q[1]}-{q[2]}+{q[3]}={q[4]}/{rest}"


def lengthened(labels: Sequence[str], vowel: int, copies: int) -> list[str]:
    """`labels` with the vowel at `vowel` said 1 + `copies` times in a row (a long vowel, as
    Open JTalk labels 「みー」: steady, where a phrase-final vowel alone decays across its
    states), voiced even where the dictionary devoiced it."""
    q, rest = quinphone(labels[vowel])
    v = "N" if q[2] in ("n", "N") else q[2].lower()  # a lone n is ん: hummed, syllabic
    q[2] = v
    seq = q[:2] + [v] * (copies + 1) + q[3:]
    out = [*labels[:vowel]]
    for i in range(copies + 1):
        out.append(_label(seq[i:i + 5], rest))
    # the phonemes after it see the vowel (not a devoiced one) before them
    for j, lab in enumerate(labels[vowel + 1:vowel + 3], start=1):
        q2, rest2 = quinphone(lab)
        for k in range(2 - j, -1, -1) if copies else [2 - j]:  # p2 (and p1) are the vowel
            q2[k] = v
        out.append(_label(q2, rest2))
    return out + list(labels[vowel + 3:])


def plan(hts: Hts, phrase_labels: Sequence[Sequence[str]], style: ChantStyle, *, lower: bool,
         pitch_st: float = 0.0) -> VersePlan:
    """Durations and the tone of a verse read in the reader's style."""
    natural = [(tuple(labs), hts.durations(labs)) for labs in phrase_labels]
    mora_frames = [sum(d[i] for i in m) for labs, d in natural for m in morae(labs)]
    median_mora = int(np.median(mora_frames)) if mora_frames else 1
    if style.tone_hz is None:
        voiced = [v for labs in phrase_labels for v in _vowel_means(hts, labs)]
        tone = float(np.median(voiced)) + pitch_st * ST
    else:
        tone = math.log(style.tone_hz) + pitch_st * ST
    rate = hts.rate / hts.fperiod  # frames a second
    last = len(natural) - 1
    labs, d = natural[last]
    final_mora = morae(labs)[-1]
    vowel = final_mora[-1]
    hold = round((style.hold_lower if lower else style.hold_upper) * median_mora)
    release = round(style.release_s * rate)
    consonant = sum(d[i] for i in final_mora[:-1])
    # the vowel held: said three times in a row (a long vowel), the middle one taking the
    # hold and the release (its neighbours are vowels: never devoiced, no transition in it);
    # the last ends the verse as it would, with its decay into silence
    extra = max(1, hold + release - consonant - 2 * d[vowel])
    held_labels = lengthened(labs, vowel, 2)
    frames = [*d[:vowel + 1], extra, *d[vowel:]]
    plans = [PhrasePlan(labs_, tuple(d_), tuple(d_), hts.lf0_means(labs_))
             for labs_, d_ in natural[:last]]
    plans.append(PhrasePlan(tuple(held_labels), tuple(frames),
                            tuple([*d[:vowel + 1], 0, *d[vowel:]]),
                            hts.lf0_means(held_labels)))
    return VersePlan(tuple(plans), tone, (last, final_mora[0], vowel + 2), release)


def _vowel_means(hts: Hts, labels: Sequence[str]) -> list[float]:
    """The log-F0 means of the inner states of the phrase's vowels and ん."""
    means = hts.lf0_means(labels)
    return [float(v) for i, lab in enumerate(labels)
            if phoneme(lab) in VOWELS - UNVOICED or phoneme(lab) == "N" for v in means[i, 1:-1]]


def lf0_target(p: PhrasePlan, tone: float, style: ChantStyle, first_phrase: bool) -> Lf0Plan:
    """The log-F0 mean each state of phrase `p` is given."""
    voiced = [i for i, lab in enumerate(p.labels) if phoneme(lab) not in UNVOICED]
    centre = float(np.median(p.means[voiced, 1:-1])) if voiced else tone
    first = morae(p.labels)[0] if first_phrase else []
    nstate = p.means.shape[1]
    held = {j for i, n in enumerate(p.natural) if n == 0 for j in (i - 1, i, i + 1)}

    def target(ph: int, state: int, mean: float) -> float:
        if phoneme(p.labels[ph]) in UNVOICED or ph in held:  # the held vowel: on the tone
            return tone
        lf0 = tone + style.accent * (mean - centre)
        if ph in first:  # the scoop: from scoop_st below to the tone across the first mora
            k = first.index(ph) * nstate + state
            lf0 -= style.scoop_st * ST * (1.0 - k / max(1, len(first) * nstate - 1))
        return lf0

    return target


def vibrato(x: np.ndarray, rate: int, start: int, stop: int, style: ChantStyle) -> np.ndarray:
    """`x` with a vibrato from `start` to `stop` (samples): a delay modulated at vibrato_hz,
    whose depth gives vibrato_st peak to peak, faded in over 0.1 s."""
    if style.vibrato_st <= 0 or stop <= start:
        return x
    n = np.arange(stop - start, dtype=np.float64)
    ratio = 2.0 ** (style.vibrato_st / 24.0) - 1.0  # the frequency's peak deviation
    depth = ratio / (2.0 * math.pi * style.vibrato_hz) * rate  # the delay's amplitude, samples
    ramp = np.clip(n / (0.1 * rate), 0.0, 1.0)
    delay = depth * ramp * np.sin(2.0 * math.pi * style.vibrato_hz * n / rate)
    out = x.copy()
    src = start + n - delay
    out[start:stop] = np.interp(src, np.arange(x.size, dtype=np.float64), x)
    return out


def release(x: np.ndarray, start: int, stop: int) -> np.ndarray:
    """`x` faded from `start` to `stop` (linear in dB, RELEASE_DB down), silent after."""
    out = x.copy()
    n = max(1, stop - start)
    gain = 10.0 ** (-RELEASE_DB * np.arange(n) / n / 20.0)
    tail = min(n, 480)  # and the last 10 ms (at 48 kHz) to zero, so the end makes no step
    gain[n - tail:] *= 0.5 + 0.5 * np.cos(np.linspace(0.0, math.pi, tail))
    out[start:stop] *= gain
    out[stop:] = 0.0
    return out


def for_verse(style: ChantStyle, phrase_labels: Sequence[Sequence[str]]) -> ChantStyle:
    """The style one verse is read in (issue 48: a reader never holds two verses alike): with
    `vary`, its vibrato rate 0.9-1.1 and depth 0.8-1.15 times the style's (4.7-5.7 Hz and
    0.64-0.92 st at the defaults), its hold 1-1.12 times (4-4.5 / 4.7-5.3 median morae: never
    shorter than set), drawn from the verse's own labels: the same verse always alike, a match
    replayed alike."""
    if not style.vary:
        return style
    digest = hashlib.sha256("\n".join("|".join(p) for p in phrase_labels).encode()).digest()
    rng = random.Random(int.from_bytes(digest[:8], "big"))
    hold = rng.uniform(1.0, 1.12)
    return replace(style, vibrato_hz=style.vibrato_hz * rng.uniform(0.9, 1.1),
                   vibrato_st=style.vibrato_st * rng.uniform(0.8, 1.15),
                   hold_upper=style.hold_upper * hold, hold_lower=style.hold_lower * hold)


def chant(hts: Hts, phrase_labels: Sequence[Sequence[str]], style: ChantStyle, *,
          lower: bool, pitch_st: float = 0.0) -> tuple[list[np.ndarray], VersePlan]:
    """Each phrase's samples (int16 scale, untrimmed) read in the reader's style (`for_verse`:
    this verse's), the last with its held vowel, vibrato and release; and the plan they were
    read by."""
    style = for_verse(style, phrase_labels)
    vp = plan(hts, phrase_labels, style, lower=lower, pitch_st=pitch_st)
    out = []
    for k, p in enumerate(vp.phrases):
        x = hts.synthesize(p.labels, p.frames, lf0_target(p, vp.tone, style, k == 0),
                           lf0_gv=False, no_gv=held_phonemes(vp) if k == vp.final[0] else ())
        out.append(held_end(x, vp, style, hts) if k == vp.final[0] else x)
    return out, vp


def held_phonemes(vp: VersePlan) -> list[int]:
    """The held vowel's three phonemes in the last phrase."""
    return [vp.final[2] - 2, vp.final[2] - 1, vp.final[2]]


def held_end(x: np.ndarray, vp: VersePlan, style: ChantStyle, hts: Hts) -> np.ndarray:
    """The verse's last phrase `x` with the vibrato on its held vowel and the release."""
    p, f = vp.phrases[vp.final[0]], hts.fperiod
    _, first, vowel = vp.final  # the last mora's first phoneme; its vowel, said last
    copies = [i for i in range(first, vowel) if p.natural[i] == 0]
    v0 = sum(p.frames[:copies[0] - 1]) * f  # where the vowel begins
    v1 = sum(p.frames[:vowel]) * f  # where its own decay begins
    nasal = quinphone(p.labels[vowel])[0][2] == "N"
    x = level(x, hts.rate, v0, v1, HELD_N_FLOOR_DB if nasal else HELD_FLOOR_DB)
    x = vibrato(x, hts.rate, v0 + round(style.vibrato_delay_s * hts.rate), v1, style)
    return release(x, v1 - vp.release_frames * f, v1)


def level(x: np.ndarray, rate: int, start: int, stop: int, floor_db: float = HELD_FLOOR_DB,
          window_s: float = 0.02) -> np.ndarray:
    """`x` with its held sound from `start` to `stop` at one level: each 20 ms brought to the
    stretch's median RMS (or to `floor_db` below the phrase's peak where that is quieter: a
    held ン hums as loud as a vowel would), the gain smoothed and joined to 1 at the edges."""
    n = max(1, round(window_s * rate))
    seg = x[start:stop]
    if seg.size < 2 * n:
        return x
    k = seg.size // n
    rms = np.sqrt(np.mean(seg[: k * n].reshape(k, n) ** 2, axis=1)) + 1e-9
    target = max(float(np.median(rms)), float(np.max(np.abs(x))) * 10 ** (floor_db / 20) / 1.41)
    gain = np.clip(target / rms, 0.25, 4.0)
    centres = (np.arange(k) + 0.5) * n
    g = np.interp(np.arange(seg.size), centres, gain)
    edge = np.clip(np.arange(seg.size) / n, 0, 1)  # from 1 at its start (the release ends it)
    out = x.copy()
    out[start:stop] = seg * (1 + (g - 1) * edge)
    return out
