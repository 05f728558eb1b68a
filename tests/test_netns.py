"""The partition tests' harness (tests/netns.py, tests/delayrelay.py) does what they rely on:
real processes in namespaces, real sockets in the root namespace, and the cuts, losses and
delays between them. Every wait is bounded; every absence is watched for a fixed time."""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
import queue
import re
import select
import socket
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import IO

import httpx2
import pytest

from tests import netns
from tests.delayrelay import Relay
from tests.serverproc import Server

ROOT = Path(__file__).resolve().parent.parent
PY = sys.executable

# a client inside a namespace: stdin's lines go to the socket, the socket's lines come out as
# "got ...", and an error as "error <name>" (a reset would say ConnectionResetError)
PEER = r"""
import socket, sys, threading
s = socket.create_connection((sys.argv[1], int(sys.argv[2])), timeout=30)
s.settimeout(None)
print("connected", flush=True)
def down():
    try:
        for line in s.makefile("rb"):
            print("got", line.decode().strip(), flush=True)
        print("eof", flush=True)
    except OSError as e:
        print("error", type(e).__name__, flush=True)
threading.Thread(target=down, daemon=True).start()
try:
    for line in sys.stdin:
        if line.strip() == "blob":
            s.sendall(bytes(range(256)) * 1024)
        else:
            s.sendall(line.encode())
except OSError as e:
    print("error", type(e).__name__, flush=True)
"""

# one connection attempt: "ok <reply>", or the exception's name (TimeoutError: silence, no RST)
PROBE = r"""
import socket, sys
try:
    with socket.create_connection((sys.argv[1], int(sys.argv[2])), timeout=float(sys.argv[3])) as s:
        s.sendall(b"ping\n")
        print("ok", s.makefile("rb").readline().decode().strip())
except OSError as e:
    print(type(e).__name__)
"""

# a line echo server inside a namespace, on IP:0; it prints its port
ECHO = r"""
import socket, sys, threading
srv = socket.create_server((sys.argv[1], 0))
print(srv.getsockname()[1], flush=True)
def serve(c):
    with c, c.makefile("rb") as f:
        for line in f:
            c.sendall(line)
while True:
    threading.Thread(target=serve, args=(srv.accept()[0],), daemon=True).start()
"""


class Lines:
    """A process's stdout, line by line, read by a thread: waits that end."""

    def __init__(self, proc: subprocess.Popen[str]) -> None:
        assert proc.stdout is not None
        self._q: queue.Queue[str] = queue.Queue()
        threading.Thread(target=self._read, args=(proc.stdout,), daemon=True).start()

    def _read(self, stdout: IO[str]) -> None:
        # ends at EOF, or when the Net closes the pipe of a process it killed
        with contextlib.suppress(ValueError, OSError):
            for line in stdout:
                self._q.put(line.strip())

    def next(self, timeout: float) -> str:
        try:
            return self._q.get(timeout=timeout)
        except queue.Empty:
            raise AssertionError(f"no line in {timeout} s") from None

    def none_for(self, seconds: float) -> None:
        with pytest.raises(queue.Empty):
            line = self._q.get(timeout=seconds)
            raise AssertionError(f"a line arrived: {line!r}")


def listener(host: str) -> socket.socket:
    s = socket.create_server((host, 0))
    s.settimeout(30)
    return s


def recv_line(conn: socket.socket, timeout: float) -> bytes:
    """One line from `conn` (read byte by byte: the rest stays in the socket)."""
    conn.settimeout(timeout)
    out = b""
    while not out.endswith(b"\n"):
        more = conn.recv(1)
        assert more, f"EOF after {out!r}"
        out += more
    return out


def silent(conn: socket.socket, seconds: float) -> bool:
    return not select.select([conn], [], [], seconds)[0]


def tcp_state(conn: socket.socket) -> int:
    return conn.getsockopt(socket.IPPROTO_TCP, socket.TCP_INFO, 1)[0]  # tcpi_state


ESTABLISHED = 1


@pytest.fixture
def net() -> Iterator[netns.Net]:
    with netns.Net() as n:
        yield n


