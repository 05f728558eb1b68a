"""Three real NATS servers with JetStream joined in one cluster, for the tests that kill a
broker node: Debian's `nats-server`, each node on its own client, route and monitoring ports on
loopback, with its own store folder. A node is killed with SIGKILL and started again on the same
ports and store (it rejoins and catches up); the monitoring endpoint (`http`) tells which node
leads a stream (`/jsz`) and which node a named client is connected to (`/connz`).

Each node runs the very text docs/nats/node-1.conf... ship for an association (read here, as
tests/natsbroker.py reads accounts.conf), its addresses, ports and files replaced by the test's:
clients over TLS (tests/tlsfiles.py's certificate), routes between the nodes over TLS with a
certificate of the cluster's own CA checked both ways, and the accounts of
docs/nats/accounts.conf (no client without credentials; yomite's processes sign in as
`yomite`). `BrokerCluster` answers as tests/natsbroker.py's `Broker` does (`address`,
`cluster_config`), so tests/clusterprocs.py's `Cluster` runs on it unchanged.
"""

import asyncio
import datetime
import json
import re
import secrets
import signal
import socket
import ssl
import subprocess
import time
import urllib.error
import urllib.request
from dataclasses import dataclass
from ipaddress import ip_address
from pathlib import Path
from typing import Any

from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import ExtendedKeyUsageOID, NameOID

from tests import procstop, tlsfiles
from tests.natsbroker import NATS_SERVER, YOMITE_USER, accounts_conf, require_nats
from tests.serverproc import ROOT, free_port

DOCS = ROOT / "docs" / "nats"
NODES = 3


@dataclass(frozen=True)
class RouteTls:
    """The cluster's own CA and the nodes' route certificate (for 127.0.0.1, usable as server
    and as client: a node accepts routes and opens them)."""

    ca: Path
    cert: Path
    key: Path


def route_tls(folder: Path) -> RouteTls:
    folder.mkdir(parents=True, exist_ok=True)
    now = datetime.datetime.now(datetime.UTC)

    def name(cn: str) -> x509.Name:
        return x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, cn)])

    ca_key = ec.generate_private_key(ec.SECP256R1())
    ca = (x509.CertificateBuilder().subject_name(name("yomite test routes CA"))
          .issuer_name(name("yomite test routes CA")).public_key(ca_key.public_key())
          .serial_number(x509.random_serial_number())
          .not_valid_before(now - datetime.timedelta(hours=1))
          .not_valid_after(now + datetime.timedelta(days=1))
          .add_extension(x509.BasicConstraints(ca=True, path_length=None), critical=True)
          .sign(ca_key, hashes.SHA256()))
    key = ec.generate_private_key(ec.SECP256R1())
    cert = (x509.CertificateBuilder().subject_name(name("127.0.0.1")).issuer_name(ca.subject)
            .public_key(key.public_key()).serial_number(x509.random_serial_number())
            .not_valid_before(now - datetime.timedelta(hours=1))
            .not_valid_after(now + datetime.timedelta(days=1))
            .add_extension(x509.SubjectAlternativeName([x509.IPAddress(ip_address("127.0.0.1"))]),
                           critical=False)
            .add_extension(x509.ExtendedKeyUsage([ExtendedKeyUsageOID.SERVER_AUTH,
                                                  ExtendedKeyUsageOID.CLIENT_AUTH]),
                           critical=False)
            .sign(ca_key, hashes.SHA256()))
    out = RouteTls(folder / "route-ca.pem", folder / "route-cert.pem", folder / "route-key.pem")
    out.ca.write_bytes(ca.public_bytes(serialization.Encoding.PEM))
    out.cert.write_bytes(cert.public_bytes(serialization.Encoding.PEM))
    out.key.write_bytes(key.private_bytes(serialization.Encoding.PEM,
                                          serialization.PrivateFormat.PKCS8,
                                          serialization.NoEncryption()))
    out.key.chmod(0o600)
    return out


