"""The file sink: the shared schedule rendered offline, sample by sample."""

import asyncio
import wave

import numpy as np
import pytest

from audio.errors import AudioError
from audio.output.events import ClipDone, SinkEvent, Stopped, fade_ramp
from audio.output.filesink import FileSink, to_int16
from reader.clock import ManualClock

RATE = 48000
FADE = 240  # 5 ms at 48 kHz


def noise(n: int, seed: int = 0) -> np.ndarray:
    """A clip whose every sample is distinct from silence and from other clips."""
    rng = np.random.default_rng(seed)
    x = rng.uniform(0.05, 0.45, n) * rng.choice([-1, 1], n)
    return x.astype(np.float32)


def make(clock_s: float = 0.0) -> tuple[FileSink, ManualClock, list[SinkEvent]]:
    clock = ManualClock(clock_s)
    sink = FileSink(RATE, clock)
    events: list[SinkEvent] = []
    sink.set_listener(events.append)
    return sink, clock, events


def at(frame: int) -> float:
    return frame / RATE


def test_clip_sounds_at_its_exact_frame_and_nowhere_else():
    sink, clock, events = make()
    clip = noise(1000)
    sink.play(clip, 4321, 0, tag=7)
    clock.set(at(10_000))
    out = sink.pcm()
    assert out.shape == (10_000,)
    np.testing.assert_array_equal(out[4321:5321], clip)
    assert not out[:4321].any() and not out[5321:].any()
    assert events == [ClipDone(7, 5321)]


def test_offset_plays_from_that_sample_of_the_clip():
    sink, clock, events = make()
    clip = noise(1000)
    sink.play(clip, 500, 300, tag=1)  # clip frame 300 sounds at output frame 500
    clock.set(at(3000))
    out = sink.pcm()
    np.testing.assert_array_equal(out[500:1200], clip[300:])
    assert not out[:500].any() and not out[1200:].any()
    assert events == [ClipDone(1, 1200)]


def test_overlapping_clips_are_mixed():
    sink, clock, _ = make()
    a, b = noise(1000, 1), noise(1000, 2)
    sink.play(a, 0, 0, 1)
    sink.play(b, 600, 0, 2)
    clock.set(at(2000))
    out = sink.pcm()
    np.testing.assert_array_equal(out[:600], a[:600])
    np.testing.assert_array_equal(out[600:1000], a[600:] + b[:400])
    np.testing.assert_array_equal(out[1000:1600], b[400:])


def test_a_late_clip_is_cut_at_the_head_and_counted():
    sink, clock, events = make(at(2000))  # frames before 2000 are already "played"
    clip = noise(1000)
    sink.play(clip, 1500, 0, tag=3)
    clock.set(at(4000))
    out = sink.pcm()
    assert not out[:2000].any()
    np.testing.assert_array_equal(out[2000:2500], clip[500:])  # the right sample, not the first
    assert sink.stats().late_clips == 1
    assert sink.stats().late_frames == 500
    assert events == [ClipDone(3, 2500)]


def test_a_clip_wholly_in_the_past_is_done_at_once():
    sink, _, events = make(at(5000))
    sink.play(noise(1000), 1000, 0, tag=4)
    assert events == [ClipDone(4, 2000)]
    assert sink.stats().late_frames == 1000
    assert not sink.pcm().any()


def test_stop_fades_over_fade_ms_then_silence():
    sink, clock, events = make()
    clip = np.full(RATE, 0.5, dtype=np.float32)
    sink.play(clip, 0, 0, tag=1)
    clock.set(at(1000))
    sink.stop(3000)
    clock.set(at(10_000))
    out = sink.pcm()
    np.testing.assert_array_equal(out[:3000], clip[:3000])
    np.testing.assert_array_equal(out[3000 : 3000 + FADE], 0.5 * fade_ramp(FADE))
    assert np.all(np.diff(out[3000 : 3000 + FADE]) < 0) and out[3000 + FADE - 1] > 0
    assert not out[3000 + FADE :].any()
    assert events == [Stopped(3000 + FADE)]  # the cancelled clip is never "done"


