"""The event loop of `yomite serve` runs real-time where allowed, and nothing it starts later
inherits that: a real server, its threads and its processes read from /proc."""

from __future__ import annotations

import os
import subprocess
import sys
import time
from pathlib import Path

import httpx2

from tests.serverproc import Server

TOKEN = "scheduling-operator-token-0123456789"


def policy(tid: int) -> int:
    return os.sched_getscheduler(tid) & ~os.SCHED_RESET_ON_FORK


def threads(pid: int) -> list[int]:
    return [int(t) for t in os.listdir(f"/proc/{pid}/task")]


def children(pid: int) -> list[int]:
    out = subprocess.run(["pgrep", "-P", str(pid)], capture_output=True, text=True).stdout
    return [int(p) for p in out.split()]


def realtime_allowed() -> bool:
    """Whether this machine lets a process of ours run real-time (root with CAP_SYS_NICE, or
    an rtprio limit): asked of a throwaway child, as the server asks for itself."""
    probe = "import os; os.sched_setscheduler(0, os.SCHED_RR, os.sched_param(1))"
    return subprocess.run([sys.executable, "-c", probe], capture_output=True).returncode == 0


def test_the_event_loop_runs_realtime_and_what_it_starts_does_not(tmp_path: Path) -> None:
    cfg = {"voice": {"engine": "openjtalk", "cache_dir": str(tmp_path / "cache")},
           "audio": {"output": "null", "render_workers": 1},
           "server": {"realtime_priority": 1}}
    s = Server(tmp_path, cfg, TOKEN).start()
    try:
        pid = s.proc.pid if s.proc else 0
        with httpx2.Client(base_url=s.base, headers=s.op, timeout=30) as c:
            sched = c.get("/api/health").json()["event_loop"]["scheduling"]
            before = set(threads(pid))
            # pages, and work the loop hands to a thread pool whose threads it makes now
            for path in ("/console", "/static/console.js", "/api/voices", "/api/devices"):
                assert c.get(path).status_code == 200, path
        allowed = realtime_allowed()  # root here and in CI; elsewhere it says so and runs
        if allowed:
            assert sched == "realtime 1", sched
            assert policy(pid) == os.SCHED_RR
            assert os.sched_getscheduler(pid) & os.SCHED_RESET_ON_FORK, "children would inherit"
            assert os.sched_getparam(pid).sched_priority == 1
        else:
            assert sched.startswith("nice "), sched
            assert policy(pid) == os.SCHED_OTHER
        later = set(threads(pid)) - before
        for tid in set(threads(pid)) - {pid}:
            assert policy(tid) == os.SCHED_OTHER, f"thread {tid} inherited the loop's policy"
        # the render worker is started by a thread of the pool, and sets its own niceness
        # once Python is up: on a busy machine that may be a while after start-up
        deadline = time.monotonic() + 60
        while True:
            kids = children(pid)
            workers = [k for k in kids
                       if b"audio.voices.renderpool" in Path(f"/proc/{k}/cmdline").read_bytes()]
            niced = all(os.getpriority(os.PRIO_PROCESS, k) == 2 for k in workers)
            if (workers and niced) or time.monotonic() > deadline:
                break
            time.sleep(0.1)
        assert workers, f"no render worker among {kids}"
        for k in workers:
            assert policy(k) == os.SCHED_OTHER
            assert os.getpriority(os.PRIO_PROCESS, k) == 2, "render workers run at nice 2"
        assert later, "no thread was made after start-up: the thread check proved nothing"
    finally:
        s.stop()