class Node:
    """One nats-server of the cluster (`broker-1`.., its docs file's server_name)."""

    def __init__(self, tmp: Path, i: int) -> None:
        self.tmp = tmp
        self.i = i
        self.name = f"broker-{i}"
        self.port = free_port()
        self.route_port = free_port()
        self.http_port = free_port()
        self.url = f"tls://127.0.0.1:{self.port}"
        self.store = tmp / "jetstream"
        self.conf_path = tmp / "nats.conf"
        self.log_path = tmp / "nats.log"
        self.proc: subprocess.Popen[bytes] | None = None
        self.frozen = False

    def start(self, config: str, timeout: float = 20.0) -> "Node":
        self.frozen = False
        self.tmp.mkdir(parents=True, exist_ok=True)
        self.conf_path.write_text(config, "utf-8")
        with open(self.log_path, "ab") as log:
            self.proc = subprocess.Popen([NATS_SERVER, "-c", str(self.conf_path)],
                                         stdout=log, stderr=subprocess.STDOUT)
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                raise RuntimeError(f"nats-server {self.name} exited: {self.log()[-2000:]}")
            try:
                with socket.create_connection(("127.0.0.1", self.port), timeout=0.5) as s:
                    if s.recv(4).startswith(b"INFO"):
                        return self
            except OSError:
                time.sleep(0.05)
        raise RuntimeError(f"nats-server {self.name} did not listen: {self.log()[-2000:]}")

    @property
    def alive(self) -> bool:
        """Running, and not frozen (a frozen node answers nothing, its monitoring included)."""
        return self.proc is not None and self.proc.poll() is None and not self.frozen

    def kill(self) -> None:
        procstop.kill(self.proc)
        self.frozen = False

    def freeze(self) -> None:
        """SIGSTOP: the node's machine gone without a word (a power cut, a cable): its
        connections stay open and nothing answers on them. `kill` ends it."""
        assert self.proc is not None
        self.proc.send_signal(signal.SIGSTOP)
        self.frozen = True

    def stop(self) -> None:
        procstop.stop(self.proc, signal.SIGTERM, 10)

    def monitor(self, path: str) -> dict[str, Any]:
        """One of the monitoring endpoint's JSON documents (`/jsz?...`, `/connz?...`)."""
        with urllib.request.urlopen(f"http://127.0.0.1:{self.http_port}{path}",
                                    timeout=5) as r:
            out: dict[str, Any] = json.loads(r.read())
            return out

    def log(self) -> str:
        return self.log_path.read_text("utf-8", errors="replace")


MONITOR_ERRORS = (OSError, urllib.error.URLError, ValueError)


