"""The connections the server holds (`Doors`): at most `connections_per_address` from one
address and `connections` in all, the latter lowered at start below the open-files limit so
that the journal and the desk's database always have files to open (`door_limits`). A new
connection past a cap takes the place of the oldest connection that only waits for a
request; if none does (they all serve requests, or are WebSockets, which count like any
other), it is answered 503 (by the server's protocols: api/serverglue.py)."""

from __future__ import annotations

import ipaddress
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from hall.config import Config, LimitsConfig


@dataclass(frozen=True)
class DoorLimits:
    """The door's sizes, from `server.limits` and the open-files limit at start."""

    open_files: int
    connections: int  # held at once, in all
    per_address: int
    backlog: int  # connections the kernel queues before they are accepted

    @property
    def reserve(self) -> int:
        return self.open_files - self.connections


def door_limits(limits: LimitsConfig, open_files: int) -> DoorLimits:
    """A quarter of the open files (at least 256) is kept from connections: the server's own
    files (journals, the desk's database and its journal, clips, the render and audio
    processes' pipes) and the connections accepted in one go before the door sees them
    (an event loop accepts every queued connection at once: the listen backlog bounds them,
    and is kept to a quarter of the reserve)."""
    reserve = max(256, open_files // 4)
    total = max(16, min(limits.connections, open_files - reserve))
    return DoorLimits(open_files, total, min(limits.connections_per_address, total),
                      max(16, min(2048, reserve // 4)))


def address_of(client: Any) -> str:
    host = client[0] if isinstance(client, tuple | list) and client else ""
    if host.startswith("::ffff:"):
        host = host[7:]  # an IPv4 client of a dual-stack socket
    return str(host)


class Doors:
    """The connections the server holds: `total` at most in all, `per_address` from one
    address (but those `exempt` says are not). Each is held by its transport, from its
    accept to its close, through a WebSocket upgrade; one that only waits for a request (a
    head not yet complete, a kept-alive connection) may give way to a new one."""

    def __init__(self, total: int, per_address: int,
                 exempt: Callable[[str], bool] = lambda _a: False) -> None:
        self.total = total
        self.per_address = per_address
        self._exempt = exempt
        self._exempt_seen: dict[str, bool] = {}
        self._held: dict[Any, str] = {}  # transport: client address
        self._count: dict[str, int] = {}
        # the connections that only wait for a request, oldest first: transport -> close
        self._idle: dict[Any, Callable[[], None]] = {}
        self._idle_at: dict[str, dict[Any, None]] = {}
        self.refused = 0
        self.gave_way = 0

    def __len__(self) -> int:
        return len(self._held)

    def _capped(self, address: str) -> bool:
        exempt = self._exempt_seen.get(address)
        if exempt is None:
            if len(self._exempt_seen) > 4096:
                self._exempt_seen.clear()
            exempt = self._exempt_seen[address] = self._exempt(address)
        return not exempt

    def admit(self, transport: Any, address: str) -> bool:
        """Hold a new connection (an idle one may give way to it); False: refuse it."""
        if (self._capped(address) and self._count.get(address, 0) >= self.per_address
                and not self._give_way(self._idle_at.get(address))):
            self.refused += 1
            return False
        if len(self._held) >= self.total and not self._give_way(self._idle):
            self.refused += 1
            return False
        self._held[transport] = address
        self._count[address] = self._count.get(address, 0) + 1
        return True

    def idle(self, transport: Any, close: Callable[[], None]) -> None:
        """The connection waits for a request: it may give way (`close`) to a new one."""
        address = self._held.get(transport)
        if address is None:
            return
        self._idle.pop(transport, None)
        self._idle[transport] = close  # the newest idle last
        at = self._idle_at.setdefault(address, {})
        at.pop(transport, None)
        at[transport] = None

    def busy(self, transport: Any) -> None:
        """The connection serves a request (or is a WebSocket): it does not give way."""
        if self._idle.pop(transport, None) is not None:
            address = self._held[transport]
            at = self._idle_at[address]
            del at[transport]
            if not at:
                del self._idle_at[address]

    def release(self, transport: Any) -> None:
        self.busy(transport)
        address = self._held.pop(transport, None)
        if address is None:
            return
        n = self._count[address] - 1
        if n:
            self._count[address] = n
        else:
            del self._count[address]

    def _give_way(self, idle: dict[Any, Any] | None) -> bool:
        if not idle:
            return False
        transport = next(iter(idle))
        close = self._idle[transport]
        self.release(transport)
        self.gave_way += 1
        close()
        return True


def exempt_addresses(config: Config) -> Callable[[str], bool]:
    """Whether an address is exempt from the per-address cap: `connections_exempt`, and the
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
