"""Where organisations, their operators and their rooms are kept across restarts.

`OrgStore` and `RoomStore` read and write typed records; both keep them in a `Bucket`, a
key-value store of JSON documents (one a key), read at once and written before a change is
answered. On one process: `FileBucket`, a file of JSON lines in `journal_dir` (a put or a delete
is one appended, fsynced line; the file is rewritten whole, with only what is left, when it is
opened). A cluster's processes share the broker's key-value bucket instead
(cluster.records.KvBucket): every process sees every organisation, operator and room.
"""

from __future__ import annotations

import json
import logging
from dataclasses import asdict, dataclass, fields
from pathlib import Path
from typing import Any, Protocol, TypeVar

from hall.jsonlines import append_line, rewrite_lines

log = logging.getLogger("yomite.rooms")


class Bucket(Protocol):
    def items(self) -> dict[str, dict[str, Any]]:
        """Every key with its latest document."""
        ...

    async def put(self, key: str, value: dict[str, Any]) -> None:
        """Keep `value` under `key`; OSError if it cannot be kept (nothing changed)."""
        ...

    async def delete(self, key: str) -> None:
        """Forget `key`; OSError if that cannot be kept."""
        ...


class FileBucket:
    def __init__(self, path: Path) -> None:
        self.path = path
        self._items: dict[str, dict[str, Any]] = {}
        try:
            lines = path.read_text("utf-8").splitlines() if path.exists() else []
        except OSError as e:
            log.error("%s is unreadable (%s): starting without it", path, e)
            lines = []
        for line in lines:
            try:
                row = json.loads(line)
                key, value = str(row["k"]), row["v"]
            except (ValueError, KeyError, TypeError):
                log.warning("%s: an unreadable line is skipped", path)
                continue
            if isinstance(value, dict):
                self._items[key] = value
            else:
                self._items.pop(key, None)
        if lines:
            try:
                self._rewrite()
            except OSError as e:
                log.warning("cannot rewrite %s (%s)", path, e)

    def items(self) -> dict[str, dict[str, Any]]:
        return dict(self._items)

    async def put(self, key: str, value: dict[str, Any]) -> None:
        self._append({"k": key, "v": value})
        self._items[key] = value

    async def delete(self, key: str) -> None:
        if key in self._items:
            self._append({"k": key, "v": None})
            del self._items[key]

    def _rewrite(self) -> None:
        rewrite_lines(self.path, ({"k": k, "v": v} for k, v in self._items.items()))

    def _append(self, row: dict[str, Any]) -> None:
        append_line(self.path, row)


@dataclass(frozen=True, slots=True)
class Org:
    id: str
    name: str
    code: str  # the invite code (shown to the admin, like a channel's PIN)
    max_open_rooms: int
    max_clients_per_room: int
    created: float  # wall clock


@dataclass(frozen=True, slots=True)
class OrgOperator:
    id: str
    org: str
    name: str
    token_digest: str  # sha-256 of the token, hex: the token itself is never kept
    joined: float


@dataclass(frozen=True, slots=True)
class Room:
    name: str  # its channel's name
    org: str
    opened: float  # wall clock
    opened_by: str  # the operator's name
    colors: tuple[str, ...] | None = None
    closed: float | None = None
    closed_why: str | None = None  # "operator", "idle", "org_removed"


R = TypeVar("R", Org, OrgOperator, Room)


def _record(cls: type[R], doc: dict[str, Any]) -> R | None:
    names = {f.name for f in fields(cls)}
    try:
        if "colors" in doc and doc["colors"] is not None:
            doc = {**doc, "colors": tuple(doc["colors"])}
        return cls(**{k: v for k, v in doc.items() if k in names})
    except TypeError:
        log.warning("a malformed %s is skipped: %s", cls.__name__, doc)
        return None


def _records(bucket: Bucket, prefix: str, cls: type[R]) -> list[R]:
    out = []
    for key, doc in bucket.items().items():
        if key.startswith(prefix) and (r := _record(cls, doc)) is not None:
            out.append(r)
    return out


class OrgStore:
    def __init__(self, bucket: Bucket) -> None:
        self.bucket = bucket

    def orgs(self) -> list[Org]:
        return _records(self.bucket, "org/", Org)

    def operators(self) -> list[OrgOperator]:
        return _records(self.bucket, "op/", OrgOperator)

    async def save_org(self, org: Org) -> None:
        await self.bucket.put(f"org/{org.id}", asdict(org))

    async def drop_org(self, org_id: str) -> None:
        for op in self.operators():
            if op.org == org_id:
                await self.bucket.delete(f"op/{op.id}")
        await self.bucket.delete(f"org/{org_id}")

    async def save_operator(self, op: OrgOperator) -> None:
        await self.bucket.put(f"op/{op.id}", asdict(op))


class RoomStore:
    def __init__(self, bucket: Bucket) -> None:
        self.bucket = bucket

    def rooms(self) -> list[Room]:
        return sorted(_records(self.bucket, "room/", Room), key=lambda r: r.opened)

    async def save(self, room: Room) -> None:
        await self.bucket.put(f"room/{room.name}", room_doc(room))

    async def drop(self, name: str) -> None:
        await self.bucket.delete(f"room/{name}")
        await self.bucket.delete(f"busy/{name}")

    def busy_at(self, name: str) -> float | None:
        """When a process last saw the room in use (wall clock; a cluster's processes say it
        in the shared bucket: hall.rooms' idle sweep); None if none said so."""
        doc = self.bucket.items().get(f"busy/{name}")
        at = doc.get("at") if doc is not None else None
        return float(at) if isinstance(at, (int, float)) else None

    async def mark_busy(self, name: str, at: float) -> None:
        await self.bucket.put(f"busy/{name}", {"at": at})


def room_doc(room: Room) -> dict[str, Any]:
    doc = asdict(room)
    doc["colors"] = list(room.colors) if room.colors is not None else None
    return doc


def room_of(doc: dict[str, Any]) -> Room | None:
    """A room's record as kept (None if it is malformed)."""
    return _record(Room, doc)
