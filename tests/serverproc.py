"""Start a real `yomite serve` process for tests: a config file in a tmp dir, a free port, and
its output kept for inspection."""

import contextlib
import os
import signal
import socket
import ssl
import subprocess
import sys
import threading
import time
from pathlib import Path
from typing import Any

import httpx2
import yaml

from api.addresses import is_loopback_host
from tests import procstop

ROOT = Path(__file__).resolve().parent.parent
YOMITE = Path(sys.executable).parent / "yomite"


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


class Server:
    def __init__(self, tmp: Path, config: dict[str, Any], token: str,
                 host: str = "127.0.0.1", deck_key: bytes | None = None,
                 yomite: Path = YOMITE, env: dict[str, str] | None = None,
                 netns: str | None = None, tls: bool = False) -> None:
        """`deck_key`: the server's key of the reading orders, given (written where the
        server keeps it) so that a test may know the order a seed gives:
        `Deck.build(colors=..., seed=..., key=deck_key)`. `yomite` and `env`: another
        installation's command and its environment (tests/test_wheel.py). `netns`: a network
        namespace to run in (`ip netns exec`, tests/netns.py), `host` its address there.
        `tls`: on an address other than loopback, the server's own https (its CA in
        `self.ca`, its clients verify with `self.verify`); without it such a server is
        started `--insecure-http`, as the tests of other things than https want (plain
        http, the pages' warning shown)."""
        self.tls = tls
        self.yomite = yomite
        self.env = env
        self.tmp = tmp
        self.host = host
        self.netns = netns
        self.port = free_port()
        self.token = token
        self.base = self._url()
        cfg = dict(config)
        cfg.setdefault("journal_dir", str(tmp / "journal"))
        if deck_key is not None:
            keyfile = Path(cfg["journal_dir"]) / "deck.key"
            keyfile.parent.mkdir(parents=True, exist_ok=True)
            keyfile.write_text(deck_key.hex(), "utf-8")
        server = cfg.setdefault("server", {})
        server.setdefault("security", {})["operator_token"] = token
        self.ca = Path(cfg["journal_dir"]) / "tls" / "ca.crt"
        self.config_path = tmp / "config.yaml"
        self.config_path.write_text(yaml.safe_dump(cfg, allow_unicode=True), "utf-8")
        self.log_path = tmp / "server.log"
        self.proc: subprocess.Popen[bytes] | None = None

    def start(self, timeout: float = 90.0, preexec_fn: Any = None,
              piped: bool = False, *, attempt: int = 0) -> "Server":
        """`preexec_fn` runs in the child before yomite (e.g. a file size limit); `piped`
        sends its output through a pipe (copied to the log by a thread), so that a limit on
        the files the server may write does not apply to its log."""
        args = [str(self.yomite), "--config", str(self.config_path), "serve", "--host",
                self.host, "--port", str(self.port)]
        if not self.tls and not self._loopback():
            args.append("--insecure-http")
        if self.netns is not None:
            args = ["ip", "netns", "exec", self.netns, *args]  # execs in place: same pid
        with open(self.log_path, "ab") as log:  # the child keeps its own descriptor
            self.proc = subprocess.Popen(
                args, stdout=subprocess.PIPE if piped else log, stderr=subprocess.STDOUT,
                cwd=self.tmp, env=self.env if self.env is not None else os.environ.copy(),
                preexec_fn=preexec_fn,
            )
        if piped:
            threading.Thread(target=self._copy_output, args=(self.proc,), daemon=True).start()
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                self._close_pipe()
                if self._lost_port(attempt):
                    # the free port was taken between free_port() and the server's bind (another
                    # worker's connection got it as its own ephemeral port): another port
                    self.port = free_port()
                    self.base = self._url()
                    return self.start(timeout, preexec_fn, piped, attempt=attempt + 1)
                raise RuntimeError(f"yomite serve exited {self.proc.returncode}:\n{self.log()}")
            try:
                # a health check on a busy machine may take a while: a slow answer is no
                # reason to ask again
                if self.base.startswith("https:") and not self.ca.exists():
                    pass  # the CA is made at start: not yet
                elif httpx2.get(f"{self.base}/api/health", timeout=10,
                                verify=self.verify).status_code == 200:
                    return self
            except httpx2.TransportError:
                pass
            time.sleep(0.1)
        # a server that never came up is stopped here: the caller's `finally` has not begun,
        # and a Popen left running warns (ResourceWarning) in some later test
        self.kill()
        raise RuntimeError(f"yomite serve did not come up in {timeout} s:\n{self.log()}")

    def _url(self) -> str:
        # a server on every address is asked on loopback (plain http there, with or without
        # TLS); one on a given address (a namespace's, which the root namespace reaches over a
        # bridge) on that address, over https when it has its own
        host = "127.0.0.1" if self.host in ("0.0.0.0", "::", "") else self.host
        scheme = "https" if self.tls and not self._loopback(host) else "http"
        return f"{scheme}://{f'[{host}]' if ':' in host else host}:{self.port}"

    def _loopback(self, host: str | None = None) -> bool:
        return is_loopback_host(host or self.host)

    @property
    def verify(self) -> ssl.SSLContext | bool:
        """What a client of this server verifies its certificate with: the server's own CA
        (once it was made), else the default."""
        if self.tls and self.ca.exists():
            return ssl.create_default_context(cafile=str(self.ca))
        return True

    def _lost_port(self, attempt: int) -> bool:
        """The server exited because its port was taken, on a try that may be repeated."""
        return (attempt < 3 and self.proc is not None and self.proc.returncode == 2
                and f"port {self.port} on {self.host} is already in use" in self.log())

    def _copy_output(self, proc: "subprocess.Popen[bytes]") -> None:
        assert proc.stdout is not None
        with open(self.log_path, "ab") as log, contextlib.suppress(ValueError, OSError):
            for line in proc.stdout:  # ends when the pipe closes
                log.write(line)
                log.flush()

    def log(self) -> str:
        return self.log_path.read_text("utf-8", errors="replace")

    def kill(self) -> None:
        procstop.kill(self.proc)
        self._close_pipe()

    def _close_pipe(self) -> None:
        if self.proc is not None and self.proc.stdout is not None:
            self.proc.stdout.close()

    def stop(self) -> None:
        procstop.stop(self.proc, signal.SIGINT, 30)
        self._close_pipe()

    @property
    def op(self) -> dict[str, str]:
        return {"Authorization": f"Bearer {self.token}"}


RENDER_WAIT_S = 600.0


def wait_rendered(s: Server, channel: str = "main", timeout_s: float = RENDER_WAIT_S) -> None:
    """Until the prepared match's clips are all rendered (the state's `render`), as an operator
    would watch the console before a start: a cold voice cache (a fresh clone, every test
    worker rendering at once) can take longer than a start's own wait for its first clips, or
    than a test's HTTP timeout for that start. Bounded in time; a render error fails."""
    deadline = time.monotonic() + timeout_s
    last: Any = None
    while time.monotonic() < deadline:
        r = httpx2.get(f"{s.base}/api/channels/{channel}", headers=s.op, timeout=30)
        r.raise_for_status()
        last = r.json().get("render")
        if last is not None:
            assert not last.get("error"), f"rendering failed: {last}"
            if last["done"] >= last["total"]:
                return
        time.sleep(0.2)
    raise AssertionError(f"the match was not rendered in {timeout_s:.0f} s: {last}")
