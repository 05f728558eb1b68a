"""How long a stop takes to be heard: DeviceSink.stop() -> silence in what the server played.

For each block size, plays a tone through a DeviceSink into the PulseAudio null sink of the
audio harness, calls stop() at random moments, and finds in the monitor recording where each
tone went silent. The time of that frame is bracketed by the recording's timestamps
[t_line, t_arrival] (see tests/audio_capture.py); the figures are both edges, minus the
time.monotonic() of the stop() call. Next to them: the physical floor of a cooperative stop,
one block (waiting for the next callback, worst case) + stream.latency (already queued) + the
fade, and the frame check: the silent frame the sink reported (Stopped.at_frame) against the
one found in the recording.

    scripts/audio-harness.sh start && . /tmp/yomite-audio/env.sh
    .venv/bin/python bench/stop_latency.py [--stops 50] [--blocksizes 128,256,512]

Prints figures; never passes or fails on them.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import itertools
import os
import random
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # run as a script from anywhere

from audio.output.device import DeviceSink
from audio.output.events import SinkEvent, Stopped
from tests.audio_capture import OwnNullSink, Recorder

RATE = 48000


def tone(frames: int, hz: float = 997.0, amp: float = 0.4) -> np.ndarray:
    k = np.arange(frames)
    return (amp * np.cos(2 * np.pi * hz * k / RATE)).astype(np.float32)


def pct(v: list[float], q: float) -> float:
    return float(np.percentile(np.asarray(v), q))


async def run_blocksize(bs: int, latency: str | float, stops: int, fade_ms: float,
                        rng: random.Random, outdir: str, flush: bool = False
                        ) -> dict[str, float]:
    loop = asyncio.get_running_loop()
    events: asyncio.Queue[SinkEvent] = asyncio.Queue()
    clip = tone(RATE * 2)
    plan: list[tuple[int, float, int]] = []  # (clip start frame, stop call time, silent frame)
    with OwnNullSink() as own, Recorder(os.path.join(outdir, f"stop_bs{bs}.wav"),
                                        own.monitor) as rec:
        sink = DeviceSink(os.environ.get("YOMITE_TEST_DEVICE", "pulse"), RATE, blocksize=bs,
                          latency=latency, fade_ms=fade_ms, flush_on_stop=flush)
        sink.set_listener(events.put_nowait, loop)
        try:
            await asyncio.sleep(0.1)
            for _ in range(stops):
                at = sink.position() + RATE // 20
                sink.play(clip, at, 0, 0)
                await asyncio.sleep(0.05 + rng.uniform(0.15, 0.35))
                t_stop = time.monotonic()
                sink.stop(sink.position())
                while not isinstance(ev := await asyncio.wait_for(events.get(), 2), Stopped):
                    pass
                plan.append((at, t_stop, ev.at_frame))
                await asyncio.sleep(0.06)
            await asyncio.sleep(sink.latency + 0.05)
        finally:
            sink.close()
    cap = rec.capture
    assert cap is not None
    segs = cap.segments(threshold=0.0, merge=240)  # silence in the null sink is exactly 0
    if len(segs) != stops:
        raise SystemExit(f"bs {bs}: found {len(segs)} tones in the capture, expected {stops}: "
                         f"{[(s, e - s) for s, e in segs]}")
    offset = segs[0][0] - plan[0][0]  # capture index of output frame 0
    lower, upper, react, frame_err, start_err = [], [], [], [], []
    fade = round(fade_ms * RATE / 1000)
    for (s, e), (at, t_stop, silent) in zip(segs, plan, strict=True):
        lower.append((cap.t_line(e) - t_stop) * 1000)
        upper.append((cap.t_arrival(e) - t_stop) * 1000)
        react.append((cap.t_arrival(silent - fade + offset) - t_stop) * 1000)
        # e is the first silent sample; the fade's last few round to 0 already
        frame_err.append(e - (silent + offset))
        start_err.append(s - (at + offset))
    block_ms = bs / RATE * 1000
    return {
        "bs": bs, "block_ms": block_ms, "latency_ms": sink.latency * 1000,
        "floor_ms": block_ms + sink.latency * 1000 + fade_ms,
        "lo50": pct(lower, 50), "lo99": pct(lower, 99), "up50": pct(upper, 50),
        "up99": pct(upper, 99), "upmax": max(upper),
        "react50": pct(react, 50), "react99": pct(react, 99),
        "ferr_min": min(frame_err), "ferr_max": max(frame_err),
        # how far each tone lands from where the one before says it should (a flush's pad)
        "steps": [int(b - a) for a, b in itertools.pairwise(start_err)],
        "underflows": sink.stats().underflows, "flushes": sink.flushes, "jitter_ms": cap.jitter_ms,
    }


async def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0] if __doc__ else None)
    ap.add_argument("--stops", type=int, default=50)
    ap.add_argument("--blocksizes", default="128,256,512")
    ap.add_argument("--fade-ms", type=float, default=5.0)
    ap.add_argument("--latency", default="low", help="low | high | seconds")
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--flush", action="store_true",
                    help="flush_on_stop: a stop drops the queued audio (abort and start)")
    a = ap.parse_args()
    if not os.environ.get("PULSE_SERVER"):
        raise SystemExit("PULSE_SERVER is not set: run `scripts/audio-harness.sh start && "
                         ". /tmp/yomite-audio/env.sh` first (or `make bench`)")
    rng = random.Random(a.seed)
    latency: str | float = a.latency
    with contextlib.suppress(ValueError):
        latency = float(a.latency)
    print(f"# stop() -> silence in the capture, {a.stops} stops per block size, fade "
          f"{a.fade_ms} ms, latency={latency!r}{', flush on stop' if a.flush else ''}; ms unless "
          "marked; [lower, upper] = capture bracket; fade-start = upper edge at the fade's "
          "first frame")
    print("  bs  block  stream.lat  floor(block+lat+fade) |  p50 [lo, up]     p99 [lo, up]"
          "      max up | fade-start p50 p99 | silent-frame err (frames) | underflows | "
          "flushes | tone placement change per stop (frames)")
    with tempfile.TemporaryDirectory(prefix="yomite-bench-") as outdir:
        for bs in (int(b) for b in a.blocksizes.split(",")):
            r = await run_blocksize(bs, latency, a.stops, a.fade_ms, rng, outdir, a.flush)
            print(f"{r['bs']:4d}  {r['block_ms']:5.2f}  {r['latency_ms']:9.2f}  "
                  f"{r['floor_ms']:20.2f} | [{r['lo50']:5.1f}, {r['up50']:5.1f}]  "
                  f"[{r['lo99']:5.1f}, {r['up99']:5.1f}]  {r['upmax']:7.1f} | "
                  f"{r['react50']:8.1f} {r['react99']:5.1f} | "
                  f"{r['ferr_min']:+4.0f} .. {r['ferr_max']:+4.0f}                | "
                  f"{r['underflows']} | {r['flushes']} | {min(r['steps'])} .. "
                  f"{max(r['steps'])}", flush=True)


if __name__ == "__main__":
    asyncio.run(main())
