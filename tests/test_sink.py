"""The schedule shared by every sink (audio.output.mixer), checked against a plain per-sample model,
and the null sink's bookkeeping."""

import asyncio
import time

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st

from audio.output.events import ClipDone, DeviceFault, SinkEvent, Stopped, fade_frames, fade_ramp
from audio.output.mixer import Mixer
from audio.output.sink import NullSink
from reader.clock import ManualClock

RATE = 48000


def test_fade_is_fade_ms_long_and_falls_from_1_to_0():
    n = fade_frames(RATE, 5.0)
    assert n == 240
    r = fade_ramp(n)
    assert r.shape == (240,) and r.dtype == np.float32
    assert 0.999 < r[0] < 1 and 0 < r[-1] < 0.001
    assert np.all(np.diff(r) < 0)


# ---------------------------------------------------------------------- mixer vs a model
CLIPS = [np.random.default_rng(i).uniform(-0.4, 0.4, n).astype(np.float32)
         for i, n in enumerate((50, 300, 1000, 1))]

ops = st.lists(
    st.one_of(
        st.tuples(st.just("advance"), st.integers(1, 400)),
        st.tuples(st.just("play"), st.integers(0, len(CLIPS) - 1), st.integers(0, 2000),
                  st.floats(0, 1)),
        st.tuples(st.just("stop"), st.integers(0, 2000)),
    ),
    max_size=25,
)


def model(program: list[tuple], fade: int, total: int) -> tuple[np.ndarray, set, int]:
    """What the schedule must sound like, one sample at a time."""
    ramp = fade_ramp(fade).astype(np.float64)
    clips: list[dict] = []
    pos = late = 0
    for tag, op in enumerate(program):
        if op[0] == "advance":
            pos += op[1]
        elif op[0] == "play":
            pcm = CLIPS[op[1]]
            offset = int(op[3] * len(pcm))
            base = op[2] - offset
            start = max(op[2], pos)
            late += max(0, min(pos, base + len(pcm)) - op[2])
            clips.append({"pcm": pcm, "base": base, "start": start, "end": base + len(pcm),
                          "cut": None, "tag": tag, "gone": False})
        else:
            c = max(op[1], pos)
            for k in clips:
                if k["gone"] or k["end"] <= max(k["start"], pos):
                    continue  # already over
                if k["start"] >= c:
                    k["gone"] = True
                elif k["end"] > c:
                    k["cut"] = c if k["cut"] is None else min(k["cut"], c)
    out = np.zeros(total)
    done = set()
    for k in clips:
        if k["gone"]:
            continue
        if k["cut"] is None:
            done.add(ClipDone(k["tag"], k["end"]))
        for f in range(k["start"], k["end"]):
            g = 1.0
            if k["cut"] is not None and f >= k["cut"]:
                if f - k["cut"] >= fade:
                    break
                g = ramp[f - k["cut"]]
            out[f] += k["pcm"][f - k["base"]] * g
    return out, done, late


@settings(max_examples=300, deadline=None)
@given(program=ops, fade=st.sampled_from([0, 1, 7, 240]))
def test_mixer_matches_a_per_sample_model(program, fade):
    events: list[SinkEvent] = []
    m = Mixer(RATE, fade_ms=fade * 1000 / RATE, emit=events.append)
    assert m.fade == fade
    total = 5000
    out = np.zeros(total, dtype=np.float32)
    for tag, op in enumerate(program):
        if op[0] == "advance":
            m.render(out[m.pos : m.pos + op[1]])
        elif op[0] == "play":
            pcm = CLIPS[op[1]]
            m.play(pcm, op[2], int(op[3] * len(pcm)), tag)
        else:
            m.stop(op[1])
    m.render(out[m.pos :])
    expected, done, late = model(program, fade, total)
    np.testing.assert_allclose(out, expected, atol=1e-6)
    assert {e for e in events if isinstance(e, ClipDone)} == done
    assert m.late_frames == late
    stops = sum(1 for op in program if op[0] == "stop")
    assert sum(isinstance(e, Stopped) for e in events) == stops
    assert m.horizon() == m.pos  # everything has ended by the end of the render


