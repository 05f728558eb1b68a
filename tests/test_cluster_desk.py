"""The desk (大会本部) of a cluster: two real `yomite serve --bus` processes on one real
PostgreSQL server (started by the test on loopback) and a real broker. A tournament made
through one process is on the other's desk; a live page on B wakes at a change made through
A; twenty entries sent at the same instant, half through each process, all land with twenty
different numbers (each process kept its own copy: without the version check and the change
computed again from the latest, half were refused or overwrote each other); a deletion through
B is a 404 on A. These run with the refresh off (an hour): only the announcements can tell.
A change written to the database by another program (no announcement) is found by every
process's refresh, and a round's start under way is left alone by a process joining. Four
processes migrating an empty database at once all open it (the
migration's lock). A whole tournament day through B's desk while A owns two of its four
channels: the rounds B starts there answer the seed and the journal of A's match (they
answered seed 0 and no journal: the desk read them from an engine B does not have)."""

import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx2
import pytest

from tests.clusterprocs import (  # noqa: F401 (the fixture)
    Cluster,
    at_once,
    broker_fixture,
    wait_for,
)
from tests.natsbroker import Broker
from tests.pgserver import Postgres
from tests.serverproc import ROOT, Server


@pytest.fixture(name="pg")
def pg_fixture() -> Iterator[Postgres]:
    p = Postgres().start()
    try:
        yield p
    finally:
        p.stop()


def tournament(s: Server, tid: str) -> httpx2.Response:
    return httpx2.get(f"{s.base}/api/tournaments/{tid}", headers=s.op, timeout=20)


def players(s: Server, tid: str) -> list[dict[str, Any]]:
    r = tournament(s, tid)
    assert r.status_code == 200, r.text
    out: list[dict[str, Any]] = r.json()["players"]
    return out


def add_at_once(servers: list[Server], tid: str) -> list[httpx2.Response]:
    """One entry through each of `servers`, all let go at the same instant."""
    return at_once(servers, lambda s: s.op, f"/api/tournaments/{tid}", lambda c, i: c.post(
        f"/api/tournaments/{tid}/entries",
        json={"players": [{"name": f"選手{i:02d}", "club": "東"}]}))


def two_on(tmp: Path, broker: Broker, pg: Postgres, refresh_s: float) -> Cluster:
    return Cluster(tmp, broker, 2, ("a",), desk={"database_url": pg.url},
                   cluster={"desk_refresh_s": refresh_s}).start()


def make_tournament(s: Server) -> None:
    r = httpx2.post(f"{s.base}/api/tournaments", headers=s.op, timeout=30,
                    json={"id": "city-2026", "name": "市民大会", "day": "2026-12-04"})
    assert r.status_code == 200, r.text


