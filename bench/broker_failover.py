"""A broker node killed under yomite's traffic: how long a client of a three-node NATS JetStream
cluster (tests/natscluster.py, Debian's nats-server) cannot renew a lease or store a journal
line, and how long it takes to reconnect, when one node is killed with SIGKILL (issue 46).

The nodes run docs/nats/node-1.conf... (TLS, accounts). One client, connected as cluster/bus.py
connects (every node's URL, yomite's user, reconnect_time_wait 0.25 s, ping_interval 1 s,
max_outstanding_pings 2), to an R3 key-value bucket and an R3 stream:

- **renewal**: `kv.update(key, last=revision)` every `--every` s, each with a timeout of
  `--op-timeout` s (an update that timed out but was applied shows as a wrong last sequence:
  the key is read and its revision adopted, counted as `late`). The figure is what a lease
  needs: the longest time from the start of a confirmed renewal to the answer of the next
  confirmed one (`worst`: an owner whose deadline is `renewed_at + ttl - margin` keeps reading
  through the kill if this is under `ttl - margin`), and from the kill to the first answer.
- **journal**: `js.publish` of a numbered line every `--every` s, the same line again until
  the broker acknowledges it (its message id); the same two figures, and at the end every
  acknowledged line is looked for in the stream.
- **reconnect**: from the kill to nats-py's reconnected callback, when the client's own node
  was the one killed.

`--freeze` stops the node (SIGSTOP) instead of killing it: a machine that vanishes without
closing its connections, found out by the client's pings and the nodes' own.

Each round kills, in turn, the leader of the bucket's stream, the node the client is connected
to, and the leader of the journal stream (which may be the same node), waits `--down` s,
starts it again, waits until it is current, and goes on.

`--hall TTL[,TTL...]`: the same kills under yomite itself, for each lease TTL: two
`yomite serve --bus` processes (tests/clusterprocs.py) on the cluster (its accounts, replicas 3),
one match read, and the leader of the leases bucket killed `--kills` times (the node started
again and caught up between kills). Each kill says whether the match paused (a hold in its
state as the owner shows it, read every 0.2 s: tests/matchwatch.py) or changed owner, and how
long the leases' stream had no live leader (from the nodes' monitoring, polled). A paused match
is resumed before the next kill.

    .venv/bin/python bench/broker_failover.py [--kills 12] [--op-timeout 0.5] [--down 8]
    .venv/bin/python bench/broker_failover.py --hall 12,20,30 [--kills 10]

A figure, not a test: the nodes and the client share this machine's cores.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import shutil
import signal
import statistics
import sys
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

import nats  # noqa: E402
from nats.aio.client import Client as NATS  # noqa: E402
from nats.js.api import KeyValueConfig, StorageType, StreamConfig  # noqa: E402
from nats.js.errors import KeyWrongLastSequenceError  # noqa: E402

from cluster.transport import quick_close  # noqa: E402
from tests.natsbroker import YOMITE_USER  # noqa: E402
from tests.natscluster import BrokerCluster  # noqa: E402

BUCKET = "bench_leases"
STREAM = "BENCH_JOURNAL"


@dataclass
class Ops:
    """The confirmed operations of one loop: (start, answer) on this process's monotonic
    clock, and the failures by kind."""
    done: list[tuple[float, float]] = field(default_factory=list)
    failed: dict[str, int] = field(default_factory=dict)
    late: int = 0

    def fail(self, e: BaseException) -> None:
        k = type(e).__name__
        self.failed[k] = self.failed.get(k, 0) + 1

    def around(self, t_kill: float, until: float) -> tuple[float, float]:
        """(worst: the longest start-of-confirmed to next confirmed answer over the kill's
        window, first: from the kill to the first confirmed answer of an op started after)."""
        worst = 0.0
        for (s0, _), (_, c1) in zip(self.done, self.done[1:], strict=False):
            if c1 >= t_kill and s0 <= until:
                worst = max(worst, c1 - s0)
        first = next((c - t_kill for s, c in self.done if s >= t_kill), float("nan"))
        return worst, first


async def renewals(kv: object, ops: Ops, every: float, timeout: float,
                   stop: asyncio.Event) -> None:
    from nats.js.kv import KeyValue
    assert isinstance(kv, KeyValue)
    rev = await kv.put("ch.main", b"me")
    while not stop.is_set():
        s = time.monotonic()
        try:
            rev = await asyncio.wait_for(kv.update("ch.main", b"me", last=rev), timeout)
            ops.done.append((s, time.monotonic()))
        except KeyWrongLastSequenceError:
            # an update that timed out was applied after all: ours, at a later revision
            with contextlib.suppress(Exception):
                entry = await asyncio.wait_for(kv.get("ch.main"), timeout)
                if entry.value == b"me" and entry.revision is not None:
                    rev = entry.revision
                    ops.late += 1
        except Exception as e:
            ops.fail(e)
        await asyncio.sleep(max(0.0, every - (time.monotonic() - s)))


async def journal(js: object, ops: Ops, every: float, timeout: float, stop: asyncio.Event,
                  acked: list[int]) -> None:
    from nats.js import JetStreamContext
    assert isinstance(js, JetStreamContext)
    n = 0
    while not stop.is_set():
        n += 1
        while not stop.is_set():  # the same line until stored
            s = time.monotonic()
            try:
                await js.publish("bench.journal.main", str(n).encode(), timeout=timeout,
                                 headers={"Nats-Msg-Id": f"line-{n}"})
                ops.done.append((s, time.monotonic()))
                acked.append(n)
                break
            except Exception as e:
                ops.fail(e)
                await asyncio.sleep(0.05)
        await asyncio.sleep(every)


async def stored(bc: BrokerCluster) -> set[int]:
    nc = await nats.connect(bc.url, tls=bc.client_tls())
    try:
        sub = await nc.jetstream().pull_subscribe("bench.journal.main", stream=STREAM)
        out: set[int] = set()
        for _ in range(10_000):
            try:
                msgs = await sub.fetch(500, timeout=1)
            except Exception:  # none left
                break
            for m in msgs:
                out.add(int(m.data))
                await m.ack()  # (unacknowledged, a consumer stops at 1,000)
        return out
    finally:
        await nc.close()


async def sitting(bc: BrokerCluster, args: argparse.Namespace) -> None:
    events: list[tuple[str, float]] = []

    async def disconnected() -> None:
        events.append(("disconnected", time.monotonic()))

    async def reconnected() -> None:
        events.append(("reconnected", time.monotonic()))

    async def error(e: Exception) -> None:  # a node killed: said by the figures
        pass

    nc = NATS()
    await nc.connect(servers=bc.address.split(","),
                     user=YOMITE_USER, password=bc.password, tls=bc.client_tls(),
                     name="bench-client", connect_timeout=1,
                     reconnect_time_wait=0.25, max_reconnect_attempts=-1,
                     ping_interval=1, max_outstanding_pings=2,
                     disconnected_cb=disconnected, reconnected_cb=reconnected,
                     error_cb=error)
    if not args.slow_close:
        quick_close(nc)  # as cluster/bus.py connects
    js = nc.jetstream(timeout=5)
    kv = await js.create_key_value(KeyValueConfig(bucket=BUCKET, history=1, ttl=60,
                                                  storage=StorageType.FILE, replicas=3))
    await js.add_stream(StreamConfig(name=STREAM, subjects=["bench.journal.>"],
                                     storage=StorageType.FILE, num_replicas=3,
                                     duplicate_window=120))
    renew, lines, acked = Ops(), Ops(), list[int]()
    stop = asyncio.Event()
    tasks = [asyncio.create_task(renewals(kv, renew, args.every, args.op_timeout, stop)),
             asyncio.create_task(journal(js, lines, args.every, args.op_timeout, stop, acked))]
    rows = []
    loop = asyncio.get_running_loop()
    await asyncio.sleep(2)
    for i in range(args.kills):
        kind = ("leases leader", "client's node", "journal leader")[i % 3]
        if kind == "leases leader":
            victim = await loop.run_in_executor(None, bc.leader_of, f"KV_{BUCKET}")
        elif kind == "journal leader":
            victim = await loop.run_in_executor(None, bc.leader_of, STREAM)
        else:
            found = await loop.run_in_executor(None, bc.node_of_client, "bench-client")
            assert found is not None
            victim = found
        kv_leader = (await loop.run_in_executor(None, bc.leader_of, f"KV_{BUCKET}")).name
        st_leader = (await loop.run_in_executor(None, bc.leader_of, STREAM)).name
        mine = await loop.run_in_executor(None, bc.node_of_client, "bench-client")
        roles = [r for r, n in (("kv", kv_leader), ("journal", st_leader),
                                ("client", mine.name if mine else "")) if n == victim.name]
        events.clear()
        t_kill = time.monotonic()
        if args.freeze:
            assert victim.proc is not None
            victim.proc.send_signal(signal.SIGSTOP)
        else:
            victim.kill()
        await asyncio.sleep(args.down)
        until = time.monotonic()
        rec = next((t - t_kill for e, t in events if e == "reconnected"), None)
        w_r, f_r = renew.around(t_kill, until)
        w_j, f_j = lines.around(t_kill, until)
        new_kv = (await loop.run_in_executor(None, bc.leader_of, f"KV_{BUCKET}")).name
        rows.append((kind, "+".join(roles), w_r, f_r, w_j, f_j, rec))
        print(f"kill {i + 1:2d} {victim.name} ({'+'.join(roles) or 'none'}): renewal worst "
              f"{w_r:.2f} s, first after {f_r:.2f} s; journal worst {w_j:.2f} s, first after "
              f"{f_j:.2f} s; reconnect {'-' if rec is None else f'{rec:.2f} s'}; "
              f"kv leader now {new_kv}", flush=True)
        if args.freeze:
            assert victim.proc is not None
            victim.proc.send_signal(signal.SIGCONT)
        else:
            bc.restart(victim)
        await loop.run_in_executor(None, bc.caught_up, victim, [f"KV_{BUCKET}", STREAM])
        await asyncio.sleep(args.settle)
    stop.set()
    for t in tasks:
        t.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await t
    await nc.close()
    have = await stored(bc)
    lost = sorted(set(acked) - have)
    print(f"\nrenewals: {len(renew.done)} confirmed, failures {renew.failed}, "
          f"applied after a timeout {renew.late}")
    print(f"journal: {len(acked)} acknowledged, failures {lines.failed}, "
          f"acknowledged but not in the stream: {len(lost)} {lost[:10]}")
    for what, col in (("renewal worst", 2), ("renewal first", 3), ("journal worst", 4),
                      ("journal first", 5)):
        for kind in ("kv", "journal", "client"):
            xs = [r[col] for r in rows if kind in r[1].split("+")]
            if xs:
                print(f"{what:14s} killing {kind:8s} leader/node: n={len(xs):2d} "
                      f"median {statistics.median(xs):.2f} s, max {max(xs):.2f} s")
        xs = [r[col] for r in rows if not r[1]]
        if xs:
            print(f"{what:14s} killing a bystander:     n={len(xs):2d} "
                  f"median {statistics.median(xs):.2f} s, max {max(xs):.2f} s")
    recs = [r[6] for r in rows if r[6] is not None]
    if recs:
        print(f"reconnect: n={len(recs)} median {statistics.median(recs):.2f} s, "
              f"max {max(recs):.2f} s")


def hall(ttl: float, args: argparse.Namespace, tmp: Path) -> None:
    import httpx2

    from tests.clusterprocs import Cluster, call, reading_a_verse, wait_for
    from tests.matchwatch import Timeline

    match = {"memorise_s": 1, "cards": 100,
             "colors": ["blue", "pink", "yellow", "green", "orange"],
             "prelude": {"enabled": False},
             "gaps": {"between_verses_s": 0.3, "between_cards_s": 0.3}}
    bc = BrokerCluster(tmp / f"brokers-{ttl:g}").start()
    c = Cluster(tmp / f"hall-{ttl:g}", bc, 2, ("main",), ttl=ttl, match=match)
    paused = 0
    try:
        c.start()
        owner = c.owner("main", 120)
        other = c.others(owner)[0]
        for path in ("/api/channels/main/match", "/api/channels/main/match/start"):
            wait_for(lambda path=path: call(other, "POST", path, json={}).status_code == 200,
                     120, path)
        wait_for(lambda: reading_a_verse(owner, "main"), 60, "a verse read")
        leases = f"KV_{c.prefix}_leases"
        for i in range(args.kills):
            w = Timeline(owner, "main").start()
            time.sleep(2)
            victim = bc.leader_of(leases)
            name = c.describe(owner)["node"]
            mine = bc.node_of_client(name)
            t_kill = time.monotonic()
            victim.kill()
            bc.leader_of(leases, 60)  # a live node leads it again
            elected = time.monotonic() - t_kill
            time.sleep(max(0.0, max(args.down, ttl) - (time.monotonic() - t_kill)))
            bc.restart(victim)
            bc.caught_up(victim, [leases, f"{c.prefix.upper()}_JOURNAL"])
            time.sleep(1)
            w.stop()
            pauses = [p for p in w.pauses() if p[0] >= t_kill]
            try:
                moved = "main" not in c.describe(owner)["owned"]
            except httpx2.HTTPError as e:  # said, and the sitting goes on
                print(f"  GET /api/cluster on the owner failed: {e!r} (logs in {tmp})")
                moved = "main" not in c.describe(owner)["owned"]
            print(f"ttl {ttl:g} s, kill {i + 1:2d} {victim.name} (leases leader"
                  f"{', the owner' + chr(39) + 's node' if mine is victim else ''}): "
                  f"a live leader {elected:.1f} s after; "
                  f"{'PAUSED ' + str(pauses[0][2]) if pauses else 'not paused'}"
                  f"{'; owner changed' if moved else ''}", flush=True)
            if pauses or moved:
                paused += 1
                owner = c.owner("main", 120)
                other = c.others(owner)[0]
                wait_for(lambda o=other: call(o, "POST", "/api/channels/main/match/resume",
                                              json={}).status_code == 200, 120, "resumed")
                wait_for(lambda o=owner: reading_a_verse(o, "main"), 60, "a verse read")
        print(f"ttl {ttl:g} s: {paused} of {args.kills} kills paused the match", flush=True)
    finally:
        c.stop()
        bc.stop()


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--kills", type=int, default=12)
    ap.add_argument("--every", type=float, default=0.1, help="s between two operations")
    ap.add_argument("--op-timeout", type=float, default=0.5, help="each operation's timeout")
    ap.add_argument("--down", type=float, default=12.0, help="s a killed node stays down")
    ap.add_argument("--settle", type=float, default=2.0, help="s after it caught up")
    ap.add_argument("--freeze", action="store_true",
                    help="SIGSTOP the node instead (a machine gone without closing its "
                         "connections), SIGCONT after --down")
    ap.add_argument("--slow-close", action="store_true",
                    help="nats-py's own transport, whose TLS close waits up to 30 s for a node "
                         "that vanished (cluster/transport.py)")
    ap.add_argument("--hall", default="", metavar="TTL,...",
                    help="under yomite: these lease TTLs (s), one sitting each")
    args = ap.parse_args()
    tmp = Path(tempfile.mkdtemp(prefix="broker-failover-"))
    if args.hall:
        for ttl in args.hall.split(","):
            hall(float(ttl), args, tmp)  # the folder is kept if it fails: the logs
        shutil.rmtree(tmp, ignore_errors=True)
        return
    bc = BrokerCluster(tmp).start()
    try:
        asyncio.run(sitting(bc, args))
    finally:
        bc.stop()
        shutil.rmtree(tmp, ignore_errors=True)


if __name__ == "__main__":
    main()
