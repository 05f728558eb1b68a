"""Referees flooding together (issue 25, item 7) against a real `yomite serve`: twenty referees
send hold, release, hold... as fast as their sockets take them and connect again whenever the
server closes them, while an honest referee raises its hand now and then.

What is asserted is counted, not timed (a loaded machine only stretches the times):
- the lines the crowd makes the journal write are bounded by the channel's budget: a hand
  going down is what is budgeted (per referee, whatever socket it comes on, and per channel),
  and a hand can only go up again after it went down;
- the honest referee's hold is never queued behind the crowd: between the moment it is sent
  and the moment it is applied, the crowd gets no more lines into the journal than its budget
  allows over that wait (today the hold waited behind the crowd's whole backlog, 745 ms at p90
  while the crowd wrote ~67 fsynced lines a second).
The delays themselves are printed (`-s`), as figures.
"""

from __future__ import annotations

import asyncio
import json
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import httpx2
import pytest
import websockets

from .serverproc import ROOT, Server

pytestmark = pytest.mark.server

TOKEN = "flood-operator-token-0123456789abcdef"
CROWD = 20
HOLDS = 15
PACE_S = 1.0  # between the honest referee's holds: the crowd floods on meanwhile
PER_S, BURST = 2.0, 8  # per referee (the defaults)
CHANNEL_PER_S, CHANNEL_BURST = 4.0, 8  # per channel (the defaults)
CONFIG = {
    "match": {"memorise_s": 3600, "cards": 2},
    "voice": {"engine": "estimate"},
    "audio": {"output": "null"},
    "server": {
        "referees": {"changes_per_s": PER_S, "changes_burst": BURST,
                     "channel_changes_per_s": CHANNEL_PER_S,
                     "channel_changes_burst": CHANNEL_BURST},
        "security": {"pin_attempts_per_minute": 1000},
    },
}


def journal(s: Server) -> list[dict[str, Any]]:
    """The match's journal as written so far (a line still being written is left out)."""
    (path,) = (s.tmp / "journal" / "main").glob("*.jsonl")
    out = []
    for line in path.read_text("utf-8").splitlines():
        try:
            out.append(json.loads(line))
        except ValueError:
            break
    return out


def hand(record: dict[str, Any]) -> tuple[str, str] | None:
    ev = record.get("event") or {}
    if ev.get("type") in ("hold", "release"):
        return ev["type"], ev.get("referee", "")
    return None


def holding(state: dict[str, Any], rid: str) -> bool:
    return rid in [h["referee"] for h in (state.get("match") or {}).get("holds", [])]


async def honest_holds(s: Server, me: dict[str, str], crowd: set[str], holds: int = HOLDS,
                       pace_s: float = PACE_S) -> list[tuple[float, int]]:
    """The honest referee raises its hand `holds` times (the operator lowers it each time):
    for each, the wait from send to the state that shows it, and the crowd's journal lines
    written in between. (bench/hostile.py measures with it too.)"""
    out = []
    uri = f"ws://127.0.0.1:{s.port}/ws/channels/main?token={me['token']}"
    async with websockets.connect(uri, max_size=None) as ws, \
            httpx2.AsyncClient(base_url=s.base, headers=s.op, timeout=60) as op:

        async def until(up: bool) -> None:
            while True:
                m = json.loads(await ws.recv())
                if m["type"] == "state" and holding(m, me["referee"]) == up:
                    return

        for _ in range(holds):
            before = len(journal(s))
            t0 = time.monotonic()
            await ws.send('{"type":"hold"}')
            await until(True)
            waited = time.monotonic() - t0
            records = journal(s)
            mine = next(i for i in range(before, len(records))
                        if hand(records[i]) == ("hold", me["referee"]))
            theirs = sum(1 for r in records[before:mine] if (hand(r) or ("", ""))[1] in crowd)
            out.append((waited, theirs))
            r = await op.delete(f"/api/channels/main/holds/{me['referee']}")
            assert r.status_code == 200, r.text
            await until(False)
            await asyncio.sleep(pace_s)
    return out


def test_a_crowd_of_flooding_referees_is_bounded_per_channel_and_never_delays_a_hold(
        tmp_path: Path) -> None:
    s = Server(tmp_path, CONFIG, TOKEN).start()
    child = None
    try:
        with httpx2.Client(base_url=s.base, headers=s.op, timeout=60) as c:
            assert c.post("/api/channels/main/match", json={"seed": 7}).status_code == 200
            assert c.post("/api/channels/main/match/start").status_code == 200
            pin = c.get("/api/channels/main/pin").json()["pin"]
            refs = [c.post("/api/channels/main/referees",
                           json={"pin": pin, "name": f"mat {i}"}).json()
                    for i in range(CROWD + 1)]
        me, crowd = refs[0], refs[1:]
        ids = {r["referee"] for r in crowd}
        child = subprocess.Popen(
            [sys.executable, "-m", "tests.flood_child", str(s.port), "main",
             *[r["token"] for r in crowd]],
            cwd=ROOT, stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
        assert child.stdout is not None and child.stdin is not None
        assert child.stdout.readline().strip() == "FLOODING"
        t0 = time.monotonic()
        start = len(journal(s))
        results = asyncio.run(honest_holds(s, me, ids))
        child.stdin.close()
        tail = child.stdout.read()
        child.wait(60)
        flooded_s = time.monotonic() - t0
        # what the crowd had already sent is applied within the budget too: wait until the
        # journal stops growing for a whole refill of the channel's burst
        records = journal(s)
        while True:
            time.sleep(CHANNEL_BURST / CHANNEL_PER_S)
            again = journal(s)
            if len(again) == len(records):
                break
            records = again
        settled_s = time.monotonic() - t0
    finally:
        if child is not None and child.poll() is None:
            child.kill()
            child.wait(10)
        if child is not None and child.stdout is not None:
            child.stdout.close()
        s.stop()

    lines = [r for r in records[start:] if (hand(r) or ("", ""))[1] in ids]
    downs = sum(1 for r in lines if hand(r)[0] == "release")  # type: ignore[index]
    waits = sorted(w for w, _ in results)
    print(f"\n{CROWD} referees flooding for {flooded_s:.1f} s ({tail.strip()}): "
          f"{len(lines)} journal lines ({downs} hands down); the honest hold seen after "
          f"p50 {waits[len(waits) // 2] * 1000:.1f} ms, max {waits[-1] * 1000:.1f} ms; the "
          f"crowd's lines during each wait: {[n for _, n in results]}; waits (ms): "
          f"{[round(w * 1000, 1) for w, _ in results]}")
    # a hand goes down at most as often as the channel's budget allows, and goes up again at
    # most once after each time it went down (plus once for each referee's first hold)
    assert downs <= CHANNEL_BURST + CHANNEL_PER_S * settled_s, (downs, settled_s)
    assert len(lines) <= 2 * downs + CROWD, (len(lines), downs)
    for waited, theirs in results:
        # during its wait, the crowd got in at most what the budget allows over that wait
        # (a full burst, and the hands it lets up again), and one change already applied
        assert theirs <= 2 * (CHANNEL_BURST + CHANNEL_PER_S * waited) + 2, (theirs, waited)
