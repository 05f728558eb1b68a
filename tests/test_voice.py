"""The Voice contract helpers, the estimate voice, make_voice, and RenderedVoice's caches."""

import dataclasses
import logging
import threading
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from audio.config import VoiceConfig, VoiceEngine
from audio.errors import VoiceError
from audio.voices.factory import make_voice
from audio.voices.voice import MORA_S_AT_SPEED_1, EstimateVoice, Param, RenderedVoice, phrases
from reader.clip import Clip, ClipDurations, ClipKind, EstimatedDurations, Verse

from .voice_fakes import CountingVoice, call, verse


def test_phrases_split_on_any_space_and_refuse_kanji() -> None:
    assert phrases(verse(1, yomi="あきのたの　かりおのいおの とまをあらみ")) == [
        "あきのたの", "かりおのいおの", "とまをあらみ"]
    with pytest.raises(VoiceError, match=r"clip verse:001:kami: yomi .* has '秋田庵'"):
        phrases(verse(1, yomi="秋の田の かりほの庵の"))
    with pytest.raises(VoiceError, match=r"call:end_call:.*empty yomi"):
        phrases(call(yomi=" "))


def test_estimate_voice_is_silence_of_the_estimated_length() -> None:
    v = EstimateVoice(48000, speed=1.25, phrase_pause_s=0.2)
    clip = verse(1, yomi="あきのたの かりおのいおの")
    x = v.render(clip)
    # speed scales speech and pauses alike, as the real voices' time-stretch does
    expected = EstimatedDurations(48000, MORA_S_AT_SPEED_1 / 1.25, 0.2 / 1.25).frames(clip)
    assert x.size == expected and x.dtype == np.float32 and not x.any()


def test_memory_cache_renders_once(tmp_path: Path) -> None:
    inner = CountingVoice()
    rv = RenderedVoice(inner, None)
    a, b = rv.pcm(verse(1)), rv.pcm(verse(1))
    assert a is b
    assert inner.total == 1
    assert rv.stats.renders == 1 and rv.stats.memory_hits == 1
    assert rv.frames(verse(1)) == a.size


def test_rendered_voice_serves_the_engine_as_clip_durations() -> None:
    durations: ClipDurations = RenderedVoice(CountingVoice(), None)
    assert durations.frames(call()) > 0


def test_second_voice_instance_hits_the_disk_cache(tmp_path: Path) -> None:
    first = CountingVoice(params={"speed": 1.0})
    x = RenderedVoice(first, tmp_path).pcm(verse(7, Verse.SHIMO))
    files = list(tmp_path.rglob("*.npy"))
    assert len(files) == 1 and files[0].name.startswith("verse-007-shimo-")
    second = CountingVoice(params={"speed": 1.0})
    rv = RenderedVoice(second, tmp_path)
    y = rv.pcm(verse(7, Verse.SHIMO))
    assert second.total == 0 and rv.stats.disk_hits == 1
    np.testing.assert_array_equal(x, y)


@pytest.mark.parametrize("param", [{"speed": 1.1}, {"pitch": 2.0}, {"phrase_pause_s": 0.2},
                                   {"loudness_lufs": -23.0}, {"version": "2"}])
def test_any_parameter_change_misses(tmp_path: Path, param: dict[str, float | str]) -> None:
    base: dict[str, Param] = {"speed": 1.0, "pitch": 0.0, "phrase_pause_s": 0.15,
                              "loudness_lufs": -20.0, "version": "1"}
    RenderedVoice(CountingVoice(params=base), tmp_path).pcm(verse(1))
    changed = CountingVoice(params={**base, **param})
    RenderedVoice(changed, tmp_path).pcm(verse(1))
    assert changed.total == 1


def test_rate_change_misses(tmp_path: Path) -> None:
    RenderedVoice(CountingVoice(rate=16000), tmp_path).pcm(verse(1))
    other = CountingVoice(rate=22050)
    RenderedVoice(other, tmp_path).pcm(verse(1))
    assert other.total == 1


@pytest.mark.parametrize("field", ["yomi", "text", "name", "poem", "verse", "kind"])
def test_every_clip_field_is_in_the_key(field: str) -> None:
    clip = Clip(ClipKind.VERSE, "あきのたの", "秋の田の", name="", poem=1, verse=Verse.KAMI)
    changes: dict[str, Any] = {"yomi": "あきのた", "text": "秋の田", "name": "x", "poem": 2,
               "verse": Verse.SHIMO, "kind": ClipKind.PRELUDE}
    rv = RenderedVoice(CountingVoice(), None)
    assert rv.cache_key(clip) != rv.cache_key(dataclasses.replace(clip, **{field: changes[field]}))


