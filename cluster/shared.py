"""What every process of a cluster must share that `config.yaml` does not say: the key of the
reading orders (a match recovered by another process reads the same order), the clips' key,
the operator's token (unless the config sets one), and each channel's PIN and speaker key.

Before a process starts its hall, each of these is taken from the broker's `shared` bucket and
written to the process's own journal folder, where the hall reads it as on one machine; the
first process to start puts its own (or makes one). A PIN or speaker key changed at a
console later is put there too, and adopted by every process (cluster.rotations).
"""

from __future__ import annotations

import os
import secrets
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from nats.js.errors import KeyNotFoundError, KeyWrongLastSequenceError
from nats.js.kv import KeyValue

from hall.pins import new_pin


@dataclass(frozen=True, slots=True)
class Secret:
    key: str  # in the bucket
    path: Path | None  # in the journal folder (None: kept in memory only)
    make: Callable[[], str]


def secrets_of(journal_dir: Path, channels: list[str], pin_digits: int) -> list[Secret]:
    out = [
        Secret("deck-key", journal_dir / "deck.key", lambda: secrets.token_bytes(32).hex()),
        Secret("speakers-key", journal_dir / "speakers.key",
               lambda: secrets.token_bytes(32).hex()),
        Secret("operator-token", None, lambda: secrets.token_urlsafe(24)),
    ]
    for ch in channels:
        out += channel_secrets(journal_dir, ch, pin_digits)
    return out


def channel_secrets(journal_dir: Path, ch: str, pin_digits: int) -> list[Secret]:
    """A channel's PIN and speaker key (a room's, shared when it is made)."""
    return [Secret(f"pin.{ch}", journal_dir / ch / "pin", lambda: new_pin(pin_digits)),
            Secret(f"speaker-key.{ch}", journal_dir / ch / "speaker.key",
                   lambda: secrets.token_urlsafe(24))]


async def share(kv: KeyValue, items: list[Secret]) -> dict[str, str]:
    """Each secret's shared value, written to its file; returns them by bucket key."""
    values: dict[str, str] = {}
    for s in items:
        value = await _shared(kv, s)
        values[s.key] = value
        if s.path is not None:
            _keep(s.path, value)
    return values


async def _shared(kv: KeyValue, s: Secret) -> str:
    try:
        return (await kv.get(s.key)).value.decode("utf-8")  # type: ignore[union-attr]
    except KeyNotFoundError:
        pass
    mine = None
    if s.path is not None:
        try:
            mine = s.path.read_text("utf-8").strip() or None
        except OSError:
            mine = None
    value = mine or s.make()
    try:
        await kv.create(s.key, value.encode("utf-8"))
        return value
    except KeyWrongLastSequenceError:  # another process put its own first
        return (await kv.get(s.key)).value.decode("utf-8")  # type: ignore[union-attr]


def _keep(path: Path, value: str) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_suffix(".sharing")
    tmp.touch(0o600)
    tmp.write_text(value, "utf-8")
    os.replace(tmp, path)
