"""The association's server: `yomite serve --bus` processes sharing one hall through a real NATS
broker (Debian's nats-server with JetStream, started here on loopback).

Each test starts its own broker and its own processes (each with its own journal folder and the
same config), finds which process owns a channel from `GET /api/cluster`, and makes the bad
case certain: SIGKILL of the owner while a verse is read, SIGSTOP of the owner past its lease,
SIGKILL of the broker. What is asserted is what a hall sees: who reads, whether the match is
paused and by whom, and that every hold a client was answered for is in the broker's journal.
Times are printed (the figures are bench/cluster.py's), never asserted.
"""

import json
import signal
import time
from pathlib import Path
from typing import Any

import httpx2

from tests.clusterprocs import (  # noqa: F401 (broker_fixture: the fixture `broker`)
    TTL,
    Cluster,
    broker_fixture,
    call,
    hold,
    holders,
    journal_lines,
    reading_a_verse,
    release,
    start_match,
    start_reading,
    state,
    wait_for,
)
from tests.natsbroker import Broker


def held_in(lines: list[dict[str, Any]], referee: str) -> bool:
    return any(referee in json.dumps(line) and "hold" in json.dumps(line) for line in lines)


def test_a_hold_sent_to_one_process_stops_a_channel_owned_by_another(
        tmp_path: Path, broker: Broker) -> None:
    c = Cluster(tmp_path, broker, 2, ("main", "pink")).start()
    try:
        # both channels owned, one each once both processes are up (a process over its share
        # hands a channel that is not being read to the other)
        owners = wait_for(lambda: (o := c.describe(c.servers[0])["owners"])
                          and len({o["main"], o["pink"]} - {None}) == 2 and o, 30,
                          "one channel owned by each process")
        print("owners:", owners)
        owner = c.owner("main")
        other = c.others(owner)[0]
        assert "main" not in c.describe(other)["owned"]
        start_reading(other, owner, "main")  # prepared and started through the other process
        t0 = time.perf_counter()
        r = hold(other, "main", "ref-a")
        took = time.perf_counter() - t0
        assert r.status_code == 200, r.text
        assert r.json()["match"]["paused"] is True
        assert holders(r.json()) == ["ref-a"]
        print(f"hold through the other process answered in {took * 1000:.1f} ms")
        # the owner read it: its own state is paused by that hand
        st = state(owner, "main")
        assert st["match"]["paused"] is True and holders(st) == ["ref-a"]
        # and it was in the broker's journal before it was answered
        assert held_in(journal_lines(broker.url, c.prefix, "main"), "ref-a")
        # both processes show the same state (the owner's, carried whole)
        mine, theirs = state(owner, "main"), state(other, "main")
        assert mine["match"] == theirs["match"]
        assert (mine["journal"], mine["audio"], mine["output"]) == (
            theirs["journal"], theirs["audio"], theirs["output"])
        # an illegal move is refused by the owner and answered alike through the other
        again = call(other, "POST", "/api/channels/main/match/start")
        direct = call(owner, "POST", "/api/channels/main/match/start")
        assert again.status_code == direct.status_code == 409
        assert again.json()["error"] == direct.json()["error"]
        assert again.json()["detail"] == direct.json()["detail"]
        # the other channel, owned by the other process, was not touched
        assert (state(owner, "pink").get("match") or {}).get("paused") in (None, False)
        r = release(other, "main", "ref-a")
        assert r.status_code == 200, r.text
        wait_for(lambda: not state(owner, "main")["match"]["paused"], 10, "reading again")
    finally:
        c.stop()


