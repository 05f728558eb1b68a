"""One JSON document in a key-value bucket of the broker, changed by compare-and-set: the
broker refuses a write made on an older revision, so the change is read and computed again
while another process wrote first. What two processes decide at the same instant about one
key (a quota's seats: cluster.seats, cluster.pageseats) is decided one after the other."""

from __future__ import annotations

import errno
import json
import logging
from collections.abc import Callable
from typing import Any, TypeVar

from nats.js.errors import KeyDeletedError, KeyNotFoundError, KeyWrongLastSequenceError
from nats.js.kv import KeyValue

log = logging.getLogger("yomite.cluster")

T = TypeVar("T")
TRIES = 50  # compare-and-set rounds lost to other processes before giving up (EAGAIN)


async def change(kv: KeyValue, key: str, step: Callable[[Any], tuple[T, Any | None]]) -> T:
    """`step` on the key's document ({} when there is none, or it is not JSON), written by
    compare-and-set; `step` says its answer and the document to write (None: nothing to
    write). OSError when the broker cannot say or keep it (EIO), or after `TRIES` rounds lost
    (EAGAIN)."""
    for _ in range(TRIES):
        doc, revision = await read(kv, key)
        out, new = step(doc)
        if new is None or await write(kv, key, new, revision):
            return out
    raise OSError(errno.EAGAIN, f"{key}: {TRIES} tries lost to other processes")


async def read(kv: KeyValue, key: str) -> tuple[Any, int]:
    """The key's document and revision ({}, 0: never written, or deleted)."""
    try:
        entry = await kv.get(key)
    except (KeyNotFoundError, KeyDeletedError):
        return {}, 0
    except Exception as e:
        raise OSError(errno.EIO, f"the broker did not answer: {e}") from None
    try:
        return json.loads(entry.value or b"{}"), int(entry.revision or 0)
    except ValueError:
        log.warning("%s is not JSON: read as empty", key)
        return {}, int(entry.revision or 0)


async def write(kv: KeyValue, key: str, doc: Any, revision: int) -> bool:
    """False when another process wrote the key since `revision` was read."""
    raw = json.dumps(doc, separators=(",", ":")).encode()
    try:
        if revision:
            await kv.update(key, raw, last=revision)
        else:
            await kv.create(key, raw)
    except KeyWrongLastSequenceError:
        return False
    except Exception as e:
        raise OSError(errno.EIO, f"the broker did not keep it: {e}") from None
    return True
