"""Organisations, their operators and the rooms, shared by a cluster's processes.

`KvBucket` is hall.roomstore's `Bucket` on the broker's `<prefix>_records` key-value bucket:
every process holds every record in memory (read at once), kept current by a watch of the
bucket, and a change is answered only once the broker has it. `RoomShare` hands what another
process changed to this one's registries: an organisation or an operator (`Orgs.reload`: a
teacher who redeemed a code through one process is an operator on all of them), a room opened
or closed (`Rooms.adopt`). `ClusterHost` is where a room's channel runs: on every process, read
by the one that holds its lease (the process that opened it first; cluster.node), its PIN and
speaker key shared like a configured channel's (cluster.shared).

A record is sealed with the cluster's key under its own key's name (cluster.seal): an
organisation's invite code, an operator's token digest, who opened which room are not the
broker's to read, and a record put by someone without the key (an operator of their own making)
is never taken. The quotas' seats (`seats/<pool>`, cluster.seats) are the exception: room names
and times, changed by compare-and-set on the broker's revision (cluster.kvcas), kept as they are.
"""

from __future__ import annotations

import asyncio
import contextlib
import errno
import json
import logging
from collections.abc import Awaitable, Callable
from typing import Any

from nats.js.kv import KeyValue

from cluster.bus import Bus, stop_watch
from cluster.node import ClusterNode
from cluster.rotations import RotationShare
from cluster.seal import SealError
from cluster.seats import KvSeats
from cluster.shared import channel_secrets, share
from hall.auth import Auth
from hall.config import ChannelConfig
from hall.orgs import Orgs
from hall.rooms import Rooms
from hall.roomstore import OrgStore, RoomStore, room_of
from reader.clock import Clock

log = logging.getLogger("yomite.cluster")

MAX_RECORD = 64 * 1024  # one record's JSON, bytes (a room's is ~200)
PLAIN = ("seats/",)  # keys written by cluster.seats as they are (names and times)

Changed = Callable[[str, dict[str, Any] | None], Awaitable[None]]


class KvBucket:
    def __init__(self, bus: Bus, kv: KeyValue) -> None:
        self.bus = bus
        self.kv = kv
        self._items: dict[str, dict[str, Any]] = {}
        self.on_change: Changed | None = None  # a key put or deleted, by any process
        self._watcher: Any = None
        self._task: asyncio.Task[None] | None = None

    async def start(self, timeout_s: float = 10.0) -> None:
        """Every record read, then watched."""
        async with asyncio.timeout(timeout_s):
            await self._watch()
        self.bus.on_reconnect.append(self._watch)

    async def stop(self) -> None:
        with contextlib.suppress(ValueError):
            self.bus.on_reconnect.remove(self._watch)
        await self._unwatch()

    # ------------------------------------------------------------------ hall.roomstore.Bucket
    def items(self) -> dict[str, dict[str, Any]]:
        return dict(self._items)

    async def put(self, key: str, value: dict[str, Any]) -> None:
        raw = json.dumps(value, ensure_ascii=False, separators=(",", ":")).encode("utf-8")
        if len(raw) > MAX_RECORD:
            raise OSError(errno.EFBIG, f"a record of {len(raw)} bytes (at most {MAX_RECORD})")
        if not key.startswith(PLAIN):
            raw = self.bus.seal.seal(self._where(key), raw)
        try:
            await self.kv.put(key, raw)
        except Exception as e:
            raise OSError(errno.EIO, f"the broker did not keep it: {e}") from None
        self._items[key] = value

    async def delete(self, key: str) -> None:
        if key not in self._items:
            return
        try:
            await self.kv.delete(key)
        except Exception as e:
            raise OSError(errno.EIO, f"the broker did not keep it: {e}") from None
        self._items.pop(key, None)

    def _where(self, key: str) -> str:
        return f"{self.bus.subjects.records}/{key}"

    def _doc(self, entry: Any) -> dict[str, Any] | None:
        """The entry's document; None for a deleted key, or one that is not a JSON object or
        does not open with the cluster's key (said in the log)."""
        if entry.operation in ("DEL", "PURGE") or not entry.value:
            return None
        raw = entry.value
        if not entry.key.startswith(PLAIN):
            try:
                raw = self.bus.seal.open(self._where(entry.key), raw)
            except SealError as e:
                log.error("records: %s is not taken: %s", entry.key, e)
                return None
        try:
            doc = json.loads(raw)
        except ValueError:
            log.warning("records: %s is not JSON: skipped", entry.key)
            return None
        return doc if isinstance(doc, dict) else None

    # ------------------------------------------------------------------ the watch
    async def _unwatch(self) -> None:
        task, watcher, self._task, self._watcher = self._task, self._watcher, None, None
        await stop_watch(task, watcher)

    async def _watch(self) -> None:
        """Read every key's latest value (the watch's first updates, up to its empty marker),
        then follow the changes. Again after the broker came back: what changed meanwhile is
        handed on like any change."""
        await self._unwatch()
        watcher = await self.kv.watchall()
        before, now = self._items, {}
        while (entry := await watcher.updates(timeout=5.0)) is not None:  # type: ignore[no-untyped-call]
            doc = self._doc(entry)
            if doc is not None:
                now[entry.key] = doc
        self._items, self._watcher = now, watcher
        self._task = asyncio.get_running_loop().create_task(self._follow(watcher),
                                                            name="cluster-records")
        for key in set(before) | set(now):
            if before.get(key) != now.get(key):
                await self._changed(key, now.get(key))

    async def _follow(self, watcher: Any) -> None:
        async for entry in watcher:
            if entry is None:
                continue
            doc = self._doc(entry)
            if doc is None:
                self._items.pop(entry.key, None)
            else:
                self._items[entry.key] = doc
            await self._changed(entry.key, doc)

    async def _changed(self, key: str, doc: dict[str, Any] | None) -> None:
        if self.on_change is None:
            return
        try:
            await self.on_change(key, doc)
        except Exception:  # one record this process cannot apply stops no other
            log.exception("records: applying %s failed", key)


