"""Scripted referee phones that press as api/static/referee.js does, for
tests/test_presses_netns.py (run inside a network namespace whose link to the server is
impaired): each keeps a WebSocket, pings every 0.5 s, estimates the server's match clock from
the pong of the shortest round trip, calls 1.75 s of silence lost and opens a new socket at once;
each press carries its move (rising), the card and last verse the phone showed and `at_s`; with
no confirming state within 1.5 s the same move goes by REST; with no answer by the server's age
limit + 0.3 s the press is given up (the page says it failed).

    python -m tests.press_phones BASE SECONDS SEED TOKEN...

Prints "PRESSING" once every phone has its first state, and at the end one JSON line: every
press with its outcome (applied, refused, superseded, gave_up)."""

from __future__ import annotations

import asyncio
import contextlib
import json
import random
import sys
import time
from typing import Any

import httpx2
import websockets

CONFIRM_S, PING_S, LOST_S = 1.5, 0.5, 1.75
RUNNING = ("prelude", "reading", "tiebreak")


class Phone:
    def __init__(self, base: str, token: str, rng: random.Random) -> None:
        self.base, self.token, self.rng = base, token, rng
        self.referee = ""
        self.state: dict[str, Any] = {}
        self.seen: dict[str, Any] = {"card": None, "verse": None}
        self.samples: list[tuple[float, float]] = []  # (rtt, offset)
        self.pings: list[float] = []
        self.ws: Any = None
        self.heard = time.monotonic()
        self.max_age_s = 2.0
        self.move = int(time.time() * 1000)
        self.presses: list[dict[str, Any]] = []
        self.pending: dict[str, Any] | None = None
        self.changed = asyncio.Event()
        self.ready = asyncio.Event()
        self.reconnects = 0

    # ------------------------------------------------------------------ the link
    def server_now(self) -> float | None:
        if not self.samples:
            return None
        return time.monotonic() + min(self.samples)[1]

    async def link(self, stop: asyncio.Event) -> None:
        uri = self.base.replace("http", "ws", 1) + "/ws/channels/main"
        while not stop.is_set():
            try:
                async with asyncio.timeout(LOST_S):
                    ws = await websockets.connect(
                        uri, subprotocols=None, additional_headers={
                            "Authorization": f"Bearer {self.token}"}, open_timeout=None)
            except (TimeoutError, OSError, websockets.WebSocketException):
                await asyncio.sleep(0.25)
                continue
            self.ws, self.heard, self.pings = ws, time.monotonic(), []
            reader = asyncio.create_task(self._read(ws))
            try:
                while not stop.is_set() and not reader.done():
                    if time.monotonic() - self.heard > LOST_S:
                        break  # lost: a new socket at once, the old one left behind
                    self.pings.append(time.monotonic())
                    with contextlib.suppress(Exception):
                        await asyncio.wait_for(ws.send('{"type":"ping"}'), 0.2)
                    await asyncio.sleep(PING_S)
            finally:
                self.ws = None
                reader.cancel()
                ws.transport.abort()
                self.reconnects += 1

    async def _read(self, ws: Any) -> None:
        with contextlib.suppress(Exception):
            async for text in ws:
                self.heard = time.monotonic()
                m = json.loads(text)
                if m["type"] == "hello":
                    self.referee = m["referee"]
                    self.max_age_s = m.get("press_max_age_s") or 2.0
                elif m["type"] == "pong" and self.pings:
                    sent = self.pings.pop(0)
                    rtt = time.monotonic() - sent
                    if "s" in m:
                        self.samples = [*self.samples[-19:], (rtt, m["s"] - (sent + rtt / 2))]
                elif m["type"] == "state":
                    self.on_state(m)
                elif m["type"] == "error":
                    self.on_error(m)

    def mine(self, st: dict[str, Any]) -> bool:
        return self.referee in [h["referee"] for h in (st.get("match") or {}).get("holds", [])]

    def on_state(self, st: dict[str, Any]) -> None:
        if self.state and st.get("seq", 0) <= self.state.get("seq", -1) and \
                st.get("channel") == self.state.get("channel"):
            return
        self.state = st
        m = st.get("match")
        if m:
            if m["card"] != self.seen["card"]:
                self.seen = {"card": m["card"], "verse": None}
            seg = m.get("segment") or {}
            if seg.get("card") == m["card"] and seg.get("verse"):
                self.seen["verse"] = seg["verse"]
        self.ready.set()
        p = self.pending
        if p is not None and self.mine(st) == p["want"]:
            self.answer(p, "applied")

    def on_error(self, m: dict[str, Any]) -> None:
        p = self.pending
        if p is None or m.get("move") != p["move"]:
            return
        if m["error"] == "press_stale":
            self.answer(p, "refused")
        elif m["error"] == "press_superseded":
            self.answer(p, "superseded")

    def answer(self, p: dict[str, Any], outcome: str) -> None:
        if p.get("outcome") is None:
            p["outcome"] = outcome
            p["answered_after_s"] = time.monotonic() - p["t"]
        if self.pending is p:
            self.pending = None
        self.changed.set()

    # ------------------------------------------------------------------ presses
    async def press(self, want: bool) -> None:
        self.move = max(self.move + 1, int(time.time() * 1000))
        msg: dict[str, Any] = {"type": "hold" if want else "release", "move": self.move}
        if self.seen["card"] is not None:
            msg["card"] = self.seen["card"]
            if self.seen["verse"]:
                msg["verse"] = self.seen["verse"]
        at = self.server_now()
        if at is not None:
            msg["at_s"] = round(at, 3)
        p = {"want": want, "move": self.move, "seen": dict(self.seen), "at_s": msg.get("at_s"),
             "t": time.monotonic(), "outcome": None, "via": "ws"}
        self.presses.append(p)
        self.pending = p
        sent = False
        if self.ws is not None:
            with contextlib.suppress(Exception):
                await asyncio.wait_for(self.ws.send(json.dumps(msg)), 0.2)
                sent = True
        deadline = p["t"] + self.max_age_s + 0.3
        rest: asyncio.Task[None] | None = None
        if not sent:
            rest = asyncio.create_task(self._rest(p, msg))
        while p["outcome"] is None and time.monotonic() < deadline:
            self.changed.clear()
            if rest is None and time.monotonic() - p["t"] >= CONFIRM_S:
                rest = asyncio.create_task(self._rest(p, msg))
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(self.changed.wait(), 0.05)
        if p["outcome"] is None:
            self.answer(p, "gave_up")
        if rest is not None:
            rest.cancel()

    async def _rest(self, p: dict[str, Any], msg: dict[str, Any]) -> None:
        p["via"] = "ws+rest" if p["via"] == "ws" else "rest"
        body = {k: v for k, v in msg.items() if k != "type"}
        path = f"/api/channels/main/holds/{self.referee}"
        with contextlib.suppress(Exception):
            async with httpx2.AsyncClient(base_url=self.base, timeout=10, headers={
                    "Authorization": f"Bearer {self.token}"}) as c:
                r = await c.request("PUT" if p["want"] else "DELETE", path, json=body)
                if r.status_code == 409 and r.json().get("error") == "press_stale":
                    self.answer(p, "refused")
                elif r.status_code == 200:
                    st = r.json()
                    self.on_state(st)
                    outcome = (st.get("press") or {}).get("outcome")
                    if outcome == "superseded":
                        self.answer(p, "superseded")
                    elif self.pending is p:  # applied, or repeated: applied once already
                        self.answer(p, "applied")

    async def play(self, stop: asyncio.Event) -> None:
        await self.ready.wait()
        while not stop.is_set():
            await asyncio.sleep(self.rng.uniform(0.3, 1.2) if self.mine(self.state)
                                else self.rng.uniform(1.5, 4.0))
            m = self.state.get("match") or {}
            if stop.is_set():
                break
            if self.mine(self.state) or (m.get("phase") in RUNNING and not m.get("paused")):
                await self.press(not self.mine(self.state))


