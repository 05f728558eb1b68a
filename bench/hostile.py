"""What hostile clients cost a real `yomite serve` now: memory under oversized requests, a
referee's flood, a mass join, PIN guessing. Prints figures; never passes or fails.

    make bench   (or: .venv/bin/python bench/hostile.py)
"""

import asyncio
import contextlib
import json
import re
import socket
import sys
import tempfile
import time
from pathlib import Path

import httpx2
import websockets

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
from tests.serverproc import Server

TOKEN = "hostile-bench-operator-token-0123456789"


def rss_mib(pid: int) -> float:
    status = Path(f"/proc/{pid}/status").read_text()
    return int(re.search(r"VmRSS:\s+(\d+)", status).group(1)) / 1024


def send(port: int, head: bytes, chunks) -> float:
    t0 = time.perf_counter()
    with socket.create_connection(("127.0.0.1", port), timeout=30) as s:
        with contextlib.suppress(BrokenPipeError, ConnectionResetError):
            s.sendall(head)  # the server answers and closes before the rest is sent
            for c in chunks:
                s.sendall(c)
        with contextlib.suppress(ConnectionResetError, TimeoutError):
            s.recv(4096)
    return time.perf_counter() - t0


def sizes(s: Server) -> None:
    mib = b"x" * (1 << 20)
    pid = s.proc.pid
    start = rss_mib(pid)
    took = [send(s.port, b"POST /api/channels/main/referees HTTP/1.1\r\nHost: 127.0.0.1\r\n"
                 b"Content-Type: application/json\r\nContent-Length: 52428800\r\n\r\n",
                 [mib] * 50) for _ in range(10)]
    after_declared = rss_mib(pid)
    chunk = b"%x\r\n%s\r\n" % (len(mib), mib)
    for _ in range(10):
        send(s.port, b"POST /api/channels/main/referees HTTP/1.1\r\nHost: 127.0.0.1\r\n"
             b"Content-Type: application/json\r\nTransfer-Encoding: chunked\r\n\r\n",
             [chunk] * 50)
    after_chunked = rss_mib(pid)
    for _ in range(10):
        send(s.port, b"GET /api/health HTTP/1.1\r\nHost: 127.0.0.1\r\nX-Big: ",
             [mib] * 50 + [b"\r\n\r\n"])
    after_headers = rss_mib(pid)
    print(f"server RSS {start:.1f} MiB; after ten 50 MB bodies (declared) {after_declared:.1f}; "
          f"ten chunked {after_chunked:.1f}; ten 50 MB headers {after_headers:.1f} MiB")
    print(f"  a declared 50 MB body is refused (413) in {sorted(took)[5] * 1000:.1f} ms "
          "(median), before it is read")


def mass_join(s: Server, cap: int) -> None:
    pin = httpx2.get(f"{s.base}/api/channels/main/pin", headers=s.op).json()["pin"]
    codes: dict[int, int] = {}
    t0 = time.perf_counter()
    with httpx2.Client(base_url=s.base) as c:
        for i in range(3000):
            r = c.post("/api/channels/main/referees", json={"pin": pin, "name": f"mat {i}"},
                       headers={"X-Forwarded-For": f"10.0.{i // 250}.{i % 250}"})
            codes[r.status_code] = codes.get(r.status_code, 0) + 1
    took = time.perf_counter() - t0
    op = len(httpx2.get(f"{s.base}/api/channels/main", headers=s.op).content)
    viewer = len(httpx2.get(f"{s.base}/api/channels/main").content)
    store = s.tmp / "journal" / "referees.jsonl"
    print(f"3,000 joins in {took:.1f} s: {codes.get(200, 0)} joined, {codes.get(409, 0)} refused "
          f"as the channel is full (cap {cap}), {codes.get(429, 0)} by the per-address limit "
          "(raised to 1,000 a minute for this run)")
    print(f"  state: operator {op / 1024:.1f} KiB, viewer {viewer / 1024:.1f} KiB; "
          f"store {len(store.read_text().splitlines())} lines, {store.stat().st_size} bytes")