def test_two_processes_serve_one_desk(tmp_path: Path, broker: Broker, pg: Postgres) -> None:
    c = two_on(tmp_path, broker, pg, 3600)
    try:
        a, b = c.servers
        make_tournament(a)
        t0 = time.monotonic()
        wait_for(lambda: tournament(b, "city-2026").status_code == 200, 30,
                 "the tournament on B")
        print(f"\nmade on A, on B's desk after {(time.monotonic() - t0) * 1000:.0f} ms")
        version = tournament(b, "city-2026").json()["version"]

        # a live page on B (long poll past the version it has) wakes at a change through A
        woke: list[Any] = []

        def poll() -> None:
            r = httpx2.get(f"{b.base}/api/tournaments/city-2026", headers=b.op, timeout=60,
                           params={"after": version})
            woke.append((time.monotonic(), r))

        waiter = threading.Thread(target=poll)
        waiter.start()
        time.sleep(0.5)  # the poll is waiting on B (or answers at once: the check below)
        r = httpx2.post(f"{a.base}/api/tournaments/city-2026/entries", headers=a.op,
                        timeout=30, json={"players": [{"name": "一番", "club": "東"}]})
        assert r.status_code == 200, r.text
        sent = time.monotonic()
        waiter.join(60)
        assert woke, "B's live page never answered"
        at, answer = woke[0]
        assert answer.status_code == 200, answer.text
        assert answer.json()["version"] > version
        assert [p["name"] for p in answer.json()["players"]] == ["一番"]
        print(f"A's entry answered, B's live page woke {(at - sent) * 1000:.0f} ms later")

        # twenty entries at the same instant, ten through each process: every one lands
        answers = add_at_once([a, b] * 10, "city-2026")
        assert [x.status_code for x in answers] == [200] * 20, [x.text for x in answers]
        numbers = [x.json()["added"] for x in answers]
        assert all(len(n) == 1 for n in numbers), numbers
        assert sorted(n[0] for n in numbers) == list(range(2, 22)), numbers
        for s in (a, b):
            wait_for(lambda s=s: len(players(s, "city-2026")) == 21, 30,
                     "the twenty-one players on both")
            got = {p["no"]: p["name"] for p in players(s, "city-2026")}
            for i, n in enumerate(numbers):
                assert got[n[0]] == f"選手{i:02d}", (n, got)

        # deleted through B: gone from A
        r = httpx2.delete(f"{b.base}/api/tournaments/city-2026", headers=b.op, timeout=30)
        assert r.status_code == 200, r.text
        wait_for(lambda: tournament(a, "city-2026").status_code == 404, 30,
                 "the deletion on A")

        # the same id made at one instant, ten times through each process: one is made, the
        # others are told it exists (409, what to do), not that the database failed (503)
        answers = at_once([a, b] * 10, lambda s: s.op, "/api/tournaments", lambda c, i: c.post(
            "/api/tournaments", json={"id": "city-2026", "name": f"大会{i}", "day": "2026-12-04"}))
        codes = sorted(x.status_code for x in answers)
        assert codes == [200] + [409] * 19, [x.text for x in answers]
        made = next(x.json()["name"] for x in answers if x.status_code == 200)
        assert all(x.json()["error"] == "tournament_exists" and "'city-2026'" in x.text
                   for x in answers if x.status_code == 409), [x.text for x in answers]
        for s in (a, b):
            wait_for(lambda s=s: tournament(s, "city-2026").status_code == 200, 30,
                     "the tournament made at once")
            assert tournament(s, "city-2026").json()["name"] == made
    finally:
        c.stop()


def test_a_change_no_process_announced_is_found_by_the_refresh(
        tmp_path: Path, broker: Broker, pg: Postgres) -> None:
    c = Cluster(tmp_path, broker, 3, ("a",), desk={"database_url": pg.url},
                cluster={"desk_refresh_s": 1.0})
    a, b, late = c.servers
    try:
        a.start()
        b.start()
        make_tournament(a)
        wait_for(lambda: tournament(b, "city-2026").status_code == 200, 30,
                 "the tournament on B")
        # a change no process announced (another program on the database): every process
        # finds it at its next refresh
        from desk import tournament as ops
        from desk.entries import entry
        from desk.repository import open_repository

        repo = open_repository(pg.url)
        try:
            t = repo.load("city-2026")
            assert t is not None
            repo.apply("city-2026", t.version, ops.add_players(t, [entry("外部")]))
        finally:
            repo.close()
        t0 = time.monotonic()
        for s in (a, b):
            wait_for(lambda s=s: any(p["name"] == "外部" for p in players(s, "city-2026")),
                     30, "the unannounced change on both")
        print(f"an unannounced change on both after {time.monotonic() - t0:.1f} s "
              f"(refresh every 1 s)")

        # a round's start under way on one process (asked for, not yet confirmed) is left
        # alone by a process joining the cluster: only a start cut short long ago is undone
        # at a start (the joining process undid it: the other's confirmation then failed)
        for i in range(3):
            r = httpx2.post(f"{a.base}/api/tournaments/city-2026/entries", headers=a.op,
                            timeout=30, json={"players": [{"name": f"選手{i}"}]})
            assert r.status_code == 200, r.text
        r = httpx2.post(f"{a.base}/api/tournaments/city-2026/blocks/draw", headers=a.op,
                        timeout=30, json={"blocks": 1, "seed": 7})
        assert r.status_code == 200, r.text
        r = httpx2.post(f"{a.base}/api/tournaments/city-2026/rounds", headers=a.op, timeout=30)
        assert r.status_code == 200, r.text
        from hall.deskstore import now_iso

        repo = open_repository(pg.url)
        try:
            t = repo.load("city-2026")
            assert t is not None
            block = t.rounds[0].block
            repo.apply("city-2026", t.version,
                       ops.start_reading(t, block, 1, "a", now_iso()))
        finally:
            repo.close()
        late.start()
        (mine,) = [r for r in tournament(late, "city-2026").json()["rounds"]
                   if r["number"] == 1]
        assert mine["reading"] is not None and mine["reading"]["status"] == "starting", mine
    finally:
        c.stop()


