"""The channels one process of a cluster reads, and how each comes and goes: taken (its
lease's tenure: read only from when the last holder's lease is certainly over, and only while
its own is proven, cluster.lease and hall.tenure), kept (every lease renewed every `ttl/4` on
its own loop, whatever else the process asks the broker), lost (its lease lost or not proven in
time, or another process wrote its journal: it stops at once, its lease given back if it still
can be, the lines the cluster's journal did not take set aside) or given back (a drain, a
share handed over, a room closed); and every other channel reached over the bus
(cluster.remote), its pages told whether this process reaches the broker.

cluster.node decides which channels to take (the rounds, the shares); this module owns what
taking, keeping and losing one means.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time

from nats.js.kv import KeyValue

from cluster.bus import Bus
from cluster.drain import notes, resume_handed_over
from cluster.journalstream import JournalStream
from cluster.lease import Lease, Taken
from cluster.link import BrokerLink
from cluster.messages import Output
from cluster.mirror import JournalMirror
from cluster.owner import OwnerLink
from cluster.remote import RemoteRuntime
from cluster.speakers import RemoteSpeakers
from hall.channel import ChannelService
from hall.hall import Hall
from hall.runtime import ChannelRuntime

log = logging.getLogger("yomite.cluster")

RENEW_EVERY_S = 0.5

class LeaseTenure:
    """A channel's tenure here (hall.tenure) from its lease: read from when the lease was
    taken safely, until the lease can no longer be proven."""

    def __init__(self, lease: Lease, taken: Taken) -> None:
        self.lease = lease
        self._from = taken.reads_from

    def reads_from(self) -> float:
        return self._from

    def reads_until(self) -> float:
        return self.lease.proven_until

    def why_ended(self) -> str:
        return (f"this process could not renew its lease on the channel within "
                f"{self.lease.ttl_s - self.lease.margin_s:.1f} s (it does not reach the "
                "cluster's broker, or it was too slow): another process reads the channel")



class Holdings:
    def __init__(self, bus: Bus, hall: Hall, node: str, mirror: JournalMirror,
                 link: BrokerLink) -> None:
        self.bus = bus
        self.hall = hall
        self.node = node
        self.mirror = mirror
        self.link = link
        self.journal_dir = hall.config.journal_dir
        # the leases renewed this often (a failed renewal is tried again as soon): a lease's
        # deadline is 3/4 of its TTL after its last confirmed renewal, so with a long TTL (a
        # broker cluster electing a new leader for seconds) the election may last up to
        # 3/4 TTL less one period
        self.interval_s = min(bus.lease_ttl_s / 4, RENEW_EVERY_S)
        self.leases = {name: self.lease_of(name) for name in hall.channels}
        self.owned: dict[str, tuple[OwnerLink, JournalStream]] = {}
        self.remotes: dict[str, RemoteRuntime] = {}
        self._fencing: set[asyncio.Task[None]] = set()
        self._epochs: dict[str, int] = {}  # each owned channel's epoch (its lease's revision)
        self._lost_epoch: dict[str, int] = {}  # a channel lost here: the epoch it was read in
        self._notes: KeyValue | None = None  # the handover notes' bucket (cluster.drain)

    def lease_of(self, name: str) -> Lease:
        return Lease(self.bus.leases, f"ch.{name}", self.node.encode(), self.bus.lease_ttl_s)

    def reading(self) -> list[str]:
        """The channels read here now: owned, their leases proven (a loop late to act on a
        deadline that passed does not say it reads)."""
        return sorted(n for n in self.owned if self.leases[n].proven())

    def on_link(self, up: bool) -> None:
        """Every page of this process says whether it reaches the broker; a channel read here
        is read here all the same while its lease is proven (its pages hear of `@lease` when
        it is not), so its own speakers go on."""
        for name, svc in list(self.hall.channels.items()):
            svc.broker_up = up or name in self.owned
            svc.broadcast()

    async def forget(self, name: str) -> None:
        """A channel closed (a room): read here no more, its lease given back, and no longer
        reached over the bus."""
        if name in self.owned:
            await self.release(name, flush=True, attach=False)
        rr = self.remotes.pop(name, None)
        if rr is not None:
            await rr.stop()
        if name in self.hall.presses:
            self.hall.presses[name].forward = None
        self.leases.pop(name, None)

    async def stop(self) -> None:
        for name in list(self.owned):
            await self.release(name, flush=True)
        for rr in self.remotes.values():
            await rr.stop()


    async def handover_notes(self) -> KeyValue:
        if self._notes is None:
            self._notes = await notes(self.bus)
        return self._notes


    async def keep(self) -> None:
        """The leases, renewed every `interval_s` on their own (a round's calls to the broker,
        the alive key, the count of processes, never hold them up)."""
        loop = asyncio.get_running_loop()
        while True:
            began = loop.time()
            try:
                await self.renew_owned()
            except Exception:
                log.exception("cluster: renewing the leases failed")
            await asyncio.sleep(max(0.0, self.interval_s - (loop.time() - began)))


    async def renew_owned(self) -> None:
        """Every lease held renewed at once (one after another, each answer waited behind the
        loop's other work, took 0.5-0.7 s a round for 100 channels while 10,000 sockets
        connected). A lease lost stops its channel here."""
        owned = list(self.owned)
        kept = await asyncio.gather(*(self.leases[name].renew() for name in owned))
        for name, ok in zip(owned, kept, strict=True):
            if not ok and name in self.owned:
                log.warning("channel %s: the lease is lost: it stops here", name)
                await self.lose(name)


    async def take(self, name: str, taken: Taken) -> None:
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
        presses = self.hall.presses[name]
        presses.forward = None  # judged here from now on
        self.mirror.owned.add(name)
        stream = JournalStream(self.bus, name, self.node, last_seq=last_seq,
                               on_fenced=lambda: self._fenced(name))
        svc = self.hall.channels[name]
        svc.runtime = None
        tenure = LeaseTenure(lease, taken)
        try:
            self.mirror.restore(name)
            stream.start()
            self.hall.start_channel(self.hall.config_of(name), journal_tap=stream.tap,
                                    tenure=tenure, on_ended=lambda _why: self._ended(name))
        except Exception:  # its output or journal cannot be opened here: another process
            log.exception("channel %s: cannot be started here: given back", name)
            await self.hall.stop_channel(name)
            await stream.stop()
            self.mirror.owned.discard(name)
            await lease.release()
            await self.attach(name)
            return
        stream.lease = lease
        svc.durable = stream.flushed
        assert lease.revision is not None
        link = OwnerLink(self.bus, svc, self.node, lease.revision, self.link, presses)
        await link.start()
        self.owned[name] = (link, stream)
        svc.broker_up = True
        self._epochs[name] = lease.revision
        self._lost_epoch.pop(name, None)
        wait = taken.reads_from - time.monotonic()
        log.info("channel %s: owned here (epoch %d)%s", name, lease.revision,
                 f", read from {wait:.1f} s on (the last holder's lease)" if wait > 0 else "")
        try:
            await resume_handed_over(await self.handover_notes(), svc)
        except Exception as e:  # stays paused by @recovered: the operator resumes it
            log.warning("channel %s: a handover not resumed: %s", name, e)


    def _fenced(self, name: str) -> None:
        """Another process wrote the channel's journal: this one lost it (frozen, cut off)
        before its lease said so. It stops reading at once."""
        self._give_up_soon(name)


    def _ended(self, name: str) -> None:
        """The runtime stopped the reading at its lease's deadline (hall.tenure)."""
        self._give_up_soon(name)


    def _give_up_soon(self, name: str) -> None:
        async def give_up() -> None:
            if name in self.owned:
                await self.lose(name)

        task = asyncio.get_running_loop().create_task(give_up())
        self._fencing.add(task)
        task.add_done_callback(self._fencing.discard)


    async def lose(self, name: str) -> None:
        """The channel is not this process's any more (its lease lost, or not proven in
        time): it stops here at once, the lease is given back if it still can be (nobody took
        it: the next taker need not wait), and the lines this process wrote that the cluster's
        journal did not take are kept aside, not shown as the channel's history."""
        if name not in self.owned:
            return
        epoch = self._epochs.get(name, -1)
        rt = self.hall.channels[name].runtime
        local = rt.journal_path if isinstance(rt, ChannelRuntime) else None
        if isinstance(rt, ChannelRuntime):
            # the reading stops as at its tenure's end, whichever saw the lease lost first
            # (this renewal, or the runtime at its deadline): `@lease` tells the pages here
            rt.end_tenure()
        await self.release(name, flush=False, attach=False)
        self._lost_epoch[name] = epoch
        svc = self.hall.channels.get(name)
        if svc is not None:
            svc.broker_up = self.link.up
        if local is not None:
            self.mirror.set_aside(name, local)
        await self.attach(name)


    async def release(self, name: str, *, flush: bool, attach: bool = True) -> None:
        link, stream = self.owned.pop(name)
        self._epochs.pop(name, None)
        svc = self.hall.channels[name]
        log.info("channel %s: not read here any more", name)
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
            await self.attach(name)


    async def attach(self, name: str) -> None:
        svc = self.hall.channels[name]
        speakers = None
        if self.hall.config_of(name).output in ("browser", "both"):
            speakers = RemoteSpeakers(self.bus, name, self.hall.clip_store(),
                                      svc.hub.publish_speakers, lambda: bool(svc.hub.speakers))
        rr = RemoteRuntime(self.bus, name, self.journal_dir, self.hall.config.audio.rate,
                           self.mirror, svc.on_state, lambda o: _show_output(svc, o), speakers,
                           link=self.link, after_epoch=self._lost_epoch.get(name, -1))
        self.remotes[name] = rr
        svc.runtime = rr
        self.hall.presses[name].forward = rr.press  # judged by the owner (hall.presses)
        svc.broker_up = self.link.up
        svc.speakers = speakers
        await rr.start()
        svc.broadcast()  # its pages told at once whether this process reaches the broker





def _show_output(svc: ChannelService, o: Output) -> None:
    svc.audio, svc.output_info, svc.output, svc.volume_db = o.audio, o.info, o.mode, o.volume_db
