"""Room quotas over a cluster are exact (cluster.seats): rooms opened at the same instant
through two real `yomite serve --bus` processes never pass an organisation's quota nor the
server's `rooms.max_open`, and a closed room's seat is free again on every process. Each
process alone counted only the rooms it had heard of: every open in flight passed its check.
The seats themselves, on the real broker with the clock moved by hand: a seat whose room is
closed, or that never got a room, is taken back; many takers at once get exactly the quota."""

import asyncio
from pathlib import Path
from typing import Any

import httpx2
import pytest

from cluster.bus import Bus
from cluster.seats import OPENING_S, KvSeats
from tests.clusterprocs import (  # noqa: F401 (the fixture)
    Cluster,
    at_once,
    broker_fixture,
    wait_for,
)
from tests.natsbroker import Broker
from tests.serverproc import Server


def bearer(token: str) -> dict[str, str]:
    return {"Authorization": f"Bearer {token}"}


def teacher_of(admin: Server, name: str, most: int) -> tuple[str, str]:
    org = httpx2.post(f"{admin.base}/api/orgs", headers=admin.op, timeout=20,
                      json={"name": name, "max_open_rooms": most})
    assert org.status_code == 201, org.text
    r = httpx2.post(f"{admin.base}/api/orgs/join", timeout=20,
                    json={"code": org.json()["code"], "name": f"{name}の先生"})
    assert r.status_code == 200, r.text
    return org.json()["id"], r.json()["token"]


def open_at_once(servers: list[Server], token: str) -> list[httpx2.Response]:
    """One open through each of `servers`, all let go at the same instant."""
    return at_once(servers, lambda _s: bearer(token), "/api/rooms",
                   lambda c, _i: c.post("/api/rooms", json={}), timeout=60)


def open_rooms(s: Server, org: str) -> int:
    r = httpx2.get(f"{s.base}/api/orgs/{org}", headers=s.op, timeout=20)
    assert r.status_code == 200, r.text
    n: int = r.json()["open_rooms"]
    return n


def test_rooms_opened_at_once_through_two_processes_never_pass_a_quota(
        tmp_path: Path, broker: Broker) -> None:
    c = Cluster(tmp_path, broker, 2, ("main",), rooms={"max_open": 3}).start()
    try:
        a, b = c.servers
        east, t_east = teacher_of(a, "東小学校", 2)
        west, t_west = teacher_of(a, "西小学校", 5)
        for tok in (t_east, t_west):
            wait_for(lambda tok=tok: httpx2.get(f"{b.base}/api/session", headers=bearer(tok),
                                                timeout=20).status_code == 200,
                     10, "the teachers known to B")

        # eight opens at once for an organisation allowed two, four through each process
        answers = open_at_once([a, b] * 4, t_east)
        made = [r.json()["room"] for r in answers if r.status_code == 201]
        refused = [r.json()["error"] for r in answers if r.status_code != 201]
        print(f"\nat once: {len(made)} opened, refused {refused}")
        assert len(made) == 2, [r.text for r in answers]
        assert refused == ["too_many_rooms"] * 6
        for s in (a, b):
            wait_for(lambda s=s: open_rooms(s, east) == 2, 10, "two rooms open on both")

        # the server takes three: of four opens at once for the other organisation, one
        answers = open_at_once([a, b] * 2, t_west)
        assert sorted(r.status_code for r in answers) == [201, 409, 409, 409], \
            [r.text for r in answers]
        assert {r.json()["error"] for r in answers if r.status_code == 409} == {"server_full"}
        for s in (a, b):
            wait_for(lambda s=s: open_rooms(s, west) == 1, 10, "one room of the other on both")

        # a room closed through B: its seats free on A
        r = httpx2.delete(f"{b.base}/api/rooms/{made[0]}", headers=bearer(t_east), timeout=20)
        assert r.status_code == 200, r.text
        wait_for(lambda: open_rooms(a, east) == 1, 10, "the closing heard by A")
        r = httpx2.post(f"{a.base}/api/rooms", headers=bearer(t_east), timeout=20, json={})
        assert r.status_code == 201, r.text
        r = httpx2.post(f"{b.base}/api/rooms", headers=bearer(t_east), timeout=20, json={})
        assert r.status_code == 409 and r.json()["error"] == "too_many_rooms", r.text
    finally:
        c.stop()


def test_seats_are_exact_under_contention_and_a_lost_seat_comes_back(broker: Broker) -> None:
    async def run() -> None:
        bus = await Bus.connect(broker.url, name="t", prefix="seats")
        assert bus.records is not None
        now = [1000.0]
        records: dict[str, dict[str, Any]] = {}
        # this process's monotonic clock, moved by hand; the wall clock stands at a time a
        # minute and more off (another machine's): it is never compared
        seats = KvSeats(bus.records, lambda: dict(records), wall=lambda: 1e9,
                        clock=lambda: now[0])
        try:
            # thirty takers at once for five seats (each write lost to another is read again)
            got = await asyncio.gather(*(seats.take("o-a", f"r-{i}", 5) for i in range(30)))
            assert sum(got) == 5
            holders = [f"r-{i}" for i, g in enumerate(got) if g]
            assert await seats.take("o-a", holders[0], 5)  # a holder asking again keeps it
            assert not await seats.take("o-a", "r-late", 5)
            # a room closed: its seat is free to the next, given back or not
            records[f"room/{holders[0]}"] = {"closed": 1e9}
            assert await seats.take("o-a", "r-next", 5)
            assert not await seats.take("o-a", "r-late", 5)
            # given back: free at once
            await seats.give_back("o-a", holders[1])
            assert await seats.take("o-a", "r-late", 5)
            # seats never followed by a room record (a process killed while opening): held
            # while the room may still be being opened, then taken back
            for h in [*holders[2:], "r-next", "r-late"]:
                records[f"room/{h}"] = {"closed": None}
            records.pop(f"room/{holders[2]}")
            assert not await seats.take("o-a", "r-x", 5)
            now[0] += OPENING_S + 1
            assert await seats.take("o-a", "r-x", 5)
            # another pool is another count
            assert await seats.take("", "r-x", 1) and not await seats.take("", "r-y", 1)
            # the broker gone: an OSError, never a seat taken blind
            broker.kill()
            with pytest.raises(OSError):
                await asyncio.wait_for(seats.take("o-b", "r-z", 5), 30)
        finally:
            await bus.close()

    asyncio.run(run())
