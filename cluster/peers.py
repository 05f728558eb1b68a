"""The addresses of a cluster's processes, as their pages reach them (`cluster.advertise`).

Each process puts its own base URL in its alive key (`node.<id>` in the leases bucket, which
expires with the process), and reads the others' once each (a process's address does not
change while it lives). `live` is this process first, then the other live ones: what the
channel's `hello` gives a page, to reconnect to another when its process dies. `known` is
every address seen since this process started, live or not: the origins whose pages it
accepts (a page loaded from a process that died since comes here from that dead origin).
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from urllib.parse import urlsplit

_DEFAULT_PORTS = {"http": 80, "https": 443}
KNOWN_MAX = 256  # addresses remembered (a cluster restarted many times on new addresses)


def origin_of(url: str) -> str | None:
    """A base URL as a browser writes its origin: `scheme://host[:port]`, lower case, the
    scheme's default port left out (None: not an http(s) URL)."""
    try:
        u = urlsplit(url.strip())
        port = u.port
    except ValueError:
        return None
    if u.scheme not in _DEFAULT_PORTS or not u.hostname:
        return None
    host = f"[{u.hostname}]" if ":" in u.hostname else u.hostname
    if port is None or port == _DEFAULT_PORTS[u.scheme]:
        return f"{u.scheme}://{host}"
    return f"{u.scheme}://{host}:{port}"


class Peers:
    def __init__(self, own: str | None) -> None:
        self.own = origin_of(own) if own else None
        mine = [self.own] if self.own else []
        self.live: list[str] = mine
        self.known: set[str] = set(mine)
        self._urls: dict[str, str] = {}  # node -> its address ("" if it gives none)

    async def refresh(self, nodes: list[str], me: str,
                      address_of: Callable[[str], Awaitable[bytes | None]]) -> None:
        """Called each round with the live processes; asks only for the addresses of
        processes not seen before."""
        for node in nodes:
            if node == me or node in self._urls:
                continue
            raw = await address_of(node)
            url = origin_of(raw.decode("utf-8", "replace")) if raw else None
            self._urls[node] = url or ""  # an older process's key names no address
            if url is not None and len(self.known) < KNOWN_MAX:
                self.known.add(url)
        alive = set(nodes)
        for node in [n for n in self._urls if n not in alive]:
            del self._urls[node]
        others = sorted({u for u in self._urls.values() if u and u != self.own})
        self.live = [*([self.own] if self.own else []), *others]
