"""Roles and tokens: viewer (no token), referee (joined a channel with its PIN), operator.

Tokens are random, compared in constant time and never logged: only a short fingerprint is.
"""

from __future__ import annotations

import contextlib
import hashlib
import hmac
import json
import logging
import secrets
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import datetime as _datetime
from enum import StrEnum
from pathlib import Path

from hall.jsonlines import append_line, rewrite_lines
from hall.pinlock import PinLock

log = logging.getLogger("yomite.auth")


class Role(StrEnum):
    VIEWER = "viewer"
    REFEREE = "referee"
    OPERATOR = "operator"
    # a device the operator admitted to play a channel (its speaker link): it gets the audio
    # schedule and the clips, the next card's among them, and nothing else a viewer lacks
    SPEAKER = "speaker"


@dataclass(frozen=True, slots=True)
class Principal:
    role: Role
    channel: str | None = None
    referee: str | None = None
    name: str = ""
    # an organisation's operator (hall.orgs): an operator of that organisation's rooms only
    org: str | None = None
    # a viewer of `channel` by its projector link: one of the class's own pages, not counted
    # among the room's viewers (hall.viewlink)
    projector: bool = False

    @property
    def admin(self) -> bool:
        """The server's own operator (the association's admin): every channel, every room."""
        return self.role is Role.OPERATOR and self.org is None

    def operates(self, owner: str | None) -> bool:
        """Whether this is an operator of a channel owned by `owner` (None: the hall's own,
        config.yaml's): the admin of every one, an organisation's operator of its rooms."""
        return self.role is Role.OPERATOR and (self.org is None or self.org == owner)


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


class TooManyReferees(Exception):
    """The channel holds `server.referees.max_per_channel` referees already."""


def _local_day(t: float) -> str:
    # the hall's day, by this machine's clock and time zone
    return _datetime.fromtimestamp(t).date().isoformat()


