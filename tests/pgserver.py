"""A real PostgreSQL server for the cluster's desk tests: Debian's PostgreSQL (`initdb`,
`postgres`) on a free loopback port, its data in a folder of its own, no Unix socket; as the
`postgres` user when the tests run as root (the server refuses root)."""

import os
import pwd
import shutil
import signal
import socket
import subprocess
import tempfile
import time
from glob import glob
from pathlib import Path
from typing import Any

import pytest

from tests import procstop
from tests.serverproc import free_port


def _bin(name: str) -> str | None:
    found = sorted(glob(f"/usr/lib/postgresql/*/bin/{name}"),
                   key=lambda p: int(Path(p).parts[4]) if Path(p).parts[4].isdigit() else 0)
    return found[-1] if found else shutil.which(name)


def require_postgres() -> tuple[str, str]:
    initdb, postgres = _bin("initdb"), _bin("postgres")
    if initdb is None or postgres is None:
        pytest.fail("PostgreSQL is not installed: scripts/system-deps.sh test installs it "
                    "(Debian's postgresql)")
    return initdb, postgres


class Postgres:
    """`url`: SQLAlchemy's URL of the database `yomite` (psycopg 3), user `yomite`, trusted
    on loopback."""

    def __init__(self) -> None:
        self.initdb, self.postgres = require_postgres()
        self.as_user: str | None = None
        if os.geteuid() == 0:
            self.as_user = "postgres"
        # not under pytest's tmp folder: root's is closed to the postgres user
        self.dir = Path(tempfile.mkdtemp(prefix="yomite-pg-"))
        self.data = self.dir / "data"
        self.log_path = self.dir / "postgres.log"
        self.port = free_port()
        self.url = f"postgresql+psycopg://yomite@127.0.0.1:{self.port}/yomite"
        self.proc: subprocess.Popen[bytes] | None = None
        if self.as_user is not None:
            pw = pwd.getpwnam(self.as_user)
            os.chown(self.dir, pw.pw_uid, pw.pw_gid)
        os.chmod(self.dir, 0o700)

    def _run(self, args: list[str], **kw: Any) -> subprocess.CompletedProcess[bytes]:
        return subprocess.run(args, user=self.as_user, check=True, capture_output=True,
                              timeout=120, **kw)

    def start(self, timeout: float = 60.0) -> "Postgres":
        if not self.data.exists():
            self._run([self.initdb, "-D", str(self.data), "-U", "yomite", "--auth=trust",
                       "-E", "UTF8", "--locale=C", "--no-sync"])
        with open(self.log_path, "ab") as log:
            if self.as_user is not None:
                os.chown(self.log_path, pwd.getpwnam(self.as_user).pw_uid, -1)
            self.proc = subprocess.Popen(
                [self.postgres, "-D", str(self.data), "-p", str(self.port),
                 "-c", "listen_addresses=127.0.0.1", "-c", "unix_socket_directories=",
                 "-c", "max_connections=50"],
                user=self.as_user, stdout=log, stderr=subprocess.STDOUT)
        deadline = time.monotonic() + timeout
        while True:
            if self.proc.poll() is not None:
                raise RuntimeError(f"postgres exited: {self.log()[-2000:]}")
            if self._ready():
                break
            if time.monotonic() > deadline:
                raise RuntimeError(f"postgres did not accept connections: {self.log()[-2000:]}")
            time.sleep(0.1)
        self._create_database()
        return self

    def _ready(self) -> bool:
        try:
            with socket.create_connection(("127.0.0.1", self.port), timeout=0.5):
                pass
        except OSError:
            return False
        import psycopg

        try:
            with psycopg.connect(host="127.0.0.1", port=self.port, user="yomite",
                                 dbname="postgres", connect_timeout=2):
                return True
        except psycopg.OperationalError:  # starting up
            return False

    def _create_database(self) -> None:
        import psycopg

        with psycopg.connect(host="127.0.0.1", port=self.port, user="yomite",
                             dbname="postgres", autocommit=True) as c:
            if not c.execute("SELECT 1 FROM pg_database WHERE datname = 'yomite'").fetchone():
                c.execute("CREATE DATABASE yomite")

    def kill(self) -> None:
        procstop.kill(self.proc)

    def stop(self) -> None:
        # SIGTERM's smart shutdown waits for every client to leave: SIGINT's fast one not
        procstop.stop(self.proc, signal.SIGINT, 15)
        shutil.rmtree(self.dir, ignore_errors=True)

    def log(self) -> str:
        try:
            return self.log_path.read_text("utf-8", errors="replace")
        except OSError:
            return ""
