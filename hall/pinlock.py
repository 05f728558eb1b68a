"""Guessing a channel's PIN (or an invite code): who a guesser is, how long each waits, when the
crowd's wrong PINs lock a channel's join, and the passes of the phones that joined.

Locks catch the guesser, not the typist. A guesser is a phone with a pass (a cookie from its
join with this PIN: `pin_pass`) or else its address, an IPv6 one by its /64 (`pin_suspect`: a
host on a LAN may take any address of its /64). Each guesser may try `attempts_per_minute`
times a minute per channel, and waits after its own wrong PINs: nothing after the first (a typo,
typed again at once), then 2 s, 4 s, 8 s... doubling up to an hour (`own_wait_s`). The wrong
PINs of guessers without a pass count together: while the last minute holds
`failures_per_minute` of them, or the last hour `failures_per_hour`, the channel's join is
locked for every guesser that sent more than one (`TYPIST_FAILURES`) in the day before its last
try; so guessing goes at most that fast however it is spread. A lock never catches a phone with
a pass (it knew the PIN; its typos are its own, not counted with the crowd's), nor a typist's
single mistake, nor anyone who never sent a wrong PIN. A new PIN (`unlock`) forgets the guesses
and the guessers, and ends every pass (a pass is signed for the PIN it was given with).

Times are monotonic seconds from `clock` (a test's `ManualClock.now`), or given (`now`).
"""

from __future__ import annotations

import hashlib
import hmac
import ipaddress
import logging
import math
import secrets
import time
from collections import OrderedDict, deque
from collections.abc import Callable
from dataclasses import dataclass

log = logging.getLogger("yomite.auth")


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


PASS = "pass:"  # a guesser named by its pass (PinLock.pass_holder), not by its address


@dataclass(slots=True)
class Guesser:
    """A guesser's wrong PINs at a channel: how many, the last, and when its wait ends."""

    failures: int = 0
    last: float = 0.0
    until: float = 0.0


class PinLock:
    """The PIN guessing of every channel of a process (see the module's words). `key`: what
    passes are signed with (the operator token's: a new token ends them)."""

    def __init__(self, key: bytes, attempts_per_minute: int = 10,
                 failures_per_minute: int = 30, failures_per_hour: int = 30,
                 clock: Callable[[], float] = time.monotonic) -> None:
        self._key = key
        self._attempts: dict[str, deque[float]] = {}
        self._limit = attempts_per_minute
        self._channel_limit = failures_per_minute
        self._hour_limit = failures_per_hour
        self._failures: dict[str, deque[float]] = {}
        # channel -> guesser -> its wrong PINs (the one that tried longest ago first)
        self._guessers: dict[str, OrderedDict[str, Guesser]] = {}
        self._clock = clock

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
        return min(PinLock.FIRST_WAIT_S * 2.0 ** (failures - 2), PinLock.MAX_WAIT_S)

    def check(self, channel: str, guesser: str, now: float | None = None) -> None:
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

    def failed(self, channel: str, guesser: str, now: float | None = None) -> None:
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
        return hmac.new(self._key, msg, hashlib.sha256).hexdigest()[:32]


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
