"""A real NATS server with JetStream for the cluster's tests: Debian's `nats-server` on a free
loopback port, its store in a tmp folder; killed with SIGKILL and started again on the same
port and store (a broker restart)."""

import shutil
import signal
import socket
import subprocess
import time
from pathlib import Path
from typing import Any

import pytest

from tests import procstop
from tests.serverproc import free_port

NATS_SERVER = shutil.which("nats-server") or "/usr/bin/nats-server"


def require_nats() -> None:
    if not Path(NATS_SERVER).exists():
        pytest.fail("nats-server is not installed: scripts/system-deps.sh test installs it "
                    "(Debian's nats-server)")


class Broker:
    def __init__(self, tmp: Path) -> None:
        require_nats()
        self.tmp = tmp
        self.port = free_port()
        self.url = f"nats://127.0.0.1:{self.port}"
        self.store = tmp / "jetstream"
        self.log_path = tmp / "nats.log"
        self.proc: subprocess.Popen[bytes] | None = None

    def start(self, timeout: float = 20.0) -> "Broker":
        with open(self.log_path, "ab") as log:
            self.proc = subprocess.Popen(
                [NATS_SERVER, "-js", "-a", "127.0.0.1", "-p", str(self.port),
                 "-sd", str(self.store)], stdout=log, stderr=subprocess.STDOUT)
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                raise RuntimeError(f"nats-server exited: {self.log()[-2000:]}")
            try:
                with socket.create_connection(("127.0.0.1", self.port), timeout=0.5) as s:
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
