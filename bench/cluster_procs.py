"""The processes of bench/cluster.py: `yomite serve` processes (with `--bus`, or one plain), and
the listeners' client processes (viewer WebSockets, each receipt timed).

A server runs as `python -m yomite` with this checkout first on PYTHONPATH (the venv's console
script may import another checkout: `check_imports` makes sure the servers run this one's code).
A client process is this file run with `--listeners SPEC`: it connects every listener of SPEC
(a JSON list of [url, room, process]), prints `READY`, and on `collect` (a line on stdin)
prints what each listener received: the first state that carried each bench hold
(`"referee":"bench..."`),
with its receive time (`time.monotonic()`: the servers and the clients share the machine's
clock) and its `seq` (the number the listener's process gave that state: each process numbers
the states it sends), and whether the seqs came in order.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import re
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import httpx2
import psutil
import yaml

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
from tests.serverproc import free_port  # noqa: E402

TOKEN = "bench-cluster-operator-token-0123456789abcdef"
AUTH = {"Authorization": f"Bearer {TOKEN}"}
COLOURS = ["blue", "pink", "yellow", "green", "orange"]


def env() -> dict[str, str]:
    path = os.pathsep.join(x for x in (str(ROOT), os.environ.get("PYTHONPATH", "")) if x)
    return {**os.environ, "PYTHONPATH": path}


def check_imports() -> None:
    """The servers must run this checkout's yomite and cluster packages."""
    out = subprocess.run(
        [sys.executable, "-c", "import yomite, cluster; print(yomite.__file__); "
         "print(cluster.__file__)"], env=env(), cwd="/", capture_output=True, text=True,
        check=True).stdout.split()
    for f in out:
        if not Path(f).resolve().is_relative_to(ROOT):
            raise SystemExit(f"the servers would import {f}, not this checkout ({ROOT})")


def config(channels: list[str], journal_dir: Path) -> dict[str, Any]:
    """Every process's config (the cluster's processes share it; --journal-dir differs): no
    sound, the estimate voice, a match of the 100 poems after 5 s of memorising (it is still
    being read when the bench ends), the lease's TTL and the prefix left at their defaults."""
    return {
        "match": {"memorise_s": 5, "cards": 100, "colors": COLOURS},
        "voice": {"engine": "estimate"},
        "audio": {"output": None},
        "journal_dir": str(journal_dir),
        "server": {
            "channels": [{"name": c} for c in channels],
            "client_queue": 256,
            "security": {"operator_token": TOKEN},
            # 10,000 sockets in one process (lowered by the server to its open files less a
            # quarter)
            "limits": {"connections": 20000},
        },
    }


def write_config(tmp: Path, channels: list[str]) -> Path:
    path = tmp / "config.yaml"
    path.write_text(yaml.safe_dump(config(channels, tmp / "journal")), "utf-8")
    return path


class Node:
    """One `yomite serve` process: `--bus` when given, its own journal folder."""

    def __init__(self, tmp: Path, cfg: Path, name: str, bus: str | None) -> None:
        self.tmp = tmp
        self.cfg = cfg
        self.name = name
        self.bus = bus
        self.port = free_port()
        self.base = f"http://127.0.0.1:{self.port}"
        self.journal = tmp / name
        self.log_path = tmp / f"{name}.log"
        self.proc: subprocess.Popen[bytes] | None = None

    def start(self) -> Node:
        args = [sys.executable, "-m", "yomite", "--config", str(self.cfg), "serve", "--host",
                "127.0.0.1", "--port", str(self.port), "--journal-dir", str(self.journal)]
        if self.bus:
            args += ["--bus", self.bus]
        with open(self.log_path, "ab") as log:
            self.proc = subprocess.Popen(args, cwd=self.tmp, env=env(), stdout=log,
                                         stderr=subprocess.STDOUT)
        return self

    def wait_up(self, timeout: float = 120.0) -> None:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if self.proc is None or self.proc.poll() is not None:
                raise RuntimeError(f"{self.name} exited:\n{self.log()[-3000:]}")
            try:
                if httpx2.get(f"{self.base}/api/health", timeout=10).status_code == 200:
                    return
            except httpx2.TransportError:
                pass
            time.sleep(0.1)
        raise RuntimeError(f"{self.name} did not come up in {timeout:.0f} s")

    @property
    def alive(self) -> bool:
        return self.proc is not None and self.proc.poll() is None

    def rss(self) -> int:
        """Resident memory of the process and its children, bytes."""
        assert self.proc is not None
        p = psutil.Process(self.proc.pid)
        total = p.memory_info().rss
        for c in p.children(recursive=True):
            with contextlib.suppress(psutil.Error):
                total += c.memory_info().rss
        return total

    def cpu_s(self) -> float:
        try:
            p = psutil.Process(self.proc.pid if self.proc else 0)
            t = p.cpu_times()
            return t.user + t.system + t.children_user + t.children_system
        except psutil.Error:
            return 0.0

    def call(self, method: str, path: str, **kw: Any) -> httpx2.Response:
        return httpx2.request(method, self.base + path, headers=AUTH, timeout=30, **kw)

    def ok(self, method: str, path: str, **kw: Any) -> Any:
        r = self.call(method, path, **kw)
        if r.status_code != 200:
            raise RuntimeError(f"{self.name} {method} {path}: {r.status_code} {r.text[:300]}")
        return r.json()

    def kill(self) -> None:
        if self.alive:
            assert self.proc is not None
            self.proc.send_signal(signal.SIGKILL)
            self.proc.wait(10)

    def stop(self) -> None:
        if self.alive:
            assert self.proc is not None
            self.proc.send_signal(signal.SIGINT)
            try:
                self.proc.wait(30)
            except subprocess.TimeoutExpired:
                self.kill()

    def log(self) -> str:
        try:
            return self.log_path.read_text("utf-8", errors="replace")
        except OSError:
            return ""


