"""The process under test in test_device's fault test: a DeviceSink whose sound server the test
kills and freezes. It runs alone, on its own PulseAudio, so that a crash (or a hang) cannot take
the test runner or the shared harness with it.

Talks to the test line by line: it prints what it observed, and waits on stdin for the test to
say what it did to the server. Exits 0 only if every step went as the contract says.
"""

from __future__ import annotations

import asyncio
import os
import sys

import numpy as np

from audio.errors import DeviceError
from audio.output.device import DeviceSink
from audio.output.events import ClipDone, DeviceFault, SinkEvent
from audio.output.process import ProcessSink

RATE = 48000


def say(*words: object) -> None:
    print(*words, flush=True)


# How long a step may take on a busy machine before it counts as not happening (the test
# waits 10 s for each line this process prints; idle, each step takes well under a second)
PATIENCE_S = 8.0


async def main() -> None:
    loop = asyncio.get_running_loop()
    events: asyncio.Queue[SinkEvent] = asyncio.Queue()
    kind = ProcessSink if os.environ.get("YOMITE_TEST_SINK") == "ProcessSink" else DeviceSink
    sink = kind(os.environ.get("YOMITE_TEST_DEVICE", "pulse"), RATE,
                      stall_timeout_s=0.5)
    sink.set_listener(events.put_nowait, loop)

    async def heard(what: str) -> None:
        line = (await loop.run_in_executor(None, sys.stdin.readline)).strip()
        if line != what:
            raise SystemExit(f"expected {what!r} from the test, got {line!r}")

    async def next_event(kind: type | tuple[type, ...], timeout: float) -> SinkEvent:
        async with asyncio.timeout(timeout):
            while True:
                ev = await events.get()
                if isinstance(ev, kind):
                    return ev

    refaults = 0  # faults of a starved stream: a loaded machine may starve a new stream

    async def clock_runs() -> bool:
        """The clock moves 0.1 s. A stream starved before its first callbacks (a loaded
        machine: seen once with two CPU burners and a full suite) is a fault as the contract
        says: counted, reopened, and watched again (up to 3 times)."""
        nonlocal refaults
        for _ in range(4):
            p = sink.position()
            deadline = loop.time() + PATIENCE_S  # a busy machine may take a while to get a new
            while loop.time() < deadline:  # stream going
                await asyncio.sleep(0.05)
                if sink.position() - p > RATE // 10:
                    return True
                if sink.faulted:
                    break
            if not sink.faulted:
                return False
            await next_event(DeviceFault, PATIENCE_S)  # the fault's event, not a later one's
            refaults += 1
            await reopen_when_back()
        return False

    async def reopen_when_back() -> None:
        deadline = loop.time() + PATIENCE_S
        while True:
            try:
                await asyncio.to_thread(sink.reopen)
                return
            except DeviceError:
                if loop.time() > deadline:
                    raise SystemExit("reopen never succeeded") from None
                await asyncio.sleep(0.1)

    async def plays_a_clip(tag: int) -> bool:
        """A clip after a reopen plays to its end at its frame. A stream that stalls again
        before (no callback for stall_timeout_s: seen once at load 10) is a fault as the
        contract says: counted, reopened, and the clip played again (up to 3 times)."""
        nonlocal refaults
        for attempt in range(4):
            at = sink.position() + RATE // 20
            sink.play(np.full(RATE // 10, 0.1, dtype=np.float32), at, 0, tag + 10 * attempt)
            done = await next_event((ClipDone, DeviceFault), PATIENCE_S)
            while isinstance(done, ClipDone) and done.tag != tag + 10 * attempt:
                done = await next_event((ClipDone, DeviceFault), PATIENCE_S)
            if isinstance(done, ClipDone):
                return done.end_frame == at + RATE // 10
            refaults += 1
            await reopen_when_back()
        return False

    tone = np.full(RATE * 30, 0.1, dtype=np.float32)
    sink.play(tone, sink.position() + RATE // 20, 0, 1)
    say("PLAYING", await clock_runs())

    # 1. the sound server is killed under a playing stream
    await heard("KILLED")
    fault = await next_event(DeviceFault, PATIENCE_S)
    assert isinstance(fault, DeviceFault)
    say("FAULT", fault.reason)
    p = sink.position()
    await asyncio.sleep(0.3)
    say("CLOCK-STILL", sink.position() == p, sink.faulted)
    try:
        await asyncio.to_thread(sink.reopen)
        say("DOWN-REOPEN worked?!")
    except DeviceError as e:
        say("DOWN-REOPEN DeviceError", str(e).splitlines()[0])
    await heard("BACK")
    await reopen_when_back()
    say("REOPENED", await clock_runs(), sink.position() >= p, await plays_a_clip(2))

    # 2. the sound server hangs (SIGSTOP): callbacks stop coming
    say("READY-STALL")
    await heard("FROZEN")
    fault = await next_event(DeviceFault, PATIENCE_S)
    assert isinstance(fault, DeviceFault)
    say("FAULT", fault.reason)
    await heard("THAWED")
    await reopen_when_back()
    say("REOPENED", await clock_runs(), await plays_a_clip(3))
    say("STATS", f"refaults={refaults}", sink.stats())
    await asyncio.to_thread(sink.close)
    say("CLOSED")


if __name__ == "__main__":
    asyncio.run(main())