def peer(host: netns.Host, ip: str, port: int) -> tuple[subprocess.Popen[str], Lines]:
    proc = host.popen([PY, "-c", PEER, ip, str(port)], stdin=subprocess.PIPE,
                      stdout=subprocess.PIPE, text=True)
    return proc, Lines(proc)


def say(proc: subprocess.Popen[str], line: str) -> None:
    assert proc.stdin is not None
    proc.stdin.write(line + "\n")
    proc.stdin.flush()


def test_cut_holds_a_connection_and_heal_delivers_what_was_sent(net: netns.Net) -> None:
    """A connection from namespace a to a server in the root: during a cut nothing crosses
    either way and nobody is reset; at the heal TCP's retransmissions deliver what both sides
    sent during the cut, in order, on the same connection."""
    a = net.host("a")
    with listener(net.gateway) as srv:
        proc, out = peer(a, net.gateway, srv.getsockname()[1])
        conn, _ = srv.accept()
        with conn:
            assert out.next(30) == "connected"
            say(proc, "before")
            assert recv_line(conn, 30) == b"before\n"
            conn.sendall(b"hello\n")
            assert out.next(30) == "got hello"

            a.cut(net.gateway, port=srv.getsockname()[1])
            say(proc, "during")
            conn.sendall(b"while cut\n")
            out.none_for(1.5)  # the root's line did not reach a
            assert silent(conn, 0.5), "a's line crossed the cut"
            assert tcp_state(conn) == ESTABLISHED
            shown = a.run(["ss", "-tnH", "state", "established", "dst", net.gateway]).stdout
            assert f"{net.gateway}:{srv.getsockname()[1]}" in shown, shown
            drops = a.dropped()
            assert drops.inbound > 0 and drops.outbound > 0, drops  # retransmissions, dropped

            a.heal()
            assert recv_line(conn, 30) == b"during\n"
            assert out.next(30) == "got while cut"
            say(proc, "after")
            assert recv_line(conn, 30) == b"after\n"
            assert tcp_state(conn) == ESTABLISHED
        proc.stdin.close()  # type: ignore[union-attr]
        assert proc.wait(10) == 0


def test_a_cut_port_leaves_the_host_serving_and_other_ports_open(net: netns.Net) -> None:
    """Cut from the broker's port only, a process in namespace a still serves a client in the
    root namespace (whose address is the broker's too), and reaches the root's other ports;
    the broker's port gets silence (a timeout, not a refusal). Another host is untouched, and
    reaches a."""
    a, b = net.host("a"), net.host("b")
    with listener(net.gateway) as broker, listener(net.gateway) as other:
        threading.Thread(target=answer_pings, args=(broker,), daemon=True).start()
        threading.Thread(target=answer_pings, args=(other,), daemon=True).start()
        echo = a.popen([PY, "-c", ECHO, a.ip], stdout=subprocess.PIPE, text=True)
        port = int(Lines(echo).next(30))

        def probe(h: netns.Host, p: int) -> str:
            return h.run([PY, "-c", PROBE, net.gateway, str(p), "2"]).stdout.strip()

        assert probe(a, broker.getsockname()[1]) == "ok pong"
        a.cut(net.gateway, port=broker.getsockname()[1])
        assert probe(a, broker.getsockname()[1]) == "TimeoutError"
        assert probe(a, other.getsockname()[1]) == "ok pong"
        assert probe(b, broker.getsockname()[1]) == "ok pong"
        with socket.create_connection((a.ip, port), timeout=10) as c:
            c.sendall(b"served while cut\n")
            assert recv_line(c, 10) == b"served while cut\n"
        # host to host across the bridge (through the root's FORWARD chain: br_netfilter)
        assert b.run([PY, "-c", PROBE, a.ip, str(port), "5"]).stdout.strip() == "ok ping"
        a.heal()
        assert probe(a, broker.getsockname()[1]) == "ok pong"
        echo.kill()
        echo.wait(10)


