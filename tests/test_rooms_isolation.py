"""One organisation cannot see or touch another's rooms (docs/rooms.md, the isolation rule), on
a real server: every channel route, and the operator's WebSocket, answer organisation B's
operator about organisation A's room exactly as about a channel that does not exist, while A's
operator succeeds; the lists, the health and the clips name no other organisation's room; a
viewer learns no room's name. The routes are taken from the app itself: a new channel route
that this test does not cover fails it."""

from __future__ import annotations

import asyncio
import json
import re
import time
from collections.abc import Callable, Iterator
from typing import Any

import pytest
import websockets

from api.app import create_app
from hall.config import parse_config

from .orgs import FAST, call, make_org, open_room, redeem, ws_hello, ws_url
from .serverproc import Server

pytestmark = pytest.mark.server

TOKEN = "rooms-isolation-operator-token-0123456789"
NOBODY = "r-zzzzzzzz"  # a room name no room has
CONFIG: dict[str, Any] = {
    **FAST,
    "match": {**FAST["match"], "memorise_s": 60},
    "server": {"channels": [{"name": "main"}],
               "security": {"pin_attempts_per_minute": 1000}},
}


class World:
    def __init__(self, server: Server) -> None:
        self.server = server
        self.a = redeem(server, make_org(server, "A小学校")["code"], "A先生")
        self.b = redeem(server, make_org(server, "B小学校")["code"], "B先生")
        self.ra = open_room(server, self.a)["room"]
        self.rb = open_room(server, self.b)["room"]
        self.found: dict[str, str] = {}  # what earlier steps learned (a referee, a match)


@pytest.fixture(scope="module")
def world(tmp_path_factory: pytest.TempPathFactory) -> Iterator[World]:
    s = Server(tmp_path_factory.mktemp("isolation"), CONFIG, TOKEN).start()
    try:
        yield World(s)
    finally:
        s.stop()


def wait_phase(w: World, *phases: str) -> None:
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        m = call(w.server, "GET", f"/api/channels/{w.ra}", w.a).json()["match"]
        if m and m["phase"] in phases:
            return
        time.sleep(0.05)
    raise AssertionError(f"{w.ra} never reached {phases}: {m}")


Body = Callable[[World], dict[str, Any] | None]


def _pin(w: World) -> dict[str, Any]:
    pin = call(w.server, "GET", f"/api/channels/{w.ra}/pin", w.a).json()["pin"]
    return {"pin": pin, "name": "mat 1"}


# Every channel route, in an order in which each succeeds for its room's operator (a match
# prepared, bowed, started, held, skipped on, resumed, read again, extended, closed, replayed,
# aborted): (method, path, body, then). `then` waits for what the next step needs.
STEPS: list[tuple[str, str, Body | None, Callable[[World, Any], None] | None]] = [
    ("GET", "/api/channels/{ch}", None, None),
    ("PUT", "/api/channels/{ch}/volume", lambda w: {"volume_db": -6}, None),
    ("PUT", "/api/channels/{ch}/projector", lambda w: {"torifuda": "full", "left": True}, None),
    ("GET", "/api/channels/{ch}/voice/preview", None, None),
    ("GET", "/api/channels/{ch}/speakers", None, None),
    ("POST", "/api/channels/{ch}/speakers/link", None, None),
    ("GET", "/api/channels/{ch}/speakers/qr.svg", None, None),
    ("GET", "/api/channels/{ch}/pin", None, None),
    ("POST", "/api/channels/{ch}/pin", None, None),
    ("GET", "/api/channels/{ch}/qr.svg", None, None),
    ("POST", "/api/channels/{ch}/referees", _pin,
     lambda w, r: w.found.__setitem__("referee", r.json()["referee"])),
    ("DELETE", "/api/channels/{ch}/referees/{referee}", None, None),
    ("POST", "/api/channels/{ch}/match", lambda w: {"seed": 3}, None),
    ("GET", "/api/channels/{ch}/match/log", None, None),
    ("POST", "/api/channels/{ch}/match/bow", None, lambda w, r: wait_phase(w, "ready")),
    ("POST", "/api/channels/{ch}/match/start", None, lambda w, r: wait_phase(w, "memorising")),
    ("PUT", "/api/channels/{ch}/holds/{referee}", None, None),
    ("POST", "/api/channels/{ch}/match/skip", None, None),
    ("DELETE", "/api/channels/{ch}/holds/{referee}", None, None),
    ("POST", "/api/channels/{ch}/match/resume", None, lambda w, r: wait_phase(w, "finished")),
    ("POST", "/api/channels/{ch}/match/read-again", None,
     lambda w, r: wait_phase(w, "finished")),
    ("POST", "/api/channels/{ch}/match/extra-card", None,
     lambda w, r: wait_phase(w, "finished")),
    ("POST", "/api/channels/{ch}/match/close", None, lambda w, r: wait_phase(w, "closed")),
    ("POST", "/api/channels/{ch}/match/replay", None, None),
    ("POST", "/api/channels/{ch}/match/abort", None, None),
    ("GET", "/api/channels/{ch}/matches", None,
     lambda w, r: w.found.__setitem__("match", r.json()[-1]["id"])),
    ("GET", "/api/channels/{ch}/matches/{match}/log", None, None),
]
# the path parameters other than the channel: B's requests are well formed too
PLACEHOLDERS = {"referee": "@operator", "match": "20260101T000000.000000-seed1"}


