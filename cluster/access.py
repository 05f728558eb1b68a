"""Who may use a cluster's broker: this process's credentials and TLS, and the key it seals
with (`BusAccess`, from the config's `cluster` keys), and the small facts about a broker's URL
the checks need (its servers, loopback, a password kept out of messages).

The broker is the cluster's memory and its nervous system: whoever reaches it with yomite's
rights reads the PINs and the cards and can stop or steal a reading. So a process proves who it
is by NATS's own means (a .creds file, an NKey seed, or a user and password), over TLS across a
network, and the broker lets no one else into yomite's account (docs/nats/, the accounts the
docs ship and the tests run). What the cluster keeps there is also sealed with the cluster's
own key (cluster.seal), so that the broker's administrator or a copy of its store reads
nothing useful. What is checked before a process joins: cluster.preflight.
"""

from __future__ import annotations

import contextlib
import ipaddress
import logging
import ssl
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit, urlunsplit

from nats.aio.client import Client as NATS

from cluster.seal import Sealer, SealError, loose_permissions
from hall.clusterconfig import ClusterConfig

log = logging.getLogger("yomite.cluster")

MAX_PASSWORD = 1024  # bytes of a password file
# what the broker says of credentials it refuses (not "authentication timeout": a client too
# slow to sign in, under load, tries again)
AUTH_REFUSED = ("authorization violation", "authentication expired",
                "authentication revoked")

class AccessError(Exception):
    """This process cannot, or must not, join the cluster's broker: the message names what to
    configure."""


@dataclass(frozen=True)
class BusAccess:
    """How a process signs in to the broker, its TLS, and the key it seals with. Paths are read
    when the connection is made (nats-py reads a .creds file and an NKey seed itself)."""

    user: str | None = None
    password: str | None = field(default=None, repr=False)
    credentials: Path | None = None
    nkey: Path | None = None
    tls_ca: Path | None = None
    tls_cert: Path | None = None
    tls_key: Path | None = None
    seal: Sealer = field(default_factory=Sealer.plain)

    @classmethod
    def of(cls, cluster: ClusterConfig) -> BusAccess:
        """The config's access, its files read now (AccessError names a file that cannot be).
        Without `cluster.insecure` a sealing key is required."""
        password = None
        if cluster.password_file is not None:
            password = _read_secret(cluster.password_file, "cluster.password_file")
        for what, path in (("cluster.credentials", cluster.credentials),
                           ("cluster.nkey", cluster.nkey), ("cluster.tls_ca", cluster.tls_ca),
                           ("cluster.tls_cert", cluster.tls_cert),
                           ("cluster.tls_key", cluster.tls_key)):
            if path is not None and not path.is_file():
                raise AccessError(f"{what} {path}: no such file")
        if cluster.secret_key_file is None:
            if not cluster.insecure:
                raise AccessError(
                    "cluster.secret_key_file is not set: what the cluster keeps on the broker "
                    "(PINs, keys, the operator's token, the cards' order) is sealed with it. "
                    "Make one with `yomite cluster-key FILE`, copy it to every process and "
                    "name it in cluster.secret_key_file (or, for one machine whose broker "
                    "listens on loopback only, start with --bus-insecure)")
            seal = Sealer.plain()
        else:
            try:
                seal = Sealer.load(cluster.secret_key_file)
            except SealError as e:
                raise AccessError(str(e)) from None
            if loose_permissions(cluster.secret_key_file):
                log.warning("cluster.secret_key_file %s can be read by other users of this "
                            "machine: chmod 600 it", cluster.secret_key_file)
        return cls(user=cluster.user, password=password, credentials=cluster.credentials,
                   nkey=cluster.nkey, tls_ca=cluster.tls_ca, tls_cert=cluster.tls_cert,
                   tls_key=cluster.tls_key, seal=seal)

    def tls_context(self, *, client_cert: bool = True) -> ssl.SSLContext | None:
        """A context that checks the broker's certificate against `tls_ca` (None: no CA or
        client certificate configured; a tls:// URL then checks against the system's CAs)."""
        if self.tls_ca is None and self.tls_cert is None:
            return None
        try:
            ctx = ssl.create_default_context(
                cafile=str(self.tls_ca) if self.tls_ca is not None else None)
            if client_cert and self.tls_cert is not None and self.tls_key is not None:
                ctx.load_cert_chain(str(self.tls_cert), str(self.tls_key))
        except (OSError, ssl.SSLError) as e:
            raise AccessError(f"cluster.tls_ca / tls_cert / tls_key: {e}") from None
        return ctx

    def options(self) -> dict[str, Any]:
        """nats.connect's keyword arguments for signing in and TLS."""
        out: dict[str, Any] = {}
        if self.user is not None:
            out["user"], out["password"] = self.user, self.password
        if self.credentials is not None:
            out["user_credentials"] = str(self.credentials)
        if self.nkey is not None:
            out["nkeys_seed"] = str(self.nkey)
        ctx = self.tls_context()
        if ctx is not None:
            out["tls"] = ctx
        return out

    def wants_tls(self, url: str) -> bool:
        """A connection to `url` must be encrypted: a tls:// URL, or a CA named."""
        return self.tls_ca is not None or any(urlsplit(u).scheme == "tls"
                                              for u in servers_of(url))


