"""The broker every process of a cluster shares: a NATS server with JetStream.

What lives there (`yomite` is the prefix, one cluster to a broker or to a prefix):

- key-value bucket `<prefix>_leases`: `ch.<channel>` names the process that owns the channel
  (cluster.lease); the bucket's TTL is the lease's, so a key not renewed by a live owner
  vanishes by itself.
- key-value bucket `<prefix>_shared`: what every process must agree on and `config.yaml` does
  not say: the keys of the reading orders and of the clips, the operator's token, each
  channel's PIN and speaker key (cluster.shared).
- key-value bucket `<prefix>_records`: the organisations, their operators and the rooms, one
  JSON document a key (cluster.records): every process holds all of them.
- key-value bucket `<prefix>_pages`: `pages/<channel>`, a room's pages on each process, changed
  by compare-and-set as a page joins (cluster.pageseats): a room's page quota.
- stream `<PREFIX>_JOURNAL` on `<prefix>.journal.<channel>`: every line of every channel's
  journal, in order, on disk (cluster.journalstream): the truth a new owner replays.
- subject `<prefix>.desk`: a tournament of the desk written by one process: the others load
  it again from the desk's database (cluster.deskwatch).
- subject `<prefix>.pages.<channel>`: how many pages (and speaker pages) of the channel each
  process has, and the speaker pages' reports (cluster.census).
- subjects `<prefix>.cmd.<channel>` (request/reply to the owner: cluster.owner),
  `<prefix>.state.<channel>` (the owner's states, whole: cluster.remote).
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Any

import nats
from nats.aio.client import Client as NATS
from nats.js import JetStreamContext
from nats.js.api import KeyValueConfig, StorageType, StreamConfig
from nats.js.errors import BucketNotFoundError, NotFoundError
from nats.js.kv import KeyValue

log = logging.getLogger("yomite.cluster")

JOURNAL_DEDUPE_S = 120.0  # a line sent again within this long (a retry) is stored once


@dataclass(frozen=True, slots=True)
class Subjects:
    prefix: str = "yomite"

    def cmd(self, channel: str) -> str:
        return f"{self.prefix}.cmd.{channel}"

    def state(self, channel: str) -> str:
        return f"{self.prefix}.state.{channel}"

    def schedule(self, channel: str) -> str:  # the owner's speaker schedules, as published
        return f"{self.prefix}.schedule.{channel}"

    def speakers(self, channel: str) -> str:  # requests about them: the latest, sync, a clip
        return f"{self.prefix}.speakers.{channel}"

    def journal(self, channel: str) -> str:
        return f"{self.prefix}.journal.{channel}"

    @property
    def journal_all(self) -> str:
        return f"{self.prefix}.journal.>"

    def pages(self, channel: str) -> str:  # a process's pages of a channel (cluster.census)
        return f"{self.prefix}.pages.{channel}"

    @property
    def desk(self) -> str:  # a tournament written by one process (cluster.deskwatch)
        return f"{self.prefix}.desk"

    @property
    def released(self) -> str:  # a lease given back (a channel's name): take it now
        return f"{self.prefix}.released"

    @property
    def stream(self) -> str:
        return f"{self.prefix.upper()}_JOURNAL"

    @property
    def leases(self) -> str:
        return f"{self.prefix}_leases"

    @property
    def shared(self) -> str:
        return f"{self.prefix}_shared"

    @property
    def records(self) -> str:
        return f"{self.prefix}_records"

    @property
    def pages_bucket(self) -> str:
        return f"{self.prefix}_pages"


class Bus:
    """One process's connection to the broker, and the buckets and stream it uses."""

    def __init__(self, nc: NATS, js: JetStreamContext, leases: KeyValue, shared: KeyValue,
                 subjects: Subjects, lease_ttl_s: float, records: KeyValue | None = None,
                 pages: KeyValue | None = None) -> None:
        self.nc = nc
        self.js = js
        self.leases = leases
        self.shared = shared
        self.records = records
        self.pages = pages
        self.subjects = subjects
        self.lease_ttl_s = lease_ttl_s
        self.connected = asyncio.Event()
        self.connected.set()
        # called when the broker is back after a loss (a restarted broker forgot consumers)
        self.on_reconnect: list[Callable[[], Awaitable[None]]] = []

    @classmethod
    async def connect(cls, url: str, *, name: str, lease_ttl_s: float = 2.0,
                      prefix: str = "yomite", connect_timeout_s: float = 5.0) -> Bus:
        """Connect (trying again for `connect_timeout_s`: a broker starting beside us), and make
        the buckets and the stream if this is the first process. Reconnects for ever after."""
        holder: list[Bus] = []

        async def disconnected() -> None:
            if holder and not holder[0].nc.is_closed:
                log.warning("the broker is out of reach: the cluster waits for it")
                holder[0].connected.clear()

        async def reconnected() -> None:
            log.info("the broker is back")
            if holder:
                holder[0].connected.set()
                for again in list(holder[0].on_reconnect):
                    try:
                        await again()
                    except Exception as e:
                        log.warning("after the broker came back: %s", e)

        async def error(e: Exception) -> None:
            log.info("broker connection: %s", e)

        deadline = asyncio.get_running_loop().time() + connect_timeout_s
        while True:
            try:
                nc = await nats.connect(
                    servers=[url], name=name, connect_timeout=1,
                    reconnect_time_wait=0.25, max_reconnect_attempts=-1,
                    ping_interval=1, max_outstanding_pings=2,
                    disconnected_cb=disconnected, reconnected_cb=reconnected,
                    error_cb=error)
                break
            except Exception as e:
                if asyncio.get_running_loop().time() > deadline:
                    raise ConnectionError(f"cannot reach the broker at {url}: {e}") from None
                await asyncio.sleep(0.2)
        js = nc.jetstream(timeout=5)
        subjects = Subjects(prefix)
        leases = await _bucket(js, KeyValueConfig(bucket=subjects.leases, history=1,
                                                  ttl=lease_ttl_s, storage=StorageType.FILE))
        shared = await _bucket(js, KeyValueConfig(bucket=subjects.shared, history=1,
                                                  storage=StorageType.FILE))
        records = await _bucket(js, KeyValueConfig(bucket=subjects.records, history=1,
                                                   storage=StorageType.FILE))
        pages = await _bucket(js, KeyValueConfig(bucket=subjects.pages_bucket, history=1,
                                                 storage=StorageType.FILE))
        try:
            await js.stream_info(subjects.stream)
        except NotFoundError:
            await js.add_stream(StreamConfig(
                name=subjects.stream, subjects=[subjects.journal_all],
                storage=StorageType.FILE, duplicate_window=JOURNAL_DEDUPE_S))
        bus = cls(nc, js, leases, shared, subjects, lease_ttl_s, records, pages)
        holder.append(bus)
        return bus

    async def close(self) -> None:
        if not self.nc.is_closed:
            await self.nc.close()


async def _bucket(js: JetStreamContext, cfg: KeyValueConfig) -> KeyValue:
    assert cfg.bucket is not None
    try:
        return await js.key_value(cfg.bucket)
    except BucketNotFoundError:
        pass
    try:
        return await js.create_key_value(cfg)
    except Exception:
        return await js.key_value(cfg.bucket)


async def stop_watch(task: asyncio.Task[None] | None, watcher: Any) -> None:
    """End a key-value watch: the task that follows it, then the watch itself (a broker gone
    meanwhile is no error)."""
    if task is not None:
        task.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await task
    if watcher is not None:
        with contextlib.suppress(Exception):
            await watcher.stop()


def headers(**kw: Any) -> dict[str, str]:
    return {k: str(v) for k, v in kw.items()}
