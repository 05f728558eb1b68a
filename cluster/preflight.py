"""What `yomite serve --bus` checks before a process joins a cluster (`check_broker`): refused,
with what to configure (AccessError), are
- a process without a sealing key (unless `cluster.insecure`);
- credentials the broker refuses, and a connection not encrypted where TLS is asked for
  (cluster.bus.Bus.connect);
- a broker that lets a client in without credentials, when that client reaches yomite's
  subjects or its JetStream (unless `cluster.insecure`, meant for one machine whose broker
  listens on loopback only; on any other address it is said loudly);
- a key that is not the cluster's (the shared bucket's check value does not open:
  cluster.shared.agree_on_key).
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import secrets
from typing import Any

from cluster.access import AccessError, BusAccess, anonymous, on_loopback, open_client, redacted
from cluster.bus import Bus
from cluster.seal import SealError
from cluster.shared import agree_on_key
from hall.clusterconfig import ClusterConfig

log = logging.getLogger("yomite.cluster")

PROBE_WAIT_S = 3.0  # an anonymous client's message to one of yomite's subjects, awaited
SECURE_BROKER = (
    "give the broker accounts with no anonymous access (docs/nats/yomite.conf, "
    "docs/cluster-security.md) and give yomite its credentials (cluster.user and "
    "cluster.password_file, cluster.credentials or cluster.nkey; tls:// and cluster.tls_ca "
    "across a network)")
ONE_MACHINE = ("or, for one machine whose broker listens on 127.0.0.1 only, start with "
               "--bus-insecure (cluster.insecure: true)")


async def check_broker(url: str, cluster: ClusterConfig, *, name: str = "yomite-check",
                       connect_timeout_s: float = 30.0) -> list[str]:
    """Before a process joins: AccessError if it must not (see the module); the warnings to
    say loudly otherwise."""
    access = BusAccess.of(cluster)
    warnings = []
    if cluster.insecure:
        if not on_loopback(url):
            unsealed = "" if access.seal.sealing else (
                ", and, without cluster.secret_key_file, read the PINs, the keys and the "
                "order of the cards")
            warnings.append(
                f"--bus-insecure with a broker at {redacted(url)}, which is not on this "
                "machine's loopback: anyone who reaches it can take or stop a reading, send "
                f"holds and commands, and hear the states as they are published{unsealed}. "
                f"Use it for one machine only; elsewhere {SECURE_BROKER}")
    elif not access.wants_tls(url) and not on_loopback(url):
        warnings.append(
            f"the bus to {redacted(url)} is not encrypted: its password (if any) and every "
            "state and command cross the network in clear; use tls:// with cluster.tls_ca")
    try:
        bus = await Bus.connect(url, name=name, prefix=cluster.prefix,
                                lease_ttl_s=cluster.lease_ttl_s, access=access,
                                connect_timeout_s=connect_timeout_s, replicas=cluster.replicas)
    except ConnectionError as e:
        hint = "" if "credentials" in str(e) else (
            ": start the broker first (docs/cluster-security.md), or check cluster.bus / --bus")
        raise AccessError(f"{e}{hint}") from None
    try:
        if not cluster.insecure:
            reached = await _anonymous_reaches(bus, url, access)
            if reached:
                raise AccessError(
                    f"the broker at {redacted(url)} lets a client in without credentials, "
                    f"and that client reaches {' and '.join(reached)}: anyone who reaches "
                    "the broker could read the PINs and the cards, and stop or take a "
                    f"reading. Not joining: {SECURE_BROKER}, {ONE_MACHINE}")
        try:
            await agree_on_key(bus)
        except SealError as e:
            raise AccessError(str(e)) from None
    finally:
        await bus.close()
    return warnings


async def _anonymous_reaches(bus: Bus, url: str, access: BusAccess) -> list[str]:
    """What of yomite's a client without credentials reaches on this broker: [] when the
    broker refuses it, or lets it into another account only."""
    ctx = access.tls_context(client_cert=False)

    async def quiet(_e: Exception) -> None:
        pass

    try:
        anon = await open_client(servers=anonymous(url), name="yomite-anonymous-check",
                                 connect_timeout=2, allow_reconnect=False,
                                 max_reconnect_attempts=0, error_cb=quiet,
                                 **({"tls": ctx} if ctx is not None else {}))
    except Exception as e:  # refused (for want of credentials, or of a client certificate)
        log.info("the broker refuses a client without credentials (%s): good", e)
        return []
    reached = []
    try:
        subject = f"{bus.subjects.prefix}.probe.{secrets.token_hex(8)}"
        heard = asyncio.Event()

        async def got(_msg: Any) -> None:
            heard.set()

        sub = None
        with contextlib.suppress(Exception):  # a permission error: the JetStream check stays
            sub = await bus.nc.subscribe(subject, cb=got)
            await bus.nc.flush(timeout=5)
        if sub is not None:
            with contextlib.suppress(Exception):
                await anon.publish(subject, b"anyone here?")
                await anon.flush(timeout=5)
                async with asyncio.timeout(PROBE_WAIT_S):
                    await heard.wait()
            with contextlib.suppress(Exception):
                await sub.unsubscribe()
        if heard.is_set():
            reached.append(f"yomite's subjects ({bus.subjects.prefix}.>)")
        with contextlib.suppress(Exception):
            await anon.jetstream(timeout=5).stream_info(bus.subjects.stream)
            reached.append(f"its journal stream ({bus.subjects.stream})")
    finally:
        with contextlib.suppress(Exception):
            await anon.close()
    return reached
