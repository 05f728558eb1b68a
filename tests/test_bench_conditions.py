"""bench/conditions.py: a bench refuses a figure from a machine that fails its conditions."""

import os
import signal
import time

import pytest

from bench import conditions, stalls


def test_a_busy_or_stolen_machine_and_a_normal_priority_process_are_named(capsys):
    busy = conditions.Machine(cpus=2, load1=3.0, busy=0.6, steal=0.25, window_s=2.0)
    # this test's process stands in for the server: it has no audio process
    problems = conditions.report(busy, os.getpid(), 256)
    text = " ".join(problems)
    assert "busy before the bench started (60 % of its CPUs" in text
    assert "hypervisor took 25 %" in text
    assert "audio process was not found" in text
    out = capsys.readouterr().out
    assert "block 256 frames (5.3 ms)" in out
    assert not conditions.verdict(problems, anyway=False)
    assert "refusing to report" in capsys.readouterr().out
    assert conditions.verdict(problems, anyway=True)
    assert "NOT A REFERENCE FIGURE" in capsys.readouterr().out
    with pytest.raises(SystemExit):
        conditions.require_quiet(busy, anyway=False)
    assert "refusing to run" in capsys.readouterr().out
    conditions.require_quiet(busy, anyway=True)  # runs, to be marked


def test_a_quiet_machine_with_real_time_audio_is_a_reference():
    assert conditions.verdict([], anyway=False)
    assert conditions.policy(os.getpid())[0] in ("SCHED_OTHER", "SCHED_FIFO", "SCHED_RR")
    m = conditions.machine(window_s=0.2)
    assert m.cpus >= 1 and 0.0 <= m.steal <= 1.0 and 0.0 <= m.busy <= 1.0


def test_every_cpu_late_at_once_is_a_machine_stall_and_one_cpu_late_is_not():
    late = [stalls.Late(0, 1.000, 1.030), stalls.Late(1, 1.010, 1.040),  # both: 1.010-1.030
            stalls.Late(0, 2.000, 2.050),  # one CPU only: not the machine
            stalls.Late(1, 3.000, 3.004), stalls.Late(0, 3.001, 3.003)]
    common = stalls.overlaps(late, 2)
    assert [(round(a, 3), round(b, 3)) for a, b in common] == [(1.01, 1.03), (3.001, 3.003)]
    s = stalls.Stalls(2, 10.0, True, late, common)
    assert s.count(0.005) == 1 and round(s.longest_ms()) == 20
    assert s.covering(1.05) == common[0]  # a hole heard as the CPUs came back
    assert s.covering(2.02) is None
    assert s.per_cpu(0.003) == [2, 2]
    problems = conditions.during(s, 0.0107)
    assert len(problems) == 1 and "stopped 1 times" in problems[0]
    assert conditions.during(s, 0.064) == []  # a buffer longer than the stall rides it out
    assert conditions.during(stalls.Stalls(2, 10.0, True, [], []), 0.0107) == []
    unknown = conditions.during(stalls.Stalls(2, 10.0, False, [], []), 0.0107)
    assert "could not run real-time" in unknown[0]


def test_the_probe_sees_its_cpus_stopped_together_and_one_stopped_alone():
    """The machine is made to 'stop' by freezing every probe at once (SIGSTOP): what a host
    that takes all the CPUs looks like from inside. Then one probe alone: a busy CPU, not a
    stalled machine."""
    with stalls.StallProbe() as probe:
        time.sleep(0.3)
        t_all = time.monotonic()
        for p in probe.procs:
            os.kill(p.pid, signal.SIGSTOP)
        time.sleep(0.15)
        for p in probe.procs:
            os.kill(p.pid, signal.SIGCONT)
        time.sleep(0.3)
        t_one = time.monotonic()
        os.kill(probe.procs[0].pid, signal.SIGSTOP)
        time.sleep(0.15)
        os.kill(probe.procs[0].pid, signal.SIGCONT)
        time.sleep(0.3)
    s = probe.result()
    if len(probe.procs) < 2:
        pytest.skip("one CPU: every late wake-up is the machine's")
    hit = s.covering(t_all + 0.075, before_s=0, after_s=0)
    assert hit is not None and hit[1] - hit[0] >= 0.1, s.machine
    assert s.covering(t_one + 0.075, before_s=0, after_s=0) is None or \
        max(b - a for a, b in s.machine if a <= t_one + 0.075 <= b) < 0.1, s.machine
    assert s.per_cpu(0.1)[0] >= 2  # both freezes were seen on the first CPU
