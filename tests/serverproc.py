"""Start a real `yomite serve` process for tests: a config file in a tmp dir, a free port, and
its output kept for inspection."""

import os
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import httpx2
import yaml

ROOT = Path(__file__).resolve().parent.parent
YOMITE = Path(sys.executable).parent / "yomite"


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


class Server:
    def __init__(self, tmp: Path, config: dict[str, Any], token: str,
                 host: str = "127.0.0.1") -> None:
        self.tmp = tmp
        self.host = host
        self.port = free_port()
        self.token = token
        self.base = f"http://127.0.0.1:{self.port}"
        cfg = dict(config)
        cfg.setdefault("journal_dir", str(tmp / "journal"))
        server = cfg.setdefault("server", {})
        server.setdefault("security", {})["operator_token"] = token
        self.config_path = tmp / "config.yaml"
        self.config_path.write_text(yaml.safe_dump(cfg, allow_unicode=True), "utf-8")
        self.log_path = tmp / "server.log"
        self.proc: subprocess.Popen[bytes] | None = None

    def start(self, timeout: float = 30.0) -> "Server":
        with open(self.log_path, "ab") as log:  # the child keeps its own descriptor
            self.proc = subprocess.Popen(
                [str(YOMITE), "--config", str(self.config_path), "serve", "--host",
                 self.host, "--port", str(self.port)],
                stdout=log, stderr=subprocess.STDOUT, cwd=self.tmp, env=os.environ.copy(),
            )
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                raise RuntimeError(f"yomite serve exited {self.proc.returncode}:\n{self.log()}")
            try:
                if httpx2.get(f"{self.base}/api/health", timeout=1).status_code == 200:
                    return self
            except httpx2.TransportError:
                pass
            time.sleep(0.1)
        raise RuntimeError(f"yomite serve did not come up in {timeout} s:\n{self.log()}")

    def log(self) -> str:
        return self.log_path.read_text("utf-8", errors="replace")

    def kill(self) -> None:
        if self.proc is not None and self.proc.poll() is None:
            self.proc.send_signal(signal.SIGKILL)
            self.proc.wait(10)

    def stop(self) -> None:
        if self.proc is not None and self.proc.poll() is None:
            self.proc.send_signal(signal.SIGINT)
            try:
                self.proc.wait(10)
            except subprocess.TimeoutExpired:
                self.kill()

    @property
    def op(self) -> dict[str, str]:
        return {"Authorization": f"Bearer {self.token}"}
