"""The PIN lock (issue 25, item 11): wrong PINs lock a channel's join for the addresses that
sent them, never for a referee who comes with the right PIN from anywhere else; a new PIN
forgets every guess and every guesser; guessing a 6-digit PIN stays a matter of years, also
for a guesser that keeps under the minute's count or that takes many addresses.

The policy's arithmetic is tested on `Auth` with explicit times (a day or a month passes in a
loop); the wire test shows the 429s and the 200 on a real server."""

from __future__ import annotations

import heapq

import httpx2
import pytest

from hall.auth import Auth, RateLimited, pin_suspect

from .serverproc import Server

TOKEN = "pin-lock-operator-token-0123456789abcdef"


def auth(**kw: int) -> Auth:
    return Auth("operator-token-0123456789", kw.pop("pin_attempts_per_minute", 10), **kw)


def guess(a: Auth, address: str, t: float, channel: str = "main") -> float | None:
    """A wrong PIN from `address` at `t`: None if it was checked, else the Retry-After."""
    try:
        a.check_pin_rate(f"{channel}/{address}", t, channel=channel,
                         suspect=pin_suspect(address))
    except RateLimited as e:
        return e.retry_after_s
    a.pin_failed(channel, t, suspect=pin_suspect(address))
    return None


def admitted(a: Auth, address: str, t: float, channel: str = "main") -> bool:
    """Whether a right PIN from `address` at `t` would be checked (and so let in)."""
    try:
        a.check_pin_rate(f"{channel}/{address}", t, channel=channel,
                         suspect=pin_suspect(address))
    except RateLimited:
        return False
    return True


def test_a_lock_keeps_out_only_the_addresses_that_guessed_wrong():
    a = auth()
    t = 1000.0
    # 30 wrong PINs from six addresses in a second and a half: the report's lock
    for i in range(30):
        assert guess(a, f"10.0.0.{1 + i % 6}", t + i * 0.05) is None
    t += 2
    # a referee with the right PIN from its own phone is let in at once
    assert admitted(a, "10.0.0.50", t)
    # the guessers are refused without their PIN being looked at, until the hour's 30 wrong
    # PINs are an hour old
    retry = guess(a, "10.0.0.1", t)
    assert retry is not None and 3590 <= retry <= 3600, retry
    assert not admitted(a, "10.0.0.2", t)
    # another channel is not touched
    assert admitted(a, "10.0.0.1", t, channel="pink")
    # a new address that guesses wrong while the channel is locked is checked once, then
    # kept out like the others
    assert guess(a, "10.0.0.60", t) is None
    assert guess(a, "10.0.0.60", t + 1) is not None
    # an hour on, the guessers may try again
    assert admitted(a, "10.0.0.1", t + 3600)


def test_a_new_pin_forgets_the_guesses_and_the_guessers():
    a = auth()
    t = 1000.0
    for i in range(30):
        guess(a, f"10.0.0.{1 + i % 6}", t)
    first = guess(a, "10.0.0.1", t)
    assert first is not None
    a.unlock("main")  # the operator gives a new PIN
    assert admitted(a, "10.0.0.1", t + 1)  # the guessers are forgotten
    for i in range(30):
        guess(a, f"10.0.1.{1 + i % 6}", t + 1)
    # and the next lock is no longer than the first: nothing of the old guesses is left
    assert guess(a, "10.0.1.1", t + 1) == pytest.approx(first)


def test_a_guesser_that_keeps_under_the_minutes_count_is_locked_within_the_hour():
    a = auth()
    t = 1000.0
    refused = None
    n = 0
    while refused is None and n < 3600:  # a wrong PIN every 2.1 s: never 30 in a minute
        refused = guess(a, f"10.0.0.{1 + n % 3}", t + n * 2.1)
        n += 1
    assert refused is not None, "28 wrong PINs a minute went on for two hours"
    assert n <= 31


@pytest.mark.parametrize("addresses", [1, 3, 250])
def test_guessing_a_six_digit_pin_takes_over_a_year(addresses: int):
    """An attacker that guesses as fast as the policy lets it, from `addresses` addresses (a
    laptop; three; a whole /24 taken over), for thirty days: its guesses a day, and what
    that makes the expected time to find a 6-digit PIN (half the million)."""
    a = auth()
    days = 30
    end = days * 86400.0
    ready = [(0.0, f"10.0.{n // 250}.{n % 250}") for n in range(addresses)]
    guesses = 0
    while ready[0][0] < end:
        t, address = heapq.heappop(ready)
        retry = guess(a, address, t)
        if retry is None:
            guesses += 1
        heapq.heappush(ready, (t + max(retry or 0.0, 0.001), address))
    per_day = guesses / days
    years = 500_000 / per_day / 365.25
    print(f"\n{addresses} address(es): {per_day:.0f} guesses a day: a 6-digit PIN in "
          f"{years:.1f} years on average")
    assert years > 1.4, (per_day, years)


# ---------------------------------------------------------------------- on the wire
@pytest.mark.server
def test_a_locked_channel_still_lets_a_referee_with_the_right_pin_in(tmp_path):
    s = Server(tmp_path, {"voice": {"engine": "estimate"}, "audio": {"output": "null"},
                          "server": {"channels": [{"name": "side"}]}}, TOKEN).start()
    try:
        base = f"{s.base}/api/channels/side"
        pin = httpx2.get(f"{base}/pin", headers=s.op).json()["pin"]
        wrong = f"{(int(pin) + 1) % 10 ** len(pin):0{len(pin)}d}"

        def post(address: str, p: str, name: str = "mat") -> httpx2.Response:
            with httpx2.Client(transport=httpx2.HTTPTransport(local_address=address)) as c:
                return c.post(f"{base}/referees", json={"pin": p, "name": name})

        # 30 wrong PINs from three addresses (9 each) and a fourth (3): the channel locks
        codes = [post(f"127.0.0.{2 + i % 3}", wrong).status_code for i in range(27)]
        codes += [post("127.0.0.6", wrong).status_code for _ in range(3)]
        assert codes == [403] * 30
        # a guesser comes with the right PIN: refused, the PIN not even looked at, until the
        # hour's wrong PINs are an hour old
        r = post("127.0.0.6", pin)
        assert r.status_code == 429 and r.json()["error"] == "rate_limited"
        first = int(r.headers["retry-after"])
        assert 3500 <= first <= 3601
        # a referee from any other phone is let in with it, at once
        r = post("127.0.0.7", pin, "mat 7")
        assert r.status_code == 200, r.text
        # the operator gives a new PIN: the guessers are forgotten
        new = httpx2.post(f"{base}/pin", headers=s.op).json()["pin"]
        assert post("127.0.0.6", new, "mat 6").status_code == 200
        # and the next lock is no longer than the first
        wrong = f"{(int(new) + 1) % 10 ** len(new):0{len(new)}d}"
        codes = [post(f"127.0.0.{10 + i % 3}", wrong).status_code for i in range(30)]
        assert codes == [403] * 30
        r = post("127.0.0.10", new)
        # (later than the first, so its whole hour is still to run: an hour at most, never
        # the doubled two of the old policy)
        assert r.status_code == 429 and int(r.headers["retry-after"]) <= 3601
    finally:
        s.stop()