def test_an_owner_killed_mid_verse_is_replaced_paused_with_every_acknowledged_hold(
        tmp_path: Path, broker: Broker) -> None:
    c = Cluster(tmp_path, broker, 3, ("main",)).start()
    try:
        owner = c.owner("main")
        a, b = c.others(owner)
        start_reading(a, owner, "main")
        acked = []
        for i, via in enumerate((a, b, owner, a)):
            rid = f"ack-{i}"
            assert hold(via, "main", rid).status_code == 200
            acked.append(rid)
            assert release(via, "main", rid).status_code == 200
        assert hold(b, "main", "kept").status_code == 200
        assert release(b, "main", "kept").status_code == 200
        assert hold(a, "main", "up").status_code == 200
        assert release(a, "main", "up").status_code == 200
        wait_for(lambda: reading_a_verse(owner, "main"), 30, "a verse read again")
        t0 = time.monotonic()
        owner.kill()
        survivors = c.live()

        def recovered() -> dict[str, Any] | None:
            for s in survivors:
                st = state(s, "main")
                m = st.get("match") or {}
                if st.get("recovered") and m.get("paused") and "@recovered" in holders(st):
                    return st
            return None

        st = wait_for(recovered, 30, "the match recovered by another process")
        took = time.monotonic() - t0
        print(f"recovered paused by another process {took:.2f} s after the kill")
        assert holders(st) == ["@recovered"]  # the hands were down; never resumes by itself
        new = c.owner("main", among=survivors)
        assert new is not owner
        lines = journal_lines(broker.url, c.prefix, "main")
        for rid in [*acked, "kept", "up"]:
            assert held_in(lines, rid), rid
        # every process shows it, and it stays paused
        time.sleep(TTL)
        for s in survivors:
            st = state(s, "main")
            assert st["match"]["paused"] is True and holders(st) == ["@recovered"]
        # the operator resumes it through any process
        r = call(c.others(new)[0], "POST", "/api/channels/main/match/resume")
        assert r.status_code == 200, r.text
        wait_for(lambda: not state(new, "main")["match"]["paused"], 15, "reading again")
    finally:
        c.stop()


def test_a_frozen_owner_stops_reading_once_another_took_its_channel(
        tmp_path: Path, broker: Broker) -> None:
    c = Cluster(tmp_path, broker, 2, ("main",)).start()
    try:
        owner = c.owner("main")
        other = c.others(owner)[0]
        start_reading(other, owner, "main")
        assert owner.proc is not None
        owner.proc.send_signal(signal.SIGSTOP)
        try:
            wait_for(lambda: "main" in c.describe(other)["owned"], 30,
                     "the other process taking the channel")
            st = wait_for(lambda: (s := state(other, "main"))["match"]["paused"] and s, 15,
                          "the match recovered paused")
            assert "@recovered" in holders(st)
        finally:
            owner.proc.send_signal(signal.SIGCONT)
        # woken, the old owner finds its lease gone and stops reading: one owner only
        wait_for(lambda: "main" not in c.describe(owner)["owned"], 15,
                 "the old owner giving the channel up")
        assert "main" in c.describe(other)["owned"]
        # and it shows the new owner's state, paused
        wait_for(lambda: holders(state(owner, "main")) == ["@recovered"], 15,
                 "the old owner showing the new owner's state")
        # and says why: its lease refused or not renewed, or (woken, the reading's next line
        # came first) its journal line refused after the new owner's: either ends its reading
        said = ("lease ch.main: ", "channel main: the lease is lost",
                "channel main: another process wrote its journal since")
        wait_for(lambda: any(x in owner.log() for x in said), 15,
                 "the old owner saying why it gave the channel up")
    finally:
        c.stop()


def test_a_broker_killed_and_started_again_is_survived(tmp_path: Path, broker: Broker) -> None:
    c = Cluster(tmp_path, broker, 2, ("main",)).start()
    try:
        owner = c.owner("main")
        other = c.others(owner)[0]
        start_reading(other, owner, "main")
        assert hold(other, "main", "before").status_code == 200
        assert release(other, "main", "before").status_code == 200
        broker.kill()
        # with no broker, no hold reaches the owner from elsewhere: the answer says so, and
        # whether it may have been sent (expired: never applied after the answer)
        r = hold(other, "main", "meanwhile")
        assert r.status_code == 503, r.text
        assert r.json()["error"] in ("not_sent", "expired"), r.text
        # away longer than the lease's TTL: the owner certainly loses its lease (a restart
        # within its deadline keeps it, and nothing is recovered)
        time.sleep(TTL + 1.0)
        broker.start()
        t0 = time.monotonic()

        def back() -> dict[str, Any] | None:
            for s in c.live():
                try:
                    st = state(s, "main")
                    d = c.describe(s)
                except AssertionError:
                    return None
                m = st.get("match") or {}
                # recovered: a process that did not hear the new owner yet still shows the
                # state it last had (paused by the hand lowered before the kill, say)
                if not d["broker"] or not m.get("paused") or "@recovered" not in holders(st):
                    return None
            owners = {x for s in c.live() for x in c.describe(s)["owned"]}
            return st if owners == {"main"} else None

        st = wait_for(back, 30, "the channel back, paused by @recovered, on every process")
        print(f"back {time.monotonic() - t0:.2f} s after the broker was started again")
        assert "@recovered" in holders(st)
        assert held_in(journal_lines(broker.url, c.prefix, "main"), "before")
        # holds reach the owner again through any process
        owner = c.owner("main")
        r = hold(c.others(owner)[0], "main", "after")
        assert r.status_code == 200, r.text
        assert "after" in holders(state(owner, "main"))
        assert held_in(journal_lines(broker.url, c.prefix, "main"), "after")
    finally:
        c.stop()