class RoomShare:
    """What another process changed, applied here."""

    def __init__(self, rooms: Rooms, orgs: Orgs) -> None:
        self.rooms = rooms
        self.orgs = orgs

    async def changed(self, key: str, doc: dict[str, Any] | None) -> None:
        if key.startswith("room/"):
            room = room_of(doc) if doc is not None else None
            await self.rooms.adopt(key.removeprefix("room/"), room)
        elif key.startswith(("org/", "op/")):
            self.orgs.reload()

    async def catch_up(self) -> None:
        """Every room as the store has it now (what changed before `changed` was called)."""
        self.orgs.reload()
        for room in self.rooms.store.rooms():
            await self.rooms.adopt(room.name, room)


class ClusterHost:
    """hall.rooms.ChannelHost in a cluster: a room's channel on every process, read by one."""

    def __init__(self, node: ClusterNode, rotations: RotationShare) -> None:
        self.node = node
        self.rotations = rotations

    async def add(self, ch: ChannelConfig, *, here: bool) -> None:
        hall = self.node.hall
        await share(self.node.bus, channel_secrets(
            hall.config.journal_dir, ch.name, hall.config.server.security.pin_digits))
        hall.add_service(ch)
        self.rotations.hook(ch.name)
        try:
            await self.node.add(ch.name, here=here)
        except BaseException:
            await self.node.remove(ch.name)
            with contextlib.suppress(KeyError):
                await hall.close_channel(ch.name, "room_closed")
            raise

    async def close(self, name: str, reason: str) -> None:
        await self.node.remove(name)
        with contextlib.suppress(KeyError):
            await self.node.hall.close_channel(name, reason)


async def cluster_rooms(node: ClusterNode, records: KvBucket, rotations: RotationShare,
                        auth: Auth, clock: Clock) -> Rooms:
    """The rooms' registry of a cluster's process: its organisations and rooms read from the
    shared bucket, the open rooms on this process too (read where their leases are), and what
    the others change applied here from now on."""
    config = node.hall.config
    orgs = Orgs(OrgStore(records), auth, config.rooms)
    rooms = Rooms(config, node.hall, orgs, RoomStore(records), clock,
                  host=ClusterHost(node, rotations), shared=True,
                  seats=KvSeats(records.kv, records.items))
    await rooms.start()
    share_ = RoomShare(rooms, orgs)
    records.on_change = share_.changed
    await share_.catch_up()
    return rooms
