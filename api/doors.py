"""The connections the server holds (`Doors`), by who holds them.

Every connection is held from its accept to its close: at most `connections` in all, lowered
at start below the open-files limit so that the journal and the desk's database always have
files to open (`door_limits`), and at most `connections_per_address` from one address (an
IPv6 /64 counts as one address, allowed `ipv6_net_addresses` times as many: a host has a
whole /64 to take addresses from). A new connection past a cap takes the place of the
oldest connection that only waits for a request.

A WebSocket is classed when it asks for its upgrade, from the credentials it carries (checked
before the upgrade: a digest looked up, `credentials`):

- an **anonymous viewer** (no token, or one the server does not know) is held in the viewers'
  share: at most `viewer_sockets` in all (at most half the connections) and
  `viewer_sockets_per_address` per address (per /64), past which it is answered 503 before
  the upgrade. When the share is full, a viewer from an address holding fewer takes the
  place of the least recently heard-from socket of the address holding the most: a new
  phone gets in however many addresses an attack has.
- the **hall's own** (the operator, a channel's referees and speakers, a room's projector)
  are held outside the share and outside their address's count: the rest of the connections
  is theirs and the pages' requests'. When the door is full, the least recently heard-from
  viewer socket is closed (1013 `make_room`) for a new connection, after any connection that
  only waits for a request.

The caps answer 503 through the server's protocols (api/serverglue.py)."""

from __future__ import annotations

import base64
import binascii
import functools
import ipaddress
import struct
from collections import OrderedDict
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from typing import Any
from urllib.parse import parse_qs

from hall.auth import Auth, Role
from hall.config import Config, LimitsConfig


@dataclass(frozen=True)
class DoorLimits:
    """The door's sizes, from `server.limits` and the open-files limit at start."""

    open_files: int
    connections: int  # held at once, in all
    per_address: int
    backlog: int  # connections the kernel queues before they are accepted
    viewers: int  # anonymous viewers' WebSockets held at once, in all
    viewers_per_address: int
    ipv6_net_addresses: int  # an IPv6 /64 is allowed this many addresses' caps

    @property
    def reserve(self) -> int:
        return self.open_files - self.connections


