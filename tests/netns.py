"""Network failures between real processes, for the cluster's partition tests: Linux network
namespaces joined by a bridge, and packet filters inside them.

What it makes. `Net()` (a context manager) makes a bridge in the root namespace with a private
/24 on it; each `net.host(name)` makes a namespace with a veth pair, its end in the namespace
named `eth0`, the other end a port of the bridge. One L2 segment, no routing between them:

    root namespace (the test process, nats-server, PostgreSQL)
      bridge  yt<pid>x<n>b   10.213.K.1/24   = net.gateway
        ├── veth yt<pid>x<n>v0 ── namespace yt<pid>x<n>-a   eth0 10.213.K.2/24  = a.ip
        ├── veth yt<pid>x<n>v1 ── namespace yt<pid>x<n>-b   eth0 10.213.K.3/24  = b.ip
        └── ...
    each namespace: lo up, default route via the gateway

K is the first /24 of 10.213.0.0/16 that no interface or route in the root namespace uses yet
(chosen under a file lock, so the four pytest-xdist workers each get their own). The root
namespace reaches every host through the bridge; hosts reach each other and the root's services
on the gateway's address. A service meant for the hosts listens on `net.gateway` (or 0.0.0.0).

How to use it:

    with netns.Net() as net:
        a = net.host("a")
        srv = Server(tmp, cfg, TOKEN, host=a.ip, netns=a.ns).start()   # tests/serverproc.py
        a.cut(net.gateway, port=broker.port)    # a <-> broker's port dropped both ways
        a.heal()                                # a's rules gone
        a.drop(net.gateway, 0.3, port=broker.port)   # 30 % of packets lost, both ways
        p = a.popen([sys.executable, "-m", "tests.delayrelay", ...], cwd=ROOT)

`cut` and `drop` are iptables rules in the host's own namespace (INPUT and OUTPUT), DROP, never
REJECT: the peer sees silence, no RST and no ICMP, as when a cable or a switch fails. Its other
traffic (its own HTTP and WebSocket clients, other ports of the same peer) is untouched. Loss is
iptables' `statistic` match (`--mode random`), counted per packet as the filter sees it: on a
veth, segmentation offload hands it packets of up to 64 KiB, so a lost "packet" may be many
segments' worth. Delay is a relay process (tests/delayrelay.py), not the kernel: this kernel has
no netem (`tc qdisc add ... netem` answers "Specified qdisc kind is unknown").

The root namespace: the bridge gets ACCEPT rules of its own at the top of the root's INPUT,
FORWARD and OUTPUT chains (tagged with a comment, removed at exit), so that a host firewall
(ufw's INPUT policy, Docker's FORWARD DROP; `br_netfilter` passes bridged frames through
FORWARD) cannot stand between the hosts and the gateway. No ip_forward is needed (one L2
segment, the gateway is the root's own address); rp_filter is harmless (each namespace has one
interface and one route). Everything runs as root with `ip` and `iptables` (Debian's iproute2
and iptables: `scripts/system-deps.sh test`).

Cleanup. Names carry the test process's pid: `yt<pid>x<n>` (n counts this process's Nets), so
they fit Linux's 15 characters. At exit, whatever the test did, every process still inside a
namespace is killed (SIGKILL: the test's own `finally` should have stopped them; this is the
backstop) and the veths, namespaces, bridge and root rules are deleted. Each new Net first sweeps
what a dead process left (a worker killed mid-test): names whose pid has no process, or this
process's pid with no live Net of that name (the pid was reused); never a live worker's.
"""

from __future__ import annotations

import contextlib
import fcntl
import ipaddress
import itertools
import json
import os
import re
import shutil
import signal
import subprocess
import time
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from types import TracebackType
from typing import Any

import pytest

SUPERNET = ipaddress.IPv4Network("10.213.0.0/16")
IFNAMSIZ = 15  # Linux's limit on an interface's name, without its NUL
LOCK = Path("/run/lock" if Path("/run/lock").is_dir() else "/tmp") / "yomite-netns.lock"
_NAME = re.compile(r"yt(\d+)x(\d+)")
_seq = itertools.count()
_live: set[str] = set()  # this process's open Nets' tags: the sweep leaves them alone


def _tool(name: str) -> str | None:
    # root's PATH has the sbin folders; a venv's pytest started by hand may not
    return shutil.which(name) or next(
        (p for p in (f"/usr/sbin/{name}", f"/sbin/{name}") if Path(p).exists()), None)


