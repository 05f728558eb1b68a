"""The audio process (audio.output.process): nothing this process does can starve the output.
The in-process sink's contract (exact frames, stops, faults) is checked for both sinks in
test_device.py; here, what only the process gives."""

from __future__ import annotations

import asyncio
import gc
import time

import numpy as np
import pytest

from audio.filesink import to_int16
from audio.output.process import ProcessSink
from audio.sink import ClipDone, SinkEvent

from .audio_capture import Recorder
from .test_device import RATE, check_dropouts, device, monitor, noise, retrying_dropouts

__all__ = ["device", "monitor"]  # fixtures


@pytest.mark.audio
async def test_full_garbage_collections_make_no_break_in_the_capture(device, monitor, tmp_path):
    """300,000 objects alive and full collections forced every 0.2 s while a 4 s clip
    plays: each collection holds this interpreter for ~100+ ms, ten times the output's
    buffer (an in-process sink underruns at every one: bench/full_hall.py measures it), and the
    capture is still bit-exactly the clip, with no underrun counted."""
    alive = [{"n": i, "s": str(i), "t": (i, [i])} for i in range(300_000)]
    clip = noise(RATE * 4, 7)

    async def scenario(attempt: int, dropped: list[int]) -> None:
        events: asyncio.Queue[SinkEvent] = asyncio.Queue()
        held: list[float] = []
        with Recorder(tmp_path / f"gc{attempt}.wav", monitor) as rec:
            sink = ProcessSink(device, RATE)
            sink.set_listener(events.put_nowait, asyncio.get_running_loop())
            try:
                at = sink.position() + RATE // 5
                sink.play(clip, at, 0, 1)
                while sink.position() < at + len(clip):
                    t = time.perf_counter()
                    gc.collect()
                    held.append(time.perf_counter() - t)
                    await asyncio.sleep(0.2)
                async with asyncio.timeout(3):
                    done = await events.get()
                await asyncio.sleep(sink.latency + 0.1)
            finally:
                sink.close()
        assert done == ClipDone(1, at + len(clip))
        stats = sink.stats()
        print(f"{len(held)} full collections of {len(alive)} objects held the interpreter "
              f"{min(held) * 1000:.0f}-{max(held) * 1000:.0f} ms; {stats}")
        assert len(held) >= 5 and np.median(held) > 0.05  # each one a break in-process
        cap = rec.capture
        assert cap is not None and cap.channels_identical
        check_dropouts(cap.raw, to_int16(clip), dropped)
        assert stats.underflows == 0 and stats.xruns == 0 and stats.late_clips == 0

    await retrying_dropouts(scenario)
