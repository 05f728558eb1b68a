"""The conditions an audio bench's figure depends on, checked and printed before it is reported.

A figure such as "0 holes, hold -> silence p99 16 ms" is a property of the code *and* of the
machine: the sound server and yomite's audio process must run real-time, the machine must not
be busy with other work before the bench adds its own load, and the hypervisor must not take
the CPUs away. `check()` reads each of these from the kernel (not from what yomite says it did)
and `report()` prints them; a bench refuses to print its figure as a reference when a condition
fails, naming which (`--anyway` prints it marked NOT A REFERENCE).

    before = machine()              # what the CPUs did before the bench starts anything
    require_quiet(before, anyway)   # refuses at once on a busy or stolen machine
    ... start the server ...
    problems = report(before, server_pid, blocksize)   # prints; [] when all is met
"""

from __future__ import annotations

import os
import time
from dataclasses import dataclass
from pathlib import Path

import psutil

from bench.stalls import Stalls

POLICIES = {os.SCHED_OTHER: "SCHED_OTHER", os.SCHED_FIFO: "SCHED_FIFO",
            os.SCHED_RR: "SCHED_RR", getattr(os, "SCHED_BATCH", 3): "SCHED_BATCH",
            getattr(os, "SCHED_IDLE", 5): "SCHED_IDLE"}

# what "a quiet machine" means for a reference figure: the bench brings its own load (burners,
# pages, viewers); outside work on top of it is what made last turn's figures unreproducible.
# Measured over a window before the start (the load average lags by minutes: right after a test
# suite it still says 3 on an idle machine)
MAX_BUSY = 0.25  # share of all CPU time used by other work over the window
MAX_STEAL = 0.10  # share of CPU time the hypervisor took over the window


@dataclass(frozen=True)
class Machine:
    cpus: int
    load1: float  # the load average, for the record
    busy: float  # share of all CPU time in use (user, system, interrupts) over `window_s`
    steal: float  # share of all CPU time stolen by the hypervisor, over `window_s`
    window_s: float


def machine(window_s: float = 3.0) -> Machine:
    """The machine before a bench starts: what its CPUs did over `window_s`."""
    def sample() -> list[int]:
        return [int(x) for x in Path("/proc/stat").read_text().splitlines()[0].split()[1:9]]
    a = sample()
    time.sleep(window_s)
    b = sample()
    d = [y - x for x, y in zip(a, b, strict=True)]
    d += [0] * (8 - len(d))  # user nice system idle iowait irq softirq steal
    total = max(1, sum(d))
    user, nice, system, _idle, _iowait, irq, softirq, steal = d
    return Machine(os.cpu_count() or 1, os.getloadavg()[0],
                   (user + nice + system + irq + softirq) / total, steal / total, window_s)


def machine_problems(m: Machine) -> list[str]:
    """What of the machine itself is not met (checked before a bench starts anything)."""
    problems = []
    if m.busy > MAX_BUSY:
        problems.append(f"the machine was busy before the bench started ({m.busy * 100:.0f} % "
                        f"of its CPUs over {m.window_s:.0f} s > {MAX_BUSY * 100:.0f} %): "
                        "stop other work and rerun")
    if m.steal > MAX_STEAL:
        problems.append(f"the hypervisor took {m.steal * 100:.0f} % of the CPUs "
                        f"(> {MAX_STEAL * 100:.0f} %): a shared virtual machine")
    return problems


def require_quiet(m: Machine, anyway: bool) -> None:
    """Stop before starting anything on a machine that cannot give a reference figure."""
    problems = machine_problems(m)
    if problems and not anyway:
        print(f"conditions: {m.cpus} CPUs, {m.busy * 100:.0f} % busy, steal "
              f"{m.steal * 100:.1f} %, load average {m.load1:.2f}")
        for p in problems:
            print(f"  NOT MET: {p}")
        print("refusing to run: the figure would not be a reference (--anyway runs it, marked)")
        raise SystemExit(2)


