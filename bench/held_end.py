"""A reader's pack fitted to any pace, measured on what is heard (issue 48): the held last
sound's vibrato rate against the recording's, splices (clicks) near the end, how far the tail
is kept, octave jumps in the held note, and render errors.

The pack is built here (`reader_pack`): 200 verses and the jokā in a reader's manner, each
verse its poem's morae (from its kana) in phrases with short pauses, the last vowel held
0.8-2.0 s with a vibrato (4.5-6 Hz, 0.5-1 st, each verse its own) and dying away over 0.4-1.2 s
to -50 dB, over a room's noise at -75 dB: synthetic, so every figure has a known truth.

The measures are independent of the shaping's own analysis (its held-end finder, its plan):
the last sound runs back from the last loud 2.5 ms step to the dip of the stop before it; its
held note is its loud voiced frames on one pitch (`pitchtrack.track`'s, the tracker alone);
the vibrato is the frequency whose sinusoid (with a line) explains most of that pitch in
semitones; an octave jump a frame of the note 12 ± 3 semitones off it; a splice a 4 ms frame in
the last 0.5 s whose energy above 6 kHz (the voice's harmonics stop at 5 kHz) stands 15 dB
above that band's median there; the tail the last 30 ms's level under the loudest 30 ms.

    python -m bench.held_end [--poems N] [--rate HZ]
    python -m bench.held_end --reader [--poems N]   # the reader style's hold, as heard
"""

from __future__ import annotations

import argparse
import math
import random
import statistics
import tempfile
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import numpy.typing as npt

from audio.codec import read_wav, write_wav
from audio.pcm import Pcm, as_pcm
from audio.voices.kana import morae
from audio.voices.pitchtrack import track
from reader.clip import Clip, ClipKind, Verse
from reader.joka import NANIWAZU
from reader.programme import verse_clip

PACES_S = (3.5, 4.5, 6.0)
VOWELS = {"a": (800, 1200), "i": (300, 2300), "u": (350, 1300), "e": (450, 1900),
          "o": (500, 900)}


