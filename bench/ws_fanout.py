"""WebSocket fan-out: N clients on one channel; a referee's hold goes up (and later down) and
every client's receive time of the new state is taken. Prints p50/p99 of the notification time
per N, and checks that at every client the sequence numbers arrived contiguous and in order,
while a real match runs (estimate voice, no sound) with holds every few seconds.

The floor, in the same run and with the same client code: a bare `websockets` server (its own
process) that broadcasts yomite's own public state (new seq, the hand up) with
`websockets.broadcast` when asked by an HTTP request. Both servers' holds come from a process
of their own that reads the answer once the clients have had the state (`QUIET_S`). yomite's
figure includes what the floor's does not (the engine, the journal, two audiences); the ratio
is yomite's p50/p99 over the floor's. Each round's clients run in a fresh process (see
`warm_allocator`), so neither round inherits the other's state, and the rounds of the two
servers alternate (`--rounds`, 3 each by default): on this noisy machine one round against one
moves the ratio by 10-20 %, as large as what is measured.

    .venv/bin/python bench/ws_fanout.py [--clients 100,500,1000] [--holds 10] [--rounds 3]

A figure, not a test: this machine has 2 cores shared by the server and all the clients.
"""

import argparse
import asyncio
import contextlib
import functools
import json
import random
import re
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import AsyncIterator, Awaitable, Callable
from pathlib import Path
from typing import Any

import httpx2
import websockets

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
from tests.serverproc import Server, free_port

TOKEN = "bench-operator-token-0123456789abcdef"
SEQ = re.compile(r'"seq":(\d+),"audio"')
BENCH = re.compile(r'"referee":\s*"(bench[0-9-]+)"')


class Client:
    def __init__(self) -> None:
        self.seqs: list[int] = []
        self.arrivals: dict[str, tuple[float, int]] = {}  # hold id -> (receive time, seq)

    async def run(self, uri: str, stop: asyncio.Event, ready: asyncio.Event,
                  counter: list[int], n: int) -> None:
        async with websockets.connect(uri, max_size=None, open_timeout=60) as ws:
            await ws.recv()  # hello
            first = json.loads(await ws.recv())
            self.seqs.append(first["seq"])
            counter[0] += 1
            if counter[0] == n:
                ready.set()
            while not stop.is_set():
                try:
                    async with asyncio.timeout(0.5):
                        text = await ws.recv()
                except TimeoutError:
                    continue
                t = time.monotonic()
                # as little work as possible here: the clients share the machine with the
                # server, and their parsing time would count as the server's latency
                if not text.startswith('{"type":"state"'):
                    continue
                m = SEQ.search(text)
                assert m is not None
                seq = int(m.group(1))
                self.seqs.append(seq)
                for rid in BENCH.findall(text):
                    self.arrivals.setdefault(rid, (t, seq))


Trigger = tuple[Callable[[str], Awaitable[None]], Callable[[], Awaitable[None]]]


# The hand is raised from another device in a hall: here, a process of its own for both
# servers, that sends the request and reads the answer only once every client has had the
# state (QUIET_S later). Read at once, the answer (yomite's: the operator's whole state) woke
# the sender on the cores the clients share, in the middle of what is measured.
QUIET_S = 0.3
TRIGGER = """
import http.client, sys, time, urllib.parse
base, token, kind, quiet = sys.argv[1], sys.argv[2], sys.argv[3], float(sys.argv[4])
u = urllib.parse.urlsplit(base)
c = http.client.HTTPConnection(u.hostname, u.port, timeout=30)
auth = {"Authorization": "Bearer " + token}
for line in sys.stdin:
    cmd, _, rid = line.strip().partition(" ")
    if kind == "floor":
        c.request("GET", "/control?rid=" + (rid if cmd == "hold" else ""))
    elif cmd == "hold":  # the operator raises a hand in the referee's name
        c.request("PUT", f"/api/channels/main/holds/{rid}", headers=auth)
    else:
        c.request("POST", "/api/channels/main/match/resume", headers=auth)
    time.sleep(quiet)
    r = c.getresponse()
    body = r.read().decode()
    if r.status != 200:
        sys.exit(f"{cmd}: {r.status} {body[:200]}")
    print("ok " + (body.strip() if kind == "floor" else ""), flush=True)
"""


