"""The process test_process_sink freezes: it opens a sink (the audio process, or the stream in
this process), plays one clip of noise and reports, so that the test can SIGSTOP this whole
process in the middle of the clip, as a garbage collection or a stalled event loop would.

    python -m tests.freeze_child KIND SECONDS SEED LATENCY_S
prints `PLAYING <monotonic time of the clip's first frame>` once the stream runs, then
`DONE <end frame>` when the sink reports the clip finished; exits 0.
"""

from __future__ import annotations

import asyncio
import os
import sys
import time

from audio.output.device import DeviceSink
from audio.output.events import ClipDone, SinkEvent
from audio.output.process import ProcessSink

from .test_device import RATE, noise


async def main(kind: str, seconds: float, seed: int, latency_s: float) -> None:
    events: asyncio.Queue[SinkEvent] = asyncio.Queue()
    cls = ProcessSink if kind == "audio-process" else DeviceSink
    # a watchdog that outlasts the freeze (it is frozen with the rest of this process)
    sink = cls(os.environ.get("YOMITE_TEST_DEVICE", "pulse"), RATE, latency=latency_s,
              stall_timeout_s=10.0)
    sink.set_listener(events.put_nowait, asyncio.get_running_loop())
    try:
        clip = noise(int(RATE * seconds), seed)
        lead = RATE // 5
        at = sink.position() + lead
        sink.play(clip, at, 0, 1)
        print("PLAYING", time.monotonic() + lead / RATE + sink.latency, flush=True)
        while not isinstance(ev := await events.get(), ClipDone):
            pass
        print("DONE", ev.end_frame - at, flush=True)
        await asyncio.sleep(sink.latency + 0.05)  # closing drops what is queued
    finally:
        sink.close()


if __name__ == "__main__":
    asyncio.run(main(sys.argv[1], float(sys.argv[2]), int(sys.argv[3]), float(sys.argv[4])))
