"""The association's server on this machine (issue 24): R rooms served by N `yomite serve --bus`
processes through one NATS broker, L viewer WebSockets spread over the rooms and the processes.

For each N (`--processes 1,2,4`) the bench starts its own nats-server (a tmp store, a free port)
and N processes with the same config and journal folders of their own, waits until every room
is owned and the ownership spread (at most ceil(R/N) a process), starts a match in every room
(through any process: prepare and start cross the bus) and measures:

- **published -> received**: listeners connect to the processes round robin (a room's listeners
  on every process, not only its owner's: the states cross the bus), in client processes of
  their own (`--client-procs`). The operator raises a hand in one room after another (a PUT
  .../holds/benchN-k sent to a process that does not own the room, read once the listeners
  had the state; lowered 0.2 s later). The figure is from the owner's publication of the state
  with that hand (its hub's `published`, read from the owner's `/api/health`
  `recent_publishes`: one machine, one CLOCK_MONOTONIC) to each listener's receipt; "request ->"
  is from the PUT's send. p50/p99 over every receipt.
- **the reference, in the same sitting**: one plain `yomite serve` (no bus), one channel,
  `--ref-listeners` on it, the same client code, the same holds (one room, 1.3-2 s apart as in
  bench/ws_fanout.py); its rounds alternate with the clusters' (before the first, between each,
  after the last) and are pooled. ratio = the cluster's p99 / the reference's (target <= 1.2).
- **hold -> the referee's state**, with no listeners: a referee joins each room with its PIN
  through a process that does not own it, and connects its WebSocket there; `{"type":"hold"}`
  on that socket, timed to the state on the same socket with its hand up (then lowered).
- **memory**: the RSS of every process (and children) with one room a process and with R (a
  match in each), and after the listeners connected: per room = (R rooms - N rooms) / (R - N),
  per listener = (after - before) / L, over all the processes together; the broker's beside.
- **failover** (N >= 2): SIGKILL of the owner of a room while a verse is read, timed to the
  state, on an operator's WebSocket at another process, recovered and paused by `@recovered`;
  the killed process is started again and the recovered rooms resumed before the next kill.

    .venv/bin/python bench/cluster.py [--processes 1,2,4] [--rooms 100] [--listeners 10000]
        [--quick] [--out FILE]

A figure, not a test: the servers, the broker and the clients share this machine's cores.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import http.client
import json
import math
import random
import shutil
import statistics
import sys
import tempfile
import time
from collections import defaultdict
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import yaml

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
from bench.cluster_procs import (  # noqa: E402
    AUTH,
    TOKEN,
    Listeners,
    Node,
    check_imports,
    raise_open_files,
    write_config,
)
from bench.conditions import machine  # noqa: E402
from tests.clusterprocs import access  # noqa: E402
from tests.natsbroker import Broker  # noqa: E402

QUIET_S = 0.3  # the hold's answer is read once the listeners had its state
MiB = 1 << 20


def pick(v: list[float], q: float) -> float:
    return v[int(q * (len(v) - 1))] if v else math.nan


def summary(v: list[float]) -> dict[str, float]:
    s = sorted(x * 1000 for x in v)
    return {"n": len(s), "p50": statistics.median(s) if s else math.nan, "p99": pick(s, 0.99),
            "max": s[-1] if s else math.nan}


def cpu_now() -> tuple[int, int]:
    """(busy, total) jiffies of the whole machine."""
    f = [int(x) for x in Path("/proc/stat").read_text().splitlines()[0].split()[1:9]]
    return f[0] + f[1] + f[2] + f[5] + f[6], sum(f)


class Cluster:
    """N processes with `rooms`, and their broker (`bus`), or one plain process."""

    def __init__(self, tmp: Path, n: int, rooms: list[str], bus: bool = True) -> None:
        tmp.mkdir(parents=True, exist_ok=True)
        self.tmp = tmp
        self.rooms = rooms
        self.broker = Broker(tmp / "broker") if bus else None
        cfg = write_config(tmp, rooms)
        if self.broker is not None:  # the broker's accounts: yomite's user, the cluster's key
            doc = yaml.safe_load(cfg.read_text("utf-8"))
            doc.setdefault("cluster", {}).update(access(self.broker, tmp))
            cfg.write_text(yaml.safe_dump(doc), "utf-8")
        url = self.broker.address if self.broker else None
        self.nodes = [Node(tmp, cfg, f"p{i}", url) for i in range(n)]
        self.up_s = math.nan

    def start(self) -> Cluster:
        if self.broker is not None:
            self.broker.tmp.mkdir(parents=True, exist_ok=True)
            self.broker.start()
        t0 = time.monotonic()
        for nd in self.nodes:  # together: each hears the others before it takes its share
            nd.start()
        for nd in self.nodes:
            nd.wait_up()
        self.up_s = time.monotonic() - t0
        return self

    def stop(self) -> None:
        for nd in self.nodes:
            if nd.alive and nd.proc is not None:
                nd.proc.send_signal(2)
        for nd in self.nodes:
            nd.stop()
        if self.broker is not None:
            self.broker.stop()

    def owned(self) -> dict[str, int]:
        """Each room's owner (an index into nodes), as the live processes say."""
        out: dict[str, int] = {}
        for i, nd in enumerate(self.nodes):
            if not nd.alive:
                continue
            if self.broker is None:
                return dict.fromkeys(self.rooms, i)
            with contextlib.suppress(Exception):
                for room in nd.ok("GET", "/api/cluster")["owned"]:
                    out[room] = i
        return out

    def wait_spread(self, timeout: float = 300.0) -> dict[str, Any]:
        """Until every room is owned, at most ceil(R/N) by any process."""
        t0 = time.monotonic()
        share = math.ceil(len(self.rooms) / len(self.nodes))
        while True:
            owners = self.owned()
            counts = [sum(1 for o in owners.values() if o == i) for i in range(len(self.nodes))]
            if len(owners) == len(self.rooms) and max(counts) <= share:
                return {"owned": counts, "spread_s": time.monotonic() - t0}
            if time.monotonic() - t0 > timeout:
                raise RuntimeError(f"the rooms were not owned and spread in {timeout:.0f} s: "
                                   f"{counts}, {len(owners)} of {len(self.rooms)} owned")
            time.sleep(0.5)

    def rss(self) -> list[int]:
        return [nd.rss() for nd in self.nodes]

    def broker_rss(self) -> int:
        import psutil

        if self.broker is None or self.broker.proc is None:
            return 0
        return int(psutil.Process(self.broker.proc.pid).memory_info().rss)

    def cpu_s(self) -> float:
        import psutil

        t = sum(nd.cpu_s() for nd in self.nodes)
        if self.broker is not None and self.broker.proc is not None:
            with contextlib.suppress(psutil.Error):
                c = psutil.Process(self.broker.proc.pid).cpu_times()
                t += c.user + c.system
        return t

    def start_matches(self) -> None:
        """A match in every room, prepared and started through the processes in turn."""
        def one(i: int) -> None:
            nd = self.nodes[i % len(self.nodes)]
            room = self.rooms[i]
            nd.ok("POST", f"/api/channels/{room}/match", json={})
            nd.ok("POST", f"/api/channels/{room}/match/start")

        with ThreadPoolExecutor(4) as ex:
            list(ex.map(one, range(len(self.rooms))))


