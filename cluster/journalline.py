"""A journal line as the broker's stream carries it: `{"file": ..., "line": {...}}` in JSON,
sealed with the cluster's key for the channel's subject (cluster.seal). The header line names
the whole order of the match's cards, and each line after it a card as it is read: the stream
is sealed so that no one on the broker, and no copy of its store, learns a card before the
players hear it; and a line put there by anyone without the key (a hold, a skip) does not open,
so no process replays it. A sealed line opens under its own channel's subject only.
"""

from __future__ import annotations

import json
from typing import Any

from cluster.bus import Bus
from cluster.seal import SealError


def encode(bus: Bus, subject: str, file: str, line: dict[str, Any]) -> bytes:
    data = json.dumps({"file": file, "line": line}, ensure_ascii=False,
                      separators=(",", ":")).encode("utf-8")
    return bus.seal.seal(subject, data)


def decode(bus: Bus, subject: str, data: bytes) -> tuple[str, Any]:
    """(file, line) of a line stored on `subject`; ValueError if it does not open with the
    cluster's key (the message names the key file) or is not a line."""
    try:
        body = json.loads(bus.seal.open(subject, data))
    except SealError as e:
        raise ValueError(str(e)) from None
    if not isinstance(body, dict):
        raise ValueError("not a journal line")
    return str(body["file"]), body["line"]
