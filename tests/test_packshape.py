"""A pack fitted to a pace as a reader reads (issue 21): the pauses inside a verse joined, the held
last sound shortened only down to the reader style's floor, the rest of the speech stretched to
the pace; `uniform` (one ratio) as before. On synthetic verses of known anatomy, and on Open
JTalk's natural style given a held end."""

from __future__ import annotations

import itertools
from pathlib import Path

import numpy as np
import pytest

from audio.codec import write_wav
from audio.config import VoiceConfig
from audio.pcm import Pcm
from audio.voices import packshape
from audio.voices.factory import make_voice
from audio.voices.packshape import ShapeStyle, anatomy, held_onset, plan, render
from audio.voices.packvoice import PackVoice
from audio.voices.voice import mastered
from hall.config import parse_config
from reader.clip import Verse
from reader.errors import ConfigError
from reader.programme import verse_clip

RATE = 48000
FORMANTS = {"a": (800, 1200), "i": (300, 2300), "u": (350, 1300), "e": (450, 1900),
            "o": (500, 900)}
UPPER, LOWER = (5, 7, 5), (7, 7)


def vowel(seconds: float, f0: float, v: str, amp: float = 0.2) -> Pcm:
    """A vowel-like sound: harmonics of `f0` under two formant peaks, 10 ms edges."""
    t = np.arange(round(seconds * RATE)) / RATE
    out = np.zeros_like(t)
    for h in range(1, int(5000 // f0)):
        w = sum(1 / (1 + ((h * f0 - f) / 120) ** 2) for f in FORMANTS[v])
        out += w * np.sin(2 * np.pi * h * f0 * t + h)
    out *= amp / np.max(np.abs(out))
    n = round(0.01 * RATE)
    ramp = 0.5 - 0.5 * np.cos(np.pi * np.arange(n) / n)
    out[:n] *= ramp
    out[-n:] *= ramp[::-1]
    return out.astype(np.float32)


def silence(seconds: float) -> Pcm:
    return np.zeros(round(seconds * RATE), dtype=np.float32)


def synthetic_verse(phrases: tuple[int, ...] = UPPER, mora_s: float = 0.14, gap_s: float = 0.03,
                    pause_s: float = 0.18, hold_s: float = 1.2, release_s: float = 0.5) -> Pcm:
    """Morae of `mora_s` (a `gap_s` stop, then a vowel; pitch and vowel changing), `pause_s`
    of silence between the phrases, the last vowel held `hold_s` and faded 40 dB over
    `release_s`."""
    parts, k = [], 0
    for p, n in enumerate(phrases):
        for m in range(n):
            parts.append(silence(gap_s))
            if p == len(phrases) - 1 and m == n - 1:
                held = vowel(hold_s + release_s, 200.0, "a")
                fade = round(release_s * RATE)
                held[-fade:] *= (10 ** (-2 * np.arange(fade) / fade)).astype(np.float32)
                parts.append(held)
            else:
                f0 = 200.0 * 2 ** ((3 if k % 3 == 1 else 0) / 12)
                parts.append(vowel(mora_s - gap_s, f0, "aiueo"[k % 5]))
            k += 1
        if p < len(phrases) - 1:
            parts.append(silence(pause_s))
    return np.concatenate(parts)


def sounds(x: Pcm, below_db: float = 35.0) -> list[tuple[float, float]]:
    """(start, seconds) of each run of 5 ms steps within `below_db` of the loudest."""
    n = round(0.005 * RATE)
    f = x[: x.size // n * n].astype(np.float64).reshape(-1, n)
    db = 10 * np.log10(np.mean(f * f, axis=1) + 1e-12)
    loud = [*(db >= db.max() - below_db), False]
    out, start = [], None
    for i, on in enumerate(loud):
        if on and start is None:
            start = i
        elif not on and start is not None:
            out.append((start * n / RATE, (i - start) * n / RATE))
            start = None
    return out


def mora_s(x: Pcm) -> float:
    """The mean step from a sound's onset to the next, across no pause, before the last."""
    steps = np.diff([s for s, _ in sounds(x)][:-1])
    return float(np.mean(steps[steps < 1.5 * np.median(steps)]))


def held_ratio(x: Pcm) -> float:
    """The last sound (its start to 6 dB below its held level) over the mora (`mora_s`),
    measured on the sound alone."""
    mora = mora_s(x)
    start = round(sounds(x)[-1][0] * RATE)
    n = round(0.005 * RATE)
    tail = x[start: x.size // n * n].astype(np.float64)
    db = 10 * np.log10(np.mean(tail[: tail.size // n * n].reshape(-1, n) ** 2, axis=1) + 1e-12)
    held = np.flatnonzero(db >= np.percentile(db, 75) - 6.0)
    return (int(held[-1]) + 1) * n / RATE / mora


def silences(x: Pcm) -> list[float]:
    """Seconds of each silence between the first and last sound."""
    runs = sounds(x, 45.0)
    return [b[0] - (a[0] + a[1]) for a, b in itertools.pairwise(runs)]


def test_the_anatomy_finds_the_pauses_and_the_held_end() -> None:
    x = synthetic_verse()
    body = anatomy(x, RATE, 17)
    # 5 and 7 morae of 0.14 s, the pauses (0.18 s and the next mora's 0.03 s stop)
    assert [v / RATE for p in body.pauses for v in (p[0], p[1] - p[0])] == pytest.approx(
        [0.7, 0.21, 1.86, 0.21], abs=0.011)
    true_hold = 0.7 + 0.18 + 0.98 + 0.18 + 4 * 0.14 + 0.03
    assert body.hold / RATE == pytest.approx(true_hold, abs=0.03)
    assert body.release / RATE == pytest.approx(true_hold + 1.2 + 0.075, abs=0.03)
    assert body.median_mora / RATE == pytest.approx(0.14, rel=0.05)


@pytest.mark.parametrize("change", ["vowel", "pitch"])
def test_the_held_end_begins_where_the_vowel_or_the_pitch_changes(change: str) -> None:
    # no stop before the held sound: the vowel before it changes at the same pitch (a reader's
    # one reciting tone), or the pitch changes on the same vowel
    before = vowel(0.4, 200.0, "i") if change == "vowel" else vowel(0.4, 200 * 2 ** (3 / 12), "a")
    x = np.concatenate([before, vowel(1.0, 200.0, "a")])
    assert held_onset(x, RATE) / RATE == pytest.approx(0.4, abs=0.03)


def test_a_verse_on_one_steady_sound_has_no_held_end() -> None:
    # nothing left for the other morae: not a held end (the verse is fitted by one ratio)
    x = vowel(3.0, 200.0, "a")
    body = anatomy(x, RATE, 17)
    assert body.hold == body.size and body.held == 0
    p = plan(body, 0.6, RATE, ShapeStyle(), lower=False)
    assert render(x, RATE, p).size == pytest.approx(0.6 * x.size, rel=0.01)


@pytest.mark.parametrize(("ratio", "phrases"), [(0.5, UPPER), (0.7, UPPER), (0.5, LOWER),
                                                 (1.4, UPPER)])
def test_pauses_inside_become_the_join_and_the_verse_reaches_its_length(
        ratio: float, phrases: tuple[int, ...]) -> None:
    x = synthetic_verse(phrases)
    p = plan(anatomy(x, RATE, sum(phrases)), ratio, RATE, ShapeStyle(), lower=phrases == LOWER)
    y = render(x, RATE, p)
    assert y.size / x.size == pytest.approx(ratio, rel=0.01)
    quiet = silences(y)
    assert max(quiet) <= 0.06 + 0.005, quiet  # the pauses (0.21 s) joined
    assert sum(q > 0.05 for q in quiet) == len(phrases) - 1  # and nothing else cut to that
    # one ratio scales them with everything
    uniform = silences(packshape.stretch(x, RATE, ratio))
    assert sum(q >= 0.8 * ratio * 0.21 for q in uniform) == len(phrases) - 1


def test_slowed_down_no_stop_is_stretched_into_a_pause() -> None:
    # 80 ms stops before each mora: stretched 1.4 times they would be pauses of 112 ms
    x = synthetic_verse(mora_s=0.2, gap_s=0.08)
    y = render(x, RATE, packshape.fit(x, RATE, 17, 1.4, ShapeStyle(), lower=False))
    assert y.size / x.size == pytest.approx(1.4, rel=0.01)
    assert max(silences(y)) < 0.1
    assert max(silences(packshape.stretch(x, RATE, 1.4))) > 0.1


@pytest.mark.parametrize("phrases", [UPPER, LOWER])
def test_the_held_end_keeps_its_floor_and_the_speech_is_squeezed_less(
        phrases: tuple[int, ...]) -> None:
    x = synthetic_verse(phrases)
    lower = phrases == LOWER
    style = ShapeStyle()
    assert held_ratio(x) > 8  # the recording holds it 1.2 s: 8.6 morae
    y = render(x, RATE, plan(anatomy(x, RATE, sum(phrases)), 0.5, RATE, style, lower=lower))
    ratio = held_ratio(y)
    assert ratio >= (4.0 if lower else 3.0)  # the reader style's targets
    assert ratio == pytest.approx(style.hold_lower if lower else style.hold_upper, rel=0.15)
    # the time came out of the pauses and the hold first: the morae keep more of their length
    assert mora_s(y) > 1.08 * mora_s(packshape.stretch(x, RATE, 0.5))


def pack(folder: Path, poems: range) -> Path:
    folder.mkdir(parents=True, exist_ok=True)
    for no in poems:
        write_wav(folder / f"{no:03d}a.wav", synthetic_verse(UPPER, hold_s=1.0 + 0.1 * no), RATE)
        write_wav(folder / f"{no:03d}b.wav", synthetic_verse(LOWER, mora_s=0.15), RATE)
    return folder


def test_a_fitted_pack_reads_its_pace_deterministically_and_uniform_is_unchanged(
        tmp_path: Path) -> None:
    folder = pack(tmp_path / "p", range(1, 4))
    clips = [verse_clip(no, v) for no in range(1, 4) for v in Verse]
    reader = PackVoice(folder, RATE, strict=False, pace_s=4.0)
    out = [reader.render(c) for c in clips]
    assert sum(x.size for x in out) / RATE / 3 == pytest.approx(4.0, rel=0.02)
    assert all(np.array_equal(a, reader.render(c)) for a, c in zip(out, clips, strict=True))
    uniform = PackVoice(folder, RATE, strict=False, pace_s=4.0, shape=None)
    for c in clips:
        x, p = uniform.fitted(c)
        assert p is None  # one ratio, through the same mastering as before
        want = mastered(x, RATE, -20.0, uniform.name, c, stretch=uniform.fit_ratio(),
                        trim=lambda y, _r: y)
        assert np.array_equal(uniform.render(c), want)
    # each shaping is its own cache entry; a pack not fitted keeps its cache key
    keys = [dict(v.params) for v in (
        reader, uniform, PackVoice(folder, RATE, strict=False, pace_s=4.0,
                                   shape=ShapeStyle(pause_s=0.03)),
        PackVoice(folder, RATE, strict=False))]
    assert len({repr(sorted(k.items())) for k in keys}) == 4
    assert not any(k.startswith("shape") for k in keys[3])
    assert "fitted to 4 s of speech a poem, as a reader" in reader.describe()


def test_the_configuration_chooses_the_shape(tmp_path: Path) -> None:
    folder = pack(tmp_path / "p", range(1, 2))
    base = {"engine": "pack", "pack": str(folder), "pack_pace_s": 4.0,
            "cache_dir": str(tmp_path / "cache")}
    v = make_voice(VoiceConfig(**base, chant={"hold_upper": 3.2}, pack_pause_s=0.04),
                   RATE).voice
    assert isinstance(v, PackVoice) and v.shape == ShapeStyle(0.04, 3.2, 4.7)
    v = make_voice(VoiceConfig(**base, pack_shape="uniform"), RATE).voice
    assert isinstance(v, PackVoice) and v.shape is None
    with pytest.raises(ConfigError, match=r"voice\.pack_shape: Input should be 'reader' or "
                                          r"'uniform'"):
        parse_config({"voice": {"pack_shape": "even"}}, "config.yaml")
    with pytest.raises(ConfigError, match=r"voice\.pack_pause_s"):
        parse_config({"voice": {"pack_pause_s": -1}}, "config.yaml")


def test_open_jtalk_natural_speech_with_a_held_end_meets_the_reader_targets_where_uniform_did_not(
        tmp_path: Path) -> None:
    from audio.voices.openjtalk import OpenJTalkVoice
    from bench.pack_shape import demo_pack, fitted_figures

    poems = [1, 2]
    timings = demo_pack(tmp_path / "demo", OpenJTalkVoice(RATE), poems, RATE)
    recorded, per_poem = fitted_figures(tmp_path / "demo", poems, RATE, None, None, timings)
    # the natural style's pauses between phrases (150 ms), the held end 1 s and its release
    assert all(r.pauses >= 1 and r.last_ratio > 6 for rs in recorded.values() for r in rs)
    pace = 0.8 * per_poem  # a faster pace: one ratio leaves the pauses at 120 ms
    shaped, got = fitted_figures(tmp_path / "demo", poems, RATE, pace, ShapeStyle(), timings)
    uniform, _ = fitted_figures(tmp_path / "demo", poems, RATE, pace, None, timings)
    assert got == pytest.approx(pace, rel=0.02)
    for v, floor in ((Verse.KAMI, 3.0), (Verse.SHIMO, 4.0)):
        for r, u in zip(shaped[v], uniform[v], strict=True):
            assert r.pauses == 0 and r.last_ratio >= floor
            assert u.pauses >= 1
            assert r.median_mora_s > 1.1 * u.median_mora_s  # the morae squeezed less