# ---------------------------------------------------------------------- published -> received
def fanout(c: Cluster, listeners: int, holds: int, procs: int, tag: str) -> dict[str, Any]:
    """`listeners` viewers over the rooms and the processes, then `holds` holds."""
    rooms, nodes = c.rooms, c.nodes
    owners = c.owned()
    per_client: list[list[tuple[str, str, int]]] = [[] for _ in range(procs)]
    per_room: dict[str, int] = defaultdict(int)
    for i in range(listeners):
        r, k = i % len(rooms), i // len(rooms)
        j = (r + k) % len(nodes)  # a room's listeners on every process, its owner's too
        per_client[k % procs].append((f"ws://127.0.0.1:{nodes[j].port}/ws/channels/{rooms[r]}",
                                      rooms[r], j))
        per_room[rooms[r]] += 1
    rss_before = c.rss()
    t0 = time.monotonic()
    clients = [Listeners.spawn(c.tmp, j, s) for j, s in enumerate(per_client) if s]
    try:
        readies = [cl.ready() for cl in clients]
        connect_s = time.monotonic() - t0
        time.sleep(2.0)
        rss_after = c.rss()
        busy0, total0 = cpu_now()
        ours0 = c.cpu_s() + sum(cl.cpu_s() for cl in clients)
        refused: list[str] = []
        sent, pubs = run_holds(c, owners, holds, tag, refused)
        busy1, total1 = cpu_now()
        ours1 = c.cpu_s() + sum(cl.cpu_s() for cl in clients)
        results = [cl.collect() for cl in clients]
    finally:
        for cl in clients:
            cl.kill()
    arrivals = [x for res in results for x in res["arrivals"] if x[0] in sent]
    # each process numbers the states it sends: the owner's publication of a hold's state is
    # found by the number its own listeners got it with
    owner_seq: dict[str, set[int]] = defaultdict(set)
    for rid, _t, seq, room, node in arrivals:
        if node == owners[room]:
            owner_seq[rid].add(seq)
    published = {rid: pubs[sent[rid][0]].get(min(seqs)) for rid, seqs in owner_seq.items()}
    pub_lat: list[float] = []
    req_lat: list[float] = []
    # where the tail is: the owner's own listeners against the others', and each hold's
    # slowest receipt on each process
    at_owner: list[float] = []
    by_hold: dict[str, dict[int, float]] = defaultdict(dict)
    no_pub = 0
    for rid, t, _seq, room, node in arrivals:
        req_lat.append(t - sent[rid][1])
        tp = published.get(rid)
        if tp is None:
            no_pub += 1
        else:
            pub_lat.append(t - tp)
            if node == owners[room]:
                at_owner.append(t - tp)
            by_hold[rid][node] = max(by_hold[rid].get(node, 0.0), (t - tp) * 1000)
    worst = sorted(by_hold.items(), key=lambda kv: -max(kv[1].values()))[:3]
    ticks = 100  # USER_HZ
    window_s = (total1 - total0) / ticks / max(1, len(_cpus()))
    return {
        "listeners": listeners,
        "connected": sum(r["connected"] for r in readies),
        "connect_failed": sum(r["failed"] for r in readies),
        "first_error": next((r["first_error"] for r in readies if r["first_error"]), None),
        "connect_s": connect_s,
        "holds": holds, "refused": len(refused), "first_refused": refused[:1],
        "expected": sum(per_room[sent[rid][0]] for rid in sent),
        "pub": summary(pub_lat), "req": summary(req_lat), "no_pub": no_pub,
        "pub_at_owner": summary(at_owner),
        "worst_holds": [{"hold": rid, "room": sent[rid][0], "owner": owners[sent[rid][0]],
                         "max_ms_by_process": dict(sorted(m.items()))} for rid, m in worst],
        "owner_seq_disagree": sum(len(v) > 1 for v in owner_seq.values()),
        "pub_lat": pub_lat,
        "gaps": sum(r["gaps"] for r in results),
        "listeners_with_gaps": sum(r["listeners_with_gaps"] for r in results),
        "disorder": sum(r["disorder"] for r in results),
        "closed_early": sum(r["closed_early"] for r in results),
        "states_received": sum(r["states"] for r in results),
        "rss_before": rss_before, "rss_after": rss_after,
        "machine_busy": (busy1 - busy0) / max(1, total1 - total0),
        "ours_busy": (ours1 - ours0) / max(1e-9, window_s * len(_cpus())),
        "owners_stable": c.owned() == owners,
    }


