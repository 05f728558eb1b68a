"""Did the machine itself stop? A probe for the audio benches (issue 26).

One probe process per CPU, pinned to it and on `SCHED_FIFO` 99 (above everything a bench runs:
the sound server, yomite's audio process, the instruments), sleeps 1 ms at a time and notes
every wake-up that came late. On such a thread nothing in the machine can delay a wake-up by
milliseconds but the kernel (interrupts off, a section it cannot be preempted in) or a
hypervisor that does not run the virtual CPU; when *every* CPU's probe is late over the same
stretch, the machine as a whole stopped (a virtual machine's host took all its CPUs). No
program on the machine can sound through that: the sound server's clock goes on, so when the
CPUs come back the output has nothing for the time they were away, and the capture has a hole.

    with StallProbe() as probe:
        ... the bench ...
    s = probe.result()       # per-CPU late wake-ups and the machine-wide stalls
    s.covering(t)            # the stall over monotonic time t, if any (a hole's cause)

Where real-time scheduling is not allowed the probe runs ordinary and says so: its figures
then include its own scheduling delays and are not evidence of a machine stall.
`python -m bench.stalls 60` runs it alone for 60 s and prints what it saw.
"""

from __future__ import annotations

import argparse
import contextlib
import os
import subprocess
import sys
import time
from dataclasses import dataclass, field

PERIOD_S = 0.001
LATE_S = 0.0015  # a wake-up later than this is noted (the probe's own jitter is ~0.05 ms)


@dataclass(frozen=True)
class Late:
    cpu: int
    start: float  # monotonic time the wake-up was due
    end: float  # when it came


@dataclass
class Stalls:
    cpus: int
    seconds: float
    realtime: bool
    late: list[Late] = field(default_factory=list)
    machine: list[tuple[float, float]] = field(default_factory=list)  # every CPU late at once

    def per_cpu(self, over_s: float) -> list[int]:
        return [sum(1 for x in self.late if x.cpu == c and x.end - x.start >= over_s)
                for c in range(self.cpus)]

    def longest_ms(self) -> float:
        return max(((b - a) * 1000 for a, b in self.machine), default=0.0)

    def count(self, over_s: float) -> int:
        return sum(1 for a, b in self.machine if b - a >= over_s)

    def covering(self, t: float, before_s: float = 0.02, after_s: float = 0.06
                 ) -> tuple[float, float] | None:
        """The machine stall that explains a hole heard at monotonic `t` (the capture's clock
        is loose by a few ms, and the sound server writes the hole as the CPUs come back)."""
        for a, b in self.machine:
            if a - before_s <= t <= b + after_s:
                return (a, b)
        return None

    def summary(self) -> str:
        kind = "SCHED_FIFO 99" if self.realtime else "NOT real-time: not evidence"
        return (f"machine stalls (every CPU's {kind} probe late at once) over "
                f"{self.seconds:.0f} s: "
                f"{self.count(0.002)} of 2 ms or more, {self.count(0.005)} of 5 ms or more, "
                f"longest {self.longest_ms():.1f} ms; wake-ups 2 ms late, per CPU: "
                f"{self.per_cpu(0.002)}")


def overlaps(late: list[Late], cpus: int) -> list[tuple[float, float]]:
    """The stretches over which every CPU had a late wake-up pending."""
    if cpus < 1:
        return []
    by_cpu = [sorted((x.start, x.end) for x in late if x.cpu == c) for c in range(cpus)]
    common = by_cpu[0]
    for other in by_cpu[1:]:
        out: list[tuple[float, float]] = []
        i = j = 0
        while i < len(common) and j < len(other):
            a = max(common[i][0], other[j][0])
            b = min(common[i][1], other[j][1])
            if a < b:
                out.append((a, b))
            if common[i][1] < other[j][1]:
                i += 1
            else:
                j += 1
        common = out
    return common


def probe(cpu: int) -> None:
    """The child: pinned, real-time if allowed, prints 'late START END' lines until stdin closes."""
    with contextlib.suppress(OSError):
        os.sched_setaffinity(0, {cpu})
    rt = True
    try:
        os.sched_setscheduler(0, os.SCHED_FIFO, os.sched_param(99))
    except OSError:
        rt = False
    print("rt" if rt else "ordinary", flush=True)
    os.set_blocking(0, False)
    out = []
    due = time.monotonic() + PERIOD_S
    n = 0
    while True:
        time.sleep(max(0.0, due - time.monotonic()))
        now = time.monotonic()
        if now - due > LATE_S:
            out.append(f"late {due:.6f} {now:.6f}\n")
        due = now + PERIOD_S
        n += 1
        if n % 200 == 0:  # every ~0.2 s: has the bench closed our stdin?
            try:
                if os.read(0, 1) == b"":
                    break
            except BlockingIOError:
                pass
    sys.stdout.write("".join(out))
    sys.stdout.flush()


class StallProbe:
    def __init__(self) -> None:
        self.cpus = sorted(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") \
            else list(range(os.cpu_count() or 1))
        self.procs: list[subprocess.Popen[str]] = []
        self.realtime = True
        self.t0 = 0.0
        self._result: Stalls | None = None

    def __enter__(self) -> StallProbe:
        for c in self.cpus:
            p = subprocess.Popen([sys.executable, "-m", "bench.stalls", "--probe", str(c)],
                                 stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
            self.procs.append(p)
        for p in self.procs:
            assert p.stdout is not None
            self.realtime &= p.stdout.readline().strip() == "rt"
        self.t0 = time.monotonic()
        return self

    def __exit__(self, *exc: object) -> None:
        seconds = time.monotonic() - self.t0
        late: list[Late] = []
        for i, p in enumerate(self.procs):
            out, _ = p.communicate(timeout=10)  # closes stdin: the probe stops and reports
            for ln in out.splitlines():
                if ln.startswith("late "):
                    _, a, b = ln.split()
                    late.append(Late(i, float(a), float(b)))
        self._result = Stalls(len(self.procs), seconds, self.realtime, late,
                              overlaps(late, len(self.procs)))

    def result(self) -> Stalls:
        assert self._result is not None, "use the probe as a context manager first"
        return self._result


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("seconds", type=float, nargs="?", default=60.0)
    ap.add_argument("--probe", type=int, help=argparse.SUPPRESS)
    a = ap.parse_args()
    if a.probe is not None:
        probe(a.probe)
        return
    with StallProbe() as p:
        time.sleep(a.seconds)
    s = p.result()
    print(s.summary())
    for x, y in s.machine:
        if y - x >= 0.002:
            print(f"  {x:.3f}: {(y - x) * 1000:.1f} ms")


if __name__ == "__main__":
    main()
