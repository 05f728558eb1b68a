"""Idle and half-open connections at the door (issue 25, item 4), against a real `yomite serve`.

A connection that sent nothing, or half a request, used to be kept for ever: about a thousand
of them used up the server's 1,024 open files, and then no phone could load a page or
reconnect, and preparing a match failed (503 `journal_unavailable: Too many open files`).

Now every connection has a deadline for its request head and a limit on idleness, the server
holds at most so many connections per client address and in all (below its open-files limit,
with files kept in reserve for the journal and the desk's database), a new connection past a
cap takes the place of the oldest one that is only waiting for a request, and WebSockets count
like any other connection. The deadlines are checked with short settings and generous polls:
a loaded machine only makes a test slower, never wrong."""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import resource
import select
import socket
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx2
import pytest
import websockets

from hall.config import Config

from .serverproc import Server

pytestmark = pytest.mark.server

TOKEN = "door-operator-token-0123456789abcdef"
DEBIAN_NOFILE = 1024  # Debian's default open-files limit (soft and, here, hard)
IDLE_SOCKETS = 2000
BASE = {"voice": {"engine": "estimate"}, "audio": {"output": "null"},
        "match": {"memorise_s": 600, "cards": 2}}


def debian_limit() -> None:
    """preexec_fn: the server gets Debian's default limit, and may not raise it (hard too):
    without caps, the bad case is certain."""
    resource.setrlimit(resource.RLIMIT_NOFILE, (DEBIAN_NOFILE, DEBIAN_NOFILE))


@contextlib.contextmanager
def open_files_for(n: int) -> Iterator[None]:
    """This test process may hold `n` descriptors (its own soft limit raised to what the hard
    one allows); skipped where it cannot."""
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    if soft >= n:
        yield
        return
    if hard != resource.RLIM_INFINITY and hard < n:
        pytest.skip(f"this process may open {hard} files, the test needs {n}")
    resource.setrlimit(resource.RLIMIT_NOFILE, (n, hard))
    try:
        yield
    finally:
        resource.setrlimit(resource.RLIMIT_NOFILE, (soft, hard))


def server_files(pid: int) -> int:
    return len(os.listdir(f"/proc/{pid}/fd"))


def connect(port: int, address: str = "127.0.0.1") -> socket.socket:
    c = socket.socket()
    c.bind((address, 0))
    c.connect(("127.0.0.1", port))
    return c


def readable(c: socket.socket, timeout_s: float) -> bool:
    # (poll, not select: the attack's sockets are numbered past select's 1,024)
    p = select.poll()
    p.register(c, select.POLLIN | select.POLLHUP | select.POLLERR)
    return bool(p.poll(max(timeout_s, 0.0) * 1000))


def closed_by_server(c: socket.socket, within_s: float = 60.0) -> bytes | None:
    """What the server sent before closing `c` (b"" for nothing), or None if it is still
    open after `within_s` (a poll, far longer than any deadline under test)."""
    got = b""
    deadline = time.monotonic() + within_s
    while (left := deadline - time.monotonic()) > 0:
        if not readable(c, left):
            continue
        try:
            chunk = c.recv(65536)
        except (ConnectionResetError, BrokenPipeError):
            return got
        if not chunk:
            return got
        got += chunk
    return None


def still_open(c: socket.socket) -> bool:
    """Whether the server still holds `c` for a request: it has sent nothing (an answer,
    408 or 503, comes with the connection's end)."""
    try:
        c.recv(1, socket.MSG_PEEK | socket.MSG_DONTWAIT)
    except BlockingIOError:
        return True
    except OSError:
        pass
    return False


async def phone_state(port: int, address: str) -> dict[str, Any]:
    """A new phone's WebSocket from `address`: hello, then the state."""
    async with websockets.connect(f"ws://127.0.0.1:{port}/ws/channels/main",
                                  local_addr=(address, 0), open_timeout=60) as ws:
        hello = json.loads(await ws.recv())
        state = json.loads(await ws.recv())
        assert hello["type"] == "hello" and state["type"] == "state"
        return state


