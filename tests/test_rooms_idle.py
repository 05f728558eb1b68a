"""Rooms in-process, with a clock the test moves by hand (reader.clock.ManualClock): a room
closes itself after `rooms.idle_close_min` with no client and no match being read, never while
a page is connected or a match is read; invite codes are guessed no faster than a PIN; the
store keeps what it was told, line by line."""

from __future__ import annotations

import asyncio
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from fastapi.testclient import TestClient

from api.app import create_app
from hall.config import parse_config
from hall.roomstore import FileBucket, Room, RoomStore
from reader.clock import ManualClock

TOKEN = "rooms-idle-operator-token-0123456789"
OP = {"Authorization": f"Bearer {TOKEN}"}
MIN = 60.0


def make_config(tmp: Path, **rooms: Any) -> Any:
    return parse_config({
        "match": {"memorise_s": 60, "cards": 1, "prelude": {"enabled": False}},
        "voice": {"engine": "estimate", "speed": 3.0},
        "audio": {"output": "null"},
        "server": {"security": {"pin_attempts_per_minute": 3}},
        "rooms": {"idle_close_min": 120, **rooms},
        "journal_dir": str(tmp / "journal"),
    })


@pytest.fixture
def clock() -> ManualClock:
    return ManualClock(1000.0)


@pytest.fixture
def client(tmp_path: Path, clock: ManualClock) -> Iterator[TestClient]:
    with TestClient(create_app(make_config(tmp_path), operator_token=TOKEN, clock=clock)) as c:
        yield c


def teacher(c: TestClient) -> dict[str, str]:
    code = c.post("/api/orgs", json={"name": "東小学校"}, headers=OP).json()["code"]
    r = c.post("/api/orgs/join", json={"code": code, "name": "先生"})
    assert r.status_code == 200, r.text
    return {"Authorization": f"Bearer {r.json()['token']}"}


def sweep(c: TestClient) -> list[str]:
    closed: list[str] = c.portal.call(c.app.state.rooms.sweep)  # type: ignore[attr-defined]
    return closed


def is_open(c: TestClient, h: dict[str, str], room: str) -> bool:
    state: bool = c.get(f"/api/rooms/{room}", headers=h).json()["open"]
    return state


def test_an_unused_room_closes_itself_after_the_idle_time(client: TestClient,
                                                          clock: ManualClock) -> None:
    h = teacher(client)
    room = client.post("/api/rooms", headers=h).json()["room"]
    clock.advance(119 * MIN)
    assert sweep(client) == [] and is_open(client, h, room)
    clock.advance(1 * MIN)
    assert sweep(client) == [room]
    r = client.get(f"/api/rooms/{room}", headers=h).json()
    assert not r["open"] and r["closed_why"] == "idle"
    assert client.get(f"/api/channels/{room}", headers=h).status_code == 404
    assert client.get(f"/api/channels/{room}/matches", headers=h).status_code == 200


def test_a_connected_page_keeps_a_room_open(client: TestClient, clock: ManualClock) -> None:
    h = teacher(client)
    opened = client.post("/api/rooms", headers=h).json()
    room, projector = opened["room"], opened["links"]["projector"].split("#key=", 1)[1]
    with client.websocket_connect(f"/ws/channels/{room}?token={projector}") as ws:
        assert ws.receive_json()["type"] == "hello"
        clock.advance(500 * MIN)
        assert sweep(client) == []  # in use now: the idle time starts again
    clock.advance(119 * MIN)
    assert sweep(client) == [] and is_open(client, h, room)
    clock.advance(1 * MIN)
    assert sweep(client) == [room]


def test_a_match_being_read_keeps_a_room_open_a_paused_one_does_not(
        client: TestClient, clock: ManualClock) -> None:
    h = teacher(client)
    room = client.post("/api/rooms", headers=h).json()["room"]
    assert client.post(f"/api/channels/{room}/match", json={"seed": 1},
                       headers=h).status_code == 200
    # prepared, not started: no one is waiting for it
    clock.advance(200 * MIN)
    assert sweep(client) == [room]
    room = client.post("/api/rooms", headers=h).json()["room"]
    client.post(f"/api/channels/{room}/match", json={"seed": 1}, headers=h)
    assert client.post(f"/api/channels/{room}/match/start", headers=h).status_code == 200
    clock.advance(200 * MIN)  # being read (memorising: 60 s of the match's own clock)
    assert sweep(client) == [] and is_open(client, h, room)
    # paused by the teacher's hand and left: it closes after the idle time
    assert client.put(f"/api/channels/{room}/holds/@operator", headers=h).status_code == 200
    assert sweep(client) == []
    clock.advance(120 * MIN)
    assert sweep(client) == [room]


def test_idle_close_can_be_turned_off(tmp_path: Path, clock: ManualClock) -> None:
    cfg = make_config(tmp_path, idle_close_min=None)
    with TestClient(create_app(cfg, operator_token=TOKEN, clock=clock)) as c:
        h = teacher(c)
        room = c.post("/api/rooms", headers=h).json()["room"]
        clock.advance(10_000 * MIN)
        assert sweep(c) == [] and is_open(c, h, room)


