"""The audio process holds a CPU wake-up latency request while it plays (audio/output/wakeup.py)
and lets go when it ends: read back from the kernel's PM QoS device, whose value is the lowest
request held by any process."""

from __future__ import annotations

import os
import struct

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
    before = current_us()
    assert before > 0, "something else holds the CPUs awake: this test cannot tell"
    sink = ProcessSink(device, RATE, cpu_wakeup_us=0)
    try:
        assert sink.cpu_wakeup_us == 0 and current_us() == 0
    finally:
        sink.close()
    assert current_us() == before
    plain = ProcessSink(device, RATE, cpu_wakeup_us=None)  # null: the idle policy left alone
    try:
        assert plain.cpu_wakeup_us is None and current_us() == before
    finally:
        plain.close()