def require() -> tuple[str, str]:
    """`ip` and `iptables`, as root, or the test fails saying what to install."""
    ip, iptables = _tool("ip"), _tool("iptables")
    if ip is None or iptables is None:
        pytest.fail("the partition tests need `ip` and `iptables` (Debian's iproute2 and "
                    "iptables): scripts/system-deps.sh test installs them")
    if os.geteuid() != 0:
        pytest.fail("the partition tests make network namespaces and packet filters: run them "
                    "as root (scripts/system-deps.sh test installs iproute2 and iptables)")
    return ip, iptables


@dataclass(frozen=True)
class Drops:
    """Packets a host's rules have dropped so far: coming in (INPUT), going out (OUTPUT)."""
    inbound: int
    outbound: int


class Host:
    """One namespace on the Net's bridge: `ns` its name (for `ip netns exec`), `ip` its
    address. Made by `Net.host`, gone when the Net exits."""

    def __init__(self, name: str, ns: str, veth: str, ip: str, tools: tuple[str, str]) -> None:
        self.name = name
        self.ns = ns
        self.veth = veth  # the root namespace's end, a port of the bridge
        self.ip = ip
        self._ip, self._iptables = tools
        self._procs: list[subprocess.Popen[Any]] = []

    def __repr__(self) -> str:
        return f"Host({self.name!r}, ns={self.ns!r}, ip={self.ip!r})"

    def command(self, args: Sequence[str | os.PathLike[str]]) -> list[str]:
        """`args` as a command line that runs inside this namespace (the environment, the
        working folder and the descriptors are the caller's: `ip netns exec` execs in place,
        so the pid is the program's own and signals reach it)."""
        return [self._ip, "netns", "exec", self.ns, *(os.fspath(a) for a in args)]

    def popen(self, args: Sequence[str | os.PathLike[str]], **kw: Any) -> subprocess.Popen[Any]:
        """A real process inside this namespace (`subprocess.Popen`'s keywords). Stop it
        yourself; the Net kills what is left at exit."""
        proc: subprocess.Popen[Any] = subprocess.Popen(self.command(args), **kw)
        self._procs.append(proc)
        return proc

    def run(self, args: Sequence[str | os.PathLike[str]],
            timeout: float = 30) -> subprocess.CompletedProcess[str]:
        """A short command inside this namespace (`ss -tn`, `iptables -S`...), its output as
        text; a failure raises with what it printed."""
        return _run(self.command(args), timeout=timeout)

    def cut(self, peer: str, port: int | None = None) -> None:
        """Drop everything between this host and `peer`, both ways: a partition. With `port`,
        only TCP to and from the peer's `port` (the broker's, say): the host's other traffic,
        with the peer too, still flows."""
        self._rules(self._match(peer, port))

    def drop(self, peer: str, probability: float, port: int | None = None) -> None:
        """Lose each packet between this host and `peer` (its `port` only, as in `cut`) with
        `probability`, both ways, independently (iptables' `statistic --mode random`)."""
        if not 0 < probability <= 1:
            raise ValueError(f"a probability in (0, 1], not {probability}")
        self._rules(self._match(peer, port, f"-m statistic --mode random "
                                            f"--probability {probability:.4f}"))

    def heal(self) -> None:
        """Remove every rule `cut` and `drop` put here (the namespace's filter table flushed);
        connections that survived the cut carry on, retransmitting what was lost."""
        _run(self.command([self._iptables, "-w", "-F"]))

    def dropped(self) -> Drops:
        """Packets dropped by this host's rules since they were made (each `heal` starts
        again from zero)."""
        def count(chain: str) -> int:
            rows = _run(self.command([self._iptables, "-w", "-L", chain, "-n", "-v", "-x"]))
            return sum(int(f[0]) for f in (r.split() for r in rows.stdout.splitlines()[2:])
                       if len(f) > 2 and f[2] == "DROP")
        return Drops(inbound=count("INPUT"), outbound=count("OUTPUT"))

    @staticmethod
    def _match(peer: str, port: int | None, more: str = "") -> list[str]:
        """DROP rules for both directions; `more` another match (statistic's)."""
        ipaddress.IPv4Address(peer)  # a typo is an error here, not a rule that matches nothing
        tcp = port is not None
        out = f"-d {peer}" + (f" -p tcp --dport {port}" if tcp else "") + f" {more} -j DROP"
        into = f"-s {peer}" + (f" -p tcp --sport {port}" if tcp else "") + f" {more} -j DROP"
        return [f"-A OUTPUT {out}", f"-A INPUT {into}"]

    def _rules(self, lines: list[str]) -> None:
        # one iptables-restore for both directions: the cut starts on both at once
        _run(self.command([self._iptables + "-restore", "-w", "--noflush"]),
             stdin="*filter\n" + "\n".join(lines) + "\nCOMMIT\n")

    def _close(self) -> None:
        for proc in self._procs:
            if proc.poll() is None:
                proc.kill()
            with contextlib.suppress(subprocess.TimeoutExpired):
                proc.wait(10)
            for stream in (proc.stdin, proc.stdout, proc.stderr):
                if stream is not None:
                    with contextlib.suppress(OSError):
                        stream.close()
        _kill_inside(self._ip, self.ns)


