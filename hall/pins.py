"""A channel's PIN: the digits referees join with, kept across restarts so that the QR codes on
the mats stay valid."""

from __future__ import annotations

import logging
import secrets
from pathlib import Path

log = logging.getLogger("yomite.hall")


def new_pin(digits: int) -> str:
    return f"{secrets.randbelow(10 ** digits):0{digits}d}"


def kept_pin(path: Path, digits: int = 6) -> str:
    """The channel's PIN, kept across restarts so that the QR codes on the mats stay valid.
    A kept PIN shorter than `digits` (the 4-digit PINs of old) is replaced."""
    try:
        pin = path.read_text("utf-8").strip()
        if pin.isdigit() and digits <= len(pin) <= 12:
            return pin
    except OSError:
        pass
    pin = new_pin(digits)
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(pin, "utf-8")
    except OSError as e:
        log.warning("cannot keep the PIN in %s (%s): it changes at the next start", path, e)
    return pin