def door_limits(limits: LimitsConfig, open_files: int) -> DoorLimits:
    """A quarter of the open files (at least 256) is kept from connections: the server's own
    files (journals, the desk's database and its journal, clips, the render and audio
    processes' pipes) and the connections accepted in one go before the door sees them
    (an event loop accepts every queued connection at once: the listen backlog bounds them,
    and is kept to a quarter of the reserve). Anonymous viewers' sockets share at most half
    the connections: the other half is the hall's own and the pages' requests'."""
    reserve = max(256, open_files // 4)
    total = max(16, min(limits.connections, open_files - reserve))
    viewers = max(8, min(limits.viewer_sockets, total // 2))
    return DoorLimits(open_files, total, min(limits.connections_per_address, total),
                      max(16, min(2048, reserve // 4)), viewers,
                      min(limits.viewer_sockets_per_address, viewers),
                      limits.ipv6_net_addresses)


def address_of(client: Any) -> str:
    host = client[0] if isinstance(client, tuple | list) and client else ""
    if host.startswith("::ffff:"):
        host = host[7:]  # an IPv4 client of a dual-stack socket
    return str(host)


@functools.lru_cache(maxsize=4096)
def group_of(address: str) -> str:
    """What a client's caps are counted by: its IPv4 address, or its IPv6 address's /64 (one
    host may take any address of its /64: counting per address, one host fills the door)."""
    if ":" not in address:
        return address
    try:
        ip = ipaddress.IPv6Address(address.split("%", 1)[0])
    except ValueError:
        return address
    if ip.ipv4_mapped is not None:
        return str(ip.ipv4_mapped)
    return str(ipaddress.IPv6Network((int(ip) >> 64 << 64, 64)))


def is_net(group: str) -> bool:
    return "/" in group


Headers = Iterable[tuple[bytes, bytes]]


# A page's WebSocket sends its token as a subprotocol (`yomite.bearer.<base64url of it>`,
# beside `yomite`), never in its URL: a URL stays in logs, in a proxy's records, in a
# browser's history (api/static/common.js). `?token=` is still read, for scripts and
# benches; the access log redacts it (yomite/server.RedactSecrets).
WS_PROTOCOL = "yomite"
WS_BEARER = "yomite.bearer."


def offered_protocols(raw: str | None) -> list[str]:
    """The subprotocols a `Sec-WebSocket-Protocol` header offers (at most 8)."""
    return [p.strip() for p in (raw or "").split(",") if p.strip()][:8]


def bearer_protocol(raw: str | None) -> str | None:
    """The token a page sent as a subprotocol; None if none (or one that does not decode)."""
    for p in offered_protocols(raw):
        if p.startswith(WS_BEARER) and len(p) <= 1024:
            b64 = p[len(WS_BEARER):]
            try:
                return base64.urlsafe_b64decode(b64 + "=" * (-len(b64) % 4)).decode() or None
            except (binascii.Error, ValueError):
                return None
    return None


def token_in(authorization: str | None, header_token: str | None,
             query_token: str | None, protocols: str | None = None) -> str | None:
    """The token a request carries, where the pages and the API put it: `Authorization:
    Bearer`, a WebSocket's subprotocol (`protocols`: its Sec-WebSocket-Protocol header; a
    browser cannot set a WebSocket's other headers), `X-Yomite-Token`, or `?token=`.
    The one rule for the routes (api.deps.token_of) and the door (`credentials`)."""
    if authorization and authorization.lower().startswith("bearer "):
        return authorization[7:].strip() or None
    if protocols and (sent := bearer_protocol(protocols)) is not None:
        return sent
    return header_token or query_token or None


def credentials(headers: Headers, target: bytes) -> str | None:
    """The token of a raw request (its headers as the server parsed them, lower-case names,
    and its request target), read the way api.deps.token_of reads it."""
    found: dict[bytes, bytes] = {}
    for name, value in headers:
        if name in (b"authorization", b"x-yomite-token", b"sec-websocket-protocol") \
                and name not in found:
            found[name] = value
    query = None
    q = target.find(b"?")
    if q >= 0 and b"token=" in target[q:]:
        values = parse_qs(target[q + 1:].decode("latin-1")).get("token")
        query = values[0] if values else None

    def text(name: bytes) -> str | None:
        v = found.get(name)
        return v.decode("latin-1") if v is not None else None

    return token_in(text(b"authorization"), text(b"x-yomite-token"), query,
                    text(b"sec-websocket-protocol"))


def close_frame(code: int, reason: str) -> bytes:
    """A server's WebSocket close frame (RFC 6455 5.5.1: unmasked, code and reason)."""
    payload = struct.pack("!H", code) + reason.encode("utf-8")[:120]
    return struct.pack("!BB", 0x88, len(payload)) + payload


class Doors:
    """The connections the server holds: `total` at most in all, `per_address` from one
    address (but those `exempt` says are not), and among them the anonymous viewers'
    WebSockets: `viewers` at most, `viewers_per_address` from one address. Each is held by
    its transport, from its accept to its close, through a WebSocket upgrade; one that only
    waits for a request (a head not yet complete, a kept-alive connection) may give way to a
    new one. `hall_own(token)`: whether a token is one of the hall's own (set by the app once
    it knows its tokens: until then every WebSocket is a viewer's)."""

    def __init__(self, total: int, per_address: int,
                 exempt: Callable[[str], bool] = lambda _a: False, *,
                 viewers: int | None = None, viewers_per_address: int | None = None,
                 ipv6_net_addresses: int = 8) -> None:
        self.total = total
        self.per_address = per_address
        self.viewers = total if viewers is None else viewers
        self.viewers_per_address = (per_address if viewers_per_address is None
                                    else viewers_per_address)
        self.net_addresses = ipv6_net_addresses
        self.hall_own: Callable[[str], bool] = lambda _token: False
        self._exempt = exempt
        self._exempt_seen: dict[str, bool] = {}
        self._held: dict[Any, str] = {}  # transport: client group
        self._count: dict[str, int] = {}  # group: its connections (the hall's own left out)
        # the connections that only wait for a request, oldest first: transport -> close
        self._idle: dict[Any, Callable[[], None]] = {}
        self._idle_at: dict[str, dict[Any, None]] = {}
        # viewers' WebSockets, least recently heard from first: transport -> close
        self._viewers: OrderedDict[Any, Callable[[], None]] = OrderedDict()
        self._viewers_at: dict[str, OrderedDict[Any, None]] = {}
        self._own: set[Any] = set()  # the hall's own WebSockets
        self.refused = 0
        self.gave_way = 0
        self.refused_viewers = 0
        self.viewers_closed = 0  # viewers' sockets closed to make room

    def __len__(self) -> int:
        return len(self._held)

    def counts(self) -> dict[str, int]:
        """What the door holds and has done (the health route, benches)."""
        return {"connections": len(self._held), "viewers": len(self._viewers),
                "own": len(self._own), "refused": self.refused,
                "refused_viewers": self.refused_viewers, "gave_way": self.gave_way,
                "viewers_closed": self.viewers_closed}

    def _capped(self, address: str) -> bool:
        exempt = self._exempt_seen.get(address)
        if exempt is None:
            if len(self._exempt_seen) > 4096:
                self._exempt_seen.clear()
            exempt = self._exempt_seen[address] = self._exempt(address)
        return not exempt

    def _cap(self, group: str, cap: int) -> int:
        return cap * self.net_addresses if is_net(group) else cap

    def admit(self, transport: Any, address: str) -> bool:
        """Hold a new connection (an idle one, or else a viewer's socket, may give way to
        it); False: refuse it."""
        group = group_of(address)
        if (self._capped(address)
                and self._count.get(group, 0) >= self._cap(group, self.per_address)
                and not self._give_way(self._idle_at.get(group))):
            self.refused += 1
            return False
        if (len(self._held) >= self.total and not self._give_way(self._idle)
                and not self._make_room(self._viewers)):
            self.refused += 1
            return False
        self._held[transport] = group
        self._count[group] = self._count.get(group, 0) + 1
        return True

    def anonymous(self, headers: Headers, target: bytes) -> bool:
        """Whether a request carries no token of the hall's own."""
        token = credentials(headers, target)
        return token is None or not self.hall_own(token)

    def upgrade(self, transport: Any, address: str, anonymous: bool,
                close: Callable[[], None]) -> bool:
        """A held connection becomes a WebSocket: the hall's own, or an anonymous viewer's
        (`close` ends it, to make room for another); False: refuse it (answer 503)."""
        group = self._held.get(transport)
        if group is None:
            return False
        self.busy(transport)
        if not anonymous:
            self._own.add(transport)
            self._uncount(group)  # its address's cap is the requests' and the viewers'
            return True
        mine = self._viewers_at.get(group)
        if ((mine and self._capped(address)
                and len(mine) >= self._cap(group, self.viewers_per_address))
                or (len(self._viewers) >= self.viewers and not self._fair_room(group))):
            self.refused_viewers += 1
            return False
        self._viewers[transport] = close
        self._viewers_at.setdefault(group, OrderedDict())[transport] = None
        return True

    def heard(self, transport: Any) -> None:
        """A viewer's socket sent something: it is the last to make room."""
        if transport in self._viewers:
            self._viewers.move_to_end(transport)
            self._viewers_at[self._held[transport]].move_to_end(transport)

    def idle(self, transport: Any, close: Callable[[], None]) -> None:
        """The connection waits for a request: it may give way (`close`) to a new one."""
        group = self._held.get(transport)
        if group is None:
            return
        self._idle.pop(transport, None)
        self._idle[transport] = close  # the newest idle last
        at = self._idle_at.setdefault(group, {})
        at.pop(transport, None)
        at[transport] = None

    def busy(self, transport: Any) -> None:
        """The connection serves a request (or is a WebSocket): it does not give way."""
        if self._idle.pop(transport, None) is not None:
            group = self._held[transport]
            at = self._idle_at[group]
            del at[transport]
            if not at:
                del self._idle_at[group]

    def release(self, transport: Any) -> None:
        self.busy(transport)
        group = self._held.pop(transport, None)
        if group is None:
            return
        if transport in self._own:
            self._own.discard(transport)
            return
        if self._viewers.pop(transport, None) is not None:
            mine = self._viewers_at[group]
            del mine[transport]
            if not mine:
                del self._viewers_at[group]
        self._uncount(group)

    def _uncount(self, group: str) -> None:
        n = self._count[group] - 1
        if n:
            self._count[group] = n
        else:
            del self._count[group]

    def _give_way(self, idle: dict[Any, Any] | None) -> bool:
        if not idle:
            return False
        transport = next(iter(idle))
        close = self._idle[transport]
        self.release(transport)
        self.gave_way += 1
        close()
        return True

    def _make_room(self, viewers: Mapping[Any, Any] | None) -> bool:
        """The least recently heard-from of `viewers` is closed (its place is free now)."""
        if not viewers:
            return False
        transport = next(iter(viewers))
        close = self._viewers[transport]
        self.release(transport)
        self.viewers_closed += 1
        close()
        return True

    def _fair_room(self, group: str) -> bool:
        """The viewers' share is full: a place is made for `group` if another address holds
        more of it than `group` does (then that address's least recently heard-from)."""
        mine = len(self._viewers_at.get(group, ()))
        most, fullest = max(((len(v), g) for g, v in self._viewers_at.items()),
                            default=(0, ""))
        return most > mine + 1 and self._make_room(self._viewers_at[fullest])


def hall_own(auth: Auth) -> Callable[[str], bool]:
    """Whether a token is one of the hall's own: the operator's (an organisation's too), a
    referee's, a speaker key, a projector link's key; not a viewer link's, nor one the
    server does not know."""
    def own(token: str) -> bool:
        try:
            p = auth.identify(token)
        except PermissionError:
            return False
        return p.role is not Role.VIEWER or p.projector

    return own


def exempt_addresses(config: Config) -> Callable[[str], bool]:
    """Whether an address is exempt from the per-address caps: `connections_exempt`, and the
    trusted proxies (every client behind one comes from its address)."""
    nets = [ipaddress.ip_network(a, strict=False)
            for a in (*config.server.limits.connections_exempt,
                      *config.server.security.trusted_proxies)]

    def exempt(address: str) -> bool:
        try:
            ip = ipaddress.ip_address(address)
        except ValueError:
            return False
        return any(ip in net for net in nets)

    return exempt


def make_doors(config: Config, open_files: int | None = None) -> tuple[Doors, int]:
    """The door sized for `open_files` (default: this process's soft limit now), and the
    listen backlog that goes with it."""
    import resource

    if open_files is None:
        open_files = resource.getrlimit(resource.RLIMIT_NOFILE)[0]
    sizes = door_limits(config.server.limits, open_files)
    return Doors(sizes.connections, sizes.per_address, exempt_addresses(config),
                 viewers=sizes.viewers, viewers_per_address=sizes.viewers_per_address,
                 ipv6_net_addresses=sizes.ipv6_net_addresses), sizes.backlog