class Net:
    """A bridge and its hosts (see the module's docstring). Used as a context manager; `close`
    is safe to call twice."""

    def __init__(self) -> None:
        self._ip, self._iptables = require()
        self.tag = f"yt{os.getpid()}x{next(_seq)}"
        self.bridge = f"{self.tag}b"
        if len(self.bridge) + 2 > IFNAMSIZ:  # room for a veth's "v" and one digit
            raise RuntimeError(f"interface names from {self.tag!r} are too long")
        self.hosts: list[Host] = []
        self.subnet: ipaddress.IPv4Network | None = None
        self.gateway = ""
        self.setup_s = 0.0  # seconds spent making the bridge and the hosts, for the figures

    def __enter__(self) -> Net:
        t0 = time.monotonic()
        _live.add(self.tag)
        try:
            with _locked():
                _sweep(self._ip, self._iptables)
                self.subnet = _free_subnet(self._ip)
                self.gateway = str(self.subnet.network_address + 1)
                pid, n = map(int, _NAME.fullmatch(self.tag).groups())  # type: ignore[union-attr]
                mac = ":".join(f"{b:02x}" for b in (2, 0x59, pid >> 16 & 255, pid >> 8 & 255,
                                                      pid & 255, n & 255))
                # the bridge's address set by hand, or it takes its lowest port's and changes
                # as hosts are added (the hosts' ARP entries for the gateway would go stale)
                _batch(self._ip, [
                    f"link add {self.bridge} address {mac} type bridge",
                    f"addr add {self.gateway}/{self.subnet.prefixlen} dev {self.bridge}",
                    f"link set {self.bridge} up",
                ])
                _restore(self._iptables, "-I", self._root_rules())
        except BaseException:
            self.close()
            raise
        self.setup_s += time.monotonic() - t0
        return self

    def __exit__(self, _t: type[BaseException] | None, _e: BaseException | None,
                 _tb: TracebackType | None) -> None:
        self.close()

    def host(self, name: str) -> Host:
        """A new namespace on the bridge, with the next address; `name` is short
        (letters and digits), unique in this Net."""
        if self.subnet is None:
            raise RuntimeError("Net.host before the Net is entered (use `with Net() as net`)")
        if not re.fullmatch(r"[a-z0-9]{1,12}", name) or any(h.name == name for h in self.hosts):
            raise ValueError(f"a short new host name of letters and digits, not {name!r}")
        i = len(self.hosts)
        if i >= 250:
            raise ValueError("a Net has at most 250 hosts")
        t0 = time.monotonic()
        ns, veth = f"{self.tag}-{name}", f"{self.tag}v{i}"
        if len(veth) > IFNAMSIZ:
            raise RuntimeError(f"interface name {veth!r} is longer than {IFNAMSIZ}")
        host = Host(name, ns, veth, str(self.subnet.network_address + 2 + i),
                    (self._ip, self._iptables))
        self.hosts.append(host)  # before it exists: close() removes what part was made
        with _locked():  # `ip netns add` and `del` of several workers at once race on /run/netns
            _batch(self._ip, [
                f"netns add {ns}",
                f"link add {veth} type veth peer name eth0 netns {ns}",
                f"link set {veth} master {self.bridge} up",
            ])
        _batch(self._ip, [
            f"addr add {host.ip}/{self.subnet.prefixlen} dev eth0",
            "link set eth0 up",
            "link set lo up",
            f"route add default via {self.gateway}",
        ], netns=ns)
        self.setup_s += time.monotonic() - t0
        return host

    def close(self) -> None:
        """Every process left in the hosts killed, then the veths, namespaces, bridge and the
        root's rules deleted. Errors of one step do not stop the next."""
        for host in self.hosts:
            host._close()
        with _locked():
            _batch(self._ip, [f"link del {h.veth}" for h in self.hosts]
                   + [f"netns del {h.ns}" for h in self.hosts]
                   + [f"link del {self.bridge}"], force=True)
            if self.gateway:
                _restore(self._iptables, "-D", self._root_rules(), check=False)
        self.hosts = []
        self.gateway = ""
        _live.discard(self.tag)

    def _root_rules(self) -> list[str]:
        mark = f"-m comment --comment {self.tag} -j ACCEPT"
        return [f"INPUT -i {self.bridge} {mark}", f"OUTPUT -o {self.bridge} {mark}",
                f"FORWARD -i {self.bridge} -o {self.bridge} {mark}"]