# ---------------------------------------------------------------------- the report's attack
def test_two_thousand_idle_and_half_sent_sockets_and_a_new_phone_still_loads(tmp_path: Path):
    s = Server(tmp_path, BASE, TOKEN).start(preexec_fn=debian_limit)
    held: list[socket.socket] = []
    try:
        with open_files_for(IDLE_SOCKETS + 600):
            peak = 0
            for i in range(IDLE_SOCKETS):
                # one client (the machine itself) and forty more addresses
                c = connect(s.port, "127.0.0.1" if i % 4 == 0 else f"127.0.0.{2 + i % 40}")
                if i % 2:  # half a request, never finished
                    c.sendall(b"GET /api/health HTTP/1.1\r\nHost: 127.0.0.1\r\nX-Wait: ")
                held.append(c)
                if i % 100 == 0:
                    peak = max(peak, server_files(s.proc.pid))
            peak = max(peak, server_files(s.proc.pid))
            # the server never came near its limit: the journal and the desk have files
            assert peak < DEBIAN_NOFILE - 64, peak
            phone = "127.0.0.200"
            with httpx2.Client(base_url=s.base, timeout=60,
                               transport=httpx2.HTTPTransport(local_address=phone)) as c:
                assert c.get("/display/main").status_code == 200
                assert c.get("/static/common.js").status_code == 200
                assert c.get("/api/channels/main").json()["channel"] == "main"
            assert asyncio.run(phone_state(s.port, phone))["channel"] == "main"
            # the operator prepares and starts a match: the journal opens its file
            with httpx2.Client(base_url=s.base, headers=s.op, timeout=60) as op:
                r = op.post("/api/channels/main/match", json={"seed": 5})
                assert r.status_code == 200, r.text
                assert op.post("/api/channels/main/match/start").status_code == 200
                # the desk's database writes too
                r = op.post("/api/tournaments", json={"name": "door"})
                assert r.status_code in (200, 201), r.text
            assert server_files(s.proc.pid) < DEBIAN_NOFILE - 64
            # and the server did not keep what it let go: most idle sockets were closed
            assert sum(still_open(c) for c in held) < DEBIAN_NOFILE
    finally:
        for c in held:
            c.close()
        s.stop()
    assert "Too many open files" not in s.log()


# ---------------------------------------------------------------------- deadlines
@pytest.fixture(scope="module")
def quick(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Server]:
    s = Server(tmp_path_factory.mktemp("door"), {**BASE, "server": {"limits": {
        "request_head_s": 1, "keep_alive_s": 1, "ws_ping_s": 1,
        "connections_per_address": 6, "connections_exempt": []}}}, TOKEN).start()
    yield s
    s.stop()


def test_a_connection_that_sends_nothing_is_closed(quick: Server):
    with connect(quick.port, "127.0.0.21") as c:
        assert closed_by_server(c) == b""


def test_half_a_request_head_is_answered_408_and_closed(quick: Server):
    with connect(quick.port, "127.0.0.22") as c:
        c.sendall(b"GET /api/health HTTP/1.1\r\nHost: 127.0.0.1\r\nX-Wait: ")
        got = closed_by_server(c)
        assert got is not None and got.startswith(b"HTTP/1.1 408"), got
        assert b"request_timeout" in got


def test_a_head_sent_a_byte_at_a_time_still_has_its_deadline(quick: Server):
    with connect(quick.port, "127.0.0.23") as c:
        head = b"GET /api/health HTTP/1.1\r\nHost: 127.0.0.1\r\nX-Slow: " + b"a" * 10000
        deadline = time.monotonic() + 60
        sent = 0
        while time.monotonic() < deadline:
            try:
                c.sendall(head[sent:sent + 1])
            except (BrokenPipeError, ConnectionResetError):
                break
            sent += 1
            if readable(c, 0.2):  # a byte every 0.2 s, or the answer
                break
        got = closed_by_server(c)
        assert got is not None and (got == b"" or got.startswith(b"HTTP/1.1 408")), got
        assert sent < len(head)