def test_invite_codes_are_guessed_no_faster_than_pins(client: TestClient,
                                                     clock: ManualClock) -> None:
    # a wait after the second wrong code (2 s, doubling: hall.pinlock.PinLock.own_wait_s), and 3
    # attempts a minute from one address (server.security.pin_attempts_per_minute)
    for _ in range(2):
        r = client.post("/api/orgs/join", json={"code": "ZZZZZZZZ", "name": "x"})
        assert r.status_code == 403 and r.json()["error"] == "wrong_code"
    r = client.post("/api/orgs/join", json={"code": "ZZZZZZZZ", "name": "x"})
    assert r.status_code == 429 and r.json()["error"] == "too_many_codes"
    assert r.headers["Retry-After"] == "2" and r.json()["params"]["why"] == "code_own"
    clock.advance(2)
    r = client.post("/api/orgs/join", json={"code": "ZZZZZZZZ", "name": "x"})
    assert r.status_code == 403 and r.json()["error"] == "wrong_code"
    clock.advance(4)
    r = client.post("/api/orgs/join", json={"code": "ZZZZZZZZ", "name": "x"})
    assert r.status_code == 429 and r.json()["params"]["why"] == "code_attempts"
    assert 1 <= int(r.headers["Retry-After"]) <= 60


def test_a_removed_organisation_closes_its_rooms_and_its_tokens_die(
        client: TestClient) -> None:
    h = teacher(client)
    org = client.get("/api/session", headers=h).json()["org"]
    room = client.post("/api/rooms", headers=h).json()["room"]
    with client.websocket_connect(f"/ws/channels/{room}", headers=h) as ws:
        assert ws.receive_json()["type"] == "hello"
        gone = client.delete(f"/api/orgs/{org}", headers=OP).json()
        assert gone == {"removed": org, "rooms_closed": [room]}
        while (msg := ws.receive()).get("type") != "websocket.close":
            pass
        assert (msg["code"], msg["reason"]) == (1001, "room_closed")
    assert client.get("/api/session", headers=h).status_code == 401
    assert client.get(f"/api/rooms/{room}", headers=OP).json()["closed_why"] == "org_removed"


def test_the_file_bucket_keeps_the_last_word_of_each_key(tmp_path: Path) -> None:
    path = tmp_path / "rooms.jsonl"
    store = RoomStore(FileBucket(path))
    a = Room("r-aaaaaaaa", "o-1", 1.0, "x", ("pink",))

    async def writes() -> None:
        await store.save(a)
        await store.save(Room("r-bbbbbbbb", "o-1", 2.0, "y"))
        await store.save(Room("r-aaaaaaaa", "o-1", 1.0, "x", ("pink",), closed=3.0,
                              closed_why="idle"))
        await store.drop("r-bbbbbbbb")

    asyncio.run(writes())
    with path.open("a", encoding="utf-8") as f:
        f.write('{"k": "room/r-cccccccc", "v": {"name": 1\n')  # a line cut by a crash
    again = RoomStore(FileBucket(path)).rooms()
    assert again == [Room("r-aaaaaaaa", "o-1", 1.0, "x", ("pink",), 3.0, "idle")]
    assert len(path.read_text("utf-8").splitlines()) == 1  # rewritten with what is left


def test_in_a_cluster_a_room_in_use_on_another_process_is_not_closed(
        client: TestClient, clock: ManualClock) -> None:
    """A cluster's processes share the rooms' store (cluster.records): each says there when a
    room is in use on it, and none closes a room another saw in use within the idle time."""
    rooms = client.app.state.rooms  # type: ignore[attr-defined]
    rooms.shared = True  # as a cluster's registry: the store is every process's
    h = teacher(client)
    opened = client.post("/api/rooms", headers=h).json()
    room, viewer = opened["room"], opened["links"]["viewer"].split("#key=", 1)[1]
    assert rooms.store.busy_at(room) is None
    with client.websocket_connect(f"/ws/channels/{room}?token={viewer}") as ws:  # a page here
        assert ws.receive_json()["type"] == "hello"
        assert sweep(client) == []
    said = rooms.store.busy_at(room)
    assert said is not None and abs(said - time.time()) < 60  # said to the others
    # idle here for long; another process says it is in use, with its own wall clock a day
    # behind this one's (never compared: what counts is that its mark changed): kept
    clock.advance(500 * MIN)
    client.portal.call(rooms.store.mark_busy, room, time.time() - 24 * 60 * MIN)  # type: ignore
    assert sweep(client) == [] and is_open(client, h, room)
    # it says so again an hour later (its mark changes): kept
    clock.advance(60 * MIN)
    client.portal.call(rooms.store.mark_busy, room,  # type: ignore
                       time.time() - 23 * 60 * MIN)
    assert sweep(client) == [] and is_open(client, h, room)
    # its mark unchanged for longer than the idle time, by this process's clock: closed
    clock.advance(121 * MIN)
    assert sweep(client) == [room]
    assert not is_open(client, h, room)
