"""A room's page quota over a cluster is exact (cluster.pageseats): pages joining at the same
instant through two real `yomite serve --bus` processes never pass it; a page that left frees
its seat for a page through the other process; a process stopped writes its count 0 and a
killed one's pages are free again once the census forgets it; with the broker killed, pages
are let in on what the process knows. Each process counted the other's pages from its last
word in the census: pages joining through both within a half second all got in. The processes
say their counts of pages alone only every hour here (`pages_heartbeat_s`), except in the kill
test."""

import asyncio
import contextlib
import json
import time
from pathlib import Path
from typing import Any

import httpx2
import websockets

from tests.clusterprocs import Cluster, broker_fixture, wait_for  # noqa: F401 (the fixture)
from tests.natsbroker import Broker
from tests.orgs import join_at_once
from tests.serverproc import Server

VIEWER_KEYS: dict[str, str] = {}  # a room's viewer link's key (its viewers need it)


def room_of(a: Server, b: Server, most: int) -> str:
    """A class room of `most` viewers, opened through A, known to B."""
    org = httpx2.post(f"{a.base}/api/orgs", headers=a.op, timeout=20,
                      json={"name": "南小学校", "max_clients_per_room": most})
    assert org.status_code == 201, org.text
    r = httpx2.post(f"{a.base}/api/orgs/join", timeout=20,
                    json={"code": org.json()["code"], "name": "南小学校の先生"})
    assert r.status_code == 200, r.text
    r = httpx2.post(f"{a.base}/api/rooms", json={}, timeout=20,
                    headers={"Authorization": f"Bearer {r.json()['token']}"})
    assert r.status_code == 201, r.text
    room: str = r.json()["room"]
    VIEWER_KEYS[room] = r.json()["links"]["viewer"].split("#key=", 1)[1]
    wait_for(lambda: httpx2.get(f"{b.base}/api/channels/{room}", headers=b.op,
                                timeout=20).status_code == 200, 10, "the room on B")
    return room


def ws(s: Server, room: str) -> str:
    """A viewer's WebSocket on the room (with its viewer link's key)."""
    return s.base.replace("http://", "ws://") + f"/ws/channels/{room}?token={VIEWER_KEYS[room]}"


def what(answer: dict[str, Any]) -> str:
    return str(answer.get("type") or answer.get("reason"))


async def join(stack: contextlib.AsyncExitStack, url: str) -> Any:
    """A page that stays (in `stack`), or None when it was refused room_full."""
    p = await stack.enter_async_context(websockets.connect(url))
    try:
        async with asyncio.timeout(30):
            assert json.loads(await p.recv())["type"] == "hello"
    except websockets.ConnectionClosed as e:
        assert e.rcvd is not None and e.rcvd.reason == "room_full", e.rcvd
        return None
    return p


async def join_when_free(stack: contextlib.AsyncExitStack, url: str,
                         timeout: float) -> tuple[Any, int]:
    """A page through `url`, tried every 0.1 s until it gets in: it and the tries it took."""
    tries = 0
    async with asyncio.timeout(timeout):
        while True:
            tries += 1
            async with contextlib.AsyncExitStack() as one:
                p = await join(one, url)
                if p is not None:
                    stack.push_async_exit(one.pop_all())
                    return p, tries
            await asyncio.sleep(0.1)


def test_pages_joining_at_once_through_two_processes_never_pass_a_rooms_quota(
        tmp_path: Path, broker: Broker) -> None:
    c = Cluster(tmp_path, broker, 2, ("main",),
                cluster={"pages_heartbeat_s": 3600}).start()
    try:
        a, b = c.servers
        room = room_of(a, b, 6)

        async def run() -> None:
            async with contextlib.AsyncExitStack() as stack:
                # sixteen pages at one instant, eight through each process: six get in
                urls = [ws(a, room), ws(b, room)] * 8
                # (kept a second: each process says its count of the room in the census,
                # then nothing more of it for the hour of `pages_heartbeat_s`)
                answers = await join_at_once(urls, hold=1.0)
                print(f"\nat once: {[what(x) for x in answers]}")
                assert sorted(what(x) for x in answers) == ["hello"] * 6 + ["room_full"] * 10
                # (join_at_once closed them): six that stay, three through each process
                kept_a = [await join_when_free(stack, ws(a, room), 10) for _ in range(3)]
                kept_b = [await join_when_free(stack, ws(b, room), 10) for _ in range(3)]
                for s in (a, b):
                    assert await join(stack, ws(s, room)) is None  # full, on both
                # two pages through A leave: two pages through B take their seats
                for p, _tries in kept_a[:2]:
                    await p.close()
                t0 = time.monotonic()
                more_b = [await join_when_free(stack, ws(b, room), 10) for _ in range(2)]
                print(f"two seats left on A taken through B after "
                      f"{[t for _p, t in more_b]} tries, {time.monotonic() - t0:.2f} s")
                for s in (a, b):
                    assert await join(stack, ws(s, room)) is None
                # every page through B leaves (B's count 0; its census still says what it
                # had a second after the first pages): five through A take their seats
                for p, _tries in kept_b + more_b:
                    await p.close()
                for _ in range(5):
                    await join_when_free(stack, ws(a, room), 10)
                for s in (a, b):
                    assert await join(stack, ws(s, room)) is None
                # A stopped (its six pages closed, to join another process): A wrote its
                # count 0, so six through B get in (else A's six held for the census's hour)
                await asyncio.to_thread(a.stop)
                for _ in range(6):
                    await join_when_free(stack, ws(b, room), 10)
                assert await join(stack, ws(b, room)) is None

        asyncio.run(run())
    finally:
        c.stop()


def test_a_killed_processs_pages_are_free_again(tmp_path: Path, broker: Broker) -> None:
    """Three pages through A fill a room of three; A is killed (kill -9): a page through B
    gets in once B's census forgot A (three heartbeats of 1 s) and A's written count is as
    old. Before, refused; without forgetting A's written count, refused for ever. Then the
    broker is killed: a page that left frees its seat on B's own count, the quota still held."""
    c = Cluster(tmp_path, broker, 2, ("main",), cluster={"pages_heartbeat_s": 1}).start()
    try:
        a, b = c.servers
        room = room_of(a, b, 3)

        async def run() -> float:
            async with contextlib.AsyncExitStack() as stack:
                for _ in range(3):
                    assert await join(stack, ws(a, room)) is not None
                assert await join(stack, ws(b, room)) is None
                a.kill()
                t0 = time.monotonic()
                on_b = [(await join_when_free(stack, ws(b, room), 60))[0]]
                took = time.monotonic() - t0
                on_b += [await join(stack, ws(b, room)) for _ in range(2)]
                assert None not in on_b
                assert await join(stack, ws(b, room)) is None  # three pages: full again

                broker.kill()
                await on_b[0].close()
                await join_when_free(stack, ws(b, room), 20)
                assert await join(stack, ws(b, room)) is None
                return took

        took = asyncio.run(run())
        print(f"\na page through B got in {took:.1f} s after A was killed")
        assert took > 2.0, "A's pages were free before B could know A was dead"
    finally:
        c.stop()