def answer_pings(srv: socket.socket) -> None:
    """Each connection's first line answered with "pong" (until the listener closes)."""
    while True:
        try:
            c, _ = srv.accept()
        except OSError:
            return
        with c:
            try:
                recv_line(c, 10)
                c.sendall(b"pong\n")
            except (OSError, AssertionError):
                pass


def test_drop_loses_packets_yet_a_transfer_completes(net: netns.Net) -> None:
    """30 % loss both ways (after the handshake, whose retries back off to seconds): packets
    are lost in each direction, and an exchange of lines and a 256 KiB block still arrives
    whole and in order."""
    a = net.host("a")
    with listener(net.gateway) as srv:
        proc, out = peer(a, net.gateway, srv.getsockname()[1])
        conn, _ = srv.accept()
        with conn:
            assert out.next(30) == "connected"
            a.drop(net.gateway, 0.3, port=srv.getsockname()[1])
            t0 = time.monotonic()
            for i in range(20):
                say(proc, f"line {i} " + "x" * 1000)
                line = recv_line(conn, 60)
                assert line == f"line {i} ".encode() + b"x" * 1000 + b"\n"
                conn.sendall(line)
                assert out.next(60) == line.decode().strip().replace("line", "got line", 1)
            say(proc, "blob")
            want, got = bytes(range(256)) * 1024, b""
            conn.settimeout(60)
            while len(got) < len(want):
                more = conn.recv(65536)
                assert more, "EOF in the block"
                got += more
            assert hashlib.sha256(got).digest() == hashlib.sha256(want).digest()
            drops = a.dropped()
            print(f"20 round trips and 256 KiB at 30 % loss: {time.monotonic() - t0:.1f} s, "
                  f"{drops}")
            assert drops.inbound > 0 and drops.outbound > 0, drops
        proc.stdin.close()  # type: ignore[union-attr]
        proc.wait(10)


def test_relay_in_a_namespace_delays_each_chunk_both_ways_in_order(net: netns.Net) -> None:
    """A relay inside namespace a between a root client and a root server: every line reaches
    the server at least N ms after it was sent, and its echo the client at least N ms after the
    server sent it (all on this process's monotonic clock), in order."""
    delay_ms = 150
    a = net.host("a")
    with listener(net.gateway) as srv, \
            Relay((a.ip, 0), (net.gateway, srv.getsockname()[1]), delay_ms,
                  popen=a.popen) as relay:
        client = socket.create_connection((a.ip, relay.port), timeout=10)
        conn, _ = srv.accept()
        arrived: list[tuple[bytes, float]] = []
        echoed: list[tuple[bytes, float]] = []
        returned: list[tuple[bytes, float]] = []

        def server() -> None:
            for _ in range(5):
                line = recv_line(conn, 30)
                arrived.append((line, time.monotonic()))
                echoed.append((line, time.monotonic()))
                conn.sendall(line)

        def reader() -> None:
            for _ in range(5):
                line = recv_line(client, 30)
                returned.append((line, time.monotonic()))

        threads = [threading.Thread(target=f, daemon=True) for f in (server, reader)]
        for t in threads:
            t.start()
        sent = []
        for i in range(5):
            line = f"chunk {i}\n".encode()
            sent.append((line, time.monotonic()))
            client.sendall(line)
            time.sleep(0.05)  # less than the delay: chunks are in flight together
        for t in threads:
            t.join(30)
        client.close()
        conn.close()
        assert [x for x, _ in arrived] == [x for x, _ in sent]
        assert [x for x, _ in returned] == [x for x, _ in sent]
        for (line, t_sent), (_, t_arrived) in zip(sent, arrived, strict=True):
            assert t_arrived - t_sent >= delay_ms / 1000, (line, t_arrived - t_sent)
        for (line, t_echoed), (_, t_back) in zip(echoed, returned, strict=True):
            assert t_back - t_echoed >= delay_ms / 1000, (line, t_back - t_echoed)


