"""A recorded pack fitted to a pace, measured (issue 21): the style table of bench/reading_style.py
for a pack's verses as recorded and as `voice.pack_shape` `reader` and `uniform` fit them.

With no pack folder, a demonstration pack is built (`demo_pack`): Open JTalk's natural style
(phrases 150 ms apart, the words' accent), each verse's last vowel held 1 s at its own level and
released over 0.7 s (-40 dB), as a slow reader holds it. Its mora timing is known (the HTS
engine's durations, the hold added), and is carried through each fit: one ratio for `uniform`,
the plan's time map for `reader` (its speech ratio for the morae before the last). For a real
pack the timing is estimated as the shaping estimates it: the median mora as the speech, pauses
and held end taken out, over the verse's morae less one, the last sound from the held end's
onset. Pure arithmetic apart from the voices; the figures are printed by bench/voice_reading.py.
"""

from __future__ import annotations

import statistics
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from audio.codec import write_wav
from audio.pcm import Pcm, trim_noise
from audio.voices.chant import level, release
from audio.voices.packshape import ShapeStyle, stretch_parts
from audio.voices.packvoice import PackVoice
from audio.voices.pitchtrack import track
from audio.voices.pronunciation import morae
from bench.reading_style import VerseFigures, measure
from reader.clip import Clip, Verse
from reader.programme import verse_clip

HOLD_S, RELEASE_S = 1.0, 0.7


@dataclass(frozen=True)
class Timing:
    morae_s: list[float]  # each mora's seconds
    last_onset_s: float  # where the last mora begins, from the clip's start


def held_verse(voice: object, clip: Clip, rate: int, hold_s: float = HOLD_S,
               release_s: float = RELEASE_S) -> tuple[Pcm, Timing]:
    """`voice` (an OpenJTalkVoice) reading `clip`, its last vowel held `hold_s` and released
    over `release_s`: the loudest voiced 40 ms of the last mora stretched (Rubber Band, pitch
    kept), brought to one level, faded 40 dB; what followed it dropped."""
    x = voice.render(clip)  # type: ignore[attr-defined]
    morae_s, onset = voice.timing(clip)  # type: ignore[attr-defined]
    start = x.size - round(onset * rate)
    t = track(x, rate)
    hop = round(0.01 * rate)
    frames = [i for i in range(start // hop, t.f0.size) if t.f0[i] > 0]
    best = max(frames, key=lambda i: t.db[i]) if frames else (start + x.size) // 2 // hop
    a = min(max(start, best * hop), x.size - round(0.04 * rate))
    b = a + round(0.04 * rate)
    y = x[:b]
    want = a + round((hold_s + release_s) * rate)
    while y.size < want:  # at most 8 times a pass
        y = stretch_parts(y, rate, [0, a, y.size], [1.0, min(8.0, (want - a) / (y.size - a))])
    y = level(y[:want], rate, a, want)
    y = release(y, want - round(release_s * rate), want).astype(np.float32)
    y = trim_noise(y, rate)  # as the pack will: the timing holds for what it reads
    last = (a - start) / rate + hold_s + release_s
    return y, Timing([*morae_s[:-1], last], start / rate)


def demo_pack(folder: Path, voice: object, poems: Iterable[int], rate: int
              ) -> dict[tuple[int, Verse], Timing]:
    """A Shuffle100 pack of `poems` in `folder` (held_verse of each verse); their timing."""
    folder.mkdir(parents=True, exist_ok=True)
    out = {}
    for no in poems:
        for v in Verse:
            y, timing = held_verse(voice, verse_clip(no, v), rate)
            write_wav(folder / f"{no:03d}{'a' if v is Verse.KAMI else 'b'}.wav", y, rate)
            out[no, v] = timing
    return out


def fitted_figures(folder: Path, poems: Iterable[int], rate: int, pace_s: float | None,
                   shape: ShapeStyle | None, timings: dict[tuple[int, Verse], Timing] | None
                   ) -> tuple[dict[Verse, list[VerseFigures]], float]:
    """Each verse of `poems` as `folder`'s pack reads it fitted to `pace_s` (None: as
    recorded) with `shape` (None: one ratio), measured; and the seconds of speech a poem.
    `timings` known (a demonstration pack) or None (estimated from the recording)."""
    voice = PackVoice(folder, rate, strict=False, pace_s=pace_s, shape=shape)
    probe = PackVoice(folder, rate, strict=False, pace_s=pace_s or 1.0)  # the reader's anatomy
    rows: dict[Verse, list[VerseFigures]] = {v: [] for v in Verse}
    per_poem: dict[int, float] = {}
    for no in poems:
        for v in Verse:
            clip = verse_clip(no, v)
            out = voice.render(clip)
            src, plan = voice.fitted(clip)
            per_poem[no] = per_poem.get(no, 0.0) + out.size / rate
            known = timings.get((no, v)) if timings is not None else None
            if known is None:
                _, est = probe.fitted(clip)
                assert est is not None
                body = est.anatomy
                n = len(morae(clip.yomi))
                known = Timing([body.median_mora / rate] * (n - 1) + [body.sounded / rate],
                               body.hold / rate)
            if plan is None:
                r = out.size / src.size
                morae_s, onset = [m * r for m in known.morae_s], known.last_onset_s * r
            else:
                onset = plan.where(known.last_onset_s * rate) / rate
                morae_s = [m * plan.speech_ratio for m in known.morae_s[:-1]] + [known.morae_s[-1]]
            rows[v].append(measure(out, rate, morae_s, out.size / rate - onset))
    return rows, statistics.mean(per_poem.values())


def misses(rows: dict[Verse, list[VerseFigures]]) -> int:
    """Verses missing the shaping's targets: the last sound ≥ 3 (upper) / 4 (lower) median
    morae, no pause ≥ 100 ms."""
    return sum(1 for v, rs in rows.items() for r in rs
               if r.last_ratio < (3.0 if v is Verse.KAMI else 4.0) or r.pauses > 0)