def channel_routes() -> set[tuple[str, str]]:
    spec = create_app(parse_config({"voice": {"engine": "estimate"},
                                    "audio": {"output": "null"}})).openapi()
    return {(m.upper(), p) for p, item in spec["paths"].items() if "{ch}" in p for m in item}


def test_every_channel_route_is_covered() -> None:
    assert {(m, p) for m, p, _b, _t in STEPS} == channel_routes()


def _path(template: str, ch: str, found: dict[str, str]) -> str:
    def fill(m: re.Match[str]) -> str:
        name = m.group(1)
        return ch if name == "ch" else found.get(name, PLACEHOLDERS[name])
    return re.sub(r"\{(\w+)\}", fill, template)


def _answer(r: Any, name: str) -> tuple[int, str]:
    return r.status_code, r.text.replace(name, "<room>")


# (the steps run in their order, in one worker: each needs the match where the one before left
# it)
@pytest.mark.parametrize("step", range(len(STEPS)),
                         ids=[f"{m} {p}" for m, p, _b, _t in STEPS])
def test_another_organisations_operator_gets_404_where_the_rooms_own_succeeds(
        world: World, step: int) -> None:
    w, s = world, world.server
    method, template, body, then = STEPS[step]
    if template.startswith("/api/channels/{ch}/holds"):
        w.found["referee"] = "@operator"  # the teacher's own pause
    payload = body(w) if body is not None else None
    kw = {"json": payload} if payload is not None else {}
    # B on A's room: exactly the answer for a room that does not exist (its name aside)
    theirs = call(s, method, _path(template, w.ra, w.found), w.b, None, **kw)
    nobody = call(s, method, _path(template, NOBODY, w.found), w.b, None, **kw)
    assert theirs.status_code == 404 and theirs.json()["error"] == "no_such_channel", \
        theirs.text
    assert _answer(theirs, w.ra) == _answer(nobody, NOBODY)
    assert w.ra not in theirs.json()["hint"] and w.rb in theirs.json()["hint"]
    # and A on its own room succeeds
    ours = call(s, method, _path(template, w.ra, w.found), w.a, None, **kw)
    assert 200 <= ours.status_code < 300, f"{method} {template}: {ours.status_code} {ours.text}"
    if then is not None:
        then(w, ours)


def test_the_operators_websocket_and_the_clips(world: World) -> None:
    w, s = world, world.server
    # B's console on A's room: refused as on a room that does not exist, as a speaker too
    assert ws_hello(ws_url(s, w.ra, w.b)) == ws_hello(ws_url(s, NOBODY, w.b)) == {
        "refused": 403}
    assert ws_hello(ws_url(s, w.ra, w.b, audience="speaker")) == {"refused": 403}
    hello = ws_hello(ws_url(s, w.ra, w.a))
    assert hello["role"] == "operator" and hello["channel"] == w.ra
    # a clip of A's room's schedule: A's operator may fetch it, B's gets what an unknown
    # clip gets
    call(s, "POST", f"/api/channels/{w.ra}/match", w.a, json={"seed": 8})
    call(s, "POST", f"/api/channels/{w.ra}/match/start", w.a)
    url = asyncio.run(_a_clip(ws_url(s, w.ra, w.a, audience="speaker")))
    call(s, "POST", f"/api/channels/{w.ra}/match/abort", w.a)
    assert call(s, "GET", url, w.a).headers["content-type"] == "audio/ogg"
    theirs = call(s, "GET", url, w.b, 404).json()
    unknown = call(s, "GET", "/api/clips/" + "0" * 32 + ".ogg", w.b, 404).json()
    assert theirs["error"] == unknown["error"] == "no_such_clip"


