"""A real PostgreSQL server for the cluster's desk tests, set up as an association would: Debian's
PostgreSQL (`initdb`, `postgres`) on a free loopback port, its data in a folder of its own, no
Unix socket; as the `postgres` user when the tests run as root (the server refuses root).

TLS only (`ssl=on`, pg_hba.conf has `hostssl` lines and nothing else), with a certificate
authority made by the test and the server's certificate for 127.0.0.1; scram-sha-256 passwords
for every role (no trust). The desk connects as `yomite`, the owner of the database `yomite`
(not a superuser), with `sslmode=verify-full` against the test's CA and its password in a libpq
password file (`passfile`), so `url` holds no password. `pause()` stops every process of the
instance (SIGSTOP: connections stay open and nothing answers, as a hung or cut-off server) and
`resume()` lets them go on; `cut()` makes every packet to or from its port vanish (iptables DROP
on loopback, both ways: a partition, no RST, no ICMP) and `heal()` takes the rules away."""

import contextlib
import datetime
import ipaddress
import os
import pwd
import secrets
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


def make_certificates(folder: Path) -> tuple[Path, Path, Path]:
    """A certificate authority of the test's own and the server's key and certificate (for
    127.0.0.1 and localhost) signed by it: (ca.crt, server.crt, server.key)."""
    from cryptography import x509
    from cryptography.hazmat.primitives import hashes, serialization
    from cryptography.hazmat.primitives.asymmetric import ec
    from cryptography.x509.oid import NameOID

    now = datetime.datetime.now(datetime.UTC)
    ca_key = ec.generate_private_key(ec.SECP256R1())
    ca_name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, "yomite tests CA")])
    ca = (x509.CertificateBuilder().subject_name(ca_name).issuer_name(ca_name)
          .public_key(ca_key.public_key()).serial_number(x509.random_serial_number())
          .not_valid_before(now - datetime.timedelta(hours=1))
          .not_valid_after(now + datetime.timedelta(days=2))
          .add_extension(x509.BasicConstraints(ca=True, path_length=None), critical=True)
          .add_extension(x509.KeyUsage(digital_signature=True, key_cert_sign=True,
                                       crl_sign=True, content_commitment=False,
                                       key_encipherment=False, data_encipherment=False,
                                       key_agreement=False, encipher_only=False,
                                       decipher_only=False), critical=True)
          .sign(ca_key, hashes.SHA256()))
    key = ec.generate_private_key(ec.SECP256R1())
    cert = (x509.CertificateBuilder()
            .subject_name(x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, "127.0.0.1")]))
            .issuer_name(ca_name).public_key(key.public_key())
            .serial_number(x509.random_serial_number())
            .not_valid_before(now - datetime.timedelta(hours=1))
            .not_valid_after(now + datetime.timedelta(days=2))
            .add_extension(x509.SubjectAlternativeName([
                x509.IPAddress(ipaddress.ip_address("127.0.0.1")), x509.DNSName("localhost")]),
                critical=False)
            .add_extension(x509.ExtendedKeyUsage([x509.oid.ExtendedKeyUsageOID.SERVER_AUTH]),
                           critical=False)
            .sign(ca_key, hashes.SHA256()))
    paths = folder / "ca.crt", folder / "server.crt", folder / "server.key"
    paths[0].write_bytes(ca.public_bytes(serialization.Encoding.PEM))
    paths[1].write_bytes(cert.public_bytes(serialization.Encoding.PEM))
    paths[2].write_bytes(key.private_bytes(serialization.Encoding.PEM,
                                           serialization.PrivateFormat.PKCS8,
                                           serialization.NoEncryption()))
    paths[2].chmod(0o600)  # the server refuses a key others can read
    return paths