def _run(args: list[str], stdin: str | None = None, timeout: float = 30,
         check: bool = True) -> subprocess.CompletedProcess[str]:
    done = subprocess.run(args, input=stdin, capture_output=True, text=True, timeout=timeout)
    if check and done.returncode != 0:
        raise RuntimeError(f"{' '.join(args)} exited {done.returncode}: "
                           f"{(done.stderr or done.stdout).strip()}")
    return done


def _batch(ip: str, lines: list[str], netns: str | None = None, force: bool = False) -> None:
    """Several `ip` commands in one process (`ip -batch`); with `force`, on past errors (a
    cleanup that finds part of it gone already)."""
    if not lines:
        return
    args = [ip, *(["-n", netns] if netns else []), *(["-force"] if force else []), "-batch", "-"]
    _run(args, stdin="\n".join(lines) + "\n", check=not force)


def _restore(iptables: str, op: str, rules: list[str], check: bool = True) -> None:
    if rules:
        _run([iptables + "-restore", "-w", "--noflush"],
             stdin="*filter\n" + "".join(f"{op} {r}\n" for r in rules) + "COMMIT\n",
             check=check)


@contextlib.contextmanager
def _locked() -> Iterator[None]:
    with open(LOCK, "a") as f:
        fcntl.flock(f, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(f, fcntl.LOCK_UN)


def _free_subnet(ip: str) -> ipaddress.IPv4Network:
    """The first /24 of SUPERNET that no address or route of the root namespace overlaps."""
    used: list[ipaddress.IPv4Network] = []
    for link in json.loads(_run([ip, "-j", "-4", "addr", "show"]).stdout or "[]"):
        for a in link.get("addr_info", []):
            used.append(ipaddress.IPv4Network(f"{a['local']}/{a['prefixlen']}", strict=False))
    for route in json.loads(_run([ip, "-j", "-4", "route", "show"]).stdout or "[]"):
        if route.get("dst", "default") != "default":
            with contextlib.suppress(ValueError):
                used.append(ipaddress.IPv4Network(route["dst"], strict=False))
    for subnet in SUPERNET.subnets(new_prefix=24):
        if not any(subnet.overlaps(u) for u in used):
            return subnet
    raise RuntimeError(f"no free /24 left in {SUPERNET}")


def _dead(name: str) -> bool:
    """`name` is one of ours, and its owner is gone."""
    m = _NAME.match(name)
    if m is None:
        return False
    pid, tag = int(m.group(1)), m.group(0)
    if pid == os.getpid():
        return tag not in _live
    return not Path(f"/proc/{pid}").exists()


def _sweep(ip: str, iptables: str) -> None:
    """Remove what dead processes' Nets left (called under the lock)."""
    spaces = [n["name"] for n in json.loads(_run([ip, "-j", "netns", "list"]).stdout or "[]")
              if _dead(n["name"])]
    for ns in spaces:
        _kill_inside(ip, ns)
    links = [link["ifname"] for link in json.loads(_run([ip, "-j", "link", "show"]).stdout)
             if _dead(link["ifname"])]
    # veths first (their pairs go with them), then namespaces, then bridges
    links.sort(key=lambda name: name.endswith("b"))
    _batch(ip, [f"link del {n}" for n in links] + [f"netns del {n}" for n in spaces],
           force=True)
    stale = []
    for line in _run([iptables, "-w", "-S"]).stdout.splitlines():
        m = re.fullmatch(r"-A (\S+) (.*--comment (\S+) .*)", line)
        if m and _dead(m.group(3)):
            stale.append(f"{m.group(1)} {m.group(2)}")
    _restore(iptables, "-D", stale, check=False)


def _kill_inside(ip: str, ns: str) -> None:
    """SIGKILL every process still in namespace `ns` (those the test started there and left),
    so that deleting it frees it at once."""
    done = _run([ip, "netns", "pids", ns], check=False)
    for pid in done.stdout.split():
        with contextlib.suppress(ProcessLookupError, ValueError):
            os.kill(int(pid), signal.SIGKILL)
