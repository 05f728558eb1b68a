"""bench/conditions.py: a bench refuses a figure from a machine that fails its conditions."""

import os

import pytest

from bench import conditions


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