def test_a_kept_alive_connection_is_closed_when_idle(quick: Server):
    with connect(quick.port, "127.0.0.24") as c:
        c.sendall(b"GET /api/health HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n")
        got = closed_by_server(c)
        assert got is not None and got.startswith(b"HTTP/1.1 200"), got[:100] if got else got


def test_a_body_that_stops_coming_is_answered_408(quick: Server):
    with connect(quick.port, "127.0.0.25") as c:
        c.sendall(b"POST /api/channels/main/referees HTTP/1.1\r\nHost: 127.0.0.1\r\n"
                  b"Content-Type: application/json\r\nContent-Length: 100\r\n\r\n{\"pin\": ")
        got = closed_by_server(c)
        assert got is not None and got.startswith(b"HTTP/1.1 408"), got


def test_the_rest_of_a_body_the_server_did_not_read_has_the_heads_deadline(quick: Server):
    # a GET with a body its route never reads: answered, then the body goes on a byte at a
    # time (it would hold the connection for ever if only silence were timed)
    with connect(quick.port, "127.0.0.26") as c:
        c.sendall(b"GET /api/health HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Length: 30000\r\n\r\n")
        deadline = time.monotonic() + 60
        answered = b""
        while time.monotonic() < deadline:
            try:
                c.sendall(b"x")
            except (BrokenPipeError, ConnectionResetError):
                break
            if readable(c, 0.2):
                try:
                    chunk = c.recv(65536)
                except ConnectionResetError:
                    break
                if not chunk:
                    break
                answered += chunk
        assert answered.startswith(b"HTTP/1.1 200")
        assert time.monotonic() < deadline, "the connection was kept for a minute"


def test_a_websocket_that_never_answers_is_closed(quick: Server):
    with connect(quick.port, "127.0.0.27") as c:
        c.sendall(b"GET /ws/channels/main HTTP/1.1\r\nHost: 127.0.0.1\r\nUpgrade: websocket\r\n"
                  b"Connection: Upgrade\r\nSec-WebSocket-Version: 13\r\n"
                  b"Sec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\n\r\n")
        got = closed_by_server(c)  # it reads the states and pings, and never answers a ping
        assert got is not None and got.startswith(b"HTTP/1.1 101"), got[:100] if got else got


def test_a_live_websocket_stays(quick: Server):
    async def live() -> int:
        states = 0
        async with websockets.connect(f"ws://127.0.0.1:{quick.port}/ws/channels/main",
                                      local_addr=("127.0.0.28", 0)) as ws:
            # a library answers the server's pings: for five of its 1 s pings the socket lives
            t0 = time.monotonic()
            while time.monotonic() - t0 < 5:
                with contextlib.suppress(TimeoutError):
                    async with asyncio.timeout(1):
                        await ws.recv()
                        states += 1
            await ws.send('{"type": "ping"}')
            async with asyncio.timeout(30):
                while json.loads(await ws.recv())["type"] != "pong":
                    pass
        return states

    assert asyncio.run(live()) >= 2  # hello and the state


