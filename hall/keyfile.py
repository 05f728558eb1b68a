"""The server's secrets on disk: 32 random bytes a file, made at the first start and kept, so
that what they key stays the same across restarts (a speaker's clip URLs, the order a typed
seed gives)."""

from __future__ import annotations

import logging
import secrets
from pathlib import Path

log = logging.getLogger("yomite.keys")


def load_key(path: Path) -> bytes:
    """The key kept in `path` (hex), made if there is none (readable by this user only). A key
    that cannot be kept is used for this run only, and said so."""
    try:
        data = bytes.fromhex(path.read_text("utf-8").strip())
        if len(data) == 32:
            return data
    except (OSError, ValueError):
        pass
    key = secrets.token_bytes(32)
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        tmp = path.with_suffix(".tmp")
        tmp.touch(0o600)
        tmp.write_text(key.hex(), "utf-8")
        tmp.replace(path)
    except OSError as e:
        log.warning("cannot keep the key %s (%s): a new one is made at the next start", path, e)
    return key