def vowel(seconds: float, f0: float, v: str, rate: int, vib_hz: float = 0.0,
          vib_st: float = 0.0, phase: float = 0.0) -> npt.NDArray[np.float64]:
    """Harmonics of `f0` (up to 5 kHz) falling 6 dB an octave under two formant peaks, the
    pitch moving ±`vib_st`/2 semitones at `vib_hz`, 10 ms raised-cosine edges."""
    n = round(seconds * rate)
    t = np.arange(n) / rate
    inst = f0 * 2 ** (vib_st / 2 / 12 * np.sin(2 * np.pi * vib_hz * t + phase))
    ph = 2 * np.pi * np.cumsum(inst) / rate
    out = np.zeros(n)
    for h in range(1, int(5000 // (f0 * 1.06))):
        formants = sum(1 / (1 + ((h * f0 - f) / 150) ** 2) for f in VOWELS[v])
        out += (0.1 + formants) / h * np.sin(h * ph + h)  # a voice's source falls with h
    out /= max(1e-9, float(np.max(np.abs(out))))
    m = min(n // 2, round(0.01 * rate))
    ramp = 0.5 - 0.5 * np.cos(np.pi * np.arange(m) / m)
    out[:m] *= ramp
    out[n - m:] *= ramp[::-1]
    return out


@dataclass(frozen=True)
class HeldTruth:
    vib_hz: float
    vib_st: float
    hold_s: float
    release_s: float


def reader_verse(yomi: str, lower: bool, rate: int, seed: int,
                 release_s: float | None = None) -> tuple[Pcm, HeldTruth]:
    """A verse of `yomi`'s morae read as a reader: phrases (3 upper, 2 lower) of morae 0.15-0.21 s
    with 25 ms stops on a reciting tone (250 Hz, moving -2 to +3 semitones), 0.12-0.3 s pauses,
    the last vowel held 5 semitones below the tone and dying away."""
    rng = random.Random(seed)
    count = max(3, len(morae(yomi)))
    groups = 2 if lower else 3
    sizes = [count // groups + (1 if k < count % groups else 0) for k in range(groups)]
    mora_s, pause_s = rng.uniform(0.15, 0.21), rng.uniform(0.12, 0.3)
    truth = HeldTruth(rng.uniform(4.5, 6.0), rng.uniform(0.5, 1.0),
                      rng.uniform(0.8, 2.0) * (1.2 if lower else 1.0), rng.uniform(0.4, 1.2))
    if release_s is not None:  # 0: the recording cut off in its hold
        truth = HeldTruth(truth.vib_hz, truth.vib_st, truth.hold_s, release_s)
    f0, parts, k = 250.0, [], 0
    for g, size in enumerate(sizes):
        for m in range(size):
            parts.append(np.zeros(round(0.025 * rate)))
            if g == groups - 1 and m == size - 1:
                held = vowel(truth.hold_s + truth.release_s, f0 * 2 ** (-5 / 12),
                             "aiueo"[k % 5], rate,
                             truth.vib_hz, truth.vib_st, rng.uniform(0, 2 * math.pi))
                fade = round(truth.release_s * rate)
                if fade:
                    held[held.size - fade:] *= 10 ** (-2.5 * np.arange(fade) / fade)  # -50 dB
                else:  # cut off: 5 ms of the edge's fade left
                    held = held[: held.size - round(0.005 * rate)]
                parts.append(held)
            else:
                step = (3, 0, -2, 0)[k % 4]
                parts.append(vowel(mora_s * rng.uniform(0.85, 1.15) - 0.025,
                                   f0 * 2 ** (step / 12), "aiueo"[k % 5], rate))
            k += 1
        if g < groups - 1:
            parts.append(np.zeros(round(pause_s * rate)))
    if release_s == 0:
        return as_pcm(0.25 * np.concatenate(parts)), truth
    x = 0.25 * np.concatenate(parts)
    x += np.random.default_rng(seed).normal(0, 10 ** (-75 / 20) * 0.25, x.size)
    lead = np.random.default_rng(seed + 1).normal(0, 10 ** (-75 / 20) * 0.25, round(0.2 * rate))
    return np.concatenate([lead, x, lead[::-1]]).astype(np.float32), truth


def joka_clip(verse: Verse) -> Clip:
    s = NANIWAZU.kami if verse is Verse.KAMI else NANIWAZU.shimo
    return Clip(ClipKind.PRELUDE, s.yomi, s.text, poem=0, verse=verse)


def pack_clips(poems: int = 100) -> list[Clip]:
    """The jokā's verses, then each poem's."""
    return [joka_clip(v) for v in Verse] + [verse_clip(n, v) for n in range(1, poems + 1)
                                            for v in Verse]


def reader_pack(folder: Path, rate: int, poems: int = 100) -> dict[str, HeldTruth]:
    """A Shuffle100-named pack (000a.wav … 100b.wav) of `reader_verse`s; the truth of each
    slot's held end."""
    folder.mkdir(parents=True, exist_ok=True)
    truths = {}
    for c in pack_clips(poems):
        assert c.poem is not None and c.verse is not None
        name = f"{c.poem:03d}{'a' if c.verse is Verse.KAMI else 'b'}"
        x, truths[name] = reader_verse(c.yomi, c.verse is Verse.SHIMO, rate,
                                       c.poem * 2 + (c.verse is Verse.SHIMO))
        write_wav(folder / f"{name}.wav", x, rate)
    return truths


def last_sound(x: Pcm, rate: int) -> tuple[int, int]:
    """The last sound, as frames of `x`: from the last 5 ms step within 10 dB of the loudest
    back to the dip before it (a step 20 dB under the loudest: the stop before the last mora),
    to the last step within 40 dB. 5 ms: a step shorter than a voice's period dips inside a
    steady vowel."""
    n = max(1, round(0.005 * rate))
    f = x[: x.size // n * n].astype(np.float64).reshape(-1, n)
    db = 10 * np.log10(np.mean(f * f, axis=1) + 1e-20)
    on = db > db.max() - 40.0
    loud = np.flatnonzero(db > db.max() - 10.0)
    if loud.size == 0:
        return 0, 0
    start = int(loud[-1])
    near = db > db.max() - 20.0  # a stop squeezed and smeared by a stretcher is still a dip
    while start > 0 and near[start - 1]:
        start -= 1
    end = int(np.flatnonzero(on)[-1])
    return start * n, (end + 1) * n


def held_note(x: Pcm, rate: int) -> tuple[npt.NDArray[np.float64], npt.NDArray[np.float64], int]:
    """The held note of the last sound: its loud voiced 10 ms frames (within 20 dB of its
    loudest) back from the end while the pitch stays within 2 semitones of the median of their
    later half (the mora before it, run into it by a stretch, is another note), a stray an
    octave off (within 3 semitones of 12) passed over and counted. Times (s) and semitones of
    the frames on the note, and the strays."""
    s, e = last_sound(x, rate)
    t = track(x[s:e], rate)
    voiced = np.flatnonzero(t.f0 > 0)
    k = voiced[t.db[voiced] > t.db[voiced].max() - 20.0] if voiced.size else voiced
    if k.size == 0:
        return np.zeros(0), np.zeros(0), 0
    st = 12 * np.log2(t.f0[k])
    ref = float(np.median(st[st.size // 2:]))
    on = np.abs(st - ref) <= 2.0
    octave = np.abs(np.abs(st - ref) - 12.0) <= 3.0
    first = st.size - 1
    while first > 0 and (on[first - 1] or octave[first - 1]):
        first -= 1
    while first < st.size and not on[first]:  # the region starts on the note
        first += 1
    keep = on[first:]
    times = np.asarray(k[first:][keep] * 0.01, dtype=np.float64)
    return times, np.asarray(st[first:][keep], dtype=np.float64), int(np.sum(octave[first:]))


def steady_s(x: Pcm, rate: int) -> float:
    """How long the held note (`held_note`'s pitch) stays steady: its longest run of 10 ms
    frames (voiced, loud, on the note) whose level (over 30 ms, as an ear integrates it) stays
    within a 3 dB band, in seconds: the hold a listener hears, found in the sound (a release
    or the morae before it fall out)."""
    s, e = last_sound(x, rate)
    tt, _, _ = held_note(x, rate)
    if tt.size < 2:
        return 0.0
    power = 10 ** (track(x[s:e], rate).db / 10)
    smooth = np.convolve(power, np.ones(3) / 3, mode="same")  # 30 ms, as an ear integrates
    db = 10 * np.log10(smooth[np.round(tt / 0.01).astype(int)] + 1e-20)
    best, a = 0, 0
    for b in range(db.size):  # a sliding window: the band's lowest and highest so far
        while db[a:b + 1].max() - db[a:b + 1].min() > 3.0 or tt[b] - tt[a] > (b - a) * 0.011:
            a += 1  # (a frame off the note breaks the run)
        best = max(best, b - a + 1)
    return best * 0.01


def vibrato_hz(x: Pcm, rate: int) -> float:
    """The vibrato of the held note (`held_note`): the frequency (2-16 Hz) whose sinusoid,
    with a line, explains most of its pitch in semitones; nan when under 0.25 s of it."""
    tt, st, _ = held_note(x, rate)
    if tt.size < 25:
        return math.nan

    def explained(f: float) -> float:
        basis = np.column_stack([np.sin(2 * np.pi * f * tt), np.cos(2 * np.pi * f * tt),
                                 np.ones_like(tt), tt - tt.mean()])
        coef = np.linalg.lstsq(basis, st, rcond=None)[0]
        return -float(np.sum((st - basis @ coef) ** 2))

    coarse = max(np.arange(2.0, 16.0, 0.1), key=explained)  # then to 0.01 Hz around it
    return float(max(np.arange(coarse - 0.1, coarse + 0.1, 0.01), key=explained))


def splices(x: Pcm, rate: int, last_s: float = 0.5) -> int:
    """4 ms frames in the last `last_s` whose energy above 6 kHz stands 15 dB above that band's
    median there (and within 60 dB of the clip's loudest band energy)."""
    n = round(0.004 * rate)
    tail = x[max(0, x.size - round(last_s * rate)):].astype(np.float64)
    frames = tail[: tail.size // n * n].reshape(-1, n)
    if frames.shape[0] < 5 or rate < 14000:
        return 0
    spec = np.abs(np.fft.rfft(frames * np.hanning(n), axis=1)) ** 2
    freqs = np.fft.rfftfreq(n, 1 / rate)
    hf = 10 * np.log10(spec[:, freqs >= 6000].sum(axis=1) + 1e-20)
    whole = 10 * np.log10(spec.sum(axis=1) + 1e-20)
    return int(np.sum((hf > np.median(hf) + 15.0) & (hf > whole.max() - 60.0)))


def tail_db(x: Pcm, rate: int) -> float:
    """The level of the last 30 ms against the loudest 30 ms, in dB."""
    n = round(0.03 * rate)
    f = x[: x.size // n * n].astype(np.float64).reshape(-1, n)
    db = 10 * np.log10(np.mean(f * f, axis=1) + 1e-20)
    last = 10 * math.log10(float(np.mean(x[x.size - n:].astype(np.float64) ** 2)) + 1e-20)
    return last - float(db.max())


def octave_jumps(x: Pcm, rate: int) -> int:
    """Frames of the held note an octave off it (`held_note`'s strays)."""
    return held_note(x, rate)[2]


@dataclass(frozen=True)
class Rendered:
    slot: str
    seconds: float
    vibrato_hz: float
    source_vibrato_hz: float
    splices: int
    tail_db: float
    octave_jumps: int


def measure_pack(folder: Path, rate: int, pace_s: float, poems: int = 100
                 ) -> tuple[list[Rendered], list[str]]:
    """Every verse of the pack in `folder` rendered at `pace_s` by a reader-shaped PackVoice:
    the figures of each, and the errors (slot: message)."""
    from audio.voices.packvoice import PackVoice

    voice = PackVoice(folder, rate, strict=False, pace_s=pace_s)
    out, errors = [], []
    for c in pack_clips(poems):
        slot = f"{c.poem:03d}{'a' if c.verse is Verse.KAMI else 'b'}"
        try:
            y = voice.render(c)
        except Exception as e:  # every failure is a figure here
            errors.append(f"{slot}: {type(e).__name__}: {e}")
            continue
        src, src_rate = read_wav(folder / f"{slot}.wav")
        out.append(Rendered(slot, y.size / rate, vibrato_hz(y, rate), vibrato_hz(src, src_rate),
                            splices(y, rate), tail_db(y, rate), octave_jumps(y, rate)))
    return out, errors


def reader_style_holds(poems: int = 100) -> None:
    """The `reader` style's held last sound found in the sound (`steady_s`) over the median
    mora (the synthesis's own durations), for `poems` poems: what a listener hears held."""
    from audio.config import VoiceConfig
    from audio.voices.chant import ChantStyle
    from audio.voices.openjtalk import OpenJTalkVoice

    voice = OpenJTalkVoice(48000, chant=ChantStyle(**VoiceConfig().chant.model_dump()))
    for v, floor in ((Verse.KAMI, 3.0), (Verse.SHIMO, 4.0)):
        ratios = []
        for no in range(1, poems + 1):
            c = verse_clip(no, v)
            ratios.append(steady_s(voice.render(c), 48000)
                          / statistics.median(voice.timing(c)[0]))
        q = sorted(ratios)
        print(f"reader {v.value}: held steady (3 dB band) / median mora {statistics.median(q):.2f}"
              f" (p10-p90 {q[len(q) // 10]:.2f}-{q[len(q) * 9 // 10]:.2f}); "
              f"{sum(r >= floor for r in q)} of {len(q)} >= {floor:g}")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--poems", type=int, default=100)
    ap.add_argument("--rate", type=int, default=16000)
    ap.add_argument("--reader", action="store_true",
                    help="the reader style's held sound found in the sound, not a pack")
    args = ap.parse_args()
    if args.reader:
        reader_style_holds(args.poems)
        return
    with tempfile.TemporaryDirectory(prefix="yomite-held-") as tmp:
        reader_pack(Path(tmp), args.rate, args.poems)
        print(f"{2 * args.poems + 2} verses, {args.rate} Hz")
        print("pace s | errors | poem s median (min-max) | vibrato / source median (min-max) "
              "| splices | tail dB max | octave jumps")
        for pace in PACES_S:
            got, errors = measure_pack(Path(tmp), args.rate, pace, args.poems)
            ratios = [r.vibrato_hz / r.source_vibrato_hz for r in got
                      if math.isfinite(r.vibrato_hz) and math.isfinite(r.source_vibrato_hz)]
            poem = [a.seconds + b.seconds for a, b in zip(got[::2], got[1::2], strict=False)]
            print(f"{pace} | {len(errors)} | {statistics.median(poem):.2f} "
                  f"({min(poem):.2f}-{max(poem):.2f}) | {statistics.median(ratios):.3f} "
                  f"({min(ratios):.3f}-{max(ratios):.3f}, {len(ratios)} measured) | "
                  f"{sum(r.splices for r in got)} | {max(r.tail_db for r in got):.1f} | "
                  f"{sum(r.octave_jumps for r in got)}")
            for e in errors[:5]:
                print("   ", e)


if __name__ == "__main__":
    main()