def test_full_schedule_drops_and_counts():
    m = Mixer(RATE, capacity=2)
    clip = np.ones(10, dtype=np.float32)
    for k in range(3):
        m.play(clip, 100, 0, k)
    assert m.dropped_clips == 1


# ---------------------------------------------------------------------- the null sink
def test_null_sink_reports_completions_at_the_clock():
    clock = ManualClock()
    sink = NullSink(RATE, clock)
    events: list[SinkEvent] = []
    sink.set_listener(events.append)
    sink.play(np.zeros(1000, dtype=np.float32), 500, 0, 1)
    sink.play(np.zeros(1000, dtype=np.float32), 2000, 100, 2)
    clock.set(1499 / RATE)
    assert sink.position() == 1499 and events == []
    clock.set(1500 / RATE)
    sink.sync()
    assert events == [ClipDone(1, 1500)]
    clock.set(2900 / RATE)
    assert sink.now() == 2900 / RATE
    assert events == [ClipDone(1, 1500), ClipDone(2, 2900)]


def test_null_sink_stop_and_late_head_cut():
    clock = ManualClock(1000 / RATE)
    sink = NullSink(RATE, clock)
    events: list[SinkEvent] = []
    sink.set_listener(events.append)
    sink.play(np.zeros(5000, dtype=np.float32), 400, 0, 1)  # 600 frames late
    assert sink.stats().late_frames == 600 and sink.stats().late_clips == 1
    sink.play(np.zeros(100, dtype=np.float32), 9000, 0, 2)  # cancelled by the stop
    sink.stop(2000)
    clock.set(3000 / RATE)
    sink.sync()
    assert events == [Stopped(2240)]


async def test_null_sink_on_the_wall_clock_reports_on_time_by_itself():
    sink = NullSink(RATE)  # monotonic wall time
    got: asyncio.Queue[SinkEvent] = asyncio.Queue()
    sink.set_listener(got.put_nowait, asyncio.get_running_loop())
    t0 = time.monotonic()
    start = sink.position()
    sink.play(np.zeros(RATE // 20, dtype=np.float32), start, 0, 9)  # 50 ms
    ev = await asyncio.wait_for(got.get(), 30)  # nobody polls: the sink's own timer fires
    assert ev == ClipDone(9, start + RATE // 20)
    assert time.monotonic() - t0 >= 0.045
    sink.close()


def test_events_are_frozen_values():
    assert ClipDone(1, 2) == ClipDone(1, 2)
    assert hash(Stopped(3)) == hash(Stopped(3))
    assert DeviceFault("gone").reason == "gone"


def test_a_flush_ends_the_cut_clips_at_once_and_keeps_a_later_stop():
    """After the output dropped its queued audio (DeviceSink's flush), a clip already cut ends
    at `pos` without its fade (the fade was in what was dropped) and its stop reports silence
    there; a clip sent after the stop plays, and a stop planned further ahead still fades."""
    events: list[object] = []
    m = Mixer(RATE, fade_ms=5.0, emit=events.append)
    one = np.full(RATE, 0.5, dtype=np.float32)
    m.play(one, 0, 0, 1)
    out = np.zeros(256, dtype=np.float32)
    m.render(out)
    m.stop(256)  # clip 1's fade would sound from frame 256
    m.play(one, 256, 0, 2)  # sent after the stop (a verse read again)
    m.drop_queued()
    assert events == [Stopped(256)]
    m.render(out)
    assert np.all(out == 0.5)  # clip 2 alone: clip 1 is gone, not fading under it
    m.stop(2000)
    m.drop_queued()  # a stop ahead of the clock: nothing ends early
    assert events == [Stopped(256)]
    while m.pos < 2000 + m.fade:
        m.render(out)
    assert events[-1] == Stopped(2000 + m.fade) and out[-1] == 0.0
