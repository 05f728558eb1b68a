"""Stopping a server a test started (a broker, a database, a yomite process): asked with a
signal, killed if it has not gone in time."""

import signal
import subprocess
from typing import Any


def kill(proc: "subprocess.Popen[Any] | None") -> None:
    """SIGKILL, and wait for it to be gone (nothing if it is gone already)."""
    if proc is not None and proc.poll() is None:
        proc.send_signal(signal.SIGKILL)
        proc.wait(10)


def stop(proc: "subprocess.Popen[Any] | None", sig: int, wait_s: float) -> None:
    """`sig`, then SIGKILL if it is still there after `wait_s`."""
    if proc is not None and proc.poll() is None:
        proc.send_signal(sig)
        try:
            proc.wait(wait_s)
        except subprocess.TimeoutExpired:
            kill(proc)
