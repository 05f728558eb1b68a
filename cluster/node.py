"""One process of a cluster: which of the hall's channels it owns, and the others reached over
the bus.

Every `lease_ttl/4` it renews the leases it holds (a lease it cannot renew is given up: the
channel stops here at once, and is reached over the bus like any other), says it is alive
(`node.<id>`, in the leases bucket), and tries to take the channels nobody holds, up to its
share (the channels over the live processes, rounded up; a channel left without an owner for
two rounds is taken whatever the share). Taking a channel: read every line the stream holds
for it, write its latest match's journal from them, start its runtime (which recovers the
match from that journal: paused by `@recovered` if it was being read), then answer its
commands and publish its states.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import math
from collections.abc import Awaitable, Callable
from typing import Any

from nats.js.errors import KeyNotFoundError

from cluster.bus import Bus
from cluster.drain import note_handover, pause_at_card_end, resume_handed_over
from cluster.journalstream import JournalStream
from cluster.lease import Lease
from cluster.messages import Output
from cluster.mirror import JournalMirror
from cluster.owner import OwnerLink
from cluster.peers import Peers
from cluster.remote import RemoteRuntime
from cluster.speakers import RemoteSpeakers
from hall.channel import ChannelService
from hall.hall import Hall

log = logging.getLogger("yomite.cluster")


class ClusterNode:
    def __init__(self, bus: Bus, hall: Hall, node: str, *, settle_s: float | None = None,
                 url: str | None = None) -> None:
        """`url`: where pages reach this process (cluster.advertise): the value of its alive
        key, read by the others (cluster.peers)."""
        self.bus = bus
        self.hall = hall
        self.node = node
        self.journal_dir = hall.config.journal_dir
        self.mirror = JournalMirror(bus, self.journal_dir)
        ttl = bus.lease_ttl_s
        self.interval_s = ttl / 4
        self.settle_s = ttl if settle_s is None else settle_s
        self.leases = {name: Lease(bus.leases, f"ch.{name}", node.encode(), ttl)
                       for name in hall.channels}
        self.alive = Lease(bus.leases, f"node.{node}", (url or node).encode(), ttl)
        self.peers = Peers(url)
        self.owned: dict[str, tuple[OwnerLink, JournalStream]] = {}
        self.remotes: dict[str, RemoteRuntime] = {}
        self._orphaned: dict[str, int] = {}
        self._nodes = 1
        self._draining = False  # stopping: renews its leases, takes nothing
        self._task: asyncio.Task[None] | None = None
        self._fencing: set[asyncio.Task[None]] = set()
        self._renewed_at = 0.0
        self._released: set[str] = set()  # leases given back, announced since the last round
        self._released_sub: Any = None
        # the rooms' registry of this process (cluster.records.cluster_rooms; set by
        # cluster.service.joined, called by the app with its operators' auth and clock)
        self.make_rooms: Callable[..., Awaitable[Any]] | None = None
        self.watch_desk: Callable[..., Awaitable[Any]] | None = None

    async def start(self) -> None:
        await self.alive.acquire()  # counted by the others from now on
        self._released_sub = await self.bus.nc.subscribe(
            self.bus.subjects.released, cb=self._on_released)
        await self.mirror.start()
        for name in self.hall.channels:
            await self._attach(name)
        self._task = asyncio.get_running_loop().create_task(self._run(), name="cluster-node")

    async def stop(self) -> None:
        """Stop, giving every lease back so that another process takes the channels at once
        (each recovered paused there)."""
        if self._task is not None:
            self._task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._task
        for name in list(self.owned):
            await self._release(name, flush=True)
        for rr in self.remotes.values():
            await rr.stop()
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
                    await note_handover(self.bus.shared, name)

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
        info = await self.bus.js.stream_info(f"KV_{bucket}",
                                             subjects_filter=f"$KV.{bucket}.node.>")
        prefix = f"$KV.{bucket}.node."
        return sorted(k.removeprefix(prefix) for k in (info.state.subjects or {}))

    async def _address_of(self, node: str) -> bytes | None:
        try:
            return (await self.bus.leases.get(f"node.{node}")).value
        except KeyNotFoundError:  # stopped since it was counted
            return None

    async def describe(self) -> dict[str, object]:
        """This process, the live ones, and each channel's owner (None: being taken over)."""
        owners: dict[str, str | None] = {}
        for name, lease in list(self.leases.items()):
            try:
                holder = await lease.holder_now()
            except Exception:
                holder = None
            owners[name] = holder.decode() if holder is not None else None
        try:
            nodes = await self.live_nodes()
        except Exception:  # the broker away
            nodes = []
        return {"node": self.node, "nodes": nodes, "owners": owners,
                "owned": sorted(self.owned), "broker": self.bus.connected.is_set()}

    async def _round(self, *, take: bool = True) -> None:
        if not await self.alive.renew():
            await self.alive.acquire()
        try:
            nodes = await self.live_nodes()
            self._nodes = max(1, len(nodes))
            await self.peers.refresh(nodes, self.node, self._address_of)
        except Exception as e:  # the broker away: keep the last count and addresses
            log.debug("cluster: the processes could not be counted: %s", e)
        if not take:
            return
        await self._renew_owned()
        if self._draining:
            return
        loop = asyncio.get_running_loop()
        share = math.ceil(len(self.hall.channels) / self._nodes)
        if len(self.owned) > share:
            # more than this process's share (others started since): hand over one channel
            # that is not being read, so no reading is interrupted; one a round
            for name in list(self.owned):
                rt = self.hall.channels[name].runtime
                if rt is not None and rt.at_rest:
                    log.info("channel %s: handed over (%d owned here, share %d)", name,
                             len(self.owned), share)
                    await self._release(name, flush=True)
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
            if await self.leases[name].acquire():
                await self._take(name)
                if loop.time() - self._renewed_at >= self.interval_s:
                    # taking a channel reads its journal: a survivor taking 100 channels
                    # renews between takes, or it loses the ones it took first (131 leases
                    # lost in bench/cluster.py before this)
                    await self._renew_owned()

    async def _renew_owned(self) -> None:
        """Every lease held renewed at once: one after another, each answer waited behind the
        loop's other work: 0.5-0.7 s a round for 100 channels while 10,000 sockets connected,
        and once past the TTL (bench/cluster.py, one process) every lease was lost and every
        room recovered paused. A lease not renewed stops its channel here."""
        self._renewed_at = asyncio.get_running_loop().time()
        owned = list(self.owned)
        kept = await asyncio.gather(*(self.leases[name].renew() for name in owned))
        for name, ok in zip(owned, kept, strict=True):
            if not ok and name in self.owned:
                log.warning("channel %s: the lease is lost: it stops here", name)
                await self._release(name, flush=False)

    async def _held(self) -> set[str]:
        """The channels someone holds, in one request for all: the `ch.<channel>` keys in the
        bucket's stream (a key nobody renews is gone after the TTL). A key given back leaves a
        delete marker for up to the TTL: the channels announced released since the last round
        are asked one by one. Without the broker: all of them (nothing is taken)."""
        if not self.bus.connected.is_set():
            return set(self.hall.channels)
        bucket = self.bus.subjects.leases
        info = await self.bus.js.stream_info(f"KV_{bucket}",
                                             subjects_filter=f"$KV.{bucket}.ch.>")
        prefix = f"$KV.{bucket}.ch."
        held = {k.removeprefix(prefix) for k in (info.state.subjects or {})}
        released, self._released = self._released & held, set()
        for name in released:
            if name in self.leases and await self.leases[name].holder_now() is None:
                held.discard(name)
        return held

    async def _take(self, name: str) -> None:
        lease = self.leases[name]
        try:
            last_seq = await self.mirror.caught_up(name)
        except TimeoutError:
            log.warning("channel %s: the journal could not be read in time: not taken", name)
            await lease.release()
            return
        rr = self.remotes.pop(name, None)
        if rr is not None:
            await rr.stop()
        self.mirror.owned.add(name)
        stream = JournalStream(self.bus, name, self.node, last_seq=last_seq,
                               on_fenced=lambda: self._fenced(name))
        svc = self.hall.channels[name]
        svc.runtime = None
        try:
            self.mirror.restore(name)
            stream.start()
            self.hall.start_channel(self.hall.config_of(name), journal_tap=stream.tap)
        except Exception:  # its output or journal cannot be opened here: another process
            log.exception("channel %s: cannot be started here: given back", name)
            await self.hall.stop_channel(name)
            await stream.stop()
            self.mirror.owned.discard(name)
            await lease.release()
            await self._attach(name)
            return
        svc.durable = stream.flushed
        assert lease.revision is not None
        link = OwnerLink(self.bus, svc, self.node, lease.revision)
        await link.start()
        self.owned[name] = (link, stream)
        log.info("channel %s: owned here (epoch %d)", name, lease.revision)
        try:
            await resume_handed_over(self.bus.shared, svc)
        except Exception as e:  # stays paused by @recovered: the operator resumes it
            log.warning("channel %s: a handover not resumed: %s", name, e)

    def _fenced(self, name: str) -> None:
        """Another process wrote the channel's journal: this one lost it (frozen, cut off)
        before its lease said so. It stops reading at once."""
        async def give_up() -> None:
            if name in self.owned:
                self.leases[name].revision = None
                await self._release(name, flush=False)

        task = asyncio.get_running_loop().create_task(give_up())
        self._fencing.add(task)
        task.add_done_callback(self._fencing.discard)

    async def add(self, name: str, *, here: bool) -> None:
        """A channel made while running (a room, whose service the hall has): read here at once
        if `here` (this process opened it) and nobody holds it; else reached over the bus until
        a round takes it."""
        self.leases[name] = Lease(self.bus.leases, f"ch.{name}", self.node.encode(),
                                  self.bus.lease_ttl_s)
        if here and await self.leases[name].acquire():
            await self._take(name)
        else:
            await self._attach(name)

    async def remove(self, name: str) -> None:
        """A channel closed (a room): read here no more, its lease given back, and no longer
        reached over the bus; the hall then closes its clients."""
        if name in self.owned:
            await self._release(name, flush=True, attach=False)
        rr = self.remotes.pop(name, None)
        if rr is not None:
            await rr.stop()
        self.leases.pop(name, None)
        self._orphaned.pop(name, None)

    async def _release(self, name: str, *, flush: bool, attach: bool = True) -> None:
        link, stream = self.owned.pop(name)
        svc = self.hall.channels[name]
        await self.hall.stop_channel(name)  # silence first
        svc.durable = None
        await link.stop()
        if flush:
            with contextlib.suppress(Exception):
                await stream.flushed()
        await stream.stop()
        self.mirror.owned.discard(name)
        if self.leases[name].held:
            await self.leases[name].release()
            if attach:  # else the others wait for its marker's TTL
                with contextlib.suppress(Exception):
                    await self.bus.nc.publish(self.bus.subjects.released, name.encode())
        if attach:
            await self._attach(name)

    async def _on_released(self, msg: Any) -> None:
        self._released.add(msg.data.decode(errors="replace"))

    async def _attach(self, name: str) -> None:
        svc = self.hall.channels[name]
        speakers = None
        if self.hall.config_of(name).output in ("browser", "both"):
            speakers = RemoteSpeakers(self.bus, name, self.hall.clip_store(),
                                      svc.hub.publish_speakers, lambda: bool(svc.hub.speakers))
        rr = RemoteRuntime(self.bus, name, self.journal_dir, self.hall.config.audio.rate,
                           self.mirror, svc.on_state, lambda o: _show_output(svc, o), speakers)
        self.remotes[name] = rr
        svc.runtime = rr
        svc.speakers = speakers
        await rr.start()


def _show_output(svc: ChannelService, o: Output) -> None:
    svc.audio, svc.output_info, svc.output, svc.volume_db = o.audio, o.info, o.mode, o.volume_db