def policy(pid: int) -> tuple[str, int]:
    """A process's scheduling class and real-time priority, as the kernel has them."""
    try:
        pol = os.sched_getscheduler(pid)
        return POLICIES.get(pol, str(pol)), os.sched_getparam(pid).sched_priority
    except OSError:
        return "gone", 0


def sound_server_pid() -> int | None:
    """The PulseAudio serving this bench: the harness's pid file, else the one process named so."""
    run = Path(os.environ.get("YH_RUN", "/tmp/yomite-audio"))
    with_file = run / "pulseaudio.pid"
    if with_file.exists():
        try:
            return int(with_file.read_text().strip())
        except ValueError:
            pass
    found = [p.pid for p in psutil.process_iter(["name"]) if p.info["name"] == "pulseaudio"]
    return found[0] if len(found) == 1 else None


def audio_worker_pid(server_pid: int) -> int | None:
    """yomite's audio process (`audio.output.worker`) among the server's descendants."""
    try:
        for p in psutil.Process(server_pid).children(recursive=True):
            try:
                if any("audio.output.worker" in a for a in p.cmdline()):
                    return p.pid
            except psutil.Error:
                continue
    except psutil.Error:
        return None
    return None


def report(before: Machine, server_pid: int | None, blocksize: int, rate: int = 48000,
           need_worker: bool = True) -> list[str]:
    """Print the conditions and return what is not met (empty: a reference figure)."""
    problems = machine_problems(before)
    print(f"conditions: {before.cpus} CPUs, {before.busy * 100:.0f} % busy and steal "
          f"{before.steal * 100:.1f} % over {before.window_s:.0f} s before the start (load "
          f"average {before.load1:.2f}), block {blocksize} frames "
          f"({blocksize / rate * 1000:.1f} ms)")
    pa = sound_server_pid()
    if pa is None:
        problems.append("no PulseAudio found (scripts/audio-harness.sh start)")
    else:
        pol, prio = policy(pa)
        print(f"  sound server pid {pa}: {pol} {prio}")
        if pol not in ("SCHED_FIFO", "SCHED_RR"):
            problems.append(f"the sound server runs {pol}, not real-time (chrt -a -f -p 6 {pa}, "
                            "or rtkit / the audio group's rtprio limit)")
    if need_worker and server_pid is not None:
        w = audio_worker_pid(server_pid)
        if w is None:
            problems.append("yomite's audio process was not found (audio.process: false?)")
        else:
            pol, prio = policy(w)
            print(f"  yomite audio process pid {w}: {pol} {prio}")
            if pol not in ("SCHED_FIFO", "SCHED_RR"):
                problems.append(f"yomite's audio process runs {pol}: it could not take "
                                "real-time priority (run as root or give the user rtprio)")
    for p in problems:
        print(f"  NOT MET: {p}")
    return problems


def during(stalls: Stalls, buffer_s: float) -> list[str]:
    """What the machine did while the bench ran (`bench.stalls`): a stall of every CPU longer
    than the output's buffer (`buffer_s`, the audio queued ahead of the speakers) empties it
    whatever runs on the machine, so a run with one is not a reference figure (its holes are
    printed beside the stalls that explain them)."""
    if not stalls.realtime:
        return ["the stall probe could not run real-time: whether the machine stopped during "
                "the run is unknown (run as root or give the user rtprio)"]
    n = stalls.count(buffer_s)
    if n:
        return [f"the machine itself stopped {n} times during the run for longer than the "
                f"output's buffer ({buffer_s * 1000:.1f} ms; longest {stalls.longest_ms():.1f} "
                "ms): every CPU at once, a SCHED_FIFO 99 probe on each late, i.e. a virtual "
                "machine's host took its CPUs; no buffer that short can sound through that"]
    return []


def verdict(problems: list[str], anyway: bool) -> bool:
    """Whether to print the figure; says why not. With `anyway` the figure is printed, marked."""
    if not problems:
        return True
    if anyway:
        print("NOT A REFERENCE FIGURE (conditions not met, printed because of --anyway):")
        return True
    print("refusing to report a figure from this machine: the conditions above are not met "
          "(--anyway prints it, marked)")
    return False