def test_relay_jitter_draws_each_delay_anew_and_keeps_order(net: netns.Net) -> None:
    """`--jitter-ms`: 40 lines 20 ms apart through a relay of 80 ± 40 ms, echoed back: they
    come back in order, each way at least 40 ms late, and the round trips spread (a fixed
    delay would give them all within a few ms of 160)."""
    a = net.host("a")
    with listener(net.gateway) as srv, \
            Relay((a.ip, 0), (net.gateway, srv.getsockname()[1]), 80, popen=a.popen,
                  jitter_ms=40, seed=3) as relay:
        client = socket.create_connection((a.ip, relay.port), timeout=10)
        conn, _ = srv.accept()
        n = 40

        def echo() -> None:
            for _ in range(n):
                conn.sendall(recv_line(conn, 30))

        th = threading.Thread(target=echo, daemon=True)
        th.start()
        back: list[tuple[bytes, float]] = []

        def reader() -> None:
            for _ in range(n):
                back.append((recv_line(client, 30), time.monotonic()))

        rd = threading.Thread(target=reader, daemon=True)
        rd.start()
        sent = []
        for i in range(n):
            line = f"line {i}\n".encode()
            sent.append((line, time.monotonic()))
            client.sendall(line)
            time.sleep(0.02)
        rd.join(30)
        th.join(30)
        client.close()
        conn.close()
    assert [x for x, _ in back] == [x for x, _ in sent]
    rtts = [(t_back - t_sent) * 1000 for (_, t_sent), (_, t_back) in zip(sent, back, strict=True)]
    assert min(rtts) >= 80, rtts
    assert max(rtts) - min(rtts) >= 40, rtts


def test_relay_memory_is_bounded_and_sigterm_ends_it_cleanly(tmp_path: Path) -> None:
    """A receiver that stops reading: the relay stops reading too (its queue is bounded), so the
    sender gets stuck after buffers and a few MiB, not after all it has; SIGTERM with the
    connection open ends it with status 0 and closes the client's connection."""
    with listener("127.0.0.1") as srv, \
            Relay(("127.0.0.1", 0), ("127.0.0.1", srv.getsockname()[1]), 10) as relay:
        client = socket.create_connection(("127.0.0.1", relay.port), timeout=10)
        conn, _ = srv.accept()  # never read
        client.setblocking(False)
        sent, block, deadline = 0, b"\0" * 65536, time.monotonic() + 3
        while time.monotonic() < deadline and sent < 512 * 2**20:
            if select.select([], [client], [], 0.2)[1]:
                with contextlib.suppress(BlockingIOError):
                    sent += client.send(block)
        rss = rss_kib(relay.proc.pid)  # type: ignore[union-attr]
        print(f"held by the relay and the sockets' buffers: {sent / 2**20:.1f} MiB, "
              f"relay RSS {rss / 1024:.1f} MiB")
        assert sent < 64 * 2**20, sent
        assert rss < 96 * 1024, rss
        assert relay.stop() == 0
        client.setblocking(True)
        client.settimeout(10)
        # the relay closed it: a reset (it left our bytes unread) or an EOF
        with contextlib.suppress(ConnectionResetError):
            assert client.recv(65536) == b""
        client.close()
        conn.close()


def rss_kib(pid: int) -> int:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1])
    raise AssertionError("no VmRSS")


@pytest.mark.server
def test_the_real_server_runs_in_a_namespace_and_the_root_reaches_it(tmp_path: Path,
                                                                      net: netns.Net) -> None:
    """`yomite serve` inside namespace a, asked from the root over the bridge; a cut of the
    gateway's whole traffic silences it, a heal brings it back on the same process."""
    a = net.host("a")
    config = {"voice": {"engine": "estimate"}, "audio": {"output": "null"}}
    s = Server(tmp_path, config, "netns-operator-token-0123456789abcdef", host=a.ip,
               netns=a.ns)
    assert s.base == f"http://{a.ip}:{s.port}"
    s.start()
    try:
        assert s.proc.pid in pids_in(a)  # type: ignore[union-attr]
        assert httpx2.get(f"{s.base}/api/health", timeout=10).status_code == 200
        a.cut(net.gateway, port=4222)  # another port: nothing changes
        assert httpx2.get(f"{s.base}/api/health", timeout=10).status_code == 200
        a.cut(net.gateway)
        with pytest.raises(httpx2.TimeoutException):
            httpx2.get(f"{s.base}/api/health", timeout=2)
        a.heal()
        assert httpx2.get(f"{s.base}/api/health", timeout=30).status_code == 200
    finally:
        s.stop()