async def _a_clip(url: str) -> str:
    async with websockets.connect(url) as ws:
        async with asyncio.timeout(30):
            while True:
                msg = json.loads(await ws.recv())
                if msg["type"] == "speaker" and msg["clips"]:
                    found: str = msg["clips"][0]["url"]
                    return found


def test_the_lists_name_only_ones_own_rooms(world: World) -> None:
    w, s = world, world.server
    names = lambda token: [c["channel"] for c in  # noqa: E731
                           call(s, "GET", "/api/channels", token).json()]
    assert names(w.a) == [w.ra] and names(w.b) == [w.rb]
    assert names(None) == ["main"]  # a viewer: config.yaml's channels, no room
    assert set(names(TOKEN)) == {"main", w.ra, w.rb}  # the admin: every one
    rooms = lambda token: [r["room"] for r in  # noqa: E731
                           call(s, "GET", "/api/rooms", token).json()["rooms"]]
    assert rooms(w.a) == [w.ra] and rooms(w.b) == [w.rb]
    assert set(rooms(TOKEN)) == {w.ra, w.rb}
    # the admin (the server's own token) operates every organisation's rooms
    assert call(s, "GET", f"/api/channels/{w.rb}/pin", TOKEN).json()["pin"]
    assert ws_hello(ws_url(s, w.ra, TOKEN))["role"] == "operator"
    # a viewer without one of the room's links does not reach it, even by its name
    assert call(s, "GET", f"/api/channels/{w.ra}", expect=403).json()["error"] == \
        "viewer_link_needed"
    # the health counts the rooms and names none of them
    health = call(s, "GET", "/api/health")
    assert w.ra not in health.text and w.rb not in health.text
    assert health.json()["rooms"]["open"] == 2
    # a viewer's 404 does not list the rooms either
    hint = call(s, "GET", f"/api/channels/{NOBODY}", expect=404).json()["hint"]
    assert hint == "channels: main"


def test_another_organisations_room_cannot_be_closed_or_read(world: World) -> None:
    w, s = world, world.server
    for method, path in (("GET", f"/api/rooms/{w.ra}"), ("DELETE", f"/api/rooms/{w.ra}"),
                         ("GET", f"/api/rooms/{w.ra}/qr/console.svg")):
        theirs = call(s, method, path, w.b, 404).json()
        nobody = call(s, method, path.replace(w.ra, NOBODY), w.b, 404).json()
        assert theirs["error"] == "no_such_room"
        assert theirs["detail"].replace(w.ra, NOBODY) == nobody["detail"]
    assert call(s, "GET", f"/api/rooms/{w.ra}", w.a).json()["open"]  # still open
    # B cannot open a room for A either, nor use the admin's routes
    org_a = call(s, "GET", "/api/session", w.a).json()["org"]
    assert call(s, "POST", "/api/rooms", w.b, 404, json={"org": org_a}).json()["error"] == \
        "no_such_org"
    for method, path in (("GET", "/api/orgs"), ("GET", "/api/recording"),
                         ("GET", "/api/devices"), ("POST", "/api/tournaments")):
        assert call(s, method, path, w.b, 403).json()["error"] == "admin_only"
    # nor the hall's own channels: as a channel that does not exist
    assert call(s, "GET", "/api/channels/main/pin", w.b, 404).json()["error"] == \
        "no_such_channel"
    # a closed room's history is its organisation's only
    call(s, "DELETE", f"/api/rooms/{w.ra}", w.a)
    assert call(s, "GET", f"/api/channels/{w.ra}/matches", w.a).json()
    theirs = call(s, "GET", f"/api/channels/{w.ra}/matches", w.b, 404)
    nobody = call(s, "GET", f"/api/channels/{NOBODY}/matches", w.b, 404)
    assert _answer(theirs, w.ra) == _answer(nobody, NOBODY)
