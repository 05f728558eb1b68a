"""No single broker (issue 46): the cluster's broker is three NATS JetStream nodes running
docs/nats/node-1.conf... (tests/natscluster.py: TLS, routes with certificates checked both
ways, the accounts of docs/nats/accounts.conf), yomite's buckets and journal stream kept by
all three (`cluster.replicas: 3`), and one node is killed (SIGKILL) while two `yomite serve
--bus` processes read a match each.

What a hall must see: nothing. The match never pauses (no hold at all in its states, as its
owner and the other process show them, nor in its journal; its card keeps rising), no channel
changes owner, and every hand a referee was answered for on the other channel, before, during
and after each kill, is in the journal stream. The killed node is started again and catches up.

The nodes lost, one after another in one match: the leader of the leases bucket's stream
(`KV_<prefix>_leases`: no lease can be renewed until the two others elect a new leader), the
node the match's owner is connected to (found from the nodes' `/connz`: it reconnects to
another), the journal stream's leader (no line stored until a new one is elected), each killed;
then the owner's node frozen (SIGSTOP: a machine gone without closing its connections, found
out by pings, and left over TLS without waiting for its answer: cluster/transport.py). Times
are printed, never asserted.
"""

import asyncio
import contextlib
import json
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from hall.errors import JournalUnavailable
from tests.clusterprocs import TOKEN, Cluster, call, reading_a_verse, wait_for
from tests.matchwatch import Referee, Timeline
from tests.natsbroker import YOMITE_USER, Broker
from tests.natscluster import BrokerCluster, Node
from tests.serverproc import Server

# The lease's TTL (cluster.lease_ttl_s), docs/nats's recipe. A leader killed on nats-server
# 2.9.10 is replaced 4-9 s later (its raft's election timeout; 3.2-8.7 s measured), and an owner
# reads while a renewal confirmed within 0.75 TTL proves its lease, renewing (and trying a
# failed renewal again) every 0.5 s: the match goes on when the election ends before 0.75 TTL
# less 0.5-1 s, 15 s covering elections up to 10 s (docs/cluster-brokers.md). With a renewal
# every TTL/4 (before), TTL 12 s paused the match in 8 kills of 10, 16 s in 6 of 28.
TTL = 15.0
MATCH = {"memorise_s": 1, "cards": 60, "colors": ["blue", "pink", "yellow"],
         "prelude": {"enabled": False},
         "gaps": {"between_verses_s": 0.3, "between_cards_s": 0.3}}
# a node is down this long: an election, then past the deadline (0.75 TTL) of the last renewal
# the owner could have made before the kill
AFTER_KILL_S = 0.75 * TTL + 3
KILLS = ("leases leader", "owner's node", "journal leader", "owner's node, frozen")


@pytest.fixture(name="brokers")
def brokers_fixture(tmp_path: Path) -> Iterator[BrokerCluster]:
    b = BrokerCluster(tmp_path / "brokers").start()
    try:
        yield b
    finally:
        b.stop()


def held_in(lines: list[dict[str, Any]], referee: str) -> bool:
    return any((line.get("event") or {}).get("type") == "hold"
               and referee in json.dumps(line["event"]) for line in lines)


def holds_in(lines: list[dict[str, Any]]) -> list[dict[str, Any]]:
    return [line for line in lines if line.get("paused")
            or (line.get("event") or {}).get("type") in ("hold", "release", "clear_holds")]


def accepted(s: Server, path: str, timeout: float = 120) -> None:
    """A command sent until the owner accepts it: a new owner reads only once the lease it
    took is certainly its own (cluster.lease: TTL + margin after it took a key never made)."""
    wait_for(lambda: call(s, "POST", path, json={}).status_code == 200, timeout, f"POST {path}")


def one_each(c: Cluster) -> dict[str, str]:
    """Wait until each process owns one of the two channels; {channel: owner's node name}."""
    def spread() -> dict[str, str] | None:
        owners = c.describe(c.servers[0])["owners"]
        if None in owners.values() or len(set(owners.values())) != 2:
            return None
        return dict(owners)
    found: dict[str, str] = wait_for(spread, 180, "one channel owned by each process")
    return found


def server_named(c: Cluster, node: str) -> Server:
    return next(s for s in c.servers if c.describe(s)["node"] == node)


def streams(c: Cluster) -> list[str]:
    return [f"KV_{c.prefix}_leases", f"{c.prefix.upper()}_JOURNAL"]


def victim_of(brokers: BrokerCluster, c: Cluster, which: str, owner: str) -> Node:
    if which == "leases leader":
        return brokers.leader_of(f"KV_{c.prefix}_leases")
    if which == "journal leader":
        return brokers.leader_of(f"{c.prefix.upper()}_JOURNAL")
    node = wait_for(lambda: brokers.node_of_client(owner), 30, f"{owner}'s broker node")
    assert isinstance(node, Node)
    return node


