"""How soon an idle CPU wakes up: a PM QoS request on `/dev/cpu_dma_latency`, held as long as
the output plays (the kernel keeps it while the file stays open).

Why: the output's buffer is short (10.7 ms at the hall's 256-frame blocks) so that a hold is
silent at once, and every block must be handed on by three threads in turn (PulseAudio's, the
ALSA plugin's, PortAudio's) within it. An idle CPU sleeps in an idle state, and waking it can
take longer than that: measured on a 2-core virtual machine whose idle CPUs halt (cpuidle
`haltpoll`), a 20 s stream into the null sink had 29 holes with the machine otherwise idle, and
1 with two CPU burners running (the CPUs never idle); with the request held at 0 µs (idle CPUs
poll instead of halting) it had 0 in two runs of three. A reader machine is plugged in: the
idle CPUs' power is the price. `audio.cpu_wakeup_us: null` leaves the machine's idle policy
alone (a laptop on battery), at the cost of those holes on such a machine.
"""

from __future__ import annotations

import os
import struct

PATH = "/dev/cpu_dma_latency"


def hold_wakeup_latency(us: int | None) -> int | None:
    """Ask that no CPU take more than `us` microseconds to wake; returns the descriptor that
    holds the request (close it to let go), or None where it is not allowed (not root, no such
    device: the machine's idle policy stays as it is) or not asked for."""
    if us is None:
        return None
    try:
        fd = os.open(PATH, os.O_WRONLY | os.O_CLOEXEC)
    except OSError:
        return None
    try:
        os.write(fd, struct.pack("i", int(us)))
    except OSError:
        os.close(fd)
        return None
    return fd
