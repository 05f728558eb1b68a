"""What a referee page's liveness pings cost the server (issue 47, item 7): N referee sockets on
one channel of a real `yomite serve` (estimate voice, no sound, a match prepared), first quiet
for the measuring window, then each pinging every 0.5 s (what the referee page does while
shown), and the server process's CPU time (user + system, /proc) over each window. Prints the
CPU share of the server in each, the pings answered, and the bytes one referee sends and gets
per second in WebSocket frames (payloads and frame headers; TCP/IP adds about 52 bytes a
packet each way).

    .venv/bin/python bench/referee_pings.py [--referees 100] [--seconds 20]

A figure, not a test: the clients share this machine's cores with the server.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import os
import sys
import tempfile
import time
from pathlib import Path

import httpx2
import websockets

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from tests.serverproc import Server

TOKEN = "bench-pings-operator-token-0123456789"
PING = '{"type":"ping"}'
CONFIG = {"match": {"memorise_s": 3600, "cards": 2}, "voice": {"engine": "estimate"},
          "audio": {"output": "null"},
          "server": {"referees": {"max_per_channel": 1000, "sockets_each": 4},
                     "security": {"pin_attempts_per_minute": 1000}}}


def cpu_s(pid: int) -> float:
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


async def window(s: Server, tokens: list[str], seconds: float,
                 ping: bool) -> tuple[float, int, int]:
    """The server's CPU seconds over `seconds` with the sockets open (pinging or not); the
    pongs got, and their bytes."""
    assert s.proc is not None
    pongs = [0, 0]

    async def phone(tok: str, stop: asyncio.Event) -> None:
        uri = f"ws://127.0.0.1:{s.port}/ws/channels/main?token={tok}"
        async with websockets.connect(uri) as ws:
            async def read() -> None:
                async for m in ws:
                    if json.loads(m)["type"] == "pong":
                        pongs[0] += 1
                        pongs[1] += len(m)

            reader = asyncio.create_task(read())
            while not stop.is_set():
                if ping:
                    await ws.send(PING)
                with contextlib.suppress(TimeoutError):
                    await asyncio.wait_for(stop.wait(), 0.5)
            reader.cancel()

    stop = asyncio.Event()
    tasks = [asyncio.create_task(phone(t, stop)) for t in tokens]
    await asyncio.sleep(2.0)  # all connected, their first states sent
    c0 = cpu_s(s.proc.pid)
    p0 = pongs[0]
    await asyncio.sleep(seconds)
    used = cpu_s(s.proc.pid) - c0
    got = pongs[0] - p0
    stop.set()
    await asyncio.gather(*tasks, return_exceptions=True)
    return used, got, pongs[1]


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--referees", type=int, default=100)
    ap.add_argument("--seconds", type=float, default=20.0)
    a = ap.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        s = Server(Path(tmp), CONFIG, TOKEN).start()
        try:
            with httpx2.Client(base_url=s.base, headers=s.op, timeout=60) as c:
                assert c.post("/api/channels/main/match", json={"seed": 1}).status_code == 200
                pin = c.get("/api/channels/main/pin").json()["pin"]
                tokens = [c.post("/api/channels/main/referees",
                                 json={"pin": pin, "name": f"mat {i}"}).json()["token"]
                          for i in range(a.referees)]
            quiet, _, _ = asyncio.run(window(s, tokens, a.seconds, False))
            busy, got, pong_bytes = asyncio.run(window(s, tokens, a.seconds, True))
        finally:
            s.stop()
    per = got / a.seconds / a.referees
    pong_len = pong_bytes / max(1, got)
    print(f"{a.referees} referee sockets, {a.seconds:.0f} s windows, {time.strftime('%F')}")
    print(f"server CPU quiet: {quiet / a.seconds * 100:.1f} % of a core")
    print(f"server CPU pinging every 0.5 s: {busy / a.seconds * 100:.1f} % of a core "
          f"({got} pongs, {per:.2f} a second a referee; "
          f"{(busy - quiet) / max(1, got) * 1e6:.0f} µs of CPU a ping)")
    print(f"one referee: {per * (len(PING) + 6):.0f} B/s up, {per * (pong_len + 2):.0f} B/s down "
          "in WebSocket frames")


if __name__ == "__main__":
    main()