def _cpus() -> list[int]:
    import os

    return sorted(os.sched_getaffinity(0))


def run_holds(c: Cluster, owners: dict[str, int], holds: int, tag: str, refused: list[str]
              ) -> tuple[dict[str, tuple[str, float]], dict[str, dict[int, float]]]:
    """The operator's holds, room after room, each sent to a process that does not own the
    room; returns each hold's room and send time, and the owners' publication times."""
    rooms, nodes = c.rooms, c.nodes
    rng = random.Random(len(rooms) * 7919 + holds)
    step = next(s for s in range(max(1, int(len(rooms) * 0.37)), len(rooms) + 2)
                if math.gcd(s, len(rooms)) == 1)
    # one room: the next hold after the 1.0 s resume lead-in, at a random moment (ws_fanout)
    gap = (1.3, 2.0) if len(rooms) < 4 else (0.5, 0.9)
    sent: dict[str, tuple[str, float]] = {}
    pubs: dict[str, dict[int, float]] = defaultdict(dict)
    for k in range(holds):
        room = rooms[(k * step) % len(rooms)]
        owner = owners[room]
        others = [i for i in range(len(nodes)) if i != owner] or [owner]
        via = nodes[others[k % len(others)]]
        time.sleep(rng.uniform(*gap))
        rid = f"bench{tag}-{k}"
        conn = http.client.HTTPConnection("127.0.0.1", via.port, timeout=30)
        conn.connect()
        t0 = time.monotonic()
        conn.request("PUT", f"/api/channels/{room}/holds/{rid}", headers=AUTH)
        sent[rid] = (room, t0)
        time.sleep(QUIET_S)
        if not _answer(conn, f"hold {rid} in {room} through {via.name}", refused):
            del sent[rid]  # counted as refused, not as a state nobody received
        time.sleep(0.2)
        conn = http.client.HTTPConnection("127.0.0.1", via.port, timeout=30)
        conn.request("DELETE", f"/api/channels/{room}/holds/{rid}", headers=AUTH)
        time.sleep(QUIET_S)
        _answer(conn, f"release {rid}", refused)
        if k % 10 == 9 or k == holds - 1:
            time.sleep(1.1)  # /api/health is at most a second old
            for i, nd in enumerate(nodes):
                chans = nd.ok("GET", "/api/health")["channels"]
                for room_, o in owners.items():
                    if o == i and room_ in chans:
                        pubs[room_].update({int(q): float(t)
                                            for q, t in chans[room_]["recent_publishes"]})
    return sent, pubs


