"""How exact the gaps are on a real device, and how the device clock runs against the wall.

Plays a long schedule through a DeviceSink into a null sink of its own on the audio harness's
PulseAudio: ~70 clips of 0.3-0.9 s with gaps of 0.15-0.6 s (a match at short timings, squeezed),
each clip sent only when the one before it has started, as the runtime does (the engine sends
one clip ahead). The monitor is recorded by a separate process; onsets and ends are found in the
capture's samples, so the gap error needs no clock mapping. Meanwhile (time.monotonic(),
sink.now()) pairs are sampled; the slope of their fit is the device clock's drift.

    scripts/audio-harness.sh start && . /tmp/yomite-audio/env.sh
    .venv/bin/python bench/gap_error.py [--clips 70] [--blocksize 256]

Prints figures; never passes or fails on them.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import random
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # run as a script from anywhere

from audio.output.device import DeviceSink
from audio.output.events import ClipDone, SinkEvent
from audio.output.filesink import FileSink, to_int16
from tests.audio_capture import OwnNullSink, Recorder, dropouts

RATE = 48000


def burst(frames: int, seed: int) -> np.ndarray:
    """Never exactly zero, so the capture shows every sample of it."""
    rng = np.random.default_rng(seed)
    return (rng.uniform(0.05, 0.4, frames) * rng.choice([-1, 1], frames)).astype(np.float32)


async def run(clips: int, blocksize: int, seed: int, outdir: str) -> None:
    rng = random.Random(seed)
    pcm = [burst(round(rng.uniform(0.3, 0.9) * RATE), k) for k in range(clips)]
    gaps = [round(rng.uniform(0.15, 0.6) * RATE) for _ in range(clips - 1)]
    events: asyncio.Queue[SinkEvent] = asyncio.Queue()
    clock: list[tuple[float, float]] = []
    with OwnNullSink() as own, Recorder(os.path.join(outdir, "gaps.wav"), own.monitor) as rec:
        sink = DeviceSink(os.environ.get("YOMITE_TEST_DEVICE", "pulse"), RATE,
                          blocksize=blocksize)
        sink.set_listener(events.put_nowait, asyncio.get_running_loop())

        async def sample_clock() -> None:
            while True:
                clock.append((time.monotonic(), sink.now()))
                await asyncio.sleep(0.05)

        sampler = asyncio.create_task(sample_clock())
        try:
            plan = [sink.position() + RATE // 5]
            for k in range(clips - 1):
                plan.append(plan[-1] + len(pcm[k]) + gaps[k])
            sink.play(pcm[0], plan[0], 0, 0)
            sink.play(pcm[1], plan[1], 0, 1)
            done = 0
            while done < clips:
                ev = await asyncio.wait_for(events.get(), 5)
                if isinstance(ev, ClipDone):
                    done += 1
                    if done + 1 < clips:  # clip `done` is playing: send the one after it
                        sink.play(pcm[done + 1], plan[done + 1], 0, done + 1)
            await asyncio.sleep(sink.latency + 0.1)
        finally:
            sampler.cancel()
            sink.close()
    stats = sink.stats()
    cap = rec.capture
    assert cap is not None

    ref = FileSink(RATE)
    for k in range(clips):
        ref.play(pcm[k], plan[k], 0, k)
    ref.finish()
    expected = to_int16(ref.pcm())[plan[0] :]
    start = int(np.flatnonzero(cap.raw)[0])
    try:
        inserted = dropouts(cap.raw[start:], expected)
        exact = f"bit-exact except {inserted} frames of inserted silence (underruns)" \
            if inserted else "bit-exact"
    except AssertionError as e:
        exact = f"NOT the plan: {e}"

    segs = cap.segments(threshold=0.0, merge=1)
    print(f"# {clips} clips, block {blocksize}, stream latency {sink.latency * 1000:.2f} ms, "
          f"{(plan[-1] + len(pcm[-1]) - plan[0]) / RATE:.1f} s; capture {exact}; "
          f"underflows {stats.underflows}, late clips {stats.late_clips}")
    if len(segs) != clips:
        print(f"found {len(segs)} clips in the capture, expected {clips}: no gap figures")
    else:
        on = np.array([s for s, _ in segs])
        off = np.array([e for _, e in segs])
        gap_err = (on[1:] - off[:-1]) - np.array(gaps)
        len_err = (off - on) - np.array([len(p) for p in pcm])
        onset_err = (on - on[0]) - (np.array(plan) - plan[0])
        for name, v in (("gap error", gap_err), ("clip length error", len_err),
                        ("onset error vs plan", onset_err)):
            print(f"{name:20s} frames: min {v.min():+d}  p50 {int(np.median(v)):+d}  "
                  f"max {v.max():+d}  (|max| {np.abs(v).max() / RATE * 1000:.3f} ms)")
    t = np.array(clock)
    if len(t) > 10:
        fit = np.polyfit(t[:, 0], t[:, 1], 1)
        resid_ms = np.percentile(np.abs(t[:, 1] - np.polyval(fit, t[:, 0])), 99) * 1000
        # the capture's timestamps measure the server's clock independently (time per frame)
        print(f"device clock (sink.now) runs {(fit[0] - 1) * 1e6:+.1f} ppm against "
              f"time.monotonic over {t[-1, 0] - t[0, 0]:.1f} s (fit residual p99 "
              f"{resid_ms:.2f} ms: it moves in whole blocks); the server's, from the "
              f"capture: {cap.rate_ppm:+.1f} ppm")


async def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0] if __doc__ else None)
    ap.add_argument("--clips", type=int, default=70)
    ap.add_argument("--blocksize", type=int, default=256)
    ap.add_argument("--seed", type=int, default=1)
    a = ap.parse_args()
    if not os.environ.get("PULSE_SERVER"):
        raise SystemExit("PULSE_SERVER is not set: run `scripts/audio-harness.sh start && "
                         ". /tmp/yomite-audio/env.sh` first (or `make bench`)")
    with tempfile.TemporaryDirectory(prefix="yomite-bench-") as outdir:
        await run(a.clips, a.blocksize, a.seed, outdir)


if __name__ == "__main__":
    asyncio.run(main())