async def trigger(kind: str, base: str, published: dict[int, float] | None = None
                  ) -> AsyncIterator[Trigger]:
    """Holds and releases through a TRIGGER process; the floor's answers say when it published
    what (`published`)."""
    proc = await asyncio.create_subprocess_exec(
        sys.executable, "-c", TRIGGER, base, TOKEN, kind, str(QUIET_S),
        stdin=asyncio.subprocess.PIPE, stdout=asyncio.subprocess.PIPE)
    assert proc.stdin is not None and proc.stdout is not None
    stdin, stdout = proc.stdin, proc.stdout

    async def send(line: str) -> None:
        stdin.write(line.encode() + b"\n")
        await stdin.drain()
        answer = (await stdout.readline()).decode().split()
        assert answer[:1] == ["ok"], answer
        if published is not None and len(answer) == 3:
            published[int(answer[1])] = float(answer[2])

    async def hold(rid: str) -> None:
        await send(f"hold {rid}")

    async def release() -> None:
        await send("release")

    try:
        yield hold, release
    finally:
        stdin.close()
        await proc.wait()


async def one_round(uri: str, trigger: Callable[[], Any], n: int, holds: int,
                    published: Callable[[], dict[int, float]] | None = None
                    ) -> dict[str, float]:
    stop, ready = asyncio.Event(), asyncio.Event()
    counter = [0]
    clients = [Client() for _ in range(n)]
    tasks = []
    for i, c in enumerate(clients):
        tasks.append(asyncio.create_task(c.run(uri, stop, ready, counter, n)))
        if i % 50 == 49:
            await asyncio.sleep(0.05)  # do not stampede the accept queue
    await asyncio.wait_for(ready.wait(), 120)
    sent: dict[str, float] = {}
    async with contextlib.asynccontextmanager(trigger)() as (hold, release):
        rng = random.Random(n)
        for k in range(holds):
            rid = f"bench{n}-{k}"
            # a random moment, not exactly the 1.0 s resume lead-in after the last release:
            # then the hold's state met the restarted verse's in the same instant, and the
            # figure was two publications' fan-out, not one
            await asyncio.sleep(rng.uniform(1.3, 2.0))
            sent[rid] = time.monotonic()
            await hold(rid)
            await asyncio.sleep(0.5)
            await release()
    await asyncio.sleep(1.0)
    pub = published() if published is not None else {}
    stop.set()
    await asyncio.gather(*tasks, return_exceptions=True)
    lat = []
    contiguous = 0
    for c in clients:
        if c.seqs == list(range(c.seqs[0], c.seqs[0] + len(c.seqs))):
            contiguous += 1
        for rid, t0 in sent.items():
            got = c.arrivals.get(rid)
            if got is not None:
                t, seq = got
                # from the publication when the server says when it was (same machine, same
                # monotonic clock), else from the request
                lat.append((t - pub.get(seq, t0)) * 1000)
    return {"clients": n, "lat": lat, "expected": n * holds, "contiguous_clients": contiguous}


def summary(rounds: list[dict[str, Any]]) -> dict[str, float]:
    """p50/p99/max over every sample of the rounds, and what arrived whole."""
    lat = sorted(x for r in rounds for x in r["lat"])
    return {
        "clients": rounds[0]["clients"],
        "samples": len(lat),
        "expected": sum(r["expected"] for r in rounds),
        "p50_ms": statistics.median(lat) if lat else float("nan"),
        "p99_ms": lat[int(0.99 * (len(lat) - 1))] if lat else float("nan"),
        "max_ms": lat[-1] if lat else float("nan"),
        "contiguous_clients": sum(r["contiguous_clients"] for r in rounds),
    }


# ---------------------------------------------------------------------- the floor
async def floor_server(port: int, template: dict[str, Any]) -> None:
    """A bare websockets broadcast of yomite's own public state (`template`, as a viewer got it
    from yomite): hello and the state on connect; then, on each GET /control?rid=..., the state
    with a new seq and that referee's hand up (none for an empty rid), serialised once and
    broadcast; the answer says when it published what."""
    from http import HTTPStatus
    from urllib.parse import parse_qs, urlsplit

    from websockets.asyncio.server import broadcast, serve

    clients: set[Any] = set()
    state = json.loads(json.dumps(template))
    seq = [0]

    def text(rid: str, publish: bool = True) -> str:
        seq[0] += publish
        state["seq"] = seq[0]
        match = state.get("match") or {}
        match["holds"] = [{"referee": rid, "name": rid, "since_s": 0.0}] if rid else []
        return json.dumps(state, ensure_ascii=False, separators=(",", ":"))

    def control(connection: Any, request: Any) -> Any:
        url = urlsplit(request.path)
        if url.path != "/control":
            return None  # a WebSocket client
        message = text(parse_qs(url.query).get("rid", [""])[0])
        t = time.monotonic()
        broadcast(clients, message)
        return connection.respond(HTTPStatus.OK, f"{seq[0]} {t}\n")

    async def handler(ws: Any) -> None:
        await ws.send('{"type":"hello"}')
        await ws.send(text("", publish=False))
        clients.add(ws)
        try:
            await ws.wait_closed()
        finally:
            clients.discard(ws)

    async with serve(handler, "127.0.0.1", port, max_queue=None, compression=None,
                     ping_interval=None, process_request=control):
        print("READY", flush=True)
        await asyncio.Future()


