"""What a monitoring call costs the holds (issue 26: `/api/health` held the event loop 60-215 ms
a call at 8-64 channels, and a hold's p99 went to 92 ms when it was polled).

A real server with N channels (8, 32, 64 by default), a match being read on each (estimate
voice, no sound), `--viewers` phones on each channel, and meanwhile:

- a probe phone on the first channel pings every 10 ms: a pong comes back only when the loop
  runs, so the longest ping round trip during a health call is that call's longest stall;
- a referee's hand goes up and down on a channel after another, every 0.2 s, each timed
  (PUT and DELETE .../holds: the answer comes once the engine applied it);
- `/api/health` is polled every `--poll-s`.

First, in this process, what summarising one hub's 20,000 fan-out lags costs (made again for
each channel that sent since the last call; in a thread, but holding the GIL the loop needs).

Printed per N: the health call's own time, the longest stall during each call (median, p99),
the holds' p99 (all, and those that overlapped a call), and how many channel parts each
answer made afresh (`cache.channel_parts_made`, absent on code without it). Run the same
sitting against another checkout with PYTHONPATH (the server is started with this process's
environment):

    .venv/bin/python bench/health_cost.py [--channels 8,32,64] [--seconds 30]
    PYTHONPATH=/tmp/old .venv/bin/python bench/health_cost.py   # the code before, same sitting

A figure, not a test: the server, the phones and this script share the machine's cores.
"""

import argparse
import asyncio
import contextlib
import itertools
import json
import random
import statistics
import subprocess
import sys
import tempfile
import time
import timeit
from pathlib import Path
from typing import Any

import httpx2
import websockets

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
from tests.serverproc import Server

TOKEN = "bench-operator-token-0123456789abcdef"


def pct(v: list[float], q: float) -> float:
    if not v:
        return float("nan")
    v = sorted(v)
    return v[min(len(v) - 1, int(len(v) * q))]


async def viewer(uri: str, stop: asyncio.Event) -> None:
    async with websockets.connect(uri, max_size=None, open_timeout=60) as ws:
        while not stop.is_set():
            with contextlib.suppress(TimeoutError):
                async with asyncio.timeout(0.5):
                    await ws.recv()


async def prober(uri: str, stop: asyncio.Event, pings: list[tuple[float, float]]) -> None:
    """(sent, round trip) of a ping every 10 ms, one at a time."""
    async with websockets.connect(uri, max_size=None, open_timeout=60) as ws:
        while not stop.is_set():
            t = time.perf_counter()
            await ws.send('{"type":"ping"}')
            while json.loads(await ws.recv()).get("type") != "pong":
                pass
            pings.append((t, time.perf_counter() - t))
            await asyncio.sleep(0.01)


async def holder(c: httpx2.AsyncClient, names: list[str], stop: asyncio.Event,
                 holds: list[tuple[float, float]]) -> None:
    i = 0
    while not stop.is_set():
        ch = names[i % len(names)]
        i += 1
        for method in ("PUT", "DELETE"):
            t = time.perf_counter()
            r = await c.request(method, f"/api/channels/{ch}/holds/bench")
            if r.status_code == 200:
                holds.append((t, time.perf_counter() - t))
        await asyncio.sleep(0.2)


async def poller(c: httpx2.AsyncClient, poll_s: float, stop: asyncio.Event,
                 calls: list[tuple[float, float, dict[str, Any]]]) -> None:
    while not stop.is_set():
        t = time.perf_counter()
        body = (await c.get("/api/health", timeout=60)).json()
        calls.append((t, time.perf_counter(), body))
        await asyncio.sleep(poll_s)


async def measure(s: Server, names: list[str], viewers: int, seconds: float,
                  poll_s: float) -> dict[str, Any]:
    stop = asyncio.Event()
    ws = f"ws://127.0.0.1:{s.port}/ws/channels"
    pings: list[tuple[float, float]] = []
    holds: list[tuple[float, float]] = []
    calls: list[tuple[float, float, dict[str, Any]]] = []
    async with httpx2.AsyncClient(base_url=s.base, headers=s.op, timeout=60) as c:
        # the phones in a process of their own: reading 64 channels' states here would keep
        # this loop from sending the probe's pings on time
        phones = subprocess.Popen([sys.executable, __file__, "--phones-of", ws,
                                   "--viewers", str(viewers), "--channels", ",".join(names)],
                                  stdin=subprocess.PIPE)
        tasks = [asyncio.create_task(prober(f"{ws}/{names[0]}", stop, pings))]
        await asyncio.sleep(5)  # the phones connected, the matches under way
        pings.clear()
        tasks.append(asyncio.create_task(holder(c, names, stop, holds)))
        tasks.append(asyncio.create_task(poller(c, poll_s, stop, calls)))
        await asyncio.sleep(seconds)
        stop.set()
        for r in await asyncio.gather(*tasks, return_exceptions=True):
            if isinstance(r, BaseException):  # a probe that died measures nothing
                raise RuntimeError(f"a client of the bench failed: {r!r}")
        phones.communicate(b"")  # its stdin closed: it ends
    took = [(b - a) * 1000 for a, b, _ in calls]
    stalls = [max((rtt for t, rtt in pings if a - rtt <= t <= b), default=0.0) * 1000
              for a, b, _ in calls]
    during = [rtt * 1000 for t, rtt in holds
              if any(a - rtt <= t <= b for a, b, _ in calls)]
    outside = [rtt * 1000 for t, rtt in pings
               if not any(a - rtt <= t <= b for a, b, _ in calls)]
    # channel parts made per answer made (a call within a second of an unchanged hall gets the
    # answer before)
    made = [(b["cache"]["answers_made"], b["cache"]["channel_parts_made"])
            for _, _, b in calls if "cache" in b]
    parts = [(p2 - p1) / (a2 - a1) for (a1, p1), (a2, p2) in itertools.pairwise(made)
             if a2 > a1]
    return {"calls": len(calls), "took_p50": statistics.median(took),
            "took_p99": pct(took, 0.99), "stall_p50": statistics.median(stalls),
            "stall_p99": pct(stalls, 0.99), "stall_max": max(stalls),
            "ping_p50": statistics.median(r * 1000 for _, r in pings),
            "ping_p99_outside": pct(outside, 0.99),
            "hold_p50": statistics.median(r * 1000 for _, r in holds),
            "hold_p99": pct([r * 1000 for _, r in holds], 0.99), "holds": len(holds),
            "hold_during_p99": pct(during, 0.99), "holds_during": len(during),
            "parts": statistics.median(parts) if parts else None}


