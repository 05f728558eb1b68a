"""A referee's presses on a bad Wi-Fi (issue 47, item 7) against a real `yomite serve`, over the
channel's WebSocket and the REST fallback the page uses: a press sent twice is applied once; a
hold that arrives after its referee's newer release (the REST fallback stuck in an outage, the
finding of issue 47) is ignored, answered with the state and a reason; a hold pressed longer
ago than server.referees.press_max_age_s, or meant for a card no longer read, is refused with
`press_stale` and stops nothing."""

from __future__ import annotations

import asyncio
import contextlib
import json
import time
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import httpx2
import pytest
import websockets

from .serverproc import Server

pytestmark = pytest.mark.server

TOKEN = "presses-operator-token-0123456789abcdef"
CONFIG: dict[str, Any] = {
    "match": {"memorise_s": 3600, "cards": 3},
    "voice": {"engine": "estimate"},
    "audio": {"output": "null"},
    # no release waits behind a budget: the order of the presses is what is tried here
    "server": {"referees": {"changes_per_s": 100, "changes_burst": 1000,
                            "channel_changes_per_s": 100, "channel_changes_burst": 1000,
                            "press_grace_s": 0.2}},
}


def holding(state: dict[str, Any], rid: str) -> bool:
    return rid in [h["referee"] for h in (state.get("match") or {}).get("holds", [])]


class Phone:
    """A referee's socket, and what it was told."""

    def __init__(self, ws: Any) -> None:
        self.ws = ws
        self.state: dict[str, Any] = {}

    async def send(self, msg: dict[str, Any]) -> None:
        await self.ws.send(json.dumps(msg))

    async def next(self, kind: str, timeout: float = 30.0) -> dict[str, Any]:
        """The next message of `kind` (states are kept on the way)."""
        async with asyncio.timeout(timeout):
            while True:
                m = json.loads(await self.ws.recv())
                if m["type"] == "state":
                    self.state = m
                if m["type"] == kind:
                    return m

    async def clock(self) -> float:
        """The server's match clock, from a pong (the pages' estimate, without the
        round trip's half: loopback)."""
        await self.send({"type": "ping"})
        return float((await self.next("pong"))["s"])

    async def until(self, ok: Any, timeout: float = 30.0) -> dict[str, Any]:
        async with asyncio.timeout(timeout):
            while not (self.state and ok(self.state)):
                await self.next("state")
        return self.state


def started(tmp: Path, start: bool = False, **match: Any) -> tuple[Server, dict[str, str]]:
    cfg = json.loads(json.dumps(CONFIG))
    cfg["match"].update(match)
    s = Server(tmp, cfg, TOKEN).start()
    with httpx2.Client(base_url=s.base, headers=s.op, timeout=60) as c:
        assert c.post("/api/channels/main/match", json={"seed": 7}).status_code == 200
        if start:
            assert c.post("/api/channels/main/match/start").status_code == 200
        pin = c.get("/api/channels/main/pin").json()["pin"]
        me = c.post("/api/channels/main/referees", json={"pin": pin, "name": "mat 1"}).json()
    return s, me


def hand_path(me: dict[str, str]) -> str:
    return f"/api/channels/main/holds/{me['referee']}"


@contextlib.asynccontextmanager
async def joined(s: Server, me: dict[str, Any]) -> AsyncIterator[tuple[Phone, Any]]:
    """The referee `me` on the channel's socket (its first state read) and on REST."""
    uri = f"ws://127.0.0.1:{s.port}/ws/channels/main?token={me['token']}"
    auth = {"Authorization": f"Bearer {me['token']}"}
    async with websockets.connect(uri) as ws, \
            httpx2.AsyncClient(base_url=s.base, headers=auth, timeout=30) as rest:
        phone = Phone(ws)
        await phone.next("state")
        yield phone, rest

