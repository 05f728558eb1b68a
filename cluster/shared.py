"""What every process of a cluster must share that `config.yaml` does not say: the key of the
reading orders (a match recovered by another process reads the same order), the clips' key,
the operator's token (unless the config sets one), and each channel's PIN and speaker key.

Before a process starts its hall, each of these is taken from the broker's `shared` bucket and
written to the process's own journal folder, where the hall reads it as on one machine; the
first process to start puts its own (or makes one). A PIN or speaker key changed at a
console later is put there too, and adopted by every process (cluster.rotations).

Every value of the bucket but the drain's handover notes is sealed with the cluster's key
(`sealed`, `opened`: cluster.seal), under its own key's name: the broker holds none of them in
clear, and no one without the key can put one a process would take. A value that does not open
stops the start (`share` raises SealError): a process never makes its own PIN beside the
cluster's. `agree_on_key` checks, before a process joins, that it seals with the cluster's key.
"""

from __future__ import annotations

import os
import secrets
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from nats.js.errors import KeyNotFoundError, KeyWrongLastSequenceError

from cluster.bus import Bus
from cluster.seal import SealError, is_sealed
from hall.pins import new_pin

SEAL_CHECK = "seal-check"  # a known value, sealed by the first process with the cluster's key
SEAL_CHECK_VALUE = b"yomite's cluster key"
PLAIN = b"plain"  # the check value of a cluster whose processes have no key (--bus-insecure)


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


def sealed(bus: Bus, key: str, value: bytes) -> bytes:
    """`value` as the shared bucket keeps it under `key`."""
    return bus.seal.seal(f"{bus.subjects.shared}/{key}", value)


def opened(bus: Bus, key: str, data: bytes) -> bytes:
    """What the shared bucket keeps under `key`, opened; SealError if it does not open."""
    return bus.seal.open(f"{bus.subjects.shared}/{key}", data)


async def agree_on_key(bus: Bus) -> None:
    """This process seals as the cluster does (the same key, or, with --bus-insecure, none):
    SealError naming the key file otherwise. The first process leaves its check value."""
    mine = sealed(bus, SEAL_CHECK, SEAL_CHECK_VALUE) if bus.seal.sealing else PLAIN
    try:
        await bus.shared.create(SEAL_CHECK, mine)
    except KeyWrongLastSequenceError:  # there is one: it must open here
        data = (await bus.shared.get(SEAL_CHECK)).value or b""
        if bus.seal.sealing and not is_sealed(data):
            raise SealError(
                f"the cluster's values on the broker ({bus.subjects.shared}) were made by "
                f"processes without a key, and this one seals with {bus.seal.source}: every "
                "process needs the same key file (a cluster that starts sealing takes a new "
                "cluster.prefix: docs/cluster-security.md)") from None
        if opened(bus, SEAL_CHECK, data) != (SEAL_CHECK_VALUE if bus.seal.sealing else PLAIN):
            raise SealError(f"{bus.subjects.shared}/{SEAL_CHECK}: not the value it should be "
                            f"with {bus.seal.source}") from None
        return
    # a cluster whose values were shared before it had a check value (before it sealed)
    try:
        entry = await bus.shared.get("deck-key")
    except KeyNotFoundError:
        return
    opened(bus, "deck-key", entry.value or b"")


async def share(bus: Bus, items: list[Secret]) -> dict[str, str]:
    """Each secret's shared value, written to its file; returns them by bucket key.
    SealError when one that is there does not open with this process's key."""
    values: dict[str, str] = {}
    for s in items:
        value = await _shared(bus, s)
        values[s.key] = value
        if s.path is not None:
            _keep(s.path, value)
    return values


async def _get(bus: Bus, key: str) -> str:
    return opened(bus, key, (await bus.shared.get(key)).value or b"").decode("utf-8")


async def _shared(bus: Bus, s: Secret) -> str:
    try:
        return await _get(bus, s.key)
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
        await bus.shared.create(s.key, sealed(bus, s.key, value.encode("utf-8")))
        return value
    except KeyWrongLastSequenceError:  # another process put its own first
        return await _get(bus, s.key)


def _keep(path: Path, value: str) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_suffix(".sharing")
    tmp.touch(0o600)
    tmp.write_text(value, "utf-8")
    os.replace(tmp, path)
