"""WebSocket fan-out: N clients on one channel; a referee's hold goes up (and later down) and
every client's receive time of the new state is taken. Prints p50/p99 of the notification time
per N, and checks that at every client the sequence numbers arrived contiguous and in order,
while a real match runs (estimate voice, no sound) with holds every few seconds.

    .venv/bin/python bench/ws_fanout.py [--clients 100,500,1000] [--holds 10]

A figure, not a test: this machine has 2 cores shared by the server and all the clients.
"""

import argparse
import asyncio
import json
import re
import statistics
import sys
import tempfile
import time
from pathlib import Path

import httpx2
import websockets

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
from tests.serverproc import Server

TOKEN = "bench-operator-token-0123456789abcdef"
SEQ = re.compile(r'"seq":(\d+),"audio"')
BENCH = re.compile(r'"referee":\s*"(bench[0-9-]+)"')


class Client:
    def __init__(self) -> None:
        self.seqs: list[int] = []
        self.arrivals: dict[int, float] = {}  # hold id -> monotonic receive time

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
                self.seqs.append(int(m.group(1)))
                for rid in BENCH.findall(text):
                    self.arrivals.setdefault(rid, t)


async def one_round(server: Server, n: int, holds: int) -> dict[str, float]:
    uri = f"ws://127.0.0.1:{server.port}/ws/channels/main"
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
    async with httpx2.AsyncClient(base_url=server.base, timeout=30,
                                  headers={"Authorization": f"Bearer {TOKEN}"}) as http:
        for k in range(holds):
            rid = f"bench{n}-{k}"
            await asyncio.sleep(1.0)
            sent[rid] = time.monotonic()
            # the operator raises a hand in the referee's name: the same path as a referee's
            await http.put(f"/api/channels/main/holds/{rid}")
            await asyncio.sleep(0.5)
            await http.post("/api/channels/main/match/resume")
    await asyncio.sleep(1.0)
    stop.set()
    await asyncio.gather(*tasks, return_exceptions=True)
    lat = []
    contiguous = 0
    for c in clients:
        if c.seqs == list(range(c.seqs[0], c.seqs[0] + len(c.seqs))):
            contiguous += 1
        for rid, t0 in sent.items():
            t = c.arrivals.get(rid)
            if t is not None:
                lat.append((t - t0) * 1000)
    lat.sort()
    return {
        "clients": n,
        "samples": len(lat),
        "expected": n * holds,
        "p50_ms": statistics.median(lat) if lat else float("nan"),
        "p99_ms": lat[int(0.99 * (len(lat) - 1))] if lat else float("nan"),
        "max_ms": lat[-1] if lat else float("nan"),
        "contiguous_clients": contiguous,
    }


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--clients", default="100,500,1000")
    ap.add_argument("--holds", type=int, default=10)
    a = ap.parse_args()
    print("request -> state received by every client (the clients share the 2 cores) and, from the"
          "\nserver's own clock, state published -> written to every socket (ms)")
    print(f"{'clients':>8} {'p50':>7} {'p99':>7} {'max':>7} | {'srv p50':>7} {'srv p99':>7} "
          f"{'srv max':>7} | {'samples':>11} {'contiguous':>11}")
    for n in (int(x) for x in a.clients.split(",")):
        with tempfile.TemporaryDirectory() as tmp:  # a fresh server per N: its own figures
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
                r = asyncio.run(one_round(server, n, a.holds))
                srv = httpx2.get(f"{server.base}/api/health").json()["channels"]["main"][
                    "fanout_lag_ms"]
            finally:
                server.stop()
        print(f"{r['clients']:>8} {r['p50_ms']:>7.1f} {r['p99_ms']:>7.1f} {r['max_ms']:>7.1f} | "
              f"{srv['p50']:>7.1f} {srv['p99']:>7.1f} {srv['max']:>7.1f} | "
              f"{r['samples']:>5}/{r['expected']:<5} {r['contiguous_clients']:>5}/{n}",
              flush=True)


if __name__ == "__main__":
    main()