OPEN_AT = """
import sys, time
import alembic.command, alembic.config, psycopg  # noqa: F401 (loaded before the instant)
from desk.repository import open_repository
at = float(sys.argv[2])
time.sleep(max(0.0, at - time.time()))  # every process lets go at the same instant
repo = open_repository(sys.argv[1])
print(len(repo.summaries()))
"""


def test_processes_migrating_an_empty_database_at_once_all_open_it(pg: Postgres) -> None:
    """Four processes (as a cluster's start) open the empty database at the same instant:
    each brings the schema up to date under PostgreSQL's advisory lock, so all four open it
    (without the lock, the others failed creating the tables the first was creating)."""
    at = time.time() + 8.0  # past every process's imports, even on a loaded machine
    procs = [subprocess.Popen([sys.executable, "-c", OPEN_AT, pg.url, str(at)], cwd=ROOT,
                              stdout=subprocess.PIPE, stderr=subprocess.PIPE)
             for _ in range(4)]
    outs = [p.communicate(timeout=120) for p in procs]
    assert time.time() > at
    failed = [err.decode()[-600:] for p, (_o, err) in zip(procs, outs, strict=True)
              if p.returncode != 0]
    assert not failed, failed
    assert [o.decode().strip() for o, _e in outs] == ["0"] * 4


def test_a_tournament_day_through_one_process_of_a_cluster(
        tmp_path: Path, broker: Broker, pg: Postgres) -> None:
    """tests/test_desk_server.py's whole day (40 entries, four blocks on four channels, six
    rounds with a late entry and withdrawals, the referees' results, a tied final and its extra
    card) through B's desk, while A owns two of the four channels: the rounds B starts on them
    are prepared and started through the broker, their states come back to B's desk and its
    referees' results."""
    from tests.desk_sim import CHANNELS, Desk
    from tests.desk_sim import config as day_config
    from tests.test_desk_server import tournament_day

    day = day_config()
    c = Cluster(tmp_path, broker, 2, tuple(CHANNELS), match=day["match"], voice=day["voice"],
                server={"security": day["server"]["security"]},
                desk={**day["desk"], "database_url": pg.url}).start()
    try:
        a, b = c.servers
        # A, started first, took the four; it hands two over to B (a channel between two
        # owners answers 503 "try again" for a moment): the day starts once each has two
        wait_for(lambda: [len(c.describe(s)["owned"]) for s in (a, b)] == [2, 2], 60,
                 "two channels owned by each process")
        on_a = sorted(c.describe(a)["owned"])
        print(f"\nchannels owned by A: {on_a}, by B: {sorted(c.describe(b)['owned'])}")
        d = Desk(b.base, b.op)
        try:
            tournament_day(d, b)
        finally:
            d.close()
        # A's desk has the same day (once it heard B's last change)
        last = httpx2.get(f"{b.base}/api/tournaments/day", headers=b.op,
                          timeout=20).json()["version"]
        wait_for(lambda: httpx2.get(f"{a.base}/api/tournaments/day", headers=a.op,
                                    timeout=20).json()["version"] == last, 30,
                 "B's last change on A")
    finally:
        c.stop()