def _answer(conn: http.client.HTTPConnection, what: str, refused: list[str]) -> bool:
    r = conn.getresponse()
    body = r.read()
    conn.close()
    if r.status != 200:
        refused.append(f"{what}: {r.status} {body[:200]!r}")
        print(f"  refused: {refused[-1]}", flush=True)
    return r.status == 200


# ---------------------------------------------------------------------- hold -> referee
async def referee_holds(c: Cluster, n_holds: int) -> dict[str, Any]:
    """A referee per room, joined through (and connected to) a process that does not own the
    room; `n_holds` holds on its WebSocket, room after room, timed to its own state."""
    import websockets

    owners = c.owned()
    nodes = c.nodes
    used = c.rooms[:max(1, min(len(c.rooms), n_holds))]
    refs = []
    for j, room in enumerate(used):
        others = [i for i in range(len(nodes)) if i != owners[room]] or [owners[room]]
        via = nodes[others[j % len(others)]]
        pin = via.ok("GET", f"/api/channels/{room}/pin")["pin"]
        ans = via.ok("POST", f"/api/channels/{room}/referees",
                     json={"pin": pin, "name": f"bench {room}"})
        ws = await websockets.connect(
            f"ws://127.0.0.1:{via.port}/ws/channels/{room}?token={ans['token']}",
            max_size=None, compression=None)
        q: asyncio.Queue[tuple[float, dict[str, Any]]] = asyncio.Queue()
        task = asyncio.create_task(_read(ws, q))
        refs.append((room, ans["referee"], ws, q, task))
    rng = random.Random(n_holds)
    lat: list[float] = []
    errors: list[str] = []
    try:
        for j in range(n_holds):
            room, rid, ws, q, _task = refs[j % len(refs)]
            while not q.empty():
                q.get_nowait()
            t0 = time.monotonic()
            await ws.send('{"type":"hold"}')
            t = await _until(q, lambda m, r=rid: r in _holders(m), errors)
            if t is not None:
                lat.append(t - t0)
            await asyncio.sleep(0.1)
            await ws.send('{"type":"release"}')
            await _until(q, lambda m, r=rid: r not in _holders(m), errors)
            await asyncio.sleep(rng.uniform(0.05, 0.2))
    finally:
        for _room, _rid, ws, _q, task in refs:
            task.cancel()
            await ws.close()
    return {"holds": n_holds, "lat": summary(lat), "errors": errors[:5],
            "n_errors": len(errors), "local": len(nodes) == 1}