def flood(s: Server, n: int) -> None:
    httpx2.post(f"{s.base}/api/channels/side/match", json={"seed": 1}, headers=s.op)
    httpx2.post(f"{s.base}/api/channels/side/match/start", headers=s.op)
    pin = httpx2.get(f"{s.base}/api/channels/side/pin", headers=s.op).json()["pin"]
    ref = httpx2.post(f"{s.base}/api/channels/side/referees",
                      json={"pin": pin, "name": "flood"}).json()
    before = rss_mib(s.proc.pid)
    lags: list[float] = []

    async def health_meanwhile(stop: asyncio.Event) -> None:
        async with httpx2.AsyncClient() as c:
            while not stop.is_set():
                t1 = time.perf_counter()
                await c.get(f"{s.base}/api/health")
                lags.append(time.perf_counter() - t1)
                await asyncio.sleep(0.02)

    async def run() -> tuple[float, int, str]:
        stop = asyncio.Event()
        probe = asyncio.create_task(health_meanwhile(stop))
        uri = f"ws://127.0.0.1:{s.port}/ws/channels/side?token={ref['token']}"
        t0 = time.perf_counter()
        sent, how = 0, "all sent"
        async with websockets.connect(uri, max_size=None) as ws:
            try:
                for i in range(n):
                    await ws.send(json.dumps({"type": "hold" if i % 2 == 0 else "release"}))
                    sent += 1
                async with asyncio.timeout(10):
                    while True:
                        await ws.recv()
            except websockets.ConnectionClosed as e:
                how = f"closed by the server ({e.rcvd.code if e.rcvd else '?'})"
        took = time.perf_counter() - t0
        stop.set()
        await probe
        return took, sent, how

    took, sent, how = asyncio.run(run())
    time.sleep(1.0)
    t0 = time.perf_counter()
    log = httpx2.get(f"{s.base}/api/channels/side/match/log", headers=s.op, timeout=30).json()
    log_s = time.perf_counter() - t0
    mine = [r for r in log["records"] if r["event"].get("referee") == ref["referee"]]
    lags.sort()
    print(f"one referee floods hold/release: {sent:,} of {n:,} sent in {took:.1f} s, then "
          f"{how}; {len(mine)} changes applied and journaled (hand: 2/s, burst 8; socket: "
          f"50 messages/s, burst 200); RSS +{rss_mib(s.proc.pid) - before:.1f} MiB")
    print(f"  meanwhile GET /api/health: p50 {lags[len(lags) // 2] * 1000:.1f} ms, max "
          f"{lags[-1] * 1000:.1f} ms ({len(lags)} requests); the match log read in "
          f"{log_s * 1000:.0f} ms (in a worker thread)")


def pins(s: Server) -> None:
    codes = []
    for i in range(12):
        r = httpx2.post(f"{s.base}/api/channels/fourth/referees",
                        json={"pin": "00000000", "name": "g"},
                        headers={"X-Forwarded-For": f"10.1.{i}.1"})
        codes.append(r.status_code)
    one = codes.index(429) if 429 in codes else len(codes)
    wrong = 0
    lock = None
    for n in range(2, 120):
        with httpx2.Client(transport=httpx2.HTTPTransport(local_address=f"127.0.1.{n}")) as c:
            r = c.post(f"{s.base}/api/channels/third/referees",
                       json={"pin": f"{n:08d}", "name": "g"})
        if r.status_code == 429:
            lock = int(r.headers["retry-after"])
            break
        wrong += 1
    print(f"PIN guessing: one address (any X-Forwarded-For) gets {one} attempts a minute; many "
          f"addresses together {wrong} wrong PINs before the channel locks for {lock} s")
    # the policy's arithmetic: 30 wrong PINs, then locks of 60, 120, 240... s (1 h at most)
    t, guesses, lock_s = 0.0, 0, 60.0
    while guesses < 500_000:  # half of a 6-digit PIN space: the expected search
        guesses += 30
        t += lock_s
        lock_s = min(lock_s * 2, 3600.0)
    print(f"  expected time to guess a 6-digit PIN at that policy: {t / 86400 / 365:.1f} years "
          "(30 guesses an hour once the back-off reaches its hour)")


def main() -> None:
    with tempfile.TemporaryDirectory() as tmp:
        cap = 100
        s = Server(Path(tmp), {
            "match": {"memorise_s": 600, "cards": 2},
            "voice": {"engine": "estimate"}, "audio": {"output": "null"},
            "server": {"channels": [{"name": "main"}, {"name": "side"}, {"name": "third"}],
                       "security": {"pin_attempts_per_minute": 1000}},
        }, TOKEN).start()
        try:
            sizes(s)
            mass_join(s, cap)
            flood(s, 10_000)
        finally:
            s.stop()
        (Path(tmp) / "pins").mkdir()
        s2 = Server(Path(tmp) / "pins", {
            "voice": {"engine": "estimate"}, "audio": {"output": "null"},
            "server": {"channels": [{"name": "third"}, {"name": "fourth"}]},
        }, TOKEN).start()
        try:
            pins(s2)
        finally:
            s2.stop()


if __name__ == "__main__":
    main()
