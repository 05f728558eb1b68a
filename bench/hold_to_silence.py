"""Hold from a real WebSocket client -> silence in what the sound server played.

A real `yomite serve` reads a match (Open JTalk) into a PulseAudio null sink of its own; a
referee's WebSocket client raises its hand at random moments while a verse is sounding; the
monitor is recorded with timestamps (tests/audio_capture.py). For each hold: the time from the
client's send to the first silent sample of the capture, as a bracket [earliest, latest] (the
capture's timestamps are about one sink block wide). Prints p50/p99 of both ends.

    make bench   (or: . /tmp/yomite-audio/env.sh; .venv/bin/python bench/hold_to_silence.py)
"""

import argparse
import asyncio
import json
import random
import sys
import tempfile
import time
from pathlib import Path

import httpx2
import numpy as np
import websockets

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
from bench import conditions
from tests.audio_capture import OwnNullSink, Recorder
from tests.serverproc import Server

TOKEN = "hold-bench-operator-token-0123456789"


async def run(server: Server, holds: int, rng: random.Random) -> list[float]:
    op = {"Authorization": f"Bearer {TOKEN}"}
    sent: list[float] = []
    async with httpx2.AsyncClient(base_url=server.base, headers=op, timeout=30) as http:
        await http.post("/api/channels/main/match", json={"colors": ["blue"], "seed": 3})
        pin = (await http.get("/api/channels/main/pin")).json()["pin"]
        ref = (await http.post("/api/channels/main/referees",
                               json={"pin": pin, "name": "bench"})).json()
        uri = f"ws://127.0.0.1:{server.port}/ws/channels/main?token={ref['token']}"
        async with websockets.connect(uri) as ws:
            state: dict = {}

            async def reader() -> None:
                async for text in ws:
                    m = json.loads(text)
                    if m["type"] == "state":
                        state.update(m)

            task = asyncio.create_task(reader())
            await http.post("/api/channels/main/match/start")
            while len(sent) < holds:
                m = state.get("match") or {}
                if m.get("phase") == "finished":
                    await http.post("/api/channels/main/match", json={"colors": ["blue"]})
                    await http.post("/api/channels/main/match/start")
                    await asyncio.sleep(0.5)
                    continue
                seg = m.get("segment") or {}
                if m.get("paused") or seg.get("kind") not in ("verse", "prelude", "call"):
                    await asyncio.sleep(0.02)
                    continue
                # a random moment inside the clip that is sounding
                await asyncio.sleep(rng.uniform(0.2, 1.0))
                if (state.get("match") or {}).get("paused"):
                    continue
                t = time.monotonic()
                await ws.send(json.dumps({"type": "hold"}))
                sent.append(t)
                await asyncio.sleep(0.6)
                await ws.send(json.dumps({"type": "release"}))
                await asyncio.sleep(0.3)
            task.cancel()
    return sent


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--holds", type=int, default=50)
    ap.add_argument("--blocksize", type=int, default=256, help="audio.blocksize (frames)")
    ap.add_argument("--anyway", action="store_true",
                    help="print the figures even where the conditions are not met (marked)")
    a = ap.parse_args()
    rng = random.Random(11)
    before = conditions.machine()
    conditions.require_quiet(before, a.anyway)
    with tempfile.TemporaryDirectory() as tmp, OwnNullSink() as sink:
        server = Server(Path(tmp), {
            "match": {"memorise_s": 0, "cards": 17, "prelude": {"enabled": False},
                      "resume": {"lead_in_s": 0.5}},
            "voice": {"engine": "openjtalk", "cache_dir": "/tmp/yomite-test-cache"},
            "audio": {"output": "device", "device": "pulse", "blocksize": a.blocksize},
        }, TOKEN).start()
        assert server.proc is not None
        problems = conditions.report(before, server.proc.pid, a.blocksize)
        try:
            with Recorder(Path(tmp) / "cap.wav", source=sink.monitor) as rec:
                sent = asyncio.run(run(server, a.holds, rng))
        finally:
            server.stop()
        cap = rec.capture
        assert cap is not None
        lo, hi = [], []
        loud = np.abs(cap.x) > 0
        for t in sent:
            i = int(np.searchsorted(cap.times[:, 0], t))  # first read at or after the send
            start = int(cap.times[max(i - 1, 0), 1])
            # from there, the first frame after which the output stays silent for 200 ms
            j = start
            n = len(loud)
            while j < n and loud[j:j + 9600].any():
                j += int(np.flatnonzero(loud[j:j + 9600])[-1]) + 1
            lo.append((cap.t_line(j) - t) * 1000)
            hi.append((cap.t_arrival(j) - t) * 1000)
        lo_a, hi_a = np.array(lo), np.array(hi)
        if not conditions.verdict(problems, a.anyway):
            sys.exit(2)
        print(f"{len(sent)} holds from a WebSocket client to silence in the capture (ms):")
        print(f"  p50 [{np.percentile(lo_a, 50):6.1f}, {np.percentile(hi_a, 50):6.1f}]   "
              f"p99 [{np.percentile(lo_a, 99):6.1f}, {np.percentile(hi_a, 99):6.1f}]   "
              f"max [{lo_a.max():6.1f}, {hi_a.max():6.1f}]")


if __name__ == "__main__":
    main()