async def _read(ws: Any, q: asyncio.Queue[tuple[float, dict[str, Any]]]) -> None:
    with contextlib.suppress(Exception):
        async for text in ws:
            t = time.monotonic()
            q.put_nowait((t, json.loads(text)))


async def _until(q: asyncio.Queue[tuple[float, dict[str, Any]]], ok: Any, errors: list[str],
                 timeout: float = 15.0) -> float | None:
    try:
        async with asyncio.timeout(timeout):
            while True:
                t, m = await q.get()
                if m.get("type") == "error":
                    errors.append(str(m.get("detail"))[:200])
                    return None
                if m.get("type") == "state" and ok(m):
                    return t
    except TimeoutError:
        errors.append(f"no state in {timeout:.0f} s")
        return None


def _holders(state: dict[str, Any]) -> list[str]:
    m = state.get("match") or {}
    return [h["referee"] for h in m.get("holds", [])]


def reading_a_verse(st: dict[str, Any]) -> bool:
    m = st.get("match") or {}
    seg = m.get("segment") or {}
    return bool(not m.get("paused") and m.get("phase") == "reading"
                and seg.get("verse") in ("kami", "shimo"))


# ---------------------------------------------------------------------- failover
async def failover(c: Cluster, kills: int) -> dict[str, Any]:
    import websockets

    took: list[float] = []
    for k in range(kills):
        owners = c.owned()
        target = None
        deadline = time.monotonic() + 60
        while target is None and time.monotonic() < deadline:
            for j in range(len(c.rooms)):
                room = c.rooms[(k * 7 + j) % len(c.rooms)]
                o = owners.get(room)
                if o is not None and reading_a_verse(
                        c.nodes[o].ok("GET", f"/api/channels/{room}")):
                    target = (room, o)
                    break
            else:
                time.sleep(0.2)
        if target is None:
            raise RuntimeError("no room was being read")
        room, o = target
        victim = c.nodes[o]
        survivor = next(nd for i, nd in enumerate(c.nodes) if i != o and nd.alive)
        ws = await websockets.connect(
            f"ws://127.0.0.1:{survivor.port}/ws/channels/{room}?token={TOKEN}",
            max_size=None, compression=None)
        q: asyncio.Queue[tuple[float, dict[str, Any]]] = asyncio.Queue()
        task = asyncio.create_task(_read(ws, q))
        await asyncio.sleep(0.2)
        t0 = time.monotonic()
        victim.kill()
        errors: list[str] = []
        t = await _until(q, lambda m: bool(m.get("recovered")) and bool(
            (m.get("match") or {}).get("paused")) and "@recovered" in _holders(m), errors,
            timeout=60)
        task.cancel()
        await ws.close()
        if t is None:
            raise RuntimeError(f"room {room} was not recovered: {errors}")
        took.append(t - t0)
        victim.start()
        victim.wait_up()
        # the operator resumes what was recovered, so the next kill finds rooms being read
        await asyncio.get_running_loop().run_in_executor(None, _resume_recovered, c)
    return {"kills": kills, "took_s": took,
            "median_s": statistics.median(took) if took else math.nan,
            "max_s": max(took) if took else math.nan}


