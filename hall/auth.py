"""Roles and tokens: viewer (no token), referee (joined a channel with its PIN), operator.

Tokens are random, compared in constant time and never logged: only a short fingerprint is.
"""

from __future__ import annotations

import contextlib
import hashlib
import hmac
import ipaddress
import json
import logging
import math
import secrets
import time
from collections import OrderedDict, deque
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import datetime as _datetime
from enum import StrEnum
from pathlib import Path

from hall.jsonlines import append_line, rewrite_lines

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


class RateLimited(Exception):
    """`code`: why, for the page's own words: `own` (the guesser's own wrong PINs), `channel`
    (the crowd's lock), `attempts` (too many tries a minute)."""

    def __init__(self, retry_after_s: float, why: str = "too many PIN attempts",
                 code: str = "attempts") -> None:
        self.retry_after_s = retry_after_s
        self.code = code
        super().__init__(f"{why}; try again in {max(1, math.ceil(retry_after_s))} s")

    @property
    def retry_after(self) -> int:
        """Whole seconds, rounded up (the Retry-After header)."""
        return max(1, math.ceil(self.retry_after_s))


PASS = "pass:"  # a guesser named by its pass (Auth.pass_holder), not by its address


@dataclass(slots=True)
class Guesser:
    """A guesser's wrong PINs at a channel: how many, the last, and when its wait ends."""

    failures: int = 0
    last: float = 0.0
    until: float = 0.0


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

    PIN guessing is limited per guesser and channel, and per channel across all guessers. A
    guesser is a phone with a pass (a cookie from its join with this PIN: `pin_pass`) or else
    its address, an IPv6 one by its /64 (`pin_suspect`). Each guesser may try
    `pin_attempts_per_minute` times a minute, and waits after its own wrong PINs: nothing after
    the first (a typo), then 2 s, 4 s, 8 s... doubling up to an hour (`own_wait_s`). Wrong
    PINs of guessers without a pass count together: while the last minute holds
    `pin_failures_per_channel_minute` of them, or the last hour
    `pin_failures_per_channel_hour`, the channel's join is locked for every guesser that sent
    more than one wrong PIN in the last day (`TYPIST_FAILURES`); so guessing goes at most that
    fast however it is spread. A lock catches the guessers, never a phone with a pass (it knew
    the PIN), nor a typist's single mistake, nor anyone who never sent a wrong PIN. A new PIN
    (`unlock`) forgets the guesses and the guessers, and ends every pass."""

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
        # digest of an organisation operator's token: who it is (hall.orgs keeps them)
        self._org_tokens: dict[bytes, tuple[str, Principal]] = {}  # (operator id, who)
        self._by_id: dict[str, Referee] = {}
        self._by_channel: dict[str, dict[str, Referee]] = {}
        self._attempts: dict[str, deque[float]] = {}
        self._limit = pin_attempts_per_minute
        self._channel_limit = pin_failures_per_channel_minute
        self._hour_limit = pin_failures_per_channel_hour
        self._failures: dict[str, deque[float]] = {}
        # channel -> guesser -> its wrong PINs (the one that sent its last longest ago first)
        self._guessers: dict[str, OrderedDict[str, Guesser]] = {}
        self._clock = clock  # monotonic seconds (a test's ManualClock.now)
        self._pass_key = hmac.new(self._operator_digest, b"yomite pin pass",
                                  hashlib.sha256).digest()
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
        raise PermissionError("unknown or expired token: join again with the channel's PIN")

    def set_speaker_key(self, channel: str, key: str) -> None:
        """The key of `channel`'s speaker link (hall.speakerlink): its holder is a speaker of
        that channel; the channel's previous key stops working."""
        self._speaker_keys = {d: ch for d, ch in self._speaker_keys.items() if ch != channel}
        self._speaker_keys[digest(key)] = channel

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

    # ------------------------------------------------------------------ PIN guessing
    # A guesser is a phone that holds a pass (`pass_holder`: it joined with this very PIN
    # before) or, for anyone else, its address (`pin_suspect`: an IPv6 one by its /64).
    FIRST_WAIT_S = 2.0  # a guesser's own wait after its 2nd wrong PIN; doubled at each next
    MAX_WAIT_S = 3600.0  # the longest a guesser's own wait grows
    TYPIST_FAILURES = 1  # wrong PINs a guesser may send before the crowd's lock catches it
    SUSPECT_S = 86400.0  # how long a guesser's wrong PINs are remembered after its last try
    MAX_GUESSERS = 10000  # per channel: the oldest are forgotten first

    @staticmethod
    def own_wait_s(failures: int) -> float:
        """How long a guesser waits after its `failures`-th wrong PIN: none after the first
        (a typo, typed again at once), then 2 s, 4 s, 8 s... up to an hour."""
        if failures <= 1:
            return 0.0
        return min(Auth.FIRST_WAIT_S * 2.0 ** (failures - 2), Auth.MAX_WAIT_S)

    def check_pin_rate(self, channel: str, guesser: str, now: float | None = None) -> None:
        """Raise RateLimited (its `why`: own, channel or attempts) if `guesser` may not try a
        PIN on `channel` now: its own wait after its wrong PINs is not over; or it sent more
        than `TYPIST_FAILURES` wrong PINs and the channel is locked by the crowd's
        (`locked_for`), which never catches a phone with a pass nor a guesser with a single
        typo; or it tried `pin_attempts_per_minute` times in the last minute."""
        t = self._clock() if now is None else now
        g = self._guesser(channel, guesser, t)
        own = g.until - t if g is not None else 0.0
        crowd = (self.locked_for(channel, t) if g is not None and not guesser.startswith(PASS)
                 and g.failures > self.TYPIST_FAILURES else 0.0)
        if g is not None and (crowd > 0 or own > 0):
            # a guesser that keeps trying while refused stays remembered (SUSPECT_S from its
            # last try, not its last wrong PIN): else a day of refusals would make every
            # address of a crowd new again, with its typo's grace
            g.last = t
        if crowd > 0 and crowd >= own:
            raise RateLimited(crowd, "too many wrong PINs on this channel, more than one from "
                                     "this phone or network", "channel")
        if own > 0:
            raise RateLimited(own, "wrong PINs from this phone or network", "own")
        client = f"{channel}/{guesser}"
        q = self._attempts.setdefault(client, deque())
        while q and t - q[0] > 60:
            q.popleft()
        if len(q) >= self._limit:
            raise RateLimited(60 - (t - q[0]), "too many PIN attempts a minute from this "
                                               "phone or network", "attempts")
        q.append(t)
        if len(self._attempts) > 10000:  # forget clients that have gone quiet
            for k in [k for k, v in self._attempts.items() if not v or t - v[-1] > 60]:
                del self._attempts[k]

    def locked_for(self, channel: str, now: float | None = None) -> float:
        """How long the channel's join stays locked for its suspects (0: it is open): until
        fewer than `pin_failures_per_channel_minute` wrong PINs (of guessers without a pass)
        are left in the last minute and fewer than `pin_failures_per_channel_hour` in the last
        hour."""
        t = self._clock() if now is None else now
        q = self._failures.get(channel)
        if not q:
            return 0.0
        while q and t - q[0] > 3600:
            q.popleft()
        wait = 0.0
        for window, limit in ((60.0, self._channel_limit), (3600.0, self._hour_limit)):
            recent = [f for f in q if t - f <= window]
            if len(recent) >= limit:
                # the oldest wrong PINs must leave the window until one fewer than the limit
                # is left in it
                wait = max(wait, recent[len(recent) - limit] + window - t)
        return wait

    def _guesser(self, channel: str, guesser: str, t: float) -> Guesser | None:
        seen = self._guessers.get(channel)
        g = seen.get(guesser) if seen is not None else None
        if g is not None and t - g.last > self.SUSPECT_S:
            assert seen is not None
            del seen[guesser]
            return None
        return g

    def pin_failed(self, channel: str, guesser: str, now: float | None = None) -> None:
        """A wrong PIN on `channel` from `guesser`: its own wait grows (`own_wait_s`); unless
        it holds a pass, it counts with the crowd's, and enough of those lock the channel's
        join for the guessers that sent more than one."""
        t = self._clock() if now is None else now
        seen = self._guessers.setdefault(channel, OrderedDict())
        g = self._guesser(channel, guesser, t) or Guesser()
        g.failures += 1
        g.last = t
        g.until = t + self.own_wait_s(g.failures)
        seen[guesser] = g
        seen.move_to_end(guesser)
        while len(seen) > self.MAX_GUESSERS:
            seen.popitem(last=False)
        if guesser.startswith(PASS):
            return  # a phone that knew this PIN: a typo, not the crowd's guess
        q = self._failures.setdefault(channel, deque())
        was_open = self.locked_for(channel, t) == 0
        q.append(t)
        # (more than both counts is never needed to know when the lock ends)
        while len(q) > 2 * max(self._channel_limit, self._hour_limit):
            q.popleft()
        if was_open and (lock_s := self.locked_for(channel, t)) > 0:
            log.warning("channel %s: too many wrong PINs; joining is locked for %.0f s for "
                        "the phones and networks that sent more than %d (the operator can "
                        "give a new PIN)", channel, lock_s, self.TYPIST_FAILURES)

    def unlock(self, channel: str) -> None:
        """A new PIN: the guesses at the old one no longer matter, nor who made them."""
        self._failures.pop(channel, None)
        self._guessers.pop(channel, None)

    def pin_pass(self, channel: str, pin: str) -> str:
        """What a phone that joined `channel` with `pin` keeps (a cookie): with it, its later
        tries at this PIN are its own, never caught by others' guesses (`pass_holder`)."""
        nonce = secrets.token_urlsafe(12)
        return f"{nonce}.{self._pass_mac(channel, pin, nonce)}"

    def pass_holder(self, channel: str, pin: str, value: str | None) -> str | None:
        """The guesser a pass names (`pass:<nonce>`), if `value` is a pass this server gave
        for `channel` and its current `pin`; None otherwise (a new PIN ends every pass)."""
        if not value or len(value) > 200:
            return None
        nonce, _, mac = value.partition(".")
        if not nonce or not hmac.compare_digest(mac.encode(), self._pass_mac(channel, pin,
                                                                             nonce).encode()):
            return None
        return f"{PASS}{nonce}"

    def _pass_mac(self, channel: str, pin: str, nonce: str) -> str:
        msg = "\0".join(("pin-pass", channel, pin, nonce)).encode()
        return hmac.new(self._pass_key, msg, hashlib.sha256).hexdigest()[:32]

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


def pin_suspect(address: str) -> str:
    """Who a wrong PIN is held against: the client's address, an IPv6 one by its /64 (a
    host on a LAN may take any address of its /64 at will: one per guess, else)."""
    try:
        ip = ipaddress.ip_address(address)
    except ValueError:
        return address
    if isinstance(ip, ipaddress.IPv6Address):
        if ip.ipv4_mapped is not None:
            return str(ip.ipv4_mapped)
        return str(ipaddress.ip_network(f"{ip}/64", strict=False))
    return str(ip)


def pin_matches(given: str, expected: str) -> bool:
    return hmac.compare_digest(given.encode("utf-8"), expected.encode("utf-8"))
