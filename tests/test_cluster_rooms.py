"""Rooms and organisations across a cluster's processes (cluster.records), with a real broker
and three real `yomite serve --bus` processes: an organisation made through one process, its
code redeemed and a room opened through another, is one room on all three: listed,
operated and held through any process, read by one, recovered paused when that one is killed,
known to a process that starts later, closed everywhere at once; another organisation's
operator finds it nowhere; a removed organisation's token dies on every process."""

import json
import time
from pathlib import Path
from typing import Any

import httpx2
import websockets.sync.client as wsc

from tests.clusterprocs import (  # noqa: F401 (broker_fixture: the fixture `broker`)
    Cluster,
    broker_fixture,
    holders,
    journal_lines,
    wait_for,
)
from tests.natsbroker import Broker
from tests.serverproc import Server


def bearer(token: str) -> dict[str, str]:
    return {"Authorization": f"Bearer {token}"}


def req(s: Server, method: str, path: str, token: str, **kw: Any) -> httpx2.Response:
    return httpx2.request(method, s.base + path, headers=bearer(token), timeout=20, **kw)


def known_operator(s: Server, token: str) -> bool:
    r = req(s, "GET", "/api/session", token)
    return r.status_code == 200 and r.json().get("role") == "operator"


def listed(s: Server, token: str, room: str) -> dict[str, Any] | None:
    r = req(s, "GET", "/api/rooms", token)
    assert r.status_code == 200, r.text
    for row in r.json()["rooms"]:
        if row["room"] == room:
            out: dict[str, Any] = row
            return out
    return None


def room_state(s: Server, token: str, room: str) -> dict[str, Any] | None:
    r = req(s, "GET", f"/api/channels/{room}", token)
    if r.status_code != 200:
        return None
    out: dict[str, Any] = r.json()
    return out


def owned(c: Cluster, s: Server, room: str) -> bool:
    return room in c.describe(s)["owned"]