def test_a_referee_joined_through_one_process_is_known_to_every_process(
        tmp_path: Path, broker: Broker) -> None:
    c = Cluster(tmp_path, broker, 2, ("main",)).start()
    try:
        a, b = c.servers
        # one PIN for the channel on every process (shared through the broker at start)
        pins = {state(s, "main")["pin"] for s in (a, b)}
        assert len(pins) == 1
        r = httpx2.post(f"{a.base}/api/channels/main/referees",
                        json={"pin": pins.pop(), "name": "mat 3"}, timeout=10)
        assert r.status_code == 200, r.text
        rid, token = r.json()["referee"], r.json()["token"]
        mine = {"Authorization": f"Bearer {token}"}

        def known_at_b() -> bool:
            r = httpx2.get(f"{b.base}/api/session", headers=mine, timeout=10)
            return r.status_code == 200 and r.json().get("role") == "referee"
        wait_for(known_at_b, 10, "the referee known to the other process")
        owner = c.owner("main")
        start_reading(a, owner, "main")
        # its own hand, raised through the other process with its own token
        r = httpx2.put(f"{b.base}/api/channels/main/holds/{rid}", headers=mine, timeout=10)
        assert r.status_code == 200, r.text
        assert holders(state(owner, "main")) == [rid]
        # removed through one process: its token dies on every process
        r = call(b, "DELETE", f"/api/channels/main/referees/{rid}")
        assert r.status_code == 200, r.text
        wait_for(lambda: httpx2.get(f"{a.base}/api/session", headers=mine,
                                    timeout=10).status_code == 401, 10,
                 "the removed referee's token refused by the other process")
    finally:
        c.stop()


def test_a_process_stopped_gives_its_channels_to_another_without_waiting_for_the_ttl(
        tmp_path: Path, broker: Broker) -> None:
    """A process stopped (an upgrade) gives its leases back and says so on the bus: another
    takes the channels in a round or two. A given-back key leaves a delete marker in the bucket
    for the TTL (30 s here), so a process that only looked at the bucket would take them after
    30 s at the earliest: under that is the announcement at work. (The TTL was 10 s: a loaded
    fresh clone took 12.3 s from the stop's start, the stop itself slowed by the load; the
    bound is the TTL, so it is made long enough that only the bug reaches it.)"""
    ttl = 30.0
    c = Cluster(tmp_path, broker, 2, ("a", "b"), ttl=ttl).start()
    try:
        owner = c.owner("a", timeout=60)
        other = c.others(owner)[0]
        lost = set(c.describe(owner)["owned"])
        t0 = time.monotonic()
        owner.stop()
        wait_for(lambda: lost <= set(c.describe(other)["owned"]), 3 * ttl,
                 f"{sorted(lost)} owned by the process left")
        took = time.monotonic() - t0
        print(f"\nstopped process: its {len(lost)} channel(s) taken {took:.2f} s after it "
              f"stopped (the marker's TTL {ttl:.0f} s)")
        assert took < ttl, f"taken after {took:.1f} s: only once the markers expired"
        start_match(other, "a")  # the channel answers on the process left
        assert state(other, "a")["match"] is not None
    finally:
        c.stop()
