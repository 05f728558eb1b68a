"""One process of a cluster: its membership (it says it is alive, counts the live processes,
knows their addresses) and which of the hall's channels it reads.

Two loops, each on its own so that neither waits on the other's calls to the broker:

- the leases (cluster.holdings `keep`): every `lease_ttl/4`, every lease it holds is renewed
  at once, each call bounded well under the TTL; a channel is read here only while its lease
  is proven on this process's own clock (cluster.lease, hall.tenure);
- the rounds (`_run`): it says it is alive (`node.<id>`, in the leases bucket), counts the live
  processes, and takes the channels nobody holds, up to its share (the channels over the live
  processes, rounded up; a channel left without an owner for two rounds is taken whatever the
  share); over its share (others started since), it hands over one channel at rest a round.

What taking, keeping and losing a channel means is cluster.holdings'.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import math
import time
from collections.abc import Awaitable, Callable
from typing import Any

from nats.js.errors import KeyNotFoundError

from cluster.bus import Bus
from cluster.drain import note_handover, pause_at_card_end
from cluster.holdings import Holdings
from cluster.lease import Lease
from cluster.link import BrokerLink
from cluster.mirror import JournalMirror
from cluster.peers import Peers
from hall.hall import Hall

log = logging.getLogger("yomite.cluster")

DESCRIBE_S = 0.5  # GET /api/cluster asks the broker this long at most, then says what it knew



class ClusterNode:
    def __init__(self, bus: Bus, hall: Hall, node: str, *, settle_s: float | None = None,
                 url: str | None = None) -> None:
        """`url`: where pages reach this process (cluster.advertise): the value of its alive
        key, read by the others (cluster.peers)."""
        self.bus = bus
        self.hall = hall
        self.node = node
        self.mirror = JournalMirror(bus, hall.config.journal_dir)
        ttl = bus.lease_ttl_s
        self.interval_s = ttl / 4
        self.settle_s = ttl if settle_s is None else settle_s
        self.alive = Lease(bus.leases, f"node.{node}", (url or node).encode(), ttl)
        self.peers = Peers(url)
        self.link = BrokerLink(bus.nc, bus.connected.is_set)
        self.holdings = Holdings(bus, hall, node, self.mirror, self.link)
        self.leases = self.holdings.leases
        self.owned = self.holdings.owned
        self._orphaned: dict[str, int] = {}
        self._nodes = 1
        self._draining = False  # stopping: renews its leases, takes nothing
        self._task: asyncio.Task[None] | None = None
        self._keeper: asyncio.Task[None] | None = None
        self._owners: dict[str, str | None] = {}  # each channel's owner, as last described
        self._live: list[str] = [node]  # the live processes, as last counted
        self._released: set[str] = set()  # leases given back, announced since the last round
        self._described_at = -1e18
        self._released_sub: Any = None
        # the rooms' registry of this process (cluster.records.cluster_rooms; set by
        # cluster.service.joined, called by the app with its operators' auth and clock)
        self.make_rooms: Callable[..., Awaitable[Any]] | None = None
        self.watch_desk: Callable[..., Awaitable[Any]] | None = None

    async def start(self) -> None:
        await self.alive.acquire()  # counted by the others from now on
        self.link.start()
        self.link.on_change.append(self.holdings.on_link)
        self._released_sub = await self.bus.nc.subscribe(
            self.bus.subjects.released, cb=self._on_released)
        await self.mirror.start()
        for name in self.hall.channels:
            await self.holdings.attach(name)
        loop = asyncio.get_running_loop()
        self._keeper = loop.create_task(self.holdings.keep(), name="cluster-leases")
        self._task = loop.create_task(self._run(), name="cluster-node")

    async def stop(self) -> None:
        """Stop, giving every lease back so that another process takes the channels at once
        (each recovered paused there)."""
        for task in (self._task, self._keeper):
            if task is not None:
                task.cancel()
                with contextlib.suppress(asyncio.CancelledError):
                    await task
        await self.link.stop()
        await self.holdings.stop()
        await self.alive.release()
        if self._released_sub is not None:
            with contextlib.suppress(Exception):
                await self._released_sub.unsubscribe()
        await self.mirror.stop()

    async def drain(self, timeout_s: float) -> None:
        """Hand the matches read here over at a card's end (cluster.drain), if another
        process is alive to take them; then `stop` gives the leases back."""
        if timeout_s <= 0 or not self.owned or self._nodes < 2:
            return
        self._draining = True
        owned = list(self.owned)
        log.info("cluster: draining %d channels (at most %.0f s)", len(owned), timeout_s)
        results = await asyncio.gather(
            *(pause_at_card_end(self.hall.channels[name], timeout_s) for name in owned),
            return_exceptions=True)
        for name, r in zip(owned, results, strict=True):
            if isinstance(r, BaseException):
                log.warning("channel %s: not paused for its handover: %s", name, r)
            elif r and name in self.owned:
                with contextlib.suppress(Exception):
                    await note_handover(await self.holdings.handover_notes(), name)

    async def _run(self) -> None:
        # the first rounds only say this process is alive: it hears the others before it
        # takes its share
        settled = asyncio.get_running_loop().time() + self.settle_s
        while True:
            try:
                await self._round(take=asyncio.get_running_loop().time() >= settled)
            except Exception:  # a round that failed is tried again: never end the node
                log.exception("cluster: a round failed")
            await asyncio.sleep(self.interval_s)

    async def live_nodes(self) -> list[str]:
        """The processes alive now: the `node.<id>` keys, read as the bucket stream's subjects
        in one request (a key-value `keys()` makes a consumer each time). One that stopped is
        counted until its key's TTL is over."""
        bucket = self.bus.subjects.leases
        info = await asyncio.wait_for(
            self.bus.js.stream_info(f"KV_{bucket}", subjects_filter=f"$KV.{bucket}.node.>"),
            self.interval_s * 2)
        prefix = f"$KV.{bucket}.node."
        return sorted(k.removeprefix(prefix) for k in (info.state.subjects or {}))

    async def _address_of(self, node: str) -> bytes | None:
        try:
            return (await asyncio.wait_for(self.bus.leases.get(f"node.{node}"),
                                           self.interval_s * 2)).value
        except KeyNotFoundError:  # stopped since it was counted
            return None

    async def describe(self) -> dict[str, object]:
        """This process, the live ones, and each channel's owner (None: being taken over),
        asked of the broker for `DESCRIBE_S` at most: past it (the broker out of reach, slow)
        what this process knew last, said as such (`as_of_s`: how old that is)."""
        names = list(self.leases)

        async def holder(lease: Lease) -> str | None:
            h = await lease.holder_now()
            return h.decode() if h is not None else None

        fresh = True
        try:
            async with asyncio.timeout(DESCRIBE_S):
                found = await asyncio.gather(*(holder(self.leases[n]) for n in names))
                self._owners = dict(zip(names, found, strict=True))
                self._live = await self.live_nodes()
                self._described_at = time.monotonic()
        except Exception:
            fresh = False
        owners = {n: self._owners.get(n) for n in names}
        # read here: only while the lease is proven (a loop late to act on a deadline that
        # passed does not say it reads)
        reading = self.holdings.reading()
        for n in reading:
            owners[n] = self.node
        return {"node": self.node, "nodes": self._live, "owners": owners,
                "owned": reading, "broker": self.link.up,
                "fresh": fresh, "as_of_s": round(time.monotonic() - self._described_at, 1)}

    async def _round(self, *, take: bool = True) -> None:
        if not await self.alive.renew():
            await self.alive.acquire()
        try:
            nodes = await self.live_nodes()
            self._nodes = max(1, len(nodes))
            await self.peers.refresh(nodes, self.node, self._address_of)
        except Exception as e:  # the broker away: keep the last count and addresses
            log.debug("cluster: the processes could not be counted: %s", e)
        if not take or self._draining:
            return
        share = math.ceil(len(self.hall.channels) / self._nodes)
        if len(self.owned) > share:
            # more than this process's share (others started since): hand over one channel
            # that is not being read, so no reading is interrupted; one a round
            for name in list(self.owned):
                rt = self.hall.channels[name].runtime
                if rt is not None and rt.at_rest:
                    log.info("channel %s: handed over (%d owned here, share %d)", name,
                             len(self.owned), share)
                    await self.holdings.release(name, flush=True)
                    self._orphaned[name] = -2  # not taken back by this process at once
                    break
        held = await self._held()
        for name in list(self.hall.channels):  # a room may come or go while this round waits
            if name in self.owned or name not in self.leases or name not in self.hall.channels:
                continue
            if name in held:
                self._orphaned.pop(name, None)
                continue
            self._orphaned[name] = self._orphaned.get(name, 0) + 1
            if len(self.owned) >= share and self._orphaned[name] < 2:
                continue
            taken = await self.leases[name].acquire()
            if taken is not None:
                # (taking a channel reads its journal; the leases taken before are renewed
                # meanwhile by their own loop)
                await self.holdings.take(name, taken)

    async def _held(self) -> set[str]:
        """The channels someone holds, in one request for all: the `ch.<channel>` keys in the
        bucket's stream (a key nobody renews is gone after the TTL). A key given back leaves a
        delete marker for up to the TTL: the channels announced released since the last round
        are asked one by one. Without the broker: all of them (nothing is taken)."""
        if not self.link.up:
            return set(self.hall.channels)
        bucket = self.bus.subjects.leases
        info = await asyncio.wait_for(
            self.bus.js.stream_info(f"KV_{bucket}", subjects_filter=f"$KV.{bucket}.ch.>"),
            self.interval_s * 2)
        prefix = f"$KV.{bucket}.ch."
        held = {k.removeprefix(prefix) for k in (info.state.subjects or {})}
        released, self._released = self._released & held, set()
        for name in released:
            if name in self.leases and await self.leases[name].holder_now() is None:
                held.discard(name)
        return held

    async def add(self, name: str, *, here: bool) -> None:
        """A channel made while running (a room, whose service the hall has): read here at once
        if `here` (this process opened it) and nobody holds it; else reached over the bus until
        a round takes it."""
        self.leases[name] = self.holdings.lease_of(name)
        taken = await self.leases[name].acquire() if here else None
        if taken is not None:
            await self.holdings.take(name, taken)
        else:
            await self.holdings.attach(name)

    async def remove(self, name: str) -> None:
        """A channel closed (a room): read here no more, its lease given back, and no longer
        reached over the bus; the hall then closes its clients."""
        await self.holdings.forget(name)
        self._orphaned.pop(name, None)

    async def _on_released(self, msg: Any) -> None:
        self._released.add(msg.data.decode(errors="replace"))