def start_floor(template: dict[str, Any], tmp: str) -> tuple[subprocess.Popen[str], int]:
    port = free_port()
    path = Path(tmp) / "template.json"
    path.write_text(json.dumps(template, ensure_ascii=False), "utf-8")
    proc = subprocess.Popen([sys.executable, __file__, "--floor-server", str(port),
                             "--floor-template", str(path)], stdout=subprocess.PIPE, text=True)
    assert proc.stdout is not None and proc.stdout.readline().strip() == "READY"
    return proc, port


def row(name: str, r: dict[str, float], n: int, srv: dict[str, float] | None,
        floor: dict[str, float] | None, rounds: int = 1) -> str:
    s = srv or {"p50": float("nan"), "p99": float("nan"), "max": float("nan")}
    ratio = (f"{r['p50_ms'] / floor['p50_ms']:>5.2f}x {r['p99_ms'] / floor['p99_ms']:>5.2f}x"
             if floor else f"{'':>6} {'':>6}")
    return (f"{n:>8} {name:>7} {r['p50_ms']:>7.1f} {r['p99_ms']:>7.1f} {r['max_ms']:>7.1f} | "
            f"{s['p50']:>7.1f} {s['p99']:>7.1f} {s['max']:>7.1f} | {ratio} | "
            f"{r['samples']:>5}/{r['expected']:<5} {r['contiguous_clients']:>5}/{n * rounds}")


def warm_allocator() -> None:
    """Put the clients' malloc where a long-running process's is.

    asyncio reads every socket into a fresh 256 KiB buffer and shrinks it to what came. Under
    glibc's first mmap threshold (128 KiB) each such read is an mmap, an mremap and later a
    munmap: 2.5 ms more per 100 messages here (perf in the clients' windows). glibc raises the
    threshold once an mmapped block above it is freed; when both rounds shared one process that
    happened by chance between them, and whichever server was measured second got the cheap
    reads (yomite, measured first, looked 1.6x the floor at 100 clients). Each round now has
    its clients in a fresh process of their own, and this one free first."""
    block = bytearray(1 << 20)
    del block


def run_clients(kind: str, target: str, n: int, holds: int) -> dict[str, Any]:
    """One round's clients, in a process of their own (see warm_allocator): `target` is
    yomite's base URL or the floor's port."""
    proc = subprocess.run([sys.executable, __file__, "--clients-of", kind, "--target", target,
                           "--clients", str(n), "--holds", str(holds)],
                          stdout=subprocess.PIPE, text=True, check=True)
    result: dict[str, Any] = json.loads(proc.stdout.strip().splitlines()[-1])
    return result


