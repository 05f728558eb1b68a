"""Roles and tokens: viewer (no token), referee (joined a channel with its PIN), operator.

Tokens are random, compared in constant time and never logged: only a short fingerprint is.
"""

from __future__ import annotations

import hashlib
import hmac
import json
import logging
import os
import secrets
import time
from collections import deque
from dataclasses import dataclass, field
from enum import StrEnum
from pathlib import Path

log = logging.getLogger("yomite.auth")


class Role(StrEnum):
    VIEWER = "viewer"
    REFEREE = "referee"
    OPERATOR = "operator"


@dataclass(frozen=True, slots=True)
class Principal:
    role: Role
    channel: str | None = None
    referee: str | None = None
    name: str = ""


VIEWER = Principal(Role.VIEWER)


@dataclass(slots=True)
class Referee:
    id: str
    channel: str
    name: str
    token_digest: bytes
    joined: float = field(default_factory=time.time)


def digest(token: str) -> bytes:
    return hashlib.sha256(token.encode("utf-8")).digest()


def fingerprint(token: str) -> str:
    """What logs may show of a token."""
    return digest(token).hex()[:8]


class RateLimited(Exception):
    def __init__(self, retry_after_s: float) -> None:
        self.retry_after_s = retry_after_s
        super().__init__(f"too many PIN attempts; try again in {retry_after_s:.0f} s")


class Auth:
    """Who is who. Referees (their names and token digests, never the tokens) are kept in
    `store` so that a phone keeps its identity, and its hold, across a server restart."""

    def __init__(self, operator_token: str | None, pin_attempts_per_minute: int = 10,
                 store: Path | None = None) -> None:
        self.operator_token = operator_token or secrets.token_urlsafe(24)
        self.generated = operator_token is None
        self._operator_digest = digest(self.operator_token)
        self._referees: dict[bytes, Referee] = {}
        self._by_id: dict[str, Referee] = {}
        self._attempts: dict[str, deque[float]] = {}
        self._limit = pin_attempts_per_minute
        self._store = store
        if store is not None and store.exists():
            try:
                for r in json.loads(store.read_text("utf-8"))["referees"]:
                    ref = Referee(r["id"], r["channel"], r["name"], bytes.fromhex(r["digest"]),
                                  r["joined"])
                    self._referees[ref.token_digest] = ref
                    self._by_id[ref.id] = ref
            except (OSError, ValueError, KeyError, TypeError) as e:
                log.error("%s is unreadable (%s): referees must join again", store, e)

    def _save(self) -> None:
        if self._store is None:
            return
        data = {"referees": [{"id": r.id, "channel": r.channel, "name": r.name,
                              "digest": r.token_digest.hex(), "joined": r.joined}
                             for r in self._by_id.values()]}
        self._store.parent.mkdir(parents=True, exist_ok=True)
        tmp = self._store.with_suffix(".tmp")
        tmp.write_text(json.dumps(data, ensure_ascii=False), "utf-8")
        os.replace(tmp, self._store)

    def identify(self, token: str | None) -> Principal:
        if not token:
            return VIEWER
        d = digest(token)
        if hmac.compare_digest(d, self._operator_digest):
            return Principal(Role.OPERATOR, name="operator")
        ref = self._referees.get(d)  # keyed by digest: the lookup never compares secrets
        if ref is not None:
            return Principal(Role.REFEREE, ref.channel, ref.id, ref.name)
        raise PermissionError("unknown or expired token: join again with the channel's PIN")

    def check_pin_rate(self, client: str, now: float | None = None) -> None:
        t = time.monotonic() if now is None else now
        q = self._attempts.setdefault(client, deque())
        while q and t - q[0] > 60:
            q.popleft()
        if len(q) >= self._limit:
            raise RateLimited(60 - (t - q[0]))
        q.append(t)

    def join(self, channel: str, name: str) -> tuple[Referee, str]:
        token = secrets.token_urlsafe(24)
        rid = "r" + secrets.token_hex(4)
        ref = Referee(rid, channel, name, digest(token))
        self._referees[ref.token_digest] = ref
        self._by_id[rid] = ref
        self._save()
        return ref, token

    def referee(self, rid: str) -> Referee | None:
        return self._by_id.get(rid)

    def referees(self, channel: str) -> list[Referee]:
        return [r for r in self._by_id.values() if r.channel == channel]


def pin_matches(given: str, expected: str) -> bool:
    return hmac.compare_digest(given.encode("utf-8"), expected.encode("utf-8"))
