"""Open JTalk reads every verse of the hundred poems: audible, trimmed, at the target loudness,
never clipped, saying exactly the yomi, at the national rules' pace. The 200 verses are
rendered once per session (two threads: Open JTalk releases the GIL) and shared."""

import math
import threading
from concurrent.futures import ThreadPoolExecutor

import numpy as np
import pytest

from audio.config import VoiceConfig
from audio.errors import VoiceError
from audio.pcm import Pcm, loudness_lufs, peak, resample
from audio.voices.openjtalk import OpenJTalkVoice, katakana, spoken_kana
from audio.voices.voice import EstimateVoice
from reader.clip import Clip, Verse
from reader.config import MatchConfig
from reader.poems import all_poems
from reader.programme import call_clip, prelude_clip, verse_clip

from .voice_fakes import verse

RATE = 48000
CFG = VoiceConfig()
TARGET = CFG.loudness_lufs
CEILING = 10 ** (-1 / 20)
THRESHOLD = 10 ** (-45 / 20)  # trim_silence's default, relative to the peak
STEP = 10 ** (-60 / 20)  # no clip may start or end with a step above -60 dBFS
EDGE = RATE // 100  # 10 ms

VERSES = [verse_clip(p.no, v) for p in all_poems() for v in Verse]


def default_voice(rate: int = RATE) -> OpenJTalkVoice:
    return OpenJTalkVoice(rate, CFG.speed, CFG.pitch, CFG.phrase_pause_s, CFG.loudness_lufs)


@pytest.fixture(scope="module")
def rendered() -> dict[str, Pcm]:
    voice = default_voice()
    with ThreadPoolExecutor(max_workers=2) as pool:
        return dict(zip([c.key for c in VERSES], pool.map(voice.render, VERSES), strict=True))


def test_all_two_hundred_verses_are_audible_trimmed_and_normalised(
    rendered: dict[str, Pcm],
) -> None:
    assert len(rendered) == 200
    problems = []
    for key, x in rendered.items():
        lufs = loudness_lufs(x, RATE)
        top = peak(x)
        if x.dtype != np.float32 or x.ndim != 1 or x.size < RATE // 2:
            problems.append(f"{key}: {x.dtype} {x.shape}")
        elif not math.isfinite(lufs) or abs(lufs - TARGET) > 1.0:
            problems.append(f"{key}: {lufs:.2f} LUFS")
        elif top > CEILING:
            problems.append(f"{key}: peak {top:.4f}")
        elif np.max(np.abs(x[:EDGE])) < top * THRESHOLD or np.max(np.abs(x[-EDGE:])) < (
            top * THRESHOLD
        ):
            problems.append(f"{key}: silent first or last 10 ms (not trimmed)")
        elif abs(x[0]) > STEP or abs(x[-1]) > STEP:
            problems.append(f"{key}: starts or ends with a step ({x[0]:.4f}, {x[-1]:.4f})")
    assert problems == []


def test_the_pace_is_about_seven_seconds_a_poem(rendered: dict[str, Pcm]) -> None:
    gaps = MatchConfig().gaps
    per_poem = [
        (rendered[verse_clip(p.no, Verse.KAMI).key].size
         + rendered[verse_clip(p.no, Verse.SHIMO).key].size) / RATE
        + gaps.between_verses_s + gaps.between_cards_s
        for p in all_poems()
    ]
    assert 6.8 <= float(np.mean(per_poem)) <= 7.3
    assert min(per_poem) > 6.0 and max(per_poem) < 8.0


def test_open_jtalk_says_exactly_the_yomi_of_every_phrase() -> None:
    # fed as hiragana, Open JTalk would read いまはた as イマワタ and たつた as タッタ
    wrong = [(c.key, ph, spoken_kana(ph)) for c in VERSES for ph in c.yomi.split()
             if spoken_kana(ph) != katakana(ph)]
    assert wrong == []


def test_calls_and_the_prelude_render() -> None:
    m = MatchConfig()
    clips = [call_clip("memorise_call", m.memorise_call), call_clip("end_call", m.end_call),
             call_clip("prelude_intro", m.prelude.intro), prelude_clip(m, Verse.KAMI),
             prelude_clip(m, Verse.SHIMO)]
    voice = default_voice()
    for clip in clips:
        x = voice.render(clip)
        assert loudness_lufs(x, RATE) == pytest.approx(TARGET, abs=1.0), clip.key


def test_other_rates_are_resampled(rendered: dict[str, Pcm]) -> None:
    clip = VERSES[0]
    at_48k = rendered[clip.key]
    for rate in (44100, 22050):
        x = default_voice(rate).render(clip)
        assert x.size == pytest.approx(at_48k.size * rate / RATE, rel=0.01)
        assert loudness_lufs(x, rate) == pytest.approx(TARGET, abs=1.0)
        # same speech: the resampled 48 kHz render lines up with it
        ref = resample(at_48k, RATE, rate)
        n = min(ref.size, x.size)
        assert np.corrcoef(ref[:n], x[:n])[0, 1] > 0.9


def test_speed_scales_every_verse_linearly(rendered: dict[str, Pcm]) -> None:
    slow = OpenJTalkVoice(RATE, speed=0.8)
    fast = OpenJTalkVoice(RATE, speed=1.25)
    for clip in (VERSES[0], VERSES[57], VERSES[123], VERSES[199]):
        base = rendered[clip.key].size
        assert slow.render(clip).size / base == pytest.approx(1.25, rel=0.02), clip.key
        assert fast.render(clip).size / base == pytest.approx(0.8, rel=0.02), clip.key


def test_speed_pitch_and_pause_change_the_sound() -> None:
    clip = VERSES[0]
    base = default_voice().render(clip)
    longer = OpenJTalkVoice(RATE, phrase_pause_s=CFG.phrase_pause_s + 0.5).render(clip)
    assert (longer.size - base.size) / RATE == pytest.approx(2 * 0.5, abs=0.02)  # 3 phrases
    higher = OpenJTalkVoice(RATE, pitch=4.0)
    assert higher.params["pitch"] == 4.0 and higher.params != default_voice().params
    high = higher.render(clip)
    n = min(high.size, base.size)
    assert not np.allclose(high[:n], base[:n], atol=0.05)


def test_threads_render_the_same_as_one_thread(rendered: dict[str, Pcm]) -> None:
    voice = default_voice()
    clip = VERSES[41]
    out: list[Pcm] = []
    threads = [threading.Thread(target=lambda: out.append(voice.render(clip))) for _ in range(2)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    for x in out:
        np.testing.assert_array_equal(x, rendered[clip.key])


def test_kanji_and_empty_yomi_are_refused() -> None:
    voice = default_voice()
    with pytest.raises(VoiceError, match="write the yomi in kana"):
        voice.render(verse(1, yomi="秋の田の"))
    with pytest.raises(VoiceError, match="empty yomi"):
        voice.render(Clip(verse(1).kind, "", "", poem=1, verse=Verse.KAMI))


def test_the_estimate_voice_keeps_open_jtalks_timing(rendered: dict[str, Pcm]) -> None:
    # dry runs (engine: estimate) should last as long as the real reading
    estimate = EstimateVoice(RATE, CFG.speed, CFG.phrase_pause_s)
    real = sum(x.size for x in rendered.values())
    estimated = sum(estimate.render(c).size for c in VERSES)
    assert estimated == pytest.approx(real, rel=0.03)