# ---------------------------------------------------------------------- the listeners
BENCH = re.compile(r'"referee":"(bench[0-9a-z-]+)"')
SEQ = re.compile(r'"seq":(\d+)')


class Listeners:
    """One client process's listeners (started by `spawn`)."""

    def __init__(self, proc: subprocess.Popen[str]) -> None:
        self.proc = proc

    @classmethod
    def spawn(cls, tmp: Path, index: int, spec: list[tuple[str, str, int]]) -> Listeners:
        path = tmp / f"listeners{index}.json"
        path.write_text(json.dumps(spec), "utf-8")
        proc = subprocess.Popen([sys.executable, __file__, "--listeners", str(path)],
                                stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
        return cls(proc)

    def ready(self) -> dict[str, Any]:
        assert self.proc.stdout is not None
        line = self.proc.stdout.readline()
        if not line.startswith("READY "):
            raise RuntimeError(f"a listeners' process failed: {line!r}")
        out: dict[str, Any] = json.loads(line[6:])
        return out

    def collect(self) -> dict[str, Any]:
        assert self.proc.stdin is not None and self.proc.stdout is not None
        self.proc.stdin.write("collect\n")
        self.proc.stdin.flush()
        line = self.proc.stdout.readline()
        self.proc.wait(60)
        out: dict[str, Any] = json.loads(line)
        return out

    def cpu_s(self) -> float:
        try:
            t = psutil.Process(self.proc.pid).cpu_times()
            return t.user + t.system
        except psutil.Error:
            return 0.0

    def kill(self) -> None:
        if self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait(10)


class _Listener:
    __slots__ = ("arrivals", "closed", "disorder", "gaps", "last", "states")

    def __init__(self) -> None:
        self.arrivals: dict[str, tuple[float, int]] = {}
        self.last = -1
        self.gaps = 0
        self.disorder = 0
        self.states = 0
        self.closed = False

    async def run(self, url: str, connected: asyncio.Future[None] | None) -> None:
        import websockets

        try:
            async with websockets.connect(url, max_size=None, open_timeout=120,
                                          ping_interval=None, compression=None) as ws:
                if connected is not None and not connected.done():
                    connected.set_result(None)
                async for text in ws:
                    t = time.monotonic()
                    # as little work as possible here: the clients share the machine with
                    # the servers, and their parsing would count as the servers' latency
                    if not isinstance(text, str) or not text.startswith('{"type":"state"'):
                        continue
                    m = SEQ.search(text)
                    if m is None:
                        continue
                    seq = int(m.group(1))
                    self._seq(seq)
                    if '"referee":"bench' in text:
                        for rid in BENCH.findall(text):
                            if rid not in self.arrivals:
                                self.arrivals[rid] = (t, seq)
            self.closed = True  # by the server
        except Exception as e:
            if connected is not None and not connected.done():
                connected.set_exception(e)
            self.closed = True

    def _seq(self, seq: int) -> None:
        self.states += 1
        if self.last >= 0:
            if seq < self.last:
                self.disorder += 1
            elif seq > self.last + 1:
                self.gaps += 1
        self.last = max(self.last, seq)


async def _listeners_main(spec: list[tuple[str, str, int]]) -> None:
    from bench.ws_fanout import warm_allocator

    warm_allocator()
    loop = asyncio.get_running_loop()
    listeners = [_Listener() for _ in spec]
    tasks = []
    waits: list[asyncio.Future[None]] = []
    t0 = time.monotonic()
    for i, (url, _room, _node) in enumerate(spec):
        fut: asyncio.Future[None] = loop.create_future()
        waits.append(fut)
        tasks.append(asyncio.create_task(listeners[i].run(url, fut)))
        if i % 50 == 49:
            await asyncio.wait(waits[-50:])  # do not stampede the servers' accept queues
    done = await asyncio.gather(*waits, return_exceptions=True)
    failed = [repr(e) for e in done if isinstance(e, BaseException)]
    print("READY " + json.dumps({"connected": len(spec) - len(failed), "failed": len(failed),
                                 "first_error": failed[0] if failed else None,
                                 "connect_s": time.monotonic() - t0}), flush=True)
    await loop.run_in_executor(None, sys.stdin.readline)
    for t in tasks:
        t.cancel()
    await asyncio.gather(*tasks, return_exceptions=True)
    arrivals = [[rid, t, seq, room, node]
                for lst, (_url, room, node) in zip(listeners, spec, strict=True)
                for rid, (t, seq) in lst.arrivals.items()]
    print(json.dumps({
        "listeners": len(spec), "arrivals": arrivals,
        "gaps": sum(x.gaps for x in listeners),
        "listeners_with_gaps": sum(x.gaps > 0 for x in listeners),
        "disorder": sum(x.disorder for x in listeners),
        "states": sum(x.states for x in listeners),
        "closed_early": sum(x.closed for x in listeners),
    }), flush=True)


def raise_open_files() -> int:
    import resource

    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    if hard != resource.RLIM_INFINITY and soft < hard:
        resource.setrlimit(resource.RLIMIT_NOFILE, (hard, hard))
        soft = hard
    return soft


if __name__ == "__main__":
    if len(sys.argv) == 3 and sys.argv[1] == "--listeners":
        raise_open_files()
        asyncio.run(_listeners_main(
            [tuple(x) for x in json.loads(Path(sys.argv[2]).read_text("utf-8"))]))
    else:
        sys.exit("the listeners' process of bench/cluster.py (--listeners SPEC)")
