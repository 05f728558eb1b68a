"""The audio process: a `DeviceSink` (the output stream and its mixer) alone in a process of its
own, driven by `audio.output.process.ProcessSink` through a socket. Run as
`python -m audio.output.worker FD COUNTERS_FD JSON`; never imported by the server itself.

Why a process: the callback is Python, so in the server's process any long hold of the
interpreter (a full garbage collection with many objects alive: 50-90 ms measured with 200
WebSockets; JSON for many clients; a voice rendering) is a hole in the reading. Here the
interpreter does nothing else: three small threads (commands in, events out, PortAudio's
callback) and DeviceSink's watchdog, the garbage collector off (nothing here makes reference
cycles worth collecting), the whole process on SCHED_FIFO where the system allows it.

The wire: one SOCK_SEQPACKET socket (a message is one pickled tuple, never split). The parent
sends ("play", key, frames, at_frame, offset, tag) with a memfd of the PCM attached the first
time a key is used, ("stop", at_frame), ("forget", key), ("reopen", id), ("close",). The worker
answers ("opened", error or None, info), ("done", tag, end), ("stopped", frame),
("fault", reason, faults), ("reopened", id, error or None). The clock is not on the wire: the
callback writes the output position into a shared int64 array after every block (COUNTERS).
"""

from __future__ import annotations

import contextlib
import gc
import json
import mmap
import os
import pickle
import queue
import socket
import sys
import threading
from typing import Any

import numpy as np

from audio.errors import DeviceError
from audio.output.device import COUNTERS, DeviceSink
from audio.output.events import ClipDone, DeviceFault, SinkEvent, Stopped
from audio.output.wakeup import hold_wakeup_latency

MAX_MESSAGE = 1 << 16


def realtime(priority: int | None) -> bool:
    """SCHED_FIFO for this thread and every thread started after it (PortAudio's included)."""
    if priority is None or not hasattr(os, "sched_setscheduler"):
        return False
    try:
        os.sched_setscheduler(0, os.SCHED_FIFO, os.sched_param(priority))
    except OSError:  # no rtprio allowed: ordinary scheduling, still a GIL of its own
        return False
    return True


def pcm_from_fd(fd: int, frames: int) -> np.ndarray:
    """The clip the parent wrote into a memfd, mapped read-only (no copy). The mapping lives as
    long as any view of it (the mixer's, while the clip plays)."""
    try:
        if frames == 0:
            return np.zeros(0, dtype=np.float32)
        mm = mmap.mmap(fd, frames * 4, prot=mmap.PROT_READ)
    finally:
        os.close(fd)
    a = np.frombuffer(mm, dtype=np.float32, count=frames)
    return a


def main() -> None:
    sock = socket.socket(fileno=int(sys.argv[1]))
    cfd = int(sys.argv[2])
    opts: dict[str, Any] = json.loads(sys.argv[3])
    rt = realtime(opts.pop("realtime_priority", None))
    # held for the life of this process: the kernel drops the request when it exits
    wakeup_us = opts.pop("cpu_wakeup_us", None)
    wakeup = hold_wakeup_latency(wakeup_us)
    counters = np.frombuffer(mmap.mmap(cfd, len(COUNTERS) * 8), dtype=np.int64)
    os.close(cfd)
    start_frame = int(counters[0])
    events: queue.SimpleQueue[SinkEvent | None] = queue.SimpleQueue()

    def send(msg: tuple[Any, ...]) -> None:
        # the parent may be gone: the command loop sees it and exits
        with contextlib.suppress(OSError):
            sock.send(pickle.dumps(msg, protocol=pickle.HIGHEST_PROTOCOL))

    try:
        sink = DeviceSink(start_frame=start_frame, counters=counters, **opts)
    except (DeviceError, ValueError) as e:
        why = e if isinstance(e, DeviceError) else DeviceError(str(e))
        send(("opened", str(e), {"code": why.code, "params": why.params}))
        return
    sink.set_listener(events.put)  # called on the audio thread: only hands the event on

    def forward() -> None:
        while (ev := events.get()) is not None:
            match ev:
                case ClipDone(tag=tag, end_frame=end):
                    send(("done", tag, end))
                case Stopped(at_frame=at):
                    send(("stopped", at))
                case DeviceFault(reason=reason):
                    send(("fault", reason, sink.stats().faults))

    forwarder = threading.Thread(target=forward, name="yomite-audio-events", daemon=True)
    forwarder.start()
    send(("opened", None, {"channels": sink.channels, "latency": sink.latency,
                           "blocksize": sink.blocksize, "realtime": rt, "pid": os.getpid(),
                           "cpu_wakeup_us": wakeup_us if wakeup is not None else None}))
    gc.freeze()  # what exists now is never scanned again
    gc.disable()
    clips: dict[int, np.ndarray] = {}
    try:
        while True:
            try:
                data, fds, _flags, _addr = socket.recv_fds(sock, MAX_MESSAGE, 1)
            except OSError:
                break
            if not data:
                break  # the parent closed its end (or died)
            msg = pickle.loads(data)
            match msg[0]:
                case "play":
                    _, key, frames, at, offset, tag = msg
                    if fds:
                        clips[key] = pcm_from_fd(fds[0], frames)
                    pcm = clips.get(key)
                    if pcm is not None:
                        sink.play(pcm, at, offset, tag)
                case "stop":
                    sink.stop(msg[1])
                case "forget":
                    clips.pop(msg[1], None)
                case "reopen":
                    try:
                        sink.reopen()
                        send(("reopened", msg[1], None))
                    except DeviceError as e:
                        send(("reopened", msg[1], str(e)))
                case "close":
                    break
                case _:
                    for fd in fds:
                        os.close(fd)
    finally:
        sink.close()
        events.put(None)
        forwarder.join(timeout=1.0)
        sock.close()


if __name__ == "__main__":
    main()
