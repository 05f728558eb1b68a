"""bench/cluster.py at its smallest: 2 processes, 4 rooms, 20 listeners, 5 holds, one kill.

What is checked is that the bench runs its whole course against real processes (its own
nats-server, `yomite serve --bus` twice, a plain server for the reference, the listeners in
processes of their own) and prints every figure of its tables: no speed is asserted. That every
listener got every hold's state, and that the owner's publication of it was found, are not
speeds: without them a figure is made of fewer samples than it says.
"""

import json
import math
import subprocess
import sys
from pathlib import Path

from tests.natsbroker import require_nats

ROOT = Path(__file__).resolve().parent.parent


def rows(out: str, header: str) -> list[list[str]]:
    lines = out.splitlines()
    start = next(i for i, line in enumerate(lines) if line.startswith(header))
    table = []
    for line in lines[start + 2:]:
        if not line.startswith("|"):
            break
        table.append([c.strip() for c in line.strip().strip("|").split("|")])
    return table


def test_the_cluster_bench_prints_every_figure_at_its_smallest(tmp_path: Path) -> None:
    require_nats()
    out_json = tmp_path / "cluster.json"
    run = subprocess.run(
        [sys.executable, "bench/cluster.py", "--processes", "2", "--rooms", "4",
         "--listeners", "20", "--holds", "5", "--referee-holds", "5", "--kills", "1",
         "--ref-listeners", "20", "--ref-holds", "2", "--client-procs", "2",
         "--out", str(out_json)],
        cwd=ROOT, capture_output=True, text=True, timeout=600)
    print(run.stdout)
    assert run.returncode == 0, run.stderr[-3000:]
    latency = rows(run.stdout, "| processes | rooms |")
    assert [r[0] for r in latency] == ["reference: 1, no bus", "2"]
    memory = rows(run.stdout, "| processes | RSS")
    assert [r[0] for r in memory] == ["2"]
    cluster = latency[1]
    for row in (*latency, *memory):
        for cell in row:
            assert cell and "nan" not in cell.lower(), (row, cell)
    for cell in cluster:
        assert cell != "—", cluster  # the cluster's row has every figure, failover too
    assert cluster[3].split() == ["2", "2"]  # the 4 rooms spread over the 2 processes
    assert cluster[2] == "20 (20)"
    assert cluster[6] == "25/25"  # 5 holds x 5 listeners a room, every one from its owner
    assert cluster[9].endswith("(1)")
    figures = json.loads(out_json.read_text("utf-8"))
    run2 = figures["runs"][0]
    f = run2["fanout"]
    assert f["pub"]["n"] == f["expected"] == 25 and f["no_pub"] == 0
    assert f["disorder"] == 0 and f["closed_early"] == 0 and f["refused"] == 0
    assert run2["referee"]["lat"]["n"] == 5 and run2["referee"]["n_errors"] == 0
    assert len(run2["failover"]["took_s"]) == 1
    for k in ("p50", "p99", "max"):
        assert math.isfinite(f["pub"][k]) and math.isfinite(figures["reference"]["pub"][k])
    assert len(figures["reference_rounds"]) == 2  # before and after the cluster
    assert all(x > 0 for x in run2["rss_rooms"] + f["rss_after"] + run2["rss_one_room"])