def _resume_recovered(c: Cluster) -> None:
    deadline = time.monotonic() + 60
    while len(c.owned()) < len(c.rooms):
        if time.monotonic() > deadline:
            raise RuntimeError("rooms left without an owner after a kill")
        time.sleep(0.2)
    nd = next(x for x in c.nodes if x.alive)

    def one(room: str) -> None:
        st = nd.ok("GET", f"/api/channels/{room}")
        if "@recovered" in _holders(st):
            nd.ok("POST", f"/api/channels/{room}/match/resume")

    with ThreadPoolExecutor(4) as ex:
        list(ex.map(one, c.rooms))


# ---------------------------------------------------------------------- the runs
def run_cluster(tmp: Path, n: int, a: argparse.Namespace) -> dict[str, Any]:
    rooms = [f"r{i:03d}" for i in range(a.rooms)]
    out: dict[str, Any] = {"processes": n, "rooms": len(rooms)}
    # the baseline of the memory per room: one room a process (each has loaded what a room
    # being read needs)
    one = Cluster(tmp / f"n{n}-one", n, rooms[:n])
    try:
        one.start()
        one.wait_spread()
        one.start_matches()
        time.sleep(2.0)
        out["rss_one_room"] = one.rss()
        out["rooms_one"] = n
    finally:
        one.stop()
    c = Cluster(tmp / f"n{n}", n, rooms)
    try:
        c.start()
        out["up_s"] = c.up_s
        out.update(c.wait_spread())
        print(f"  {n} processes up in {c.up_s:.1f} s, rooms spread {out['owned']} "
              f"{out['spread_s']:.1f} s later", flush=True)
        c.start_matches()
        time.sleep(3.0)
        out["rss_rooms"] = c.rss()
        out["broker_rss_rooms"] = c.broker_rss()
        out["fanout"] = fanout(c, a.listeners, a.holds, a.client_procs, str(n))
        out["broker_rss_listeners"] = c.broker_rss()
        f = out["fanout"]
        print(f"  {f['connected']} listeners in {f['connect_s']:.1f} s; published -> received "
              f"p50 {f['pub']['p50']:.1f} p99 {f['pub']['p99']:.1f} ms (the owner's own "
              f"listeners p99 {f['pub_at_owner']['p99']:.1f} ms)", flush=True)
        for w in f["worst_holds"]:
            by = ", ".join(f"p{k}{'*' if k == w['owner'] else ''} {v:.0f}"
                           for k, v in w["max_ms_by_process"].items())
            print(f"    slowest hold {w['hold']} ({w['room']}), its last receipt on each "
                  f"process (* the owner), ms: {by}", flush=True)
        time.sleep(1.0)
        out["referee"] = asyncio.run(referee_holds(c, a.referee_holds))
        r = out["referee"]["lat"]
        print(f"  hold -> referee p50 {r['p50']:.1f} p99 {r['p99']:.1f} ms", flush=True)
        out["failover"] = asyncio.run(failover(c, a.kills)) if n > 1 and a.kills else None
        if out["failover"]:
            print(f"  failover {out['failover']['took_s']}", flush=True)
    finally:
        c.stop()
    return out


def run_reference(tmp: Path, k: int, a: argparse.Namespace) -> dict[str, Any]:
    c = Cluster(tmp / f"ref{k}", 1, ["main"], bus=False)
    try:
        c.start()
        c.start_matches()
        time.sleep(3.0)
        f = fanout(c, a.ref_listeners, a.ref_holds, a.client_procs, f"ref{k}")
        print(f"  reference {k}: published -> received p50 {f['pub']['p50']:.1f} p99 "
              f"{f['pub']['p99']:.1f} ms", flush=True)
        return f
    finally:
        c.stop()