class Postgres:
    """`url`: SQLAlchemy's URL of the database `yomite` (psycopg 3) as the role `yomite`, over
    TLS checked against `ca` (`sslmode=verify-full`), its password in `passfile`.
    `url_with_password`: the same with the password in the URL (and no password file).
    `password`: the role's."""

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
        self.password = secrets.token_urlsafe(18)
        self._admin_password = secrets.token_urlsafe(18)
        self.tls = self.dir / "tls"
        self.ca = self.tls / "ca.crt"
        self.passfile = self.dir / "pgpass"
        tls = f"sslmode=verify-full&sslrootcert={self.ca}"
        where = f"127.0.0.1:{self.port}/yomite"
        self.url = f"postgresql+psycopg://yomite@{where}?{tls}&passfile={self.passfile}"
        self.url_with_password = f"postgresql+psycopg://yomite:{self.password}@{where}?{tls}"
        self.url_without_tls = (f"postgresql+psycopg://yomite:{self.password}@{where}"
                                "?sslmode=disable")
        self.proc: subprocess.Popen[bytes] | None = None
        self._paused: list[int] = []
        self._cut = False
        if self.as_user is not None:
            pw = pwd.getpwnam(self.as_user)
            os.chown(self.dir, pw.pw_uid, pw.pw_gid)
        os.chmod(self.dir, 0o700)

    def _run(self, args: list[str], **kw: Any) -> subprocess.CompletedProcess[bytes]:
        return subprocess.run(args, user=self.as_user, check=True, capture_output=True,
                              timeout=120, **kw)

    def _give(self, path: Path) -> None:
        """`path` to the server's user (its key, its password file for initdb)."""
        if self.as_user is not None:
            pw = pwd.getpwnam(self.as_user)
            os.chown(path, pw.pw_uid, pw.pw_gid)

    def start(self, timeout: float = 60.0) -> "Postgres":
        if not self.data.exists():
            self._init()
        with open(self.log_path, "ab") as log:
            self._give(self.log_path)
            self.proc = subprocess.Popen(
                [self.postgres, "-D", str(self.data), "-p", str(self.port),
                 "-c", "listen_addresses=127.0.0.1", "-c", "unix_socket_directories=",
                 "-c", "max_connections=50", "-c", "ssl=on",
                 "-c", f"ssl_cert_file={self.tls / 'server.crt'}",
                 "-c", f"ssl_key_file={self.tls / 'server.key'}",
                 "-c", "password_encryption=scram-sha-256"],
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

    def _init(self) -> None:
        self.tls.mkdir()
        for p in (self.tls, *make_certificates(self.tls)):
            self._give(p)
        pwfile = self.dir / "initdb.pw"
        pwfile.write_text(self._admin_password + "\n", "utf-8")
        self._give(pwfile)
        try:
            self._run([self.initdb, "-D", str(self.data), "-U", "postgres",
                       "--auth=scram-sha-256", f"--pwfile={pwfile}", "-E", "UTF8",
                       "--locale=C", "--no-sync"])
        finally:
            pwfile.unlink()
        # TLS and a password, or nothing: no `host` line (unencrypted), no trust
        (self.data / "pg_hba.conf").write_text(
            "hostssl all all 127.0.0.1/32 scram-sha-256\n", "utf-8")
        # libpq reads a password file only if no one else can (0600)
        self.passfile.write_text(f"127.0.0.1:{self.port}:yomite:yomite:{self.password}\n",
                                 "utf-8")
        self.passfile.chmod(0o600)

    def _admin(self, dbname: str = "postgres", **kw: Any) -> Any:
        import psycopg

        return psycopg.connect(host="127.0.0.1", port=self.port, user="postgres",
                               password=self._admin_password, dbname=dbname,
                               sslmode="verify-full", sslrootcert=str(self.ca), **kw)

    def _ready(self) -> bool:
        try:
            with socket.create_connection(("127.0.0.1", self.port), timeout=0.5):
                pass
        except OSError:
            return False
        import psycopg

        try:
            with self._admin(connect_timeout=2):
                return True
        except psycopg.OperationalError:  # starting up
            return False

    def _create_database(self) -> None:
        from psycopg import sql

        with self._admin(autocommit=True) as c:
            if not c.execute("SELECT 1 FROM pg_roles WHERE rolname = 'yomite'").fetchone():
                c.execute(sql.SQL("CREATE ROLE yomite LOGIN PASSWORD {}")
                          .format(sql.Literal(self.password)))
            if not c.execute("SELECT 1 FROM pg_database WHERE datname = 'yomite'").fetchone():
                c.execute("CREATE DATABASE yomite OWNER yomite")

    def execute(self, sql: str) -> None:
        """`sql` in the database `yomite` as the superuser (what a test does to the server)."""
        with self._admin("yomite", autocommit=True) as c:
            c.execute(sql)

    # ------------------------------------------------------------------ outages
    def pids(self) -> list[int]:
        """The postmaster and every process it started (the backends, the writers)."""
        if self.proc is None or self.proc.poll() is not None:
            return []
        children: dict[int, list[int]] = {}
        for stat in glob("/proc/[0-9]*/stat"):
            try:
                text = Path(stat).read_text()
            except OSError:  # gone meanwhile
                continue
            fields = text[text.rindex(")") + 2:].split()
            children.setdefault(int(fields[1]), []).append(int(text.split(" ", 1)[0]))
        out, todo = [], [self.proc.pid]
        while todo:
            pid = todo.pop()
            out.append(pid)
            todo.extend(children.get(pid, []))
        return out

    def pause(self) -> None:
        """Every process of the instance stopped (SIGSTOP): its connections stay open, its port
        still completes a TCP handshake in the kernel, and nothing answers. The postmaster
        first (it starts no backend after), then its children, looked for again until none is
        new (bounded: a stopped postmaster starts none)."""
        assert self.proc is not None
        for _ in range(10):
            new = [p for p in self.pids() if p not in self._paused]
            if not new:
                return
            for pid in new:
                try:
                    os.kill(pid, signal.SIGSTOP)
                except ProcessLookupError:
                    continue
                self._paused.append(pid)
        raise AssertionError(f"postgres kept starting processes: {self._paused}")

    def resume(self) -> None:
        for pid in reversed(self._paused):
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signal.SIGCONT)
        self._paused = []

    def _rules(self) -> list[list[str]]:
        tag = ["-m", "comment", "--comment", f"yomite-tests-pg-{self.port}"]
        return [["INPUT", "-i", "lo", "-p", "tcp", "--dport", str(self.port), "-j", "DROP", *tag],
                ["INPUT", "-i", "lo", "-p", "tcp", "--sport", str(self.port), "-j", "DROP", *tag]]

    def cut(self) -> None:
        """Every packet to or from the server's port dropped (its connections and new ones)."""
        iptables = shutil.which("iptables")
        if iptables is None or os.geteuid() != 0:
            pytest.fail("a partition needs root and iptables: scripts/system-deps.sh test "
                        "installs it")
        for rule in self._rules():
            subprocess.run([iptables, "-I", *rule], check=True, capture_output=True, timeout=30)
        self._cut = True

    def heal(self) -> None:
        if not self._cut:
            return
        iptables = shutil.which("iptables") or "iptables"
        for rule in self._rules():
            subprocess.run([iptables, "-D", *rule], capture_output=True, timeout=30)
        self._cut = False

    def kill(self) -> None:
        self.heal()
        self.resume()
        procstop.kill(self.proc)

    def stop(self) -> None:
        self.heal()
        self.resume()
        # SIGTERM's smart shutdown waits for every client to leave: SIGINT's fast one not
        procstop.stop(self.proc, signal.SIGINT, 15)
        shutil.rmtree(self.dir, ignore_errors=True)

    def log(self) -> str:
        try:
            return self.log_path.read_text("utf-8", errors="replace")
        except OSError:
            return ""