class BrokerCluster:
    """Three nodes (`broker-1`..`broker-3`). `address` names them all, comma-separated, with no
    one's credentials (a process's `cluster.bus`); `url` is one live node's with yomite's user
    (a test's own client, with `client_tls`); `cluster_config` a process's `cluster` keys to
    sign in (and 3 replicas)."""

    def __init__(self, tmp: Path) -> None:
        require_nats()
        self.tmp = tmp
        self.anonymous = False
        self.password = secrets.token_hex(16)
        self.other_password = secrets.token_hex(16)
        self.tls = tlsfiles.make(tmp / "tls")
        self.routes = route_tls(tmp / "routes")
        self.nodes = [Node(tmp / f"broker-{i}", i) for i in range(1, NODES + 1)]
        self.address = ",".join(node.url for node in self.nodes)

    def config(self, node: Node) -> str:
        """docs/nats/node-<i>.conf, on this test's ports, folders and certificates."""
        text = (DOCS / f"node-{node.i}.conf").read_text("utf-8")
        text = "\n".join(line for line in text.splitlines() if not line.lstrip().startswith("#"))
        swaps = {"0.0.0.0:4222": f"127.0.0.1:{node.port}",
                 "127.0.0.1:8222": f"127.0.0.1:{node.http_port}",
                 "0.0.0.0:6222": f"127.0.0.1:{node.route_port}",
                 '"/var/lib/nats"': f'"{node.store}"',
                 "/etc/nats/broker-cert.pem": str(self.tls.cert),
                 "/etc/nats/broker-key.pem": str(self.tls.key),
                 "/etc/nats/route-cert.pem": str(self.routes.cert),
                 "/etc/nats/route-key.pem": str(self.routes.key),
                 "/etc/nats/route-ca.pem": str(self.routes.ca),
                 'include "accounts.conf"': accounts_conf(self.password, self.other_password)}
        swaps.update({f"broker-{o.i}.example.lan:6222": f"127.0.0.1:{o.route_port}"
                      for o in self.nodes})
        swaps[f"broker-{node.i}.example.lan:4222"] = f"127.0.0.1:{node.port}"
        for old, new in swaps.items():
            if old not in text:
                raise AssertionError(f"docs/nats/node-{node.i}.conf no longer has {old!r}: "
                                     "tests/natscluster.py follows it")
            text = text.replace(old, new)
        left = re.findall(r"example\.lan|/etc/nats|0\.0\.0\.0", text)
        assert not left, f"docs/nats/node-{node.i}.conf: {left} not replaced for the test"
        return text

    def start(self, timeout: float = 60.0) -> "BrokerCluster":
        for node in self.nodes:
            node.start(self.config(node))
        self.wait_meta(timeout)
        return self

    def stop(self) -> None:
        for node in self.nodes:
            node.stop()

    def restart(self, node: Node) -> None:
        """Start a killed node again, on its ports and store."""
        node.start(self.config(node))

    @property
    def url(self) -> str:
        """A live node's URL with yomite's user (a test's own client: `client_tls`)."""
        node = self.live()[0]
        return f"tls://{YOMITE_USER}:{self.password}@127.0.0.1:{node.port}"

    def client_tls(self) -> ssl.SSLContext:
        return ssl.create_default_context(cafile=str(self.tls.ca))

    def cluster_config(self) -> dict[str, Any]:
        """A yomite process's `cluster` keys: three copies of everything, yomite's user (the
        password in a file of the cluster's tmp folder) and the CA of the nodes' certificate."""
        path = self.tmp / "yomite-password"
        path.write_text(self.password + "\n", "utf-8")
        path.chmod(0o600)
        return {"replicas": 3, "user": YOMITE_USER, "password_file": str(path),
                "tls_ca": str(self.tls.ca)}

    def node(self, name: str) -> Node:
        return next(n for n in self.nodes if n.name == name)

    def live(self) -> list[Node]:
        return [n for n in self.nodes if n.alive]

    def wait_meta(self, timeout: float = 60.0) -> str:
        """Wait until every live node is healthy (`/healthz`) and knows the same JetStream meta
        leader of all the nodes (the cluster can make streams); its name."""
        deadline = time.monotonic() + timeout
        while True:
            leaders = set()
            for node in self.live():
                try:
                    meta = node.monitor("/jsz").get("meta_cluster") or {}
                    healthy = node.monitor("/healthz").get("status") == "ok"
                except MONITOR_ERRORS:
                    meta, healthy = {}, False
                whole = meta.get("cluster_size") == len(self.nodes)
                leaders.add(meta.get("leader") if healthy and whole else None)
            if len(leaders) == 1 and None not in leaders and "" not in leaders:
                leader: str = leaders.pop()
                return leader
            if time.monotonic() > deadline:
                raise AssertionError(f"no JetStream meta leader in {timeout:.0f} s: {leaders}")
            time.sleep(0.1)

    def stream(self, name: str) -> dict[str, Any] | None:
        """A stream's detail as its leader's `/jsz` gives it (its `cluster`: `leader`, and the
        other `replicas` with `current` and `lag`, as only the leader knows them), or None
        while no live node leads it."""
        for node in self.live():
            try:
                jsz = node.monitor("/jsz?accounts=true&streams=true&config=true")
            except MONITOR_ERRORS:
                continue
            for acc in jsz.get("account_details") or []:
                for st in acc.get("stream_detail") or []:
                    if st.get("name") == name and \
                            (st.get("cluster") or {}).get("leader") == node.name:
                        out: dict[str, Any] = st
                        return out
        return None

    def leader_of(self, stream: str, timeout: float = 30.0) -> Node:
        """The node that leads `stream` (the leases bucket's is `KV_<prefix>_leases`, the
        journal's `<PREFIX>_JOURNAL`), waiting until a live one does."""
        deadline = time.monotonic() + timeout
        while True:
            st = self.stream(stream)
            if st is not None:
                return self.node(st["cluster"]["leader"])
            if time.monotonic() > deadline:
                raise AssertionError(f"no leader of {stream} in {timeout:.0f} s")
            time.sleep(0.1)

    def replicas_of(self, stream: str) -> int:
        """How many nodes keep `stream` (its config's `num_replicas`, once it has a leader)."""
        self.leader_of(stream)
        st = self.stream(stream)
        assert st is not None, f"no stream {stream}"
        return int(st["config"]["num_replicas"])

    def node_of_client(self, client: str) -> Node | None:
        """The live node a connection named `client` is connected to (nats.connect's `name`)."""
        for node in self.live():
            try:
                conns = node.monitor("/connz?limit=1024").get("connections") or []
            except MONITOR_ERRORS:
                continue
            if any(c.get("name") == client for c in conns):
                return node
        return None

    def caught_up(self, node: Node, streams: list[str], timeout: float = 60.0) -> None:
        """Wait until `node` holds a current replica of each of `streams` (after a restart)."""
        deadline = time.monotonic() + timeout
        while True:
            behind = []
            for name in streams:
                cl = (self.stream(name) or {}).get("cluster") or {}
                if cl.get("leader") == node.name:
                    continue
                rep = next((r for r in cl.get("replicas") or [] if r.get("name") == node.name),
                           None)
                if rep is None or not rep.get("current"):
                    behind.append(name)
            if not behind:
                return
            if time.monotonic() > deadline:
                raise AssertionError(f"{node.name} not caught up in {timeout:.0f} s: {behind}")
            time.sleep(0.2)

    def journal_lines(self, prefix: str, ch: str) -> list[dict[str, Any]]:
        """Every line the journal stream holds for the channel (tests/clusterprocs.py's
        `journal_lines`, over TLS)."""
        import nats

        from cluster.seal import Sealer, is_sealed
        from tests.clusterprocs import KEY

        sealer = Sealer([bytes.fromhex(KEY)], "tests/clusterprocs.KEY")
        subject = f"{prefix}.journal.{ch}"

        async def read() -> list[dict[str, Any]]:
            nc = await nats.connect(self.url, tls=self.client_tls())
            try:
                sub = await nc.jetstream().pull_subscribe(subject,
                                                          stream=f"{prefix.upper()}_JOURNAL")
                out: list[dict[str, Any]] = []
                for _ in range(10_000):
                    try:
                        msgs = await sub.fetch(200, timeout=2)
                    except Exception:  # nats' TimeoutError: none left
                        break
                    for m in msgs:
                        data = sealer.open(subject, m.data) if is_sealed(m.data) else m.data
                        out.append(json.loads(data)["line"])
                        await m.ack()
                return out
            finally:
                await nc.close()

        return asyncio.run(read())

    def __enter__(self) -> "BrokerCluster":
        return self.start()

    def __exit__(self, *_exc: Any) -> None:
        self.stop()
