"""The cluster's part of config.yaml (`cluster`: `yomite serve --bus`), and the one limit on a
file's path named in the config."""

from pathlib import Path
from typing import Literal, Self

from pydantic import Field, field_validator, model_validator

from reader.config import Frozen

MAX_PATH = 1024  # characters of a file's path in the config


def short_path(v: Path | None) -> Path | None:
    """A configured file's path, refused when empty or longer than MAX_PATH characters."""
    if v is not None and not 0 < len(str(v)) <= MAX_PATH:
        raise ValueError(f"a path of 1 to {MAX_PATH} characters")
    return v


class ClusterConfig(Frozen):
    """`yomite serve --bus URL`: several processes serving one hall through a NATS broker (the
    README's cluster section). Every process runs with the same config."""

    # nats://host:4222, or a broker cluster's nodes, comma-separated (nats://b1:4222,
    # nats://b2:4222,nats://b3:4222: a process reaches the cluster while any one is up); --bus
    # sets it too
    bus: str | None = Field(None, max_length=512)
    lease_ttl_s: float = Field(2.0, ge=0.5, le=30)  # a dead owner's channels move after this
    prefix: str = Field("yomite", pattern=r"^[a-z][a-z0-9_]{0,31}$")  # subjects and buckets
    # how many broker nodes keep each of yomite's buckets and its journal stream (JetStream
    # replicas): 3 on the three-node broker cluster of docs/nats/ (one node lost: nothing lost,
    # no reading paused), 1 on a single broker. Buckets made with fewer are raised to it when a
    # process starts, never lowered (cluster.bus)
    replicas: Literal[1, 3, 5] = 1
    # where pages reach this process by its own address (http://10.0.0.5:8000, no path): told
    # to the others, so that a page whose process died reconnects to another, and accepted as
    # an origin by them. Default: http://<the bound address>:<port>, or, bound to 0.0.0.0 /
    # ::, the default route's address (127.0.0.1 without one)
    advertise: str | None = Field(None, pattern=r"^https?://[^\s/?#@]+/?$", max_length=256)
    # a process stopping while others are alive hands each match it reads over at a card's end,
    # waiting at most this long for it (0: at once, recovered paused by the next, as a crash)
    drain_s: float = Field(60.0, ge=0, le=600)
    # the desk's tournaments (on one database: desk.database_url on PostgreSQL) compared with
    # the database this often by each process: what another process's announcement, lost on
    # the way, would have said (cluster.deskwatch)
    desk_refresh_s: float = Field(5.0, ge=0.5, le=3600)
    # how often a process says how many pages it has of each channel (a room's page quota
    # counts them); near a room's quota a change is said at once. A process not heard from
    # for three of these is forgotten (cluster.census)
    pages_heartbeat_s: float = Field(5.0, ge=1, le=3600)
    # who this process is on the broker (docs/cluster-security.md): one of a NATS .creds file
    # (JWT and seed), an NKey seed file, or a user and the file holding its password (a file,
    # so that the password is neither in config.yaml nor in a command line)
    credentials: Path | None = None
    nkey: Path | None = None
    user: str | None = Field(None, pattern=r"^[A-Za-z0-9_.@-]{1,128}$")
    password_file: Path | None = None
    # TLS to the broker (tls://host:4222): the CA that signed its certificate (default: the
    # system's), and this process's own certificate and key where the broker asks for one
    tls_ca: Path | None = None
    tls_cert: Path | None = None
    tls_key: Path | None = None
    # the cluster's key (`yomite cluster-key FILE`, the same file on every process): what the
    # cluster keeps on the broker (PINs, keys, tokens, the journal's cards) is sealed with it.
    # Required unless `insecure`
    secret_key_file: Path | None = None
    # --bus-insecure: join a broker that anyone who reaches it may use (one machine, the
    # broker on loopback only); otherwise such a broker is refused at start
    insecure: bool = False

    @field_validator("bus")
    @classmethod
    def _servers(cls, v: str | None) -> str | None:
        if not v:
            return v
        servers = [u.strip() for u in v.split(",")]
        if not all(servers) or any(c.isspace() for u in servers for c in u):
            raise ValueError("one URL, or several separated by commas "
                             "(nats://b1:4222,nats://b2:4222,nats://b3:4222), none empty")
        return ",".join(servers)

    @field_validator("credentials", "nkey", "password_file", "tls_ca", "tls_cert", "tls_key",
                     "secret_key_file")
    @classmethod
    def _short_path(cls, v: Path | None) -> Path | None:
        return short_path(v)

    @model_validator(mode="after")
    def _one_identity(self) -> Self:
        named = [k for k in ("credentials", "nkey", "user") if getattr(self, k) is not None]
        if len(named) > 1:
            raise ValueError(f"name one way to sign in to the broker, not {' and '.join(named)}")
        if (self.user is None) != (self.password_file is None):
            raise ValueError("user and password_file go together")
        if (self.tls_cert is None) != (self.tls_key is None):
            raise ValueError("tls_cert and tls_key go together")
        return self
