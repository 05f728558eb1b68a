"""Soak: 20 matches back to back on a real server, with random holds from referees over
WebSocket, at short timings. Prints the server's RSS after each match and the growth from match
2 to the last, and checks that every journal is complete (header, every record, the end) and
replays to the state the server published.

    .venv/bin/python bench/soak.py [--matches 20] [--voice estimate|openjtalk] [--device pulse]
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
import websockets

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
from reader.journal import read_journal, replay
from tests.serverproc import Server

TOKEN = "soak-operator-token-0123456789abcdef"


def rss_kib(pid: int) -> int:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1])
    raise RuntimeError("no VmRSS")


async def match(server: Server, refs: list[dict], rng: random.Random, seed: int) -> dict:
    op = {"Authorization": f"Bearer {TOKEN}"}
    async with httpx2.AsyncClient(base_url=server.base, headers=op, timeout=30) as http:
        r = await http.post("/api/channels/main/match", json={"colors": ["blue"], "seed": seed})
        r.raise_for_status()
        await http.post("/api/channels/main/match/start")
        socks = [await websockets.connect(
            f"ws://127.0.0.1:{server.port}/ws/channels/main?token={ref['token']}")
            for ref in refs]

        async def drain(ws: websockets.ClientConnection) -> None:
            async for _ in ws:  # a phone reads every state (one that does not is dropped)
                pass

        readers = [asyncio.create_task(drain(ws)) for ws in socks]
        try:
            while True:
                await asyncio.sleep(rng.uniform(2.0, 5.0))
                st = (await http.get("/api/channels/main")).json()["match"]
                if st["phase"] == "finished":
                    return st
                ws = rng.choice(socks)
                await ws.send(json.dumps({"type": "hold"}))
                await asyncio.sleep(rng.uniform(0.05, 0.6))
                await ws.send(json.dumps({"type": "release"}))
        finally:
            for ws in socks:
                await ws.close()
            await asyncio.gather(*readers, return_exceptions=True)


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--matches", type=int, default=20)
    ap.add_argument("--voice", default="estimate")
    ap.add_argument("--device", default=None, help="e.g. pulse (default: no sound)")
    a = ap.parse_args()
    rng = random.Random(7)
    with tempfile.TemporaryDirectory() as tmp:
        audio = {"output": "device", "device": a.device} if a.device else {"output": "null"}
        server = Server(Path(tmp), {
            "match": {"memorise_s": 1, "cards": 3,
                      "gaps": {"after_call_s": 0.2, "between_verses_s": 0.3,
                               "between_cards_s": 0.3}, "resume": {"lead_in_s": 0.3}},
            "voice": {"engine": a.voice, "speed": 3.0, "cache_dir": str(Path(tmp) / "cache")},
            "audio": audio,
        }, TOKEN).start()
        try:
            with httpx2.Client(base_url=server.base) as c:
                pin = c.get("/api/channels/main/pin",
                            headers={"Authorization": f"Bearer {TOKEN}"}).json()["pin"]
                refs = [c.post("/api/channels/main/referees",
                               json={"pin": pin, "name": f"mat {i}"}).json() for i in range(3)]
            rss = []
            complete = 0
            t0 = time.monotonic()
            for k in range(a.matches):
                final = asyncio.run(match(server, refs, rng, 1000 + k))
                rss.append(rss_kib(server.proc.pid))
                path = sorted((Path(tmp) / "journal" / "main").glob("*.jsonl"))[-1]
                contents = read_journal(path)
                facts = [f["fact"] for r in contents.records for f in r["facts"]]
                engine = replay(contents)
                ok = (contents.torn is None and "finished" in facts
                      and [c.poem for c in engine.snapshot().cards]
                      == [c["poem"] for c in final["cards"]])
                complete += ok
                print(f"match {k + 1:2d}: {len(contents.records):4d} records, "
                      f"{facts.count('hold'):3d} holds, journal {'complete' if ok else 'BAD'}, "
                      f"RSS {rss[-1] / 1024:.1f} MiB", flush=True)
            growth = (rss[-1] - rss[1]) / rss[1] * 100
            print(f"\n{a.matches} matches in {time.monotonic() - t0:.0f} s; "
                  f"RSS match 2 {rss[1] / 1024:.1f} MiB -> match {a.matches} "
                  f"{rss[-1] / 1024:.1f} MiB: {growth:+.1f}% (target < 10%); "
                  f"journals complete {complete}/{a.matches}")
        finally:
            server.stop()


if __name__ == "__main__":
    main()