def ms(s: dict[str, float], *keys: str) -> str:
    return " / ".join(f"{s[k]:.1f}" for k in keys)


def table(ref: dict[str, Any], ref_rounds: list[dict[str, Any]], runs: list[dict[str, Any]],
          a: argparse.Namespace) -> str:
    rp99 = ref["pub"]["p99"]
    lines = [
        "| processes | rooms | listeners (connected) | rooms owned per process | published → "
        "received p50 / p99 / max (ms) | request → received p50 / p99 (ms) | receipts | p99 "
        "ratio to the reference | hold → referee p50 / p99 (ms, holds) | failover median / max "
        "(s, kills) |",
        "|---|---|---|---|---|---|---|---|---|---|",
        f"| reference: 1, no bus | 1 | {ref['listeners']} ({ref['connected']}) | 1 | "
        f"{ms(ref['pub'], 'p50', 'p99', 'max')} | {ms(ref['req'], 'p50', 'p99')} | "
        f"{ref['pub']['n']}/{ref['expected']} | 1.00 | — | — |",
    ]
    for r in runs:
        f, rf, fo = r["fanout"], r["referee"], r["failover"]
        fail = (f"{fo['median_s']:.2f} / {fo['max_s']:.2f} ({fo['kills']})" if fo
                else "n/a (one process)")
        lines.append(
            f"| {r['processes']} | {r['rooms']} | {f['listeners']} ({f['connected']}) | "
            f"{' '.join(str(x) for x in r['owned'])} | {ms(f['pub'], 'p50', 'p99', 'max')} | "
            f"{ms(f['req'], 'p50', 'p99')} | {f['pub']['n']}/{f['expected']} | "
            f"**{f['pub']['p99'] / rp99:.2f}** | {ms(rf['lat'], 'p50', 'p99')} "
            f"({rf['lat']['n']}) | {fail} |")
    lines += [
        "",
        "| processes | RSS, 1 room a process (MiB, all) | RSS, all rooms (MiB) | per room (MiB) | "
        "RSS with the listeners (MiB) | per listener (KiB) | broker RSS, rooms / listeners "
        "(MiB) |",
        "|---|---|---|---|---|---|---|",
    ]
    for r in runs:
        f = r["fanout"]
        one, rooms, before, after = (sum(r["rss_one_room"]), sum(r["rss_rooms"]),
                                     sum(f["rss_before"]), sum(f["rss_after"]))
        per_room = (rooms - one) / max(1, r["rooms"] - r["rooms_one"]) / MiB
        per_listener = (after - before) / max(1, f["connected"]) / 1024
        lines.append(
            f"| {r['processes']} | {one / MiB:.1f} | {rooms / MiB:.1f} "
            f"({' + '.join(f'{x / MiB:.0f}' for x in r['rss_rooms'])}) | {per_room:.2f} | "
            f"{after / MiB:.1f} | {per_listener:.1f} | {r['broker_rss_rooms'] / MiB:.1f} / "
            f"{r['broker_rss_listeners'] / MiB:.1f} |")
    return "\n".join(lines)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--processes", default="1,2,4")
    ap.add_argument("--rooms", type=int, default=100)
    ap.add_argument("--listeners", type=int, default=10000, help="in all, over the rooms")
    ap.add_argument("--holds", type=int, default=40, help="operator holds, room after room")
    ap.add_argument("--ref-listeners", type=int, default=1000)
    ap.add_argument("--ref-holds", type=int, default=10, help="per reference round")
    ap.add_argument("--referee-holds", type=int, default=200)
    ap.add_argument("--kills", type=int, default=5)
    ap.add_argument("--client-procs", type=int, default=4,
                    help="listeners' processes (the reference's too)")
    ap.add_argument("--quick", action="store_true",
                    help="1 and 2 processes, 10 rooms, 200 listeners, fewer holds and kills")
    ap.add_argument("--out", type=Path, help="write every figure here as JSON")
    ap.add_argument("--keep", action="store_true", help="keep the servers' logs and journals")
    a = ap.parse_args()
    if a.quick:
        a.processes, a.rooms, a.listeners, a.holds = "1,2", 10, 200, 10
        a.ref_listeners, a.ref_holds, a.referee_holds, a.kills = 100, 4, 20, 2
    counts = [int(x) for x in a.processes.split(",")]
    if min(counts) < 1 or a.rooms < max(counts) or a.listeners < a.rooms * max(counts):
        ap.error("at least one process, a room per process and, in each room, a listener per "
                 "process (the owner's listeners say which of its states carried a hold)")
    files = raise_open_files()
    need = a.listeners + 1024
    if files < need:
        print(f"note: {files} open files allowed (ulimit -n), {need} wanted: raise the hard "
              "limit for the whole count")
    check_imports()
    before = machine()
    started = time.monotonic()
    cond = (f"{before.cpus} CPUs, {before.busy * 100:.0f} % busy over {before.window_s:.0f} s "
            f"before the start (load average {before.load1:.2f}), open files {files}")
    print(f"conditions: {cond}", flush=True)
    ref_rounds: list[dict[str, Any]] = []
    runs: list[dict[str, Any]] = []
    tmp = Path(tempfile.mkdtemp(prefix="yomite-cluster-bench-"))
    try:
        # the reference rounds before, between and after the clusters: the machine's drift
        # falls on both alike
        ref_rounds.append(run_reference(tmp, 0, a))
        for k, n in enumerate(counts):
            print(f"{n} processes:", flush=True)
            runs.append(run_cluster(tmp, n, a))
            ref_rounds.append(run_reference(tmp, k + 1, a))
    except BaseException:
        print(f"the servers' logs are kept in {tmp}", file=sys.stderr)
        raise
    if a.keep:
        print(f"the servers' logs are kept in {tmp}")
    else:
        shutil.rmtree(tmp, ignore_errors=True)
    pooled = [x for r in ref_rounds for x in r["pub_lat"]]
    ref = {**ref_rounds[0], "pub": summary(pooled),
           "req": summary([]) if not ref_rounds else ref_rounds[0]["req"],
           "expected": sum(r["expected"] for r in ref_rounds),
           "connected": min(r["connected"] for r in ref_rounds)}
    ref["req"] = {k: statistics.median(r["req"][k] for r in ref_rounds)
                  for k in ("n", "p50", "p99", "max")}
    print()
    print(f"(conditions: {cond}; the machine during the listeners' holds: "
          + ", ".join(f"{r['processes']} processes {r['fanout']['machine_busy'] * 100:.0f} % "
                      f"busy (the bench's own {r['fanout']['ours_busy'] * 100:.0f} %)"
                      for r in runs)
          + f"; {time.monotonic() - started:.0f} s in all)")
    print("reference rounds p99: " + " ".join(f"{r['pub']['p99']:.1f}" for r in ref_rounds)
          + " ms; pooled over " + str(len(ref_rounds)))
    for r in runs:
        f = r["fanout"]
        print(f"{r['processes']} processes: receipts without the owner's publication time "
              f"{f['no_pub']}, listeners with a gap in their seqs {f['listeners_with_gaps']}, "
              f"out of order {f['disorder']}, closed early {f['closed_early']}, owners "
              f"unchanged {f['owners_stable']}, holds refused {f['refused']}, connect failures "
              f"{f['connect_failed']}"
              + (f" ({f['first_error']})" if f["first_error"] else ""))
    print()
    print(table(ref, ref_rounds, runs, a), flush=True)
    if a.out:
        for r in [*ref_rounds, *(x["fanout"] for x in runs)]:
            r.pop("pub_lat", None)
        ref.pop("pub_lat", None)
        a.out.write_text(json.dumps({"conditions": cond, "args": vars(a) | {"out": str(a.out)},
                                     "reference": ref, "reference_rounds": ref_rounds,
                                     "runs": runs}, indent=1, default=str), "utf-8")


if __name__ == "__main__":
    main()