def pids_in(host: netns.Host) -> set[int]:
    out = subprocess.run(["ip", "netns", "pids", host.ns], capture_output=True, text=True,
                         timeout=30, check=True).stdout
    return {int(p) for p in out.split()}


def ours(tag: str) -> list[str]:
    """What of Net `tag` the root namespace still has: namespaces, links, root rules."""
    spaces = [n["name"] for n in json.loads(run(["ip", "-j", "netns", "list"]) or "[]")]
    links = [x["ifname"] for x in json.loads(run(["ip", "-j", "link", "show"]))]
    rules = run(["iptables", "-w", "-S"]).splitlines()
    mine = re.compile(re.escape(tag) + r"(?!\d)")  # not yt1x10 for yt1x1
    return [x for x in spaces + links + rules if mine.search(x)]


def run(args: list[str]) -> str:
    return subprocess.run(args, capture_output=True, text=True, timeout=30, check=True).stdout


def test_exit_removes_everything_even_when_the_test_fails() -> None:
    """A test that fails with processes still running in a namespace and a cut in place: at
    exit the processes are gone and no namespace, veth, bridge or root rule of its Net is left."""
    with pytest.raises(RuntimeError, match="the test failed"), netns.Net() as net:
        tag = net.tag
        a, b, c = net.host("a"), net.host("b"), net.host("c")
        a.cut(net.gateway)
        b.drop(net.gateway, 0.5)
        left = c.popen(["sleep", "600"])
        # started in c without popen (as tests/serverproc.Server does): killed all the same
        stray = subprocess.Popen(c.command(["sleep", "600"]))
        assert len(ours(tag)) == 1 + 3 + 3 + 3  # bridge, veths, namespaces, root rules
        raise RuntimeError("the test failed")
    assert left.poll() is not None
    try:
        assert stray.wait(10) == -9
    finally:
        stray.kill()
        stray.wait(10)
    assert ours(tag) == []


def test_a_new_net_sweeps_what_dead_processes_left_and_nothing_else() -> None:
    """Leftovers named for a dead pid, and for this pid but no open Net (a reused pid), are
    removed when a Net is made; those of a live process stay."""
    gone = subprocess.Popen(["true"])
    gone.wait(10)
    alive = subprocess.Popen(["sleep", "600"])
    dead_tag, live_tag, reused_tag = (f"yt{gone.pid}x0", f"yt{alive.pid}x0",
                                      f"yt{os.getpid()}x9999")
    try:
        for tag in (dead_tag, live_tag, reused_tag):
            run(["ip", "link", "add", f"{tag}b", "type", "bridge"])
            run(["ip", "netns", "add", f"{tag}-a"])
            run(["iptables", "-w", "-A", "INPUT", "-i", f"{tag}b", "-m", "comment",
                 "--comment", tag, "-j", "ACCEPT"])
        with netns.Net():
            pass
        assert ours(dead_tag) == []
        assert ours(reused_tag) == []
        assert len(ours(live_tag)) == 3
    finally:
        alive.kill()
        alive.wait(10)
        with netns.Net():  # now dead: swept
            pass
    assert ours(live_tag) == []


def test_without_root_or_tools_it_fails_naming_the_setup(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(os, "geteuid", lambda: 1000)
    with pytest.raises(pytest.fail.Exception, match=r"scripts/system-deps\.sh test"):
        netns.Net()
    monkeypatch.undo()
    monkeypatch.setattr(netns, "_tool", lambda name: None if name == "iptables" else "/x")
    with pytest.raises(pytest.fail.Exception, match=r"scripts/system-deps\.sh test"):
        netns.Net()