def roles(brokers: BrokerCluster, c: Cluster, node: Node, owners: dict[str, str]) -> list[str]:
    out = [what for what, stream in (("leases leader", f"KV_{c.prefix}_leases"),
                                     ("journal leader", f"{c.prefix.upper()}_JOURNAL"))
           if brokers.leader_of(stream).name == node.name]
    out += [f"{ch}'s owner's node" for ch, owner in owners.items()
            if brokers.node_of_client(owner) is node]
    return out


def test_broker_nodes_killed_one_at_a_time_mid_match_pause_nothing_and_lose_nothing(
        tmp_path: Path, brokers: BrokerCluster) -> None:
    c = Cluster(tmp_path, brokers, 2, ("main", "pink"), ttl=TTL, match=MATCH).start()
    try:
        for s in c.servers:  # the processes made the buckets and the stream with 3 replicas
            assert c.describe(s)["broker"] is True
        leases, journal = f"KV_{c.prefix}_leases", f"{c.prefix.upper()}_JOURNAL"
        assert brokers.replicas_of(leases) == brokers.replicas_of(journal) == 3
        owners = one_each(c)
        reader, judged = server_named(c, owners["main"]), server_named(c, owners["pink"])
        for ch, owner in (("main", reader), ("pink", judged)):
            accepted(c.others(owner)[0], f"/api/channels/{ch}/match")
            accepted(c.others(owner)[0], f"/api/channels/{ch}/match/start")
            wait_for(lambda ch=ch, owner=owner: reading_a_verse(owner, ch), 60, f"{ch} read")
        # main: read on, nobody touches it, watched on both processes; pink: a referee on the
        # process that does not own it raises and lowers a hand every half second
        watched = [Timeline(s, "main").start() for s in (reader, judged)]
        referee = Referee(reader, "pink").start()
        kills: list[tuple[str, float, float]] = []
        for which in KILLS:
            time.sleep(3)
            victim = victim_of(brokers, c, which, owners["main"])
            said = ", ".join(roles(brokers, c, victim, owners))
            t_kill = time.monotonic()
            if which.endswith("frozen"):
                victim.freeze()
            else:
                victim.kill()
            brokers.leader_of(leases, 60)
            brokers.leader_of(journal, 60)
            elected = time.monotonic() - t_kill
            time.sleep(max(0.0, AFTER_KILL_S - (time.monotonic() - t_kill)))
            t_back = time.monotonic()
            victim.kill()
            brokers.restart(victim)
            brokers.caught_up(victim, [leases, journal])
            print(f"{which}: {victim.name} down ({said}); the leases and the journal led by "
                  f"live nodes {elected:.1f} s after (polled); started again, caught up "
                  f"{time.monotonic() - t_back:.1f} s later")
            kills.append((which, t_kill, t_back))
        time.sleep(3)
        referee.stop()
        for w in watched:
            w.stop()

        # the match never paused, on its owner or as the other process shows it
        for w in watched:
            assert w.samples and not w.failures, w.failures[:5]
            assert w.pauses() == [], f"paused, as {w.server.base} shows it: {w.pauses()[:5]}"
        for which, t_kill, t_back in kills:  # it read on while each node was down
            at_kill, at_back = watched[0].card_at(t_kill), watched[0].card_at(t_back)
            print(f"{which}: main at card {at_kill} at the kill, {at_back} at the restart; "
                  f"pink's hands {referee.between(t_kill, t_back)}")
            assert at_back >= at_kill + 2, which
        # nothing paused it in its journal either, and nobody else took a channel
        assert holds_in(brokers.journal_lines(c.prefix, "main")) == []
        assert c.describe(reader)["owned"] == ["main"]
        assert c.describe(judged)["owned"] == ["pink"]
        # every hand acknowledged on pink is in the stream; no hand but the referee's came
        acked = referee.acknowledged()
        print(f"pink's hands: {referee.between(0, 1e18)}")
        assert len(acked) >= 20
        pink_lines = brokers.journal_lines(c.prefix, "pink")
        refused = [rid for rid, code, _t, _s in referee.answers if code != 200]
        # answered "applied, not yet in the journal" (journal_unavailable: the owner's answer
        # comes by the command's deadline, whatever the journal's leader) and in it later, as
        # said; "not sent" never in it; "expired" (no answer in time) in it only if applied
        # before the answer's deadline and its answer lost
        print(f"pink's hands not acknowledged, by answer, and in the journal: "
              f"{[(rid, referee.errors.get(rid), held_in(pink_lines, rid)) for rid in refused]}")
        assert [rid for rid in acked if not held_in(pink_lines, rid)] == []
        assert [rid for rid in refused if referee.errors.get(rid) == "not_sent"
                and held_in(pink_lines, rid)] == []
        strangers = [line for line in holds_in(pink_lines)
                     if (line.get("event") or {}).get("type") == "hold"
                     and not str((line["event"] or {}).get("referee", "")).startswith("ref-")]
        assert strangers == []
    finally:
        c.stop()


