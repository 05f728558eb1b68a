"""A real NATS server with JetStream for the cluster's tests: Debian's `nats-server` on a free
loopback port, its store in a tmp folder; killed with SIGKILL and started again on the same
port and store (a broker restart).

By default the broker runs the accounts docs/nats/accounts.conf ships for an association (its
very text, the passwords defined before it): no client gets in without credentials, yomite's
processes sign in as `yomite` (`url` carries the user and password, for a test's own client;
`cluster_config` gives a process's `cluster.user` and `cluster.password_file`), and `other` is
a stranger of another account on the same broker (`stranger_url`). `anonymous=True` is the
broker docs/cluster.md used to start: anyone who reaches it is in, with yomite's rights. `tls`
(tests/tlsfiles.py's `Tls`) serves TLS with that certificate.
"""

import secrets
import shutil
import signal
import socket
import subprocess
import time
from pathlib import Path
from typing import Any

import pytest

from tests import procstop
from tests.serverproc import ROOT, free_port

NATS_SERVER = shutil.which("nats-server") or "/usr/bin/nats-server"
ACCOUNTS = ROOT / "docs" / "nats" / "accounts.conf"
YOMITE_USER = "yomite"
OTHER_USER = "other"


def require_nats() -> None:
    if not Path(NATS_SERVER).exists():
        pytest.fail("nats-server is not installed: scripts/system-deps.sh test installs it "
                    "(Debian's nats-server)")


def accounts_conf(yomite_password: str, other_password: str) -> str:
    """docs/nats/accounts.conf as a broker's config runs it, its passwords defined first (a
    node's config of a broker cluster takes the same text)."""
    return (f'YOMITE_BUS_PASSWORD: "{yomite_password}"\n'
            f'OTHER_BUS_PASSWORD: "{other_password}"\n'
            f"{ACCOUNTS.read_text('utf-8')}\n")


class Broker:
    def __init__(self, tmp: Path, *, anonymous: bool = False, tls: Any = None,
                 host: str = "127.0.0.1") -> None:
        """`host`: the address it listens on (a network namespaces' gateway: tests/netns)."""
        require_nats()
        self.tmp = tmp
        self.host = host
        self.anonymous = anonymous
        self.tls = tls
        self.port = free_port()
        scheme = "tls" if tls is not None else "nats"
        self.address = f"{scheme}://{host}:{self.port}"  # the broker, no one named
        self.password = secrets.token_hex(16)
        self.other_password = secrets.token_hex(16)
        self.url = (self.address if anonymous else
                    f"{scheme}://{YOMITE_USER}:{self.password}@{host}:{self.port}")
        self.stranger_url = f"{scheme}://{OTHER_USER}:{self.other_password}@{host}:{self.port}"
        self.store = tmp / "jetstream"
        self.conf_path = tmp / "nats.conf"
        self.log_path = tmp / "nats.log"
        self.proc: subprocess.Popen[bytes] | None = None

    def config(self) -> str:
        out = f"listen: {self.host}:{self.port}\njetstream {{ store_dir: \"{self.store}\" }}\n"
        if self.tls is not None:
            out += (f'tls {{ cert_file: "{self.tls.cert}", key_file: "{self.tls.key}" }}\n')
        if not self.anonymous:
            out += accounts_conf(self.password, self.other_password)
        return out

    def cluster_config(self) -> dict[str, Any]:
        """A yomite process's `cluster` keys to sign in as yomite (none: an open broker); the
        password in a file of the broker's tmp folder."""
        if self.anonymous:
            return {}
        self.tmp.mkdir(parents=True, exist_ok=True)
        path = self.tmp / "yomite-password"
        path.write_text(self.password + "\n", "utf-8")
        path.chmod(0o600)
        out: dict[str, Any] = {"user": YOMITE_USER, "password_file": str(path)}
        if self.tls is not None:
            out["tls_ca"] = str(self.tls.ca)
        return out

    def start(self, timeout: float = 20.0) -> "Broker":
        self.tmp.mkdir(parents=True, exist_ok=True)
        self.conf_path.write_text(self.config(), "utf-8")
        with open(self.log_path, "ab") as log:
            self.proc = subprocess.Popen([NATS_SERVER, "-c", str(self.conf_path)],
                                         stdout=log, stderr=subprocess.STDOUT)
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                raise RuntimeError(f"nats-server exited: {self.log()[-2000:]}")
            try:
                with socket.create_connection((self.host, self.port), timeout=0.5) as s:
                    if s.recv(4).startswith(b"INFO"):
                        return self
            except OSError:
                time.sleep(0.05)
        raise RuntimeError(f"nats-server did not listen: {self.log()[-2000:]}")

    def kill(self) -> None:
        procstop.kill(self.proc)

    def stop(self) -> None:
        procstop.stop(self.proc, signal.SIGTERM, 10)

    def log(self) -> str:
        return self.log_path.read_text("utf-8", errors="replace")

    def __enter__(self) -> "Broker":
        return self.start()

    def __exit__(self, *_exc: Any) -> None:
        self.stop()
