"""How an owner's pages hear that it lost its channel, whichever part of the process saw it
first (under a loaded CI they race for the same instant; each test makes one order certain):
- a lease found lost by its renewal (cluster.holdings) before the runtime's own deadline came:
  the reading stops as at its tenure's end, `@lease` on the pages, never a silent stop;
- the broker silent: the link is seen down first (a channel read here still says it reaches
  the broker: its lease is proven), then the lease's deadline: the pages say both.
A real `yomite serve --bus` and a real broker."""

import asyncio
import json
import signal
import time
from pathlib import Path
from typing import Any

import nats
import websockets.sync.client as wsc

from tests.clusterprocs import (  # noqa: F401 (broker_fixture: the fixture `broker`)
    Cluster,
    broker_fixture,
    reading_a_verse,
    start_match,
    state,
    wait_for,
)
from tests.natsbroker import Broker
from tests.serverproc import Server


def overwrite(url: str, bucket: str, key: str) -> None:
    """Another writer of the lease's key (as a process that took it would be)."""
    async def run() -> None:
        nc = await nats.connect(url)
        try:
            kv = await nc.jetstream().key_value(bucket)
            await kv.put(key, b"someone-else")
        finally:
            await nc.close()
    asyncio.run(run())


def leases(msg: dict[str, Any]) -> bool:
    return "@lease" in {h["referee"] for h in (msg.get("match") or {}).get("holds") or []}


def reading_owner(c: Cluster) -> Server:
    """The one process, owning main and reading a verse of a match."""
    s = c.owner("main", 60)
    start_match(s, "main")
    wait_for(lambda: reading_a_verse(s, "main"), 60, "the owner reading a verse")
    return s


def test_a_lease_its_renewal_finds_lost_stops_the_reading_with_lease_on_the_pages(
        tmp_path: Path, broker: Broker) -> None:
    c = Cluster(tmp_path, broker, 1, ("main",), ttl=6.0,
                match={"memorise_s": 1, "cards": 12, "prelude": {"enabled": False}}).start()
    try:
        s = reading_owner(c)
        seen: list[dict[str, Any]] = []
        url = f"ws://{s.host}:{s.port}/ws/channels/main?token={s.token}"
        with wsc.connect(url, open_timeout=20) as ws:
            t0 = time.monotonic()
            overwrite(broker.url, f"{c.prefix}_leases", "ch.main")
            # the renewal (every 0.5 s) finds another writer long before the lease's
            # deadline (ttl − margin = 4.5 s after the last renewal): the runtime has not
            # stopped by itself yet
            while time.monotonic() - t0 < 20:
                try:
                    msg = json.loads(ws.recv(timeout=0.5))
                except TimeoutError:
                    continue
                if msg.get("type") != "state":
                    continue
                seen.append(msg)
                if leases(msg):
                    break
        took = time.monotonic() - t0
        leased = [m for m in seen if leases(m)]
        print(f"the lease overwritten: @lease on the page {took:.2f} s later "
              f"({len(seen)} states)")
        assert leased, "the page never said the reader moved (the reading stopped silently)"
        assert leased[0]["match"]["paused"] is True
        assert "lease ch.main: lost" in s.log()  # by the renewal, not the runtime's deadline
        assert state(s, "main")["match"]["paused"] is True
    finally:
        c.stop()


def test_an_owner_whose_broker_falls_silent_tells_its_pages_after_its_lease_ends(
        tmp_path: Path, broker: Broker) -> None:
    c = Cluster(tmp_path, broker, 1, ("main",), ttl=6.0,
                match={"memorise_s": 1, "cards": 12, "prelude": {"enabled": False}}).start()
    try:
        s = reading_owner(c)
        seen: list[tuple[float, dict[str, Any]]] = []
        url = f"ws://{s.host}:{s.port}/ws/channels/main?token={s.token}"
        assert broker.proc is not None
        with wsc.connect(url, open_timeout=20) as ws:
            t0 = time.monotonic()
            # the link is seen down within 2 s; the lease is proven until 4.5 s after its last
            # renewal: the link's news comes first, certainly
            broker.proc.send_signal(signal.SIGSTOP)
            try:
                while time.monotonic() - t0 < 12:
                    try:
                        msg = json.loads(ws.recv(timeout=0.5))
                    except TimeoutError:
                        continue
                    if msg.get("type") == "state":
                        seen.append((time.monotonic() - t0, msg))
            finally:
                broker.proc.send_signal(signal.SIGCONT)
        moved = next((t for t, m in seen if leases(m)), None)
        told = [t for t, m in seen if m.get("broker") is False]
        print(f"the broker frozen: @lease at {moved} s, broker false at {told[:1]} s "
              f"({len(seen)} states)")
        assert moved is not None, "the page never said the reader moved"
        assert told, "the page was never told this process lost the broker"
        # the last word before the broker came back: not reached, the reader moved
        last = seen[-1][1]
        assert last.get("broker") is False and leases(last), last
    finally:
        c.stop()
