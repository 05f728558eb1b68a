"""The broker every process of a cluster shares: a NATS server with JetStream, or the three
nodes of a JetStream cluster (docs/cluster-brokers.md: `cluster.bus` names them all, and each
bucket and the stream is kept by `cluster.replicas` of them, so that losing one loses nothing).

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
import dataclasses
import logging
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import nats.errors
from nats.aio.client import Client as NATS
from nats.js import JetStreamContext
from nats.js.api import KeyValueConfig, StorageType, StreamConfig
from nats.js.errors import APIError, BucketNotFoundError, NotFoundError
from nats.js.kv import KeyValue

from cluster.seal import Sealer
from cluster.transport import quick_close

if TYPE_CHECKING:
    from cluster.access import BusAccess

log = logging.getLogger("yomite.cluster")

JOURNAL_DEDUPE_S = 120.0  # a line sent again within this long (a retry) is stored once
# JetStream's answers to more replicas than it can keep: a single server (not a cluster), a
# cluster with fewer nodes than replicas (no peers; not enough room)
TOO_MANY_REPLICAS = (10074, 10005, 10023)


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
    """One process's connection to the broker, and the buckets and stream it uses. `seal`:
    what the cluster's secrets on the broker are sealed with (cluster.seal; none: as they
    are, `cluster.insecure` on one machine)."""

    def __init__(self, nc: NATS, js: JetStreamContext, leases: KeyValue, shared: KeyValue,
                 subjects: Subjects, lease_ttl_s: float, records: KeyValue | None = None,
                 pages: KeyValue | None = None, seal: Sealer | None = None) -> None:
        self.nc = nc
        self.seal = seal if seal is not None else Sealer.plain()
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
                      prefix: str = "yomite", connect_timeout_s: float = 30.0,
                      access: BusAccess | None = None, replicas: int = 1) -> Bus:
        """Connect (trying for `connect_timeout_s`: a broker starting beside us, a loaded
        machine), and make the buckets and the stream if this is the first process. Reconnects
        for ever after.
        `access`: the credentials, TLS and sealing key (cluster.access; none: anonymous, as a
        test's own client). ConnectionError at once when the broker refuses the credentials,
        or when a connection that must be encrypted is not. `url` may name several servers
        (comma-separated: the nodes of a broker cluster). `replicas`: the copies JetStream
        keeps of each bucket and of the stream (cluster.replicas; see `_replicated`)."""
        from cluster.access import (
            BusAccess,
            encrypted,
            open_client,
            redacted,
            refused_for_credentials,
            servers_of,
        )

        access = access if access is not None else BusAccess()
        must_encrypt = access.wants_tls(url)
        holder: list[Bus] = []
        closing: list[asyncio.Task[None]] = []

        async def disconnected() -> None:
            if holder and not holder[0].nc.is_closed:
                log.warning("the broker is out of reach: the cluster waits for it")
                holder[0].connected.clear()

        async def reconnected() -> None:
            if must_encrypt and holder and not encrypted(holder[0].nc):
                log.error("the broker came back without TLS: the connection is closed (what "
                          "crosses it would be in clear)")
                # from a task of its own: this callback runs inside the client's reconnection,
                # which closing cancels
                closing.append(asyncio.get_running_loop().create_task(holder[0].nc.close()))
                return
            log.info("the broker is back")
            if holder:
                holder[0].connected.set()
                for again in list(holder[0].on_reconnect):
                    try:
                        await again()
                    except Exception as e:
                        log.warning("after the broker came back: %s", e)

        refusals: list[Exception] = []
        refused = asyncio.Event()

        async def error(e: Exception) -> None:
            if refused_for_credentials(e):
                if not holder:  # at the start: asking again changes nothing
                    refusals.append(e)
                    refused.set()
                log.warning("the broker refuses this process's credentials: %s", e)
                return
            log.info("broker connection: %s", e)

        # nats-py tries the servers again and again until one takes it (max_reconnect_attempts
        # -1 holds for the first connection too): what ends it is a refusal of the credentials,
        # said through `error`, or `connect_timeout_s` without a broker
        connecting = asyncio.ensure_future(open_client(
            servers=servers_of(url), name=name, connect_timeout=1,
            reconnect_time_wait=0.25, max_reconnect_attempts=-1,
            ping_interval=1, max_outstanding_pings=2,
            disconnected_cb=disconnected, reconnected_cb=reconnected,
            error_cb=error, **access.options()))
        told = asyncio.ensure_future(refused.wait())
        try:
            await asyncio.wait({connecting, told}, timeout=connect_timeout_s,
                               return_when=asyncio.FIRST_COMPLETED)
        finally:
            told.cancel()
        if not connecting.done():
            connecting.cancel()
            with contextlib.suppress(BaseException):
                await connecting
        if refusals:
            raise ConnectionError(
                f"the broker at {redacted(url)} refused this process's credentials "
                f"({refusals[0]}): check cluster.user and cluster.password_file, "
                "cluster.credentials or cluster.nkey (docs/cluster-security.md)")
        if connecting.cancelled():
            raise ConnectionError(f"cannot reach the broker at {redacted(url)} in "
                                  f"{connect_timeout_s:.0f} s")
        try:
            nc = connecting.result()
        except Exception as e:
            raise ConnectionError(f"cannot reach the broker at {redacted(url)}: {e}") from None
        quick_close(nc)  # a node that vanished is left at once, not 30 s later (TLS)
        if must_encrypt and not encrypted(nc):
            await nc.close()
            raise ConnectionError(
                f"the broker at {redacted(url)} did not speak TLS, and cluster.bus (tls://) or "
                "cluster.tls_ca asks for it: give the broker a `tls` block (docs/nats/)")
        js = nc.jetstream(timeout=5)
        subjects = Subjects(prefix)
        # a broker cluster just started, or electing a leader, answers "JetStream temporarily
        # unavailable" (or nothing) for a few seconds: asked again until then
        loop = asyncio.get_running_loop()
        deadline = loop.time() + connect_timeout_s
        while True:
            try:
                leases, shared, records, pages = await _made(js, subjects, lease_ttl_s,
                                                             replicas)
                break
            except Exception as e:
                if _not_yet(e) and loop.time() < deadline:
                    log.info("the broker cannot make yomite's buckets yet (%s): again", e)
                    await asyncio.sleep(0.5)
                    continue
                await nc.close()
                if isinstance(e, APIError) and e.err_code in TOO_MANY_REPLICAS:
                    raise ConnectionError(
                        f"cluster.replicas is {replicas}, but the broker at {redacted(url)} "
                        f"cannot keep {replicas} copies ({e.description}): run a broker "
                        f"cluster of {replicas} nodes or more (docs/nats/node-1.conf...) and "
                        "name its nodes in cluster.bus, or set cluster.replicas: 1 for a "
                        "single broker") from None
                raise ConnectionError(f"the broker at {redacted(url)} did not make yomite's "
                                      f"buckets or stream: {e!r}") from None
        bus = cls(nc, js, leases, shared, subjects, lease_ttl_s, records, pages,
                  seal=access.seal)
        holder.append(bus)
        return bus

    async def close(self) -> None:
        if not self.nc.is_closed:
            await self.nc.close()


async def _made(js: JetStreamContext, subjects: Subjects, lease_ttl_s: float,
                replicas: int) -> tuple[KeyValue, KeyValue, KeyValue, KeyValue]:
    """The buckets (leases, shared, records, pages) and the journal stream, made where they
    are not, each kept by `replicas` nodes at least (`_replicated`)."""
    leases = await _bucket(js, KeyValueConfig(
        bucket=subjects.leases, history=1, ttl=lease_ttl_s, storage=StorageType.FILE,
        replicas=replicas))
    shared = await _bucket(js, KeyValueConfig(
        bucket=subjects.shared, history=1, storage=StorageType.FILE, replicas=replicas))
    records = await _bucket(js, KeyValueConfig(
        bucket=subjects.records, history=1, storage=StorageType.FILE, replicas=replicas))
    pages = await _bucket(js, KeyValueConfig(
        bucket=subjects.pages_bucket, history=1, storage=StorageType.FILE, replicas=replicas))
    try:
        await _replicated(js, subjects.stream, replicas)
    except NotFoundError:
        await js.add_stream(StreamConfig(
            name=subjects.stream, subjects=[subjects.journal_all], storage=StorageType.FILE,
            duplicate_window=JOURNAL_DEDUPE_S, num_replicas=replicas))
    return leases, shared, records, pages


def _not_yet(e: Exception) -> bool:
    """JetStream cannot answer yet (a cluster starting or electing), as opposed to a refusal."""
    if isinstance(e, APIError) and not isinstance(e, NotFoundError):
        return e.code == 503
    return isinstance(e, nats.errors.TimeoutError | nats.errors.NoRespondersError)


async def _bucket(js: JetStreamContext, cfg: KeyValueConfig) -> KeyValue:
    assert cfg.bucket is not None
    try:
        kv = await js.key_value(cfg.bucket)
    except BucketNotFoundError:
        pass
    else:
        await _replicated(js, f"KV_{cfg.bucket}", cfg.replicas)
        return kv
    try:
        return await js.create_key_value(cfg)
    except Exception as e:
        if (isinstance(e, APIError) and e.err_code in TOO_MANY_REPLICAS) or _not_yet(e):
            raise
        # made by another process meanwhile
        kv = await js.key_value(cfg.bucket)
        await _replicated(js, f"KV_{cfg.bucket}", cfg.replicas)
        return kv


async def _replicated(js: JetStreamContext, stream: str, replicas: int) -> None:
    """A stream that exists is kept by at least `replicas` nodes: one made with fewer (by a
    single broker before it became a cluster, or by a process of an older config) is raised to
    it in place, as JetStream allows (the new replicas copy its messages; nothing is made
    again, no lease or line lost), and waited for until its new group has a leader (about a
    second without one on nats-server 2.9.10, in which a call goes unanswered for the client's
    whole timeout: the other processes' renewals fail meanwhile, so raise it before the
    matches). One kept by more is left so: a process whose config still says 1 must not take a
    cluster's copies away from the others. NotFoundError if there is no such stream."""
    info = await js.stream_info(stream)
    have = info.config.num_replicas or 1
    if have >= replicas:
        return
    log.warning("%s: kept by %d broker node(s), cluster.replicas asks %d: raised to %d",
                stream, have, replicas, replicas)
    await js.update_stream(dataclasses.replace(info.config, num_replicas=replicas))
    for _ in range(100):  # 10 s at most; past it the calls after this wait as they must
        await asyncio.sleep(0.1)
        with contextlib.suppress(Exception):
            info = await asyncio.wait_for(js.stream_info(stream), 1.0)
            group = info.cluster
            if group is not None and group.leader and \
                    len(group.replicas or []) >= replicas - 1:
                return
    log.warning("%s: no leader yet after its raise to %d replicas", stream, replicas)


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