def test_a_journal_line_sent_again_after_its_answer_was_lost_is_stored_once_and_no_fence(
        brokers: BrokerCluster) -> None:
    """A node killed between storing an owner's line and answering for it (or an answer later
    than the owner's 2 s): the owner sends the line again, with the same message id and the
    same expected last sequence. A single server answers it as a duplicate; a cluster of
    nats-server 2.9.10 checks the expected sequence first and answers "wrong last sequence",
    which JournalStream must not take for another process's line (a fence would stop the
    reading: a pause made by the broker's failover)."""
    from cluster.access import BusAccess
    from cluster.bus import Bus
    from cluster.journalline import encode
    from cluster.journalstream import EXPECTED_LAST, ORIGIN, JournalStream

    async def run() -> tuple[bool, list[int]]:
        access = BusAccess(user=YOMITE_USER, password=brokers.password, tls_ca=brokers.tls.ca)
        bus = await Bus.connect(brokers.address, name="owner", prefix="lost", replicas=3,
                                access=access)
        fenced: list[bool] = []
        stream = JournalStream(bus, "main", "owner", on_fenced=lambda: fenced.append(True))
        stream.start()
        try:
            stream.tap("m.jsonl", {"n": 1})
            await stream.flushed()
            # line 2 stored by the broker, its answer lost: what the owner sends again is this
            # very message (JournalStream's own id for its line 2)
            subject = bus.subjects.journal("main")
            await bus.js.publish(subject, encode(bus, subject, "m.jsonl", {"n": 2}), headers={
                "Nats-Msg-Id": f"{stream._ids}:2", ORIGIN: "owner",
                EXPECTED_LAST: str(stream.last_seq)})
            stream.tap("m.jsonl", {"n": 2})
            stream.tap("m.jsonl", {"n": 3})
            with contextlib.suppress(JournalUnavailable):
                await stream.flushed()
            return bool(fenced) or stream.fenced, [line["n"] for line in
                                                   await asyncio.to_thread(
                                                       brokers.journal_lines, "lost", "main")]
        finally:
            await stream.stop()
            await bus.close()

    fenced, stored = asyncio.run(run())
    assert not fenced
    assert stored == [1, 2, 3]


def test_buckets_made_with_one_replica_are_raised_to_three_in_place_and_never_lowered(
        brokers: BrokerCluster) -> None:
    """A cluster that ran on a single broker (replicas 1) moving to the three nodes: the first
    process started with `cluster.replicas: 3` raises every bucket and the journal stream to
    three copies where they are (JetStream copies them), what they held kept; a process whose
    config still says 1 leaves them at three."""
    from cluster.access import BusAccess
    from cluster.bus import Bus

    access = BusAccess(user=YOMITE_USER, password=brokers.password, tls_ca=brokers.tls.ca)
    names = ["KV_up_leases", "KV_up_shared", "KV_up_records", "KV_up_pages", "UP_JOURNAL"]

    async def connect(replicas: int) -> None:
        bus = await Bus.connect(brokers.address, name="up", prefix="up", replicas=replicas,
                                access=access)
        try:
            if replicas == 1:
                with contextlib.suppress(Exception):
                    await bus.shared.create("kept", b"before")
                    await bus.js.publish(bus.subjects.journal("main"), b"a line")
            else:
                assert (await bus.shared.get("kept")).value == b"before"
        finally:
            await bus.close()

    asyncio.run(connect(1))
    assert [brokers.replicas_of(n) for n in names] == [1] * 5
    asyncio.run(connect(3))
    assert [brokers.replicas_of(n) for n in names] == [3] * 5
    assert (brokers.stream("UP_JOURNAL") or {})["state"]["messages"] == 1
    asyncio.run(connect(1))
    assert [brokers.replicas_of(n) for n in names] == [3] * 5


def test_three_replicas_on_a_single_broker_are_refused_at_start_saying_what_to_configure(
        tmp_path: Path) -> None:
    from tests.clusterprocs import access, config

    broker = Broker(tmp_path / "broker").start()
    try:
        (tmp_path / "p").mkdir()
        server = Server(tmp_path / "p", config(
            broker.address, "single", ("main",), cluster={"replicas": 3},
            access=access(broker, tmp_path)), TOKEN)
        with pytest.raises(RuntimeError) as refused:
            server.start()
        said = str(refused.value)
        assert "cluster.replicas is 3" in said and "docs/nats/node-1.conf" in said, said
        assert "replicas > 1 not supported in non-clustered mode" in said
    finally:
        broker.stop()
