"""Where phones can reach this server: the IPv4 addresses of the machine's interfaces (the
default route's first), or `server.public_url` (a hall behind a reverse proxy, or a name on
the hall's own DNS).

The machine's name is no guide: a stock Debian `/etc/hosts` maps it to 127.0.1.1 (or
127.0.0.1), so resolving it finds only loopback. The interfaces are read instead (psutil), and
the default route's source address is learnt by connecting a UDP socket, which sends nothing.
"""

from __future__ import annotations

import ipaddress
import socket
from dataclasses import dataclass

WILDCARDS = ("", "0.0.0.0", "::")
# any address off this machine's networks: connecting a UDP socket to it only picks a route
_OFF_NET = ("198.51.100.1", 9)


@dataclass(frozen=True, slots=True)
class Candidate:
    """A base URL phones may use, and why it is offered."""

    base: str  # https://192.0.2.2:8080 (no trailing slash)
    source: str  # "public_url", "default route (eth0)", "interface wlan0", "this page", "loopback"

    @property
    def loopback(self) -> bool:
        host = self.base.split("://", 1)[-1].split("/", 1)[0].rsplit(":", 1)[0].strip("[]")
        try:
            return ipaddress.ip_address(host).is_loopback
        except ValueError:
            return host == "localhost"

    def to_dict(self) -> dict[str, object]:
        return {"base": self.base, "source": self.source, "loopback": self.loopback}


def default_route_address() -> str | None:
    """The source address of the default route, or None without one."""
    try:
        with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as s:
            s.connect(_OFF_NET)
            addr = str(s.getsockname()[0])
    except OSError:
        return None
    return None if addr.startswith(("127.", "0.")) else addr


def interface_addresses() -> list[tuple[str, str]]:
    """(interface, IPv4 address) of every interface that is up, loopback and link-local
    (169.254/16: no DHCP answered) left out."""
    import psutil

    try:
        stats = psutil.net_if_stats()
        found = []
        for name, addrs in psutil.net_if_addrs().items():
            if name in stats and not stats[name].isup:
                continue
            for a in addrs:
                if a.family != socket.AF_INET:
                    continue
                ip = ipaddress.ip_address(a.address)
                if not (ip.is_loopback or ip.is_link_local):
                    found.append((name, a.address))
        return found
    except (OSError, RuntimeError):  # no /proc in a sandbox: the default route still answers
        return []


def lan_addresses() -> list[tuple[str, str]]:
    """(address, where from): the default route's first, then the other interfaces'."""
    ifaces = interface_addresses()
    out: list[tuple[str, str]] = []
    default = default_route_address()
    if default is not None:
        name = next((n for n, a in ifaces if a == default), "")
        out.append((default, f"default route ({name})" if name else "default route"))
    for name, addr in ifaces:
        if all(addr != a for a, _ in out):
            out.append((addr, f"interface {name}"))
    return out


def _url_host(host: str) -> str:
    return f"[{host}]" if ":" in host else host


def candidates(host: str, port: int, public_url: str | None,
               own_base: str | None = None, scheme: str = "http") -> list[Candidate]:
    """The bases to offer, best first: `public_url`, then (for a server listening on every
    interface) the LAN addresses, then the page's own address if it is none of those; a
    loopback address only when nothing else is there (the console then warns). `scheme`:
    `https` on a server with TLS (a page opened over plain http on loopback still gives
    phones https links)."""
    out: list[Candidate] = []

    def add(base: str, source: str) -> None:
        base = base.rstrip("/")
        if all(c.base != base for c in out):
            out.append(Candidate(base, source))

    if public_url:
        add(public_url, "public_url")
    if host in WILDCARDS:
        for addr, source in lan_addresses():
            add(f"{scheme}://{addr}:{port}", source)
    else:
        add(f"{scheme}://{_url_host(host)}:{port}", "server.host")
    if own_base:
        add(own_base, "this page")
    reachable = [c for c in out if not c.loopback]
    if reachable:
        return reachable
    return out or [Candidate(f"{scheme}://127.0.0.1:{port}", "loopback")]


def advertised(host: str, port: int, configured: str | None, scheme: str = "http") -> str:
    """This process's own base URL for a cluster's other processes (cluster.advertise):
    the configured one, else the bound address (a wildcard: the default route's address, or
    127.0.0.1 without one), over `scheme` (https on a server with TLS). Never
    server.public_url: that is the one name of every process."""
    if configured:
        return configured.rstrip("/")
    if host in WILDCARDS:
        host = default_route_address() or "127.0.0.1"
    return f"{scheme}://{_url_host(host)}:{port}"


def is_loopback_host(host: str) -> bool:
    """127.0.0.0/8, ::1 or localhost: a server there is reached from this machine only."""
    h = host.strip().strip("[]").lower()
    if h == "localhost":
        return True
    try:
        return ipaddress.ip_address(h).is_loopback
    except ValueError:
        return False