def test_a_corrupt_cache_file_is_rendered_again(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    RenderedVoice(CountingVoice(), tmp_path).pcm(verse(3))
    (path,) = tmp_path.rglob("*.npy")
    path.write_bytes(b"not numpy")
    inner = CountingVoice()
    with caplog.at_level(logging.WARNING, logger="audio.voices.voice"):
        x = RenderedVoice(inner, tmp_path).pcm(verse(3))
    assert inner.total == 1 and x.size > 0
    assert "unreadable" in caplog.text
    assert np.load(path).size == x.size  # rewritten


def test_an_unwritable_cache_does_not_stop_rendering(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    blocker = tmp_path / "cache"
    blocker.write_text("a file where the folder should be")
    with caplog.at_level(logging.WARNING, logger="yomite.cache"):
        x = RenderedVoice(CountingVoice(), blocker).pcm(verse(1))
    assert x.size > 0 and "not writing" in caplog.text


def test_no_cache_dir_writes_nothing(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)
    RenderedVoice(CountingVoice(), None).pcm(verse(1))
    assert list(tmp_path.iterdir()) == []


def test_cached_arrays_are_read_only(tmp_path: Path) -> None:
    rv = RenderedVoice(CountingVoice(), tmp_path)
    with pytest.raises(ValueError, match="read-only"):
        rv.pcm(verse(1))[0] = 1.0
    with pytest.raises(ValueError, match="read-only"):
        RenderedVoice(CountingVoice(), tmp_path).pcm(verse(1))[0] = 1.0  # from disk too


def test_memory_is_bounded_but_frames_are_remembered() -> None:
    inner = CountingVoice()
    rv = RenderedVoice(inner, None, memory_bytes=1)  # room for one clip only
    sizes = [rv.frames(verse(n)) for n in range(1, 6)]
    assert inner.total == 5
    assert [rv.frames(verse(n)) for n in range(1, 6)] == sizes
    assert inner.total == 5  # frames did not need the evicted samples
    rv.pcm(verse(1))
    assert inner.renders[verse(1).key] == 2  # evicted, no disk cache: rendered again


def test_bad_voice_output_is_refused() -> None:
    inner = CountingVoice()
    rv = RenderedVoice(inner, None)
    inner.output = np.zeros(10, dtype=np.float64)
    with pytest.raises(VoiceError, match="not mono float32"):
        rv.pcm(verse(1))
    inner.output = np.array([0.0, 1.5], dtype=np.float32)
    with pytest.raises(VoiceError, match=r"outside \[-1, 1\]"):
        rv.pcm(verse(2))


def test_concurrent_requests_for_one_clip_render_it_once() -> None:
    inner = CountingVoice()
    inner.hold = verse(9).key
    rv = RenderedVoice(inner, None)
    results: list[np.ndarray] = []
    threads = [threading.Thread(target=lambda: results.append(rv.pcm(verse(9))))
               for _ in range(8)]
    for t in threads:
        t.start()
    assert inner.holding.wait(timeout=60)
    inner.release.set()
    for t in threads:
        t.join(timeout=60)
    assert inner.renders[verse(9).key] == 1
    assert len(results) == 8 and all(r is results[0] for r in results)


def test_a_cache_hit_does_not_wait_for_a_render_in_progress() -> None:
    inner = CountingVoice()
    rv = RenderedVoice(inner, None)
    ready = rv.pcm(verse(1))
    inner.hold = verse(2).key
    background = threading.Thread(target=rv.prefetch, args=([verse(2)],))
    background.start()
    assert inner.holding.wait(timeout=60)
    # the background render is stuck until release: a hit must still come straight back
    assert rv.pcm(verse(1)) is ready
    assert rv.frames(verse(1)) == ready.size
    assert background.is_alive()
    inner.release.set()
    background.join(timeout=60)
    assert not background.is_alive()


def test_prefetch_renders_in_order_with_progress_and_can_stop() -> None:
    inner = CountingVoice()
    rv = RenderedVoice(inner, None)
    clips = [verse(n) for n in (5, 3, 8)]
    seen: list[tuple[int, int, str]] = []
    assert rv.prefetch(clips, lambda done, total, c: seen.append((done, total, c.key))) == 3
    assert seen == [(1, 3, clips[0].key), (2, 3, clips[1].key), (3, 3, clips[2].key)]
    assert list(inner.renders) == [c.key for c in clips]
    stop = threading.Event()
    stop.set()
    assert rv.prefetch([verse(10)], stop=stop) == 0
    assert verse(10).key not in inner.renders


def test_make_voice_picks_the_engine(tmp_path: Path) -> None:
    est = make_voice(VoiceConfig(engine=VoiceEngine.ESTIMATE, cache_dir=tmp_path), 48000)
    assert est.name == "estimate" and est.cache_dir is None  # nothing worth caching
    ojt = make_voice(VoiceConfig(cache_dir=tmp_path), 44100)
    assert ojt.name == "openjtalk" and ojt.rate == 44100 and ojt.cache_dir == tmp_path
    assert ojt.params["speed"] == VoiceConfig().speed
    tts = make_voice(VoiceConfig(engine=VoiceEngine.PYTTSX3, cache_dir=tmp_path), 48000)
    assert tts.name == "pyttsx3"
    with pytest.raises(VoiceError, match=r"voice\.pack is not set"):
        make_voice(VoiceConfig(engine=VoiceEngine.PACK), 48000)