def servers_of(url: str) -> list[str]:
    """The broker's URLs (`cluster.bus` may name several, comma-separated)."""
    return [u.strip() for u in url.split(",") if u.strip()]


def redacted(url: str) -> str:
    """`url` with any password in it replaced (for messages and logs)."""
    out = []
    for u in servers_of(url):
        parts = urlsplit(u)
        if parts.password is not None:
            host = parts.hostname or ""
            if parts.port is not None:
                host = f"{host}:{parts.port}"
            u = urlunsplit(parts._replace(netloc=f"{parts.username}:***@{host}"))
        out.append(u)
    return ",".join(out)


def anonymous(url: str) -> list[str]:
    """`url`'s servers without any user or password in them."""
    out = []
    for u in servers_of(url):
        parts = urlsplit(u)
        host = parts.hostname or ""
        if ":" in host:
            host = f"[{host}]"
        if parts.port is not None:
            host = f"{host}:{parts.port}"
        out.append(urlunsplit(parts._replace(netloc=host)))
    return out


def on_loopback(url: str) -> bool:
    """Every server of `url` is on this machine's loopback."""
    for u in servers_of(url):
        host = urlsplit(u).hostname or ""
        if host == "localhost":
            continue
        try:
            if not ipaddress.ip_address(host).is_loopback:
                return False
        except ValueError:
            return False
    return True


def refused_for_credentials(e: BaseException) -> bool:
    """The broker refused a connection for its credentials (not for being out of reach)."""
    text = str(e).lower()
    return any(word in text for word in AUTH_REFUSED)


async def open_client(**options: Any) -> NATS:
    """nats.connect's client, closed again when the connection fails (nats-py leaves the socket
    of a refused sign-in open otherwise)."""
    nc = NATS()
    try:
        await nc.connect(**options)
    except BaseException:
        with contextlib.suppress(Exception):
            await nc.close()
        raise
    return nc


def encrypted(nc: NATS) -> bool:
    """The connection runs over TLS. (nats-py upgrades to TLS when the server says it requires
    it, whatever the URL's scheme: what a tls:// URL promises is checked here.)"""
    transport = getattr(nc, "_transport", None)
    writer = getattr(transport, "_io_writer", None)
    return writer is not None and writer.get_extra_info("ssl_object") is not None


def _read_secret(path: Path, what: str) -> str:
    try:
        if path.stat().st_size > MAX_PASSWORD:
            raise AccessError(f"{what} {path}: larger than {MAX_PASSWORD} bytes")
        value = path.read_text("utf-8").strip()
    except (OSError, UnicodeDecodeError) as e:
        raise AccessError(f"{what} {path}: cannot be read ({e})") from None
    if not value:
        raise AccessError(f"{what} {path}: empty")
    return value
