"""`yomite serve --bus URL`: what a process does to join a cluster, before and around its hall.

`share_secrets` runs before the server is made (its own short connection): the keys, the
operator's token and the channels' PINs every process must agree on (cluster.shared).
`joined` is the hall's companion for the server's life: the connection, the journal's mirror,
the leases (cluster.node), the shared records of organisations and rooms (cluster.records),
the desk's tournaments told to the other processes (cluster.deskwatch).
"""

from __future__ import annotations

import asyncio
import os
import secrets
import socket
from collections.abc import AsyncIterator, Callable
from contextlib import AbstractAsyncContextManager, asynccontextmanager
from typing import Any

from cluster.access import BusAccess
from cluster.bus import Bus
from cluster.census import SpeakerCensus
from cluster.deskwatch import DeskWatch
from cluster.node import ClusterNode
from cluster.pageseats import KvPageSeats
from cluster.records import KvBucket, cluster_rooms
from cluster.referees import RefereeShare
from cluster.rotations import RotationShare
from cluster.shared import secrets_of, share
from hall.auth import Auth
from hall.config import Config
from hall.deskstore import DeskStore
from hall.hall import Hall
from hall.rooms import Rooms
from reader.clock import Clock


def node_name() -> str:
    """This process, unique in the cluster and for this run only (its journal lines' ids)."""
    return f"{socket.gethostname()}-{os.getpid()}-{secrets.token_hex(3)}"


def share_secrets(config: Config, url: str) -> dict[str, str]:
    async def run() -> dict[str, str]:
        bus = await Bus.connect(url, name="yomite-start", lease_ttl_s=config.cluster.lease_ttl_s,
                                prefix=config.cluster.prefix, replicas=config.cluster.replicas,
                                access=BusAccess.of(config.cluster))
        try:
            return await share(bus, secrets_of(
                config.journal_dir, [c.name for c in config.server.channels],
                config.server.security.pin_digits))
        finally:
            await bus.close()

    return asyncio.run(run())


def joined(config: Config, url: str, node: str, advertise: str | None = None
           ) -> Callable[[Hall], AbstractAsyncContextManager[Any]]:
    """`advertise`: this process's base URL for the others' pages (cluster.peers)."""
    @asynccontextmanager
    async def run(hall: Hall) -> AsyncIterator[ClusterNode]:
        bus = await Bus.connect(url, name=node, lease_ttl_s=config.cluster.lease_ttl_s,
                                prefix=config.cluster.prefix, replicas=config.cluster.replicas,
                                access=BusAccess.of(config.cluster))
        member = ClusterNode(bus, hall, node, url=advertise)
        referees = RefereeShare(bus, hall.auth)
        rotations = RotationShare(bus, hall)
        assert bus.records is not None
        records = KvBucket(bus, bus.records)
        census = SpeakerCensus(bus, hall, node, advertise,
                               heartbeat_s=config.cluster.pages_heartbeat_s)
        quotas: list[KvPageSeats] = []
        try:
            await referees.start()
            await rotations.start()
            await member.start()
            await records.start()
            await census.start()

            async def make_rooms(auth: Auth, clock: Clock) -> Rooms:
                rooms = await cluster_rooms(member, records, rotations, auth, clock)
                assert bus.pages is not None
                rooms.pages = KvPageSeats(hall, bus.pages, node, census,  # on the broker
                                          connected=bus.connected.is_set)
                rooms.pages.start()
                quotas.append(rooms.pages)
                return rooms

            async def watch_desk(store: DeskStore) -> DeskWatch:
                watch = DeskWatch(bus, store, node, config.cluster.desk_refresh_s)
                await watch.start()
                return watch

            member.make_rooms = make_rooms
            member.watch_desk = watch_desk
            yield member
            await member.drain(config.cluster.drain_s)  # a stop asked for, not a failure
        finally:
            for q in quotas:
                await q.stop()
            await census.stop()
            records.on_change = None
            await records.stop()
            await member.stop()
            await rotations.stop()
            await referees.stop()
            await bus.close()

    return run