def test_a_stop_in_the_past_fades_from_now():
    sink, clock, events = make()
    sink.play(np.full(RATE, 0.5, dtype=np.float32), 0, 0, tag=1)
    clock.set(at(5000))
    sink.stop(3000)  # the runtime woke late: frames up to 5000 are gone already
    clock.set(at(10_000))
    out = sink.pcm()
    assert np.all(out[:5000] == 0.5)
    np.testing.assert_array_equal(out[5000 : 5000 + FADE], 0.5 * fade_ramp(FADE))
    assert not out[5000 + FADE :].any()
    assert events == [Stopped(5000 + FADE)]


def test_stop_cancels_the_schedule_but_not_later_plays():
    sink, clock, events = make()
    before = noise(1000, 1)  # ends before the stop frame: plays out
    cut = noise(4000, 2)  # sounding at the stop: fades
    future = noise(1000, 3)  # scheduled after the stop frame: never heard
    sink.play(before, 0, 0, 1)
    sink.play(cut, 1000, 0, 2)
    sink.play(future, 8000, 0, 3)
    sink.stop(2000)
    after = noise(500, 4)  # played after the stop: unaffected, even inside the fade
    sink.play(after, 2100, 0, 4)
    clock.set(at(12_000))
    out = sink.pcm()
    expected = np.zeros(12_000, dtype=np.float32)
    expected[:1000] += before
    expected[1000:2000] += cut[:1000]
    expected[2000 : 2000 + FADE] += cut[1000 : 1000 + FADE] * fade_ramp(FADE)
    expected[2100:2600] += after
    np.testing.assert_array_equal(out, expected)
    assert sorted(events, key=str) == sorted(
        [ClipDone(1, 1000), Stopped(2000 + FADE), ClipDone(4, 2600)], key=str)


def test_stop_with_nothing_playing_reports_at_once_and_repeats_harmlessly():
    sink, _, events = make(at(100))
    sink.stop(100)
    sink.stop(100)
    assert events == [Stopped(100), Stopped(100)]
    assert not sink.pcm().any()


def test_an_earlier_stop_overrides_a_later_one():
    sink, clock, events = make()
    sink.play(np.full(RATE, 0.5, dtype=np.float32), 0, 0, tag=1)
    sink.stop(9000)  # planned for later...
    sink.stop(4000)  # ...then at once: the earlier one wins
    clock.set(at(20_000))
    out = sink.pcm()
    assert not out[4000 + FADE :].any()
    assert sorted(e.at_frame for e in events if isinstance(e, Stopped)) == [4000 + FADE] * 2


def test_a_stop_near_the_end_of_a_clip_ends_with_the_clip():
    sink, clock, events = make()
    clip = noise(1000)
    sink.play(clip, 0, 0, tag=1)
    sink.stop(900)  # the fade would outlast the clip
    clock.set(at(3000))
    out = sink.pcm()
    np.testing.assert_array_equal(out[900:1000], clip[900:] * fade_ramp(FADE)[:100])
    assert events == [Stopped(1000)]


def test_zero_fade_is_a_hard_cut():
    sink = FileSink(RATE, ManualClock(), fade_ms=0)
    sink.play(np.full(1000, 0.5, dtype=np.float32), 0, 0, 1)
    sink.stop(400)
    assert sink.finish() == 400  # the end of the audio
    out = sink.pcm()
    assert np.all(out[:400] == 0.5) and not out[400:].any()


def test_rendering_does_not_depend_on_how_the_clock_moves():
    """The device renders in blocks of 256, the file sink in whatever steps the runtime's
    clock takes: the samples must be the same."""
    def render(steps: list[int]) -> np.ndarray:
        sink, clock, _ = make()
        sink.play(noise(3000, 1), 100, 0, 1)
        sink.play(noise(3000, 2), 1700, 50, 2)
        sink.stop(2500)
        sink.play(noise(2000, 3), 2600, 0, 3)
        frame = 0
        for s in steps:
            frame += s
            clock.set(at(frame))
        clock.set(at(8000))
        return sink.pcm()

    one = render([8000])
    assert np.array_equal(one, render([256] * 31))
    assert np.array_equal(one, render([1, 7, 300, 1999, 13, 2000, 77]))


