"""Start-up and memory at rest: `yomite serve` with the default config (its own folder, the null
output unless --pulse), started N times. Prints the CPU seconds spent until /api/health answers
(the server and the processes it started) and, 5 s later, each process's RSS and PSS.

    .venv/bin/python bench/startup.py [--starts 5] [--pulse]
"""

import argparse
import statistics
import sys
import tempfile
import time
from pathlib import Path

import psutil

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
from tests.serverproc import Server


def cpu_s(p: psutil.Process) -> float:
    total = 0.0
    for q in [p, *p.children(recursive=True)]:
        try:
            t = q.cpu_times()
        except psutil.Error:
            continue
        total += t.user + t.system
    return total


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--starts", type=int, default=5)
    ap.add_argument("--pulse", action="store_true", help="the default output (a sound server)")
    a = ap.parse_args()
    cfg = {} if a.pulse else {"audio": {"output": "null"}}
    cpu, wall, rss, pss, procs = [], [], [], [], []
    for _ in range(a.starts):
        with tempfile.TemporaryDirectory() as d:
            s = Server(Path(d), cfg, "b" * 40)
            t0 = time.monotonic()
            s.start()
            wall.append(time.monotonic() - t0)
            assert s.proc is not None
            p = psutil.Process(s.proc.pid)
            cpu.append(cpu_s(p))
            time.sleep(5)
            ms = [q.memory_full_info() for q in [p, *p.children(recursive=True)]]
            procs.append(len(ms))
            rss.append(sum(m.rss for m in ms) / 2**20)
            pss.append(sum(m.pss for m in ms) / 2**20)
            s.stop()
    print(f"starts {a.starts}: to healthy CPU median {statistics.median(cpu):.2f} s "
          f"(max {max(cpu):.2f}), wall median {statistics.median(wall):.2f} s")
    print(f"at rest: {statistics.median(procs):.0f} processes, RSS median "
          f"{statistics.median(rss):.0f} MiB, PSS median {statistics.median(pss):.0f} MiB")


if __name__ == "__main__":
    main()