def test_a_room_opened_through_one_process_is_one_room_on_every_process(
        tmp_path: Path, broker: Broker) -> None:
    c = Cluster(tmp_path, broker, 3, ("main",)).start()
    try:
        a, b, x = c.servers
        # the admin makes two organisations through A; their teachers redeem through B and A
        org = req(a, "POST", "/api/orgs", a.token, json={"name": "東小学校"})
        assert org.status_code == 201, org.text
        other = req(a, "POST", "/api/orgs", a.token, json={"name": "西小学校"}).json()
        r = httpx2.post(f"{b.base}/api/orgs/join", timeout=20,
                        json={"code": org.json()["code"], "name": "山田"})
        assert r.status_code == 200, r.text  # B knows A's organisation
        teacher = r.json()["token"]
        stranger = httpx2.post(f"{a.base}/api/orgs/join", timeout=20,
                               json={"code": other["code"], "name": "佐藤"}).json()["token"]
        for s in (a, x):
            wait_for(lambda s=s: known_operator(s, teacher), 10,
                     "the teacher's token known to every process")

        # the teacher opens a room through B: B reads it; A and X serve it
        t0 = time.monotonic()
        opened = req(b, "POST", "/api/rooms", teacher, json={"colors": ["pink"]})
        assert opened.status_code == 201, opened.text
        room = opened.json()["room"]
        assert owned(c, b, room)
        for s in (a, x):
            wait_for(lambda s=s: listed(s, teacher, room), 10, "the room listed everywhere")
            wait_for(lambda s=s: room_state(s, teacher, room), 10, "the room served everywhere")
        print(f"room known to every process {time.monotonic() - t0:.2f} s after it opened")
        pins = {room_state(s, teacher, room)["pin"] for s in (a, b, x)}  # type: ignore[index]
        assert len(pins) == 1  # one PIN: a referee's phone joins through any process
        # the other organisation's operator finds it on no process, as one that does not exist
        for s in (a, b, x):
            assert listed(s, stranger, room) is None
            r = req(s, "GET", f"/api/rooms/{room}", stranger)
            assert r.status_code == 404 and r.json()["error"] == "no_such_room", r.text
            r = req(s, "GET", f"/api/channels/{room}", stranger)
            assert r.status_code == 404 and r.json()["error"] == "no_such_channel", r.text
        # the org's quota counts the rooms opened through every process
        assert req(x, "GET", f"/api/orgs/{org.json()['id']}", x.token).json()["open_rooms"] == 1

        # the teacher starts a match through A; a pause through X stops B's reading
        for path in (f"/api/channels/{room}/match", f"/api/channels/{room}/match/start"):
            r = req(a, "POST", path, teacher, json={})
            assert r.status_code == 200, r.text

        def reading() -> bool:
            m = (room_state(b, teacher, room) or {}).get("match") or {}
            return bool(m.get("phase") == "reading" and not m.get("paused")
                        and (m.get("segment") or {}).get("verse") in ("kami", "shimo"))
        wait_for(reading, 30, "the room's match read by B")
        r = req(x, "PUT", f"/api/channels/{room}/holds/@operator", teacher)
        assert r.status_code == 200, r.text
        assert "@operator" in holders(room_state(b, teacher, room) or {})
        lines = journal_lines(broker.url, c.prefix, room)
        assert any(ln.get("type") == "hold" or "@operator" in json.dumps(ln) for ln in lines)

        # kill -9 of B, the room's reader: A or X takes it, paused by @recovered
        b.kill()
        t0 = time.monotonic()

        def recovered() -> dict[str, Any] | None:
            for s in (a, x):
                if owned(c, s, room):
                    st = room_state(s, teacher, room)
                    if st is not None and "@recovered" in holders(st):
                        return st
            return None
        st = wait_for(recovered, 15, "the room recovered by another process")
        print(f"room recovered {time.monotonic() - t0:.2f} s after its reader was killed")
        assert "@operator" in holders(st)  # the acknowledged pause kept

        # B started again knows the room (read from the broker at start) and serves it
        b.start()
        st = wait_for(lambda: room_state(b, teacher, room), 15, "the room served by B again")
        assert "@recovered" in holders(st)
        assert listed(b, teacher, room) is not None

        # a projector on X; the teacher closes the room through A: closed on every process
        projector = opened.json()["links"]["projector"].split("#key=", 1)[1]
        with wsc.connect(f"ws://127.0.0.1:{x.port}/ws/channels/{room}?token={projector}",
                         open_timeout=10) as ws:
            assert json.loads(ws.recv(timeout=10))["type"] == "hello"
            r = req(a, "DELETE", f"/api/rooms/{room}", teacher)
            assert r.status_code == 200 and r.json()["open"] is False, r.text
            try:
                while True:
                    ws.recv(timeout=10)
            except Exception as e:  # the close: the page says the room was closed
                rcvd = getattr(e, "rcvd", None)
                assert rcvd is not None and (rcvd.code, rcvd.reason) == (1001, "room_closed"), e
        for s in (a, b, x):
            wait_for(lambda s=s: room_state(s, teacher, room) is None, 10,
                     "the room gone from every process")
            row = listed(s, teacher, room)
            assert row is not None and row["open"] is False and row["closed_why"] == "operator"
        assert all(room not in c.describe(s)["owned"] for s in (a, b, x))
        # its history is still read, through any process
        assert req(x, "GET", f"/api/channels/{room}/matches", teacher).status_code == 200
        # the admin removes the organisation through X: its teacher's token dies everywhere
        r = req(x, "DELETE", f"/api/orgs/{org.json()['id']}", x.token)
        assert r.status_code == 200, r.text
        for s in (a, b, x):
            wait_for(lambda s=s: req(s, "GET", "/api/session", teacher).status_code == 401, 10,
                     "the removed organisation's token refused by every process")
        assert known_operator(a, stranger)  # the other organisation's untouched
    finally:
        c.stop()
