"""Organisations and rooms for the tests (docs/rooms.md), through the API of a real server: the
admin makes an organisation, a teacher redeems its code, opens a room."""

from __future__ import annotations

import asyncio
import contextlib
import json
from typing import Any

import httpx2
import websockets

from .serverproc import Server

# a match that reads in a few seconds with the estimate voice
FAST = {
    "match": {"memorise_s": 0.2, "cards": 1, "prelude": {"enabled": False},
              "gaps": {"after_bow_s": 0.1, "after_call_s": 0.1, "between_verses_s": 0.1,
                       "between_cards_s": 0.1, "before_move_s": 0.1, "repeat_s": 0.1}},
    "voice": {"engine": "estimate", "speed": 3.0},
    "audio": {"output": "null"},
}


def bearer(token: str) -> dict[str, str]:
    return {"Authorization": f"Bearer {token}"}


def call(server: Server, method: str, path: str, token: str | None = None,
         expect: int | None = 200, **kw: Any) -> httpx2.Response:
    r = httpx2.request(method, server.base + path, headers=bearer(token) if token else {},
                       timeout=30, **kw)
    if expect is not None:
        assert r.status_code == expect, f"{method} {path}: {r.status_code} {r.text}"
    return r


def make_org(server: Server, name: str, **quotas: int) -> dict[str, Any]:
    out: dict[str, Any] = call(server, "POST", "/api/orgs", server.token, 201,
                               json={"name": name, **quotas}).json()
    return out


def redeem(server: Server, code: str, name: str = "先生") -> str:
    r = call(server, "POST", "/api/orgs/join", json={"code": code, "name": name})
    token: str = r.json()["token"]
    return token


def open_room(server: Server, token: str, **body: Any) -> dict[str, Any]:
    out: dict[str, Any] = call(server, "POST", "/api/rooms", token, 201, json=body).json()
    return out


def link_key(link: str) -> str:
    """The key in a room link's fragment (`…#key=…`: projector, viewer, speaker)."""
    return link.split("#key=", 1)[1]


def ws_url(server: Server, ch: str, token: str | None = None, **query: str) -> str:
    q = "&".join(f"{k}={v}" for k, v in {**({"token": token} if token else {}), **query}.items())
    return f"ws://127.0.0.1:{server.port}/ws/channels/{ch}" + (f"?{q}" if q else "")


def ws_hello(url: str) -> dict[str, Any]:
    """The first message of a WebSocket (its hello), or what refused it: {"refused": status}
    for a refused handshake, {"closed": code, "reason": reason} for a socket closed at once."""
    async def go() -> dict[str, Any]:
        try:
            async with websockets.connect(url) as ws:
                async with asyncio.timeout(10):
                    try:
                        msg: dict[str, Any] = json.loads(await ws.recv())
                        return msg
                    except websockets.ConnectionClosed as e:
                        assert e.rcvd is not None
                        return {"closed": e.rcvd.code, "reason": e.rcvd.reason}
        except websockets.InvalidStatus as e:
            return {"refused": e.response.status_code}

    return asyncio.run(go())


async def join_at_once(urls: list[str], hold: float = 0.0) -> list[dict[str, Any]]:
    """Pages connecting at the same instant, each kept open until every one was answered (and
    `hold` seconds more): each one's first message, or how it was closed ({"closed": code,
    "reason": reason})."""
    async with contextlib.AsyncExitStack() as stack:
        async def one(url: str) -> dict[str, Any]:
            ws = await stack.enter_async_context(websockets.connect(url))
            try:
                async with asyncio.timeout(30):
                    msg: dict[str, Any] = json.loads(await ws.recv())
                    return msg
            except websockets.ConnectionClosed as e:
                assert e.rcvd is not None
                return {"closed": e.rcvd.code, "reason": e.rcvd.reason}

        out = list(await asyncio.gather(*(one(u) for u in urls)))
        await asyncio.sleep(hold)
        return out
