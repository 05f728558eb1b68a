"""What `yomite serve` does before it serves, so that a failure is said before any link is
printed: hold the journal folder (one server per folder), bind the port."""

from __future__ import annotations

import errno
import os
import socket
from pathlib import Path
from typing import IO


class StartupError(Exception):
    """yomite serve cannot start (a busy port, a journal folder in use): said before anything
    else is printed."""


def raise_open_files(most: int = 65536) -> int:
    """Raise this process's soft limit on open files to its hard limit (at most `most`: the
    door's caps never need more) where allowed; returns the soft limit it runs with. Debian
    starts a service with 1,024, and the door sizes its caps from this (api.doors)."""
    import resource

    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    want = most if hard == resource.RLIM_INFINITY else min(hard, most)
    if want > soft:
        try:
            resource.setrlimit(resource.RLIMIT_NOFILE, (want, hard))
            soft = want
        except (ValueError, OSError):
            pass  # not allowed here: the caps are sized from the limit as it is
    return soft


def bind(host: str, port: int, backlog: int = 2048) -> socket.socket:
    """The listening socket, bound before anything is printed (a busy port is said at once,
    not after a banner with links that lead nowhere)."""
    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    sock = socket.socket(family, socket.SOCK_STREAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    try:
        sock.bind((host, port))
        sock.listen(backlog)
    except OSError as e:
        sock.close()
        if e.errno == errno.EADDRINUSE:
            raise StartupError(
                f"port {port} on {host} is already in use (another yomite, or another "
                "program): stop it, or choose another port with --port or server.port"
            ) from None
        raise StartupError(f"cannot listen on {host}:{port}: {e.strerror}") from None
    return sock


def lock_journal(folder: Path, port: int) -> IO[str]:
    """Hold `folder/serve.lock` for the life of the process: two servers in one folder would
    append to the same channels' journals (and recover each other's matches)."""
    import fcntl

    folder.mkdir(parents=True, exist_ok=True)
    f = open(folder / "serve.lock", "a+", encoding="utf-8")  # noqa: SIM115 - held until exit
    try:
        fcntl.flock(f, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except OSError:
        f.seek(0)
        who = f.read().strip() or "another process"
        f.close()
        raise StartupError(
            f"another yomite already serves from {folder} ({who}): two servers in one folder "
            "would write the same journals; stop it, or give this one its own journal_dir"
        ) from None
    f.seek(0)
    f.truncate()
    f.write(f"pid {os.getpid()}, port {port}\n")
    f.flush()
    return f