# ---------------------------------------------------------------------- caps
def test_connections_per_address_are_capped_and_websockets_count(quick: Server):
    async def sockets(address: str, n: int) -> list[Any]:
        return [await websockets.connect(f"ws://127.0.0.1:{quick.port}/ws/channels/main",
                                         local_addr=(address, 0)) for _ in range(n)]

    async def run() -> None:
        held = await sockets("127.0.0.30", 6)  # the address's cap, all WebSockets
        try:
            for ws in held:
                assert json.loads(await ws.recv())["type"] == "hello"
            # a seventh connection from that address: nothing idle to give way, refused
            with httpx2.Client(transport=httpx2.HTTPTransport(local_address="127.0.0.30"),
                               timeout=60) as c:
                try:
                    r = c.get(f"{quick.base}/api/health")
                except httpx2.TransportError:
                    pass
                else:
                    assert r.status_code == 503, r.text
                    assert r.json()["error"] == "too_many_connections"
            with pytest.raises((websockets.InvalidHandshake, OSError, EOFError)):
                await websockets.connect(f"ws://127.0.0.1:{quick.port}/ws/channels/main",
                                         local_addr=("127.0.0.30", 0), open_timeout=60)
            # any other address is served
            async with httpx2.AsyncClient(
                    transport=httpx2.AsyncHTTPTransport(local_address="127.0.0.31")) as c:
                assert (await c.get(f"{quick.base}/api/health")).status_code == 200
        finally:
            for ws in held:
                await ws.close()

    asyncio.run(run())


def test_idle_connections_give_way_to_a_new_one(quick: Server):
    idle = [connect(quick.port, "127.0.0.32") for _ in range(20)]
    try:
        # the address holds at most its cap: the oldest idle ones were closed for the newer
        deadline = time.monotonic() + 60
        while sum(still_open(c) for c in idle) > 6 and time.monotonic() < deadline:
            readable(next(c for c in idle if still_open(c)), 0.5)
        assert sum(still_open(c) for c in idle) <= 6
        assert not still_open(idle[0]) and still_open(idle[-1])
        # and a request from that address is served: an idle one gives way to it
        with httpx2.Client(transport=httpx2.HTTPTransport(local_address="127.0.0.32"),
                           timeout=60) as c:
            assert c.get(f"{quick.base}/api/health").status_code == 200
    finally:
        for c in idle:
            c.close()


# ---------------------------------------------------------------------- the accounting
# (the uvicorn hooks the door relies on: tests/test_serverglue.py)
def test_doors_hold_what_the_caps_allow_and_idle_connections_give_way():
    """The door's accounting alone (api.doors.Doors), with stand-in transports."""
    from api.doors import Doors

    closed: list[str] = []
    doors = Doors(total=4, per_address=2, exempt=lambda a: a == "10.0.0.9")

    def idle(name: str, address: str) -> bool:
        ok = doors.admit(name, address)
        if ok:
            doors.idle(name, lambda: closed.append(name))
        return ok

    assert idle("a1", "10.0.0.1") and idle("a2", "10.0.0.1")
    assert idle("a3", "10.0.0.1")  # the address's oldest idle one gives way
    assert closed == ["a1"]
    doors.busy("a2")
    doors.busy("a3")  # both serve requests now: nothing of 10.0.0.1 may give way
    assert not doors.admit("a4", "10.0.0.1") and doors.refused == 1
    assert idle("e1", "10.0.0.9") and idle("e2", "10.0.0.9")  # the exempt address
    assert idle("e3", "10.0.0.9")  # in all: the oldest idle one anywhere gives way
    assert closed == ["a1", "e1"] and len(doors) == 4
    doors.busy("e2")
    doors.busy("e3")
    assert not doors.admit("b1", "10.0.0.2")  # everything is busy: refused
    doors.release("a2")
    doors.release("a2")  # (a connection lost twice changes nothing)
    assert doors.admit("b1", "10.0.0.2") and len(doors) == 4
    doors.release("a1")  # one that gave way is gone already
    assert len(doors) == 4


def test_door_limits_keep_a_reserve_below_the_open_files_limit():
    from api.doors import door_limits

    lim = Config().server.limits
    debian = door_limits(lim, 1024)
    assert debian.connections == 768 and debian.reserve == 256
    assert debian.backlog == 64  # accepted at once at most: a quarter of the reserve
    raised = door_limits(lim, 65536)
    assert raised.connections == lim.connections and raised.backlog == 2048