def test_a_late_copy_of_a_hold_after_its_release_is_ignored_over_socket_and_rest(
        tmp_path: Path) -> None:
    s, me = started(tmp_path)
    rid = me["referee"]

    async def run() -> None:
        async with joined(s, me) as (phone, rest):
            # the press by the socket; its REST fallback, sent too, applies nothing more
            await phone.send({"type": "hold", "move": 10})
            await phone.until(lambda st: holding(st, rid))
            r = await rest.put(hand_path(me), json={"move": 10})
            assert r.status_code == 200, r.text
            assert r.json()["press"] == {"move": 10, "outcome": "repeated", "last": 10}
            # the referee lowers the hand (move 11); the hold's copy (move 10) comes late
            await phone.send({"type": "release", "move": 11})
            await phone.until(lambda st: not holding(st, rid))
            r = await rest.put(hand_path(me), json={"move": 10})
            assert r.status_code == 200, r.text
            assert r.json()["press"]["outcome"] == "superseded"
            assert not holding(r.json(), rid), "a late copy raised the hand again"
            # by the socket too: ignored, said with a reason, and the state
            await phone.send({"type": "hold", "move": 10})
            err = await phone.next("error")
            assert (err["error"], err["move"], err["last"]) == ("press_superseded", 10, 11)
            st = await phone.next("state")
            assert not holding(st, rid)
            # a fresh press is applied: nothing stands in its way
            await phone.send({"type": "hold", "move": 12})
            await phone.until(lambda st: holding(st, rid))
            # and the REST DELETE's late copy of an older release does not lower it
            r = await rest.request("DELETE", hand_path(me), json={"move": 11})
            assert r.status_code == 200 and r.json()["press"]["outcome"] == "superseded"
            assert holding(r.json(), rid)

    try:
        asyncio.run(run())
        # the hand went up twice and down once: nothing applied twice
        with httpx2.Client(base_url=s.base, headers=s.op, timeout=30) as c:
            assert holding(c.get("/api/channels/main").json(), rid)
    finally:
        s.stop()


def test_a_hold_pressed_too_long_ago_is_refused_and_stops_nothing(tmp_path: Path) -> None:
    s, me = started(tmp_path)
    rid = me["referee"]

    async def run() -> None:
        async with joined(s, me) as (phone, rest):
            now = await phone.clock()
            # pressed 3 s ago (the default age limit is 2 s): an outage's press
            await phone.send({"type": "hold", "move": 20, "at_s": now - 3.0})
            err = await phone.next("error")
            assert (err["error"], err["move"], err["reason"]) == ("press_stale", 20, "stale")
            assert not holding(await phone.next("state"), rid)
            r = await rest.put(hand_path(me), json={"move": 21, "at_s": now - 3.0})
            assert r.status_code == 409, r.text
            assert r.json()["error"] == "press_stale"
            assert r.json()["params"] == {"reason": "stale", "move": 21}
            # a fresh one is applied, and an old release is not refused for its age
            now = await phone.clock()
            await phone.send({"type": "hold", "move": 22, "at_s": now})
            await phone.until(lambda st: holding(st, rid))
            r = await rest.request("DELETE", hand_path(me), json={"move": 23, "at_s": now - 30})
            assert r.status_code == 200 and not holding(r.json(), rid)

    try:
        asyncio.run(run())
    finally:
        s.stop()


def test_a_hold_meant_for_a_card_no_longer_read_is_refused(tmp_path: Path) -> None:
    s, me = started(tmp_path, start=True, memorise_s=0)
    rid = me["referee"]

    async def run() -> None:
        async with joined(s, me) as (phone, rest):

            def card(n: int) -> Any:
                return lambda st: ((st.get("match") or {}).get("segment") or {}).get("card") == n

            st = await phone.until(card(2), timeout=120)
            # the grace (0.2 s) past the start of card 2, on the server's own clock
            t0 = time.monotonic()
            while await phone.clock() < st["match"]["segment"]["started_s"] + 0.3:
                assert time.monotonic() - t0 < 10
                await asyncio.sleep(0.05)
            now = await phone.clock()
            # fresh (pressed now), but what the phone saw was card 1's lower verse
            await phone.send({"type": "hold", "move": 30, "card": 1, "verse": "shimo",
                              "at_s": now})
            err = await phone.next("error")
            assert (err["error"], err["reason"]) == ("press_stale", "moved_on")
            r = await rest.put(hand_path(me), json={"move": 31, "card": 1, "verse": "shimo",
                                                    "at_s": now})
            assert r.status_code == 409 and r.json()["params"]["reason"] == "moved_on"
            assert not holding(phone.state, rid)
            # what the phone sees now: applied
            await phone.send({"type": "hold", "move": 32, "card": 2,
                              "at_s": await phone.clock()})
            await phone.until(lambda st: holding(st, rid))

    try:
        asyncio.run(run())
    finally:
        s.stop()