class Auth:
    """Who is who. Referees (their names and token digests, never the tokens) are kept in
    `store` (one JSON line per join or removal, appended, so a join costs one short write
    however many have joined) so that a phone keeps its identity, and its hold, across a
    restart. Referees who joined on an earlier day are forgotten at start unless
    `keep_across_days`: a new day's hall starts with no referee of yesterday's tokens.
    PIN guessing is `pins` (hall.pinlock.PinLock): its passes are signed with a key of the
    operator token's, like the desk's print passes here."""

    def __init__(self, operator_token: str | None, pin_attempts_per_minute: int = 10,
                 store: Path | None = None, *, max_per_channel: int = 10000,
                 pin_failures_per_channel_minute: int = 30,
                 pin_failures_per_channel_hour: int = 30,
                 keep_across_days: bool = True, now: float | None = None,
                 clock: Callable[[], float] = time.monotonic) -> None:
        self.operator_token = operator_token or secrets.token_urlsafe(24)
        self.generated = operator_token is None
        self._operator_digest = digest(self.operator_token)
        self._referees: dict[bytes, Referee] = {}
        self._speaker_keys: dict[bytes, str] = {}  # digest of a speaker key: its channel
        # digest of a view key (hall.viewlink): its channel, and whether it is the projector's
        self._view_keys: dict[bytes, tuple[str, bool]] = {}
        # digest of an organisation operator's token: who it is (hall.orgs keeps them)
        self._org_tokens: dict[bytes, tuple[str, Principal]] = {}  # (operator id, who)
        self._by_id: dict[str, Referee] = {}
        self._by_channel: dict[str, dict[str, Referee]] = {}
        self._pass_key = hmac.new(self._operator_digest, b"yomite pin pass",
                                  hashlib.sha256).digest()
        self.pins = PinLock(self._pass_key, pin_attempts_per_minute,
                            pin_failures_per_channel_minute, pin_failures_per_channel_hour,
                            clock)
        self.max_per_channel = max_per_channel
        # told each referee joined or removed here (a cluster shares them: cluster.referees)
        self.on_change: Callable[[dict[str, object]], None] | None = None
        self._store = store
        self._load(keep_across_days, time.time() if now is None else now)

    # ------------------------------------------------------------------ the store
    def _load(self, keep_across_days: bool, now: float) -> None:
        store = self._store
        if store is None:
            return
        legacy = store.with_suffix(".json")
        rows: list[dict[str, object]] = []
        try:
            if store.exists():
                for line in store.read_text("utf-8").splitlines():
                    if line.strip():
                        try:
                            rows.append(json.loads(line))
                        except ValueError:
                            log.warning("%s: an unreadable line is skipped", store)
            elif legacy.exists():  # referees.json, one document rewritten at every join
                rows = [{"op": "join", **r}
                        for r in json.loads(legacy.read_text("utf-8"))["referees"]]
        except (OSError, ValueError, KeyError, TypeError) as e:
            log.error("%s is unreadable (%s): referees must join again", store, e)
            rows = []
        today = _local_day(now)
        for r in rows:
            try:
                if r.get("op") == "remove":
                    self._forget(str(r["id"]))
                    continue
                joined = r["joined"]
                if not isinstance(joined, int | float):
                    raise TypeError("joined")
                ref = Referee(str(r["id"]), str(r["channel"]), str(r["name"]),
                              bytes.fromhex(str(r["digest"])), float(joined))
            except (KeyError, TypeError, ValueError):
                log.warning("%s: a malformed referee is skipped", store)
                continue
            if keep_across_days or _local_day(ref.joined) == today:
                self._add(ref)
        dropped = sum(1 for r in rows if r.get("op") == "join") - len(self._by_id)
        if dropped > 0:
            log.info("%d referees of earlier days (or removed) are forgotten", dropped)
        # the file again, with only who is left: it never grows past one day's joins
        try:
            self._rewrite()
            if legacy.exists():
                legacy.unlink()
        except OSError as e:
            log.warning("cannot rewrite %s (%s)", store, e)

    def _row(self, r: Referee) -> dict[str, object]:
        return {"op": "join", "id": r.id, "channel": r.channel, "name": r.name,
                "digest": r.token_digest.hex(), "joined": r.joined}

    def _rewrite(self) -> None:
        assert self._store is not None
        rewrite_lines(self._store, (self._row(r) for r in self._by_id.values()))

    def _append(self, row: dict[str, object]) -> None:
        if self._store is not None:
            append_line(self._store, row)

    def _add(self, ref: Referee) -> None:
        self._referees[ref.token_digest] = ref
        self._by_id[ref.id] = ref
        self._by_channel.setdefault(ref.channel, {})[ref.id] = ref

    def _forget(self, rid: str) -> Referee | None:
        ref = self._by_id.pop(rid, None)
        if ref is not None:
            self._referees.pop(ref.token_digest, None)
            self._by_channel.get(ref.channel, {}).pop(rid, None)
        return ref

    # ------------------------------------------------------------------ who is who
    def identify(self, token: str | None) -> Principal:
        if not token:
            return VIEWER
        d = digest(token)
        if hmac.compare_digest(d, self._operator_digest):
            return Principal(Role.OPERATOR, name="operator")
        ref = self._referees.get(d)  # keyed by digest: the lookup never compares secrets
        if ref is not None:
            return Principal(Role.REFEREE, ref.channel, ref.id, ref.name)
        channel = self._speaker_keys.get(d)
        if channel is not None:
            return Principal(Role.SPEAKER, channel, name="speaker")
        org_operator = self._org_tokens.get(d)
        if org_operator is not None:
            return org_operator[1]
        view = self._view_keys.get(d)
        if view is not None:
            return Principal(Role.VIEWER, view[0], name="projector" if view[1] else "viewer",
                             projector=view[1])
        raise PermissionError("unknown or expired token: join again with the channel's PIN")

    def set_speaker_key(self, channel: str, key: str) -> None:
        """The key of `channel`'s speaker link (hall.speakerlink): its holder is a speaker of
        that channel; the channel's previous key stops working."""
        self._speaker_keys = {d: ch for d, ch in self._speaker_keys.items() if ch != channel}
        self._speaker_keys[digest(key)] = channel

    def set_view_keys(self, channel: str, projector: str, viewer: str) -> None:
        """The keys of `channel`'s projector and viewer links (hall.viewlink)."""
        self.forget_view_keys(channel)
        self._view_keys[digest(projector)] = (channel, True)
        self._view_keys[digest(viewer)] = (channel, False)

    def forget_view_keys(self, channel: str) -> None:
        self._view_keys = {d: v for d, v in self._view_keys.items() if v[0] != channel}

    def forget_speaker_key(self, channel: str) -> None:
        """`channel` is gone (a room closed): its speaker link admits no one any more."""
        self._speaker_keys = {d: ch for d, ch in self._speaker_keys.items() if ch != channel}

    def set_org_operator(self, token_digest: bytes, org: str, operator_id: str,
                         name: str) -> None:
        """The holder of the token with this digest is an operator of `org`'s rooms."""
        self._org_tokens[token_digest] = (operator_id,
                                          Principal(Role.OPERATOR, name=name, org=org))

    def forget_org_operators(self, org: str, operator_id: str | None = None) -> None:
        """The tokens of `org`'s operators (or of one of them) die at once."""
        self._org_tokens = {d: (oid, p) for d, (oid, p) in self._org_tokens.items()
                            if p.org != org or (operator_id is not None
                                                and oid != operator_id)}

    # ------------------------------------------------------------------ the desk's paper
    def print_pass(self, until: float) -> str:
        """What the desk's browser keeps (a cookie) to open the printed pages in a tab of
        their own, which cannot send the operator's token: the admin's, until `until` (wall
        seconds). A new operator token ends every pass."""
        stamp = str(int(until))
        return f"{stamp}.{self._print_mac(stamp)}"

    def print_pass_valid(self, value: str | None, now: float) -> bool:
        if not value or len(value) > 100:
            return False
        stamp, _, mac = value.partition(".")
        if not stamp.isdigit() or int(stamp) < now:
            return False
        return hmac.compare_digest(mac.encode(), self._print_mac(stamp).encode())

    def _print_mac(self, stamp: str) -> str:
        return hmac.new(self._pass_key, f"desk-print\0{stamp}".encode(),
                        hashlib.sha256).hexdigest()[:32]

    # ------------------------------------------------------------------ referees
    def join(self, channel: str, name: str) -> tuple[Referee, str]:
        """A new referee of `channel`; OSError if it cannot be recorded (nothing changes),
        TooManyReferees if the channel is full."""
        if len(self._by_channel.get(channel, {})) >= self.max_per_channel:
            raise TooManyReferees(f"channel {channel} has {self.max_per_channel} referees, "
                                  "the most it takes")
        token = secrets.token_urlsafe(24)
        rid = "r" + secrets.token_hex(4)
        while rid in self._by_id:
            rid = "r" + secrets.token_hex(4)
        ref = Referee(rid, channel, name, digest(token))
        self._append(self._row(ref))
        self._add(ref)
        if self.on_change is not None:
            self.on_change(self._row(ref))
        return ref, token

    def remove(self, rid: str) -> Referee | None:
        """Forget a referee: its token dies at once. OSError if it cannot be recorded."""
        if rid not in self._by_id:
            return None
        self._append({"op": "remove", "id": rid})
        if self.on_change is not None:
            self.on_change({"op": "remove", "id": rid})
        return self._forget(rid)

    def apply_row(self, row: dict[str, object]) -> bool:
        """A referee joined or removed at another process of the cluster (a row as `_row`
        writes it): known here from now on, and kept in this process's own store. False if
        it changed nothing or is malformed."""
        try:
            rid = str(row["id"])
            if row.get("op") == "remove":
                if rid not in self._by_id:
                    return False
                with contextlib.suppress(OSError):
                    self._append({"op": "remove", "id": rid})
                self._forget(rid)
                return True
            joined = row["joined"]
            if rid in self._by_id or not isinstance(joined, int | float):
                return False
            ref = Referee(rid, str(row["channel"]), str(row["name"])[:64],
                          bytes.fromhex(str(row["digest"])), float(joined))
        except (KeyError, TypeError, ValueError):
            log.warning("a malformed referee from the cluster is skipped")
            return False
        with contextlib.suppress(OSError):
            self._append(self._row(ref))
        self._add(ref)
        return True

    def referee(self, rid: str) -> Referee | None:
        return self._by_id.get(rid)

    def referees(self, channel: str) -> list[Referee]:
        return list(self._by_channel.get(channel, {}).values())