def test_write_wav_is_the_rendering_in_16_bit(tmp_path):
    sink, clock, _ = make()
    clip = noise(RATE // 2)
    sink.play(clip, 1000, 0, 1)
    sink.play(np.full(100, 0.9, dtype=np.float32), 2000, 0, 2)  # 0.9 + noise: clipped
    clock.set(at(500))
    path = sink.write(tmp_path / "match.wav")
    with wave.open(str(path), "rb") as w:
        assert (w.getnchannels(), w.getsampwidth(), w.getframerate()) == (1, 2, RATE)
        data = np.frombuffer(w.readframes(w.getnframes()), dtype="<i2")
    expected = np.zeros(1000 + RATE // 2, dtype=np.float32)
    expected[1000:] += clip
    expected[2000:2100] += 0.9
    assert data.shape == expected.shape  # written up to the end of the last clip
    np.testing.assert_array_equal(data, to_int16(expected))
    assert data.max() <= 32767 and data.min() >= -32768


def test_write_keeps_what_the_buffer_grew_for_while_finishing(tmp_path):
    """A clip scheduled past the buffer's first size (8 s) and still ahead of the clock when
    the file is written: `write` renders it then, and the file must hold it (it once sliced
    the buffer it had before finishing, so `render --no-close` lost its last card)."""
    sink, clock, _ = make()
    clip = noise(RATE)
    start = 9 * RATE
    sink.play(clip, start, 0, 1)
    clock.set(at(RATE))
    path = sink.write(tmp_path / "late.wav")
    with wave.open(str(path), "rb") as w:
        data = np.frombuffer(w.readframes(w.getnframes()), dtype="<i2")
    assert data.shape == (start + RATE,)
    np.testing.assert_array_equal(data[start:], to_int16(clip))
    assert not data[:start].any()


def test_write_flac_holds_the_same_samples(tmp_path):
    from audio.codec import decode

    sink, _, _ = make()
    sink.play(noise(RATE // 4), 100, 0, 1)
    sink.play(np.full(50, 0.9, dtype=np.float32), 200, 0, 2)  # over full scale: clipped
    path = sink.write(tmp_path / "match.flac")
    back = decode(path, RATE)  # lossless: the very 16-bit samples
    np.testing.assert_array_equal(to_int16(back), to_int16(sink.pcm()))


def test_to_int16_rounds_like_the_sound_server():
    x = np.array([0.0, 1.5 / 32768, 2.5 / 32768, -1.5 / 32768, 0.5, 1.0, -1.0, 2.0],
                 dtype=np.float32)
    assert to_int16(x).tolist() == [0, 2, 2, -2, 16384, 32767, -32768, 32767]


def test_unknown_format_is_refused(tmp_path):
    sink, _, _ = make()
    with pytest.raises(AudioError, match="unknown format"):
        sink.write(tmp_path / "x.aiff")


def test_bad_pcm_is_refused():
    sink, _, _ = make()
    with pytest.raises(ValueError, match="mono"):
        sink.play(np.zeros((10, 2), dtype=np.float32), 0, 0, 1)
    with pytest.raises(ValueError, match="offset"):
        sink.play(np.zeros(10, dtype=np.float32), 0, 11, 1)


def test_other_dtypes_are_converted_and_the_callers_array_is_untouched():
    sink, clock, _ = make()
    clip = np.linspace(-0.5, 0.5, 100)  # float64
    sink.play(clip, 0, 0, 1)
    clip[:] = 0  # the sink converted it, so this does not reach the schedule
    clock.set(at(200))
    assert sink.pcm()[:100].any()


def test_closed_sink_refuses_play():
    sink, _, _ = make()
    sink.close()
    with pytest.raises(AudioError, match="closed"):
        sink.play(noise(10), 0, 0, 1)


async def test_with_a_loop_events_arrive_on_the_loop():
    sink = FileSink(RATE)
    got: asyncio.Queue[SinkEvent] = asyncio.Queue()
    sink.set_listener(got.put_nowait, asyncio.get_running_loop())
    sink.play(noise(100), 0, 0, 5)
    assert isinstance(sink.clock, ManualClock)
    sink.clock.set(at(1000))
    sink.sync()
    assert got.empty()  # not called directly...
    assert await asyncio.wait_for(got.get(), 1) == ClipDone(5, 100)  # ...but via the loop