def clients_main(kind: str, target: str, n: int, holds: int) -> None:
    warm_allocator()
    if kind == "yomite":
        base = target

        def published() -> dict[int, float]:
            ch = httpx2.get(f"{base}/api/health").json()["channels"]["main"]
            return {int(q): float(t) for q, t in ch["recent_publishes"]}

        port = base.rsplit(":", 1)[1]
        r = asyncio.run(one_round(f"ws://127.0.0.1:{port}/ws/channels/main",
                                  functools.partial(trigger, "yomite", base), n, holds,
                                  published))
    else:
        pub: dict[int, float] = {}
        r = asyncio.run(one_round(f"ws://127.0.0.1:{target}/",
                                  functools.partial(trigger, "floor",
                                                    f"http://127.0.0.1:{target}", pub),
                                  n, holds, pub.copy))
    print(json.dumps(r))


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--clients", default="100,500,1000")
    ap.add_argument("--holds", type=int, default=10)
    ap.add_argument("--rounds", type=int, default=3,
                    help="rounds of each server per N, their order alternating; the figures "
                    "are over every sample of every round")
    ap.add_argument("--against-itself", action="store_true",
                    help="the floor in yomite's seat too: how far apart two equal servers come")
    ap.add_argument("--floor-first", action="store_true",
                    help="start each N with the floor (the order must not matter)")
    ap.add_argument("--floor-server", type=int, help=argparse.SUPPRESS)
    ap.add_argument("--floor-template", help=argparse.SUPPRESS)
    ap.add_argument("--clients-of", choices=("yomite", "floor"), help=argparse.SUPPRESS)
    ap.add_argument("--target", help=argparse.SUPPRESS)
    a = ap.parse_args()
    if a.clients_of:
        clients_main(a.clients_of, a.target, int(a.clients), a.holds)
        return
    if a.floor_server:
        # the floor gets what `yomite serve` takes (server.nice, server.realtime_priority):
        # the same scheduling, so the ratio compares the servers, not their priorities
        import os

        from yomite.server import realtime_loop

        with contextlib.suppress(OSError):
            os.setpriority(os.PRIO_PROCESS, 0, -10)
        realtime_loop(1)
        template = json.loads(Path(a.floor_template).read_text("utf-8"))
        asyncio.run(floor_server(a.floor_server, template))
        return
    print("state published -> received by every client (the clients share the 2 cores) and, from"
          "\nthe server's own clock, published -> written to every socket (ms); the floor is a"
          "\nbare websockets broadcast of yomite's own public state; ratio = yomite / floor;"
          f"\n{a.rounds} rounds of each per N, alternating, each round's clients in a fresh"
          "\nprocess; server = the median of the rounds' own figures")
    print(f"{'clients':>8} {'server':>7} {'p50':>7} {'p99':>7} {'max':>7} | {'srv p50':>7} "
          f"{'srv p99':>7} {'srv max':>7} | {'ratio p50 p99':>13} | {'samples':>11} "
          f"{'contiguous':>11}")
    for n in (int(x) for x in a.clients.split(",")):
        ys: list[dict[str, Any]] = []
        fs: list[dict[str, Any]] = []
        srvs: list[dict[str, float]] = []
        template: dict[str, Any] = {}
        for k in range(a.rounds):
            # the order alternates from round to round: a drift of the machine (or anything
            # one round leaves behind) falls on both servers alike
            if a.against_itself:  # the measurement's own noise: the floor in both seats
                template = template or yomite_round(n, 0, measure_only=True)[2]
                fs.append(floor_round(n, a.holds, template))
                r, srv = floor_round(n, a.holds, template), None
            elif (k % 2 == 1) != a.floor_first:
                template = yomite_round(n, 0, measure_only=True)[2]
                fs.append(floor_round(n, a.holds, template))
                r, srv, _ = yomite_round(n, a.holds)
            else:
                r, srv, template = yomite_round(n, a.holds)
                fs.append(floor_round(n, a.holds, template))
            ys.append(r)
            if srv:
                srvs.append(srv)
        f, y = summary(fs), summary(ys)
        srv_mid = ({k: statistics.median(s[k] for s in srvs) for k in ("p50", "p99", "max")}
                   if srvs else None)
        each = " ".join(f"{summary([yr])['p50_ms'] / summary([fr])['p50_ms']:.2f}"
                        for yr, fr in zip(ys, fs, strict=True))
        print(row("floor", f, n, None, None, a.rounds), flush=True)
        second = "floor" if a.against_itself else "yomite"
        print(row(second, y, n, srv_mid, f, a.rounds) + f"   p50 ratio by round: {each}",
              flush=True)

def yomite_round(n: int, holds: int, measure_only: bool = False
                 ) -> tuple[dict[str, Any], dict[str, float] | None, dict[str, Any]]:
    """N clients on a fresh yomite server (its own figures) with a match running; also its
    public state, the floor's message."""
    with tempfile.TemporaryDirectory() as tmp:
        server = Server(Path(tmp), {
            "match": {"memorise_s": 5, "cards": 17},
            "voice": {"engine": "estimate"},
            "audio": {"output": "null"},
            "server": {"client_queue": 256},
        }, TOKEN).start()
        try:
            with httpx2.Client(base_url=server.base,
                               headers={"Authorization": f"Bearer {TOKEN}"}) as c:
                c.post("/api/channels/main/match", json={"seed": 1})
                c.post("/api/channels/main/match/start")
            # what a viewer gets (the client's own headers would carry the operator's token
            # and its larger view)
            template = {"type": "state", **httpx2.get(f"{server.base}/api/channels/main").json()}
            if measure_only:
                return {}, None, template
            r = run_clients("yomite", server.base, n, holds)
            srv = httpx2.get(f"{server.base}/api/health").json()["channels"]["main"][
                "fanout_lag_ms"]
            return r, srv, template
        finally:
            server.stop()


def floor_round(n: int, holds: int, template: dict[str, Any]) -> dict[str, Any]:
    with tempfile.TemporaryDirectory() as tmp:
        proc, port = start_floor(template, tmp)
        try:
            return run_clients("floor", str(port), n, holds)
        finally:
            proc.kill()
            proc.wait()


if __name__ == "__main__":
    main()