def one(n: int, viewers: int, seconds: float, poll_s: float) -> dict[str, Any]:
    names = [f"c{i}" for i in range(n)]
    with tempfile.TemporaryDirectory() as tmp:
        s = Server(Path(tmp), {
            "match": {"memorise_s": 2, "cards": 17},
            "voice": {"engine": "estimate"},
            "audio": {"output": "null"},
            # the probe pings 100 times a second: over a viewer's allowance
            "server": {"channels": [{"name": x} for x in names], "client_queue": 256,
                       "limits": {"ws_messages_per_s": 1000, "ws_burst": 1000}},
        }, TOKEN).start()
        try:
            with httpx2.Client(base_url=s.base, headers=s.op, timeout=60) as c:
                for x in names:
                    c.post(f"/api/channels/{x}/match", json={"seed": 1}).raise_for_status()
                    c.post(f"/api/channels/{x}/match/start").raise_for_status()
            return asyncio.run(measure(s, names, viewers, seconds, poll_s))
        finally:
            s.stop()


async def phones(ws: str, names: list[str], viewers: int) -> None:
    """Until stdin closes."""
    stop = asyncio.Event()
    tasks = [asyncio.create_task(viewer(f"{ws}/{n}", stop))
             for n in names for _ in range(viewers)]
    await asyncio.to_thread(sys.stdin.read)
    stop.set()
    await asyncio.gather(*tasks, return_exceptions=True)


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--channels", default="8,32,64")
    ap.add_argument("--viewers", type=int, default=2, help="phones per channel")
    ap.add_argument("--seconds", type=float, default=30.0, help="measured per N")
    ap.add_argument("--poll-s", type=float, default=0.5, help="between two health calls")
    ap.add_argument("--phones-of", help=argparse.SUPPRESS)
    a = ap.parse_args()
    if a.phones_of:
        asyncio.run(phones(a.phones_of, a.channels.split(","), a.viewers))
        return
    import api
    try:
        from hall.hub import summarise_lags
    except ImportError:  # code from before the summary had a function: it sorted the lags
        def summarise_lags(v: list[float]) -> Any:
            v.sort()
            return v[len(v) // 2], v[int(len(v) * 0.99)], v[-1]

    print(f"code: {Path(api.__file__).parent.parent}")
    lags = [random.random() / 100 for _ in range(20000)]
    took = min(timeit.repeat(lambda: summarise_lags(list(lags)), number=20, repeat=5)) / 20
    print(f"a hub's 20,000 fan-out lags summarised (made again for each channel that sent "
          f"since the last call): {took * 1000:.2f} ms")
    print("ms; stall = the longest ping round trip during a health call (the loop held); "
          "ping p99 out = the pings' p99 outside\nthe calls; hold during = holds that "
          "overlapped a call; parts = channel parts made afresh per answer made")
    print(f"{'ch':>3} {'calls':>5} | {'call p50':>8} {'p99':>6} | {'stall p50':>9} {'p99':>6} "
          f"{'max':>6} | {'ping p50':>8} {'p99 out':>7} | {'hold p50':>8} {'p99':>6} "
          f"{'during p99':>10} | {'parts':>5}")
    for n in (int(x) for x in a.channels.split(",")):
        r = one(n, a.viewers, a.seconds, a.poll_s)
        parts = "-" if r["parts"] is None else f"{r['parts']:.1f}"
        print(f"{n:>3} {r['calls']:>5} | {r['took_p50']:>8.1f} {r['took_p99']:>6.1f} | "
              f"{r['stall_p50']:>9.1f} {r['stall_p99']:>6.1f} {r['stall_max']:>6.1f} | "
              f"{r['ping_p50']:>8.1f} {r['ping_p99_outside']:>7.1f} | "
              f"{r['hold_p50']:>8.1f} {r['hold_p99']:>6.1f} "
              f"{r['hold_during_p99']:>10.1f} | {parts:>5}", flush=True)


if __name__ == "__main__":
    main()