async def main(base: str, seconds: float, seed: int, tokens: list[str]) -> None:
    rng = random.Random(seed)
    phones = [Phone(base, t, random.Random(rng.random())) for t in tokens]
    stop = asyncio.Event()
    links = [asyncio.create_task(p.link(stop)) for p in phones]
    async with asyncio.timeout(60):
        await asyncio.gather(*(p.ready.wait() for p in phones))
        while any(not p.samples for p in phones):
            await asyncio.sleep(0.1)
    print("PRESSING", flush=True)
    plays = [asyncio.create_task(p.play(stop)) for p in phones]
    await asyncio.sleep(seconds)
    stop.set()
    await asyncio.gather(*plays, return_exceptions=True)
    # the last hand up comes down, so that the match ends where the hands are
    for p in phones:
        if p.mine(p.state):
            await p.press(False)
    for t in links:
        t.cancel()
    await asyncio.gather(*links, return_exceptions=True)
    print(json.dumps([{"referee": p.referee, "reconnects": p.reconnects, "presses": [
        {k: v for k, v in q.items() if k != "t"} for q in p.presses]} for p in phones]),
        flush=True)


if __name__ == "__main__":
    asyncio.run(main(sys.argv[1], float(sys.argv[2]), int(sys.argv[3]), sys.argv[4:]))
