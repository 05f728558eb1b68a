"""The audio process holds a CPU wake-up latency request while it plays (audio/output/wakeup.py)
and lets go when it ends: the request is the PM QoS device held open by that process (the
kernel's value is the lowest request of any process, so other tests' audio processes may hold
it too: what is checked is this worker's own descriptor), and the kernel's value reads 0 while
it lives."""

from __future__ import annotations

import os
import struct
from pathlib import Path

import pytest

from audio.output.process import ProcessSink
from audio.output.wakeup import PATH

from .test_device import RATE, device

__all__ = ["device"]  # fixture


def current_us() -> int:
    fd = os.open(PATH, os.O_RDONLY)
    try:
        return int(struct.unpack("i", os.read(fd, 4))[0])
    finally:
        os.close(fd)


@pytest.mark.audio
def test_the_audio_process_holds_the_wake_up_latency_while_it_lives(device):
    if not os.access(PATH, os.W_OK):
        sink = ProcessSink(device, RATE, cpu_wakeup_us=0)
        try:
            assert sink.cpu_wakeup_us is None  # not allowed here: said, and nothing held
        finally:
            sink.close()
        return
    sink = ProcessSink(device, RATE, cpu_wakeup_us=0)
    try:
        assert sink.cpu_wakeup_us == 0 and current_us() == 0
        assert sink.pid is not None and holds_request(sink.pid)
    finally:
        sink.close()
    plain = ProcessSink(device, RATE, cpu_wakeup_us=None)  # null: the idle policy left alone
    try:
        assert plain.cpu_wakeup_us is None
        assert plain.pid is not None and not holds_request(plain.pid)
    finally:
        plain.close()


def holds_request(pid: int) -> bool:
    fds = Path(f"/proc/{pid}/fd")
    return any(os.readlink(fd) == PATH for fd in fds.iterdir())
