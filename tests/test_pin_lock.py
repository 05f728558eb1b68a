"""The PIN lock (issue 25, item 11; issue 47, item 5): locks catch the guesser, not the typist.

A guesser is a phone that joined with this PIN before (its pass, a cookie) or else an address,
an IPv6 one by its /64. Each waits after its own wrong PINs (none after the first, then 2 s,
doubling up to an hour); the wrong PINs of guessers without a pass lock the channel's join
(30 a minute or an hour) for the guessers that sent more than one. So a phone that joined
before is never locked out by others' guesses from its network, a typist's single mistake
during an attack costs nothing, and guessing a 6-digit PIN stays a matter of years, also for a
guesser that keeps under the minute's count or that takes many addresses.

The policy's arithmetic is tested on `PinLock` with explicit times (a day or a month passes in a
loop); the wire tests show the 429s, their words and the 200s on a real server, whose clients
pose as many addresses through X-Forwarded-For (the server trusts the test's loopback as a
proxy: `server.security.trusted_proxies`)."""

from __future__ import annotations

import heapq
import re
import time

import httpx2
import pytest

from hall.pinlock import PASS, PinLock, RateLimited, pin_suspect

from .serverproc import Server

TOKEN = "pin-lock-operator-token-0123456789abcdef"


def auth(**kw: int) -> PinLock:
    return PinLock(b"a server's key", kw.pop("attempts_per_minute", 10), **kw)


def guess(a: PinLock, who: str, t: float, channel: str = "main") -> float | None:
    """A wrong PIN from `who` (an address, or a pass's guesser) at `t`: None if it was
    checked, else the Retry-After."""
    guesser = who if who.startswith(PASS) else pin_suspect(who)
    try:
        a.check(channel, guesser, t)
    except RateLimited as e:
        return e.retry_after_s
    a.failed(channel, guesser, t)
    return None


def admitted(a: PinLock, who: str, t: float, channel: str = "main") -> bool:
    """Whether a right PIN from `who` at `t` would be checked (and so let in)."""
    try:
        a.check(channel, who if who.startswith(PASS) else pin_suspect(who), t)
    except RateLimited:
        return False
    return True


def attack(a: PinLock, t: float, n: int = 15, prefix: str = "10.0.0.") -> None:
    """30 wrong PINs from `n` addresses, two each: the channel locks for them."""
    for i in range(2 * n):
        assert guess(a, f"{prefix}{1 + i % n}", t + i * 0.01) is None


def test_a_guessers_own_wait_grows_with_its_own_wrong_pins():
    assert [PinLock.own_wait_s(n) for n in range(1, 15)] == [
        0, 2, 4, 8, 16, 32, 64, 128, 256, 512, 1024, 2048, 3600, 3600]
    a = auth()
    t = 1000.0
    assert guess(a, "10.0.0.1", t) is None  # a typo: typed again at once
    assert guess(a, "10.0.0.1", t) is None
    assert guess(a, "10.0.0.1", t + 1) == pytest.approx(1)  # 2 s after the second
    assert guess(a, "10.0.0.1", t + 2) is None
    assert guess(a, "10.0.0.1", t + 5) == pytest.approx(1)  # 4 s after the third
    # anyone else is not held by it
    assert admitted(a, "10.0.0.2", t + 5)


def test_an_attack_locks_the_guessers_not_a_typists_single_mistake():
    a = auth()
    t = 1000.0
    attack(a, t)
    t += 1
    # every guesser is refused, the PIN not looked at, until the hour's wrong PINs are an
    # hour old
    retry = guess(a, "10.0.0.1", t)
    assert retry is not None and 3590 <= retry <= 3600, retry
    assert not admitted(a, "10.0.0.2", t)
    # a referee who mistypes once during the attack types it again and is in at once
    assert guess(a, "10.0.0.50", t) is None
    assert admitted(a, "10.0.0.50", t)
    # a second mistake is a guesser's
    assert guess(a, "10.0.0.50", t) is None
    assert not admitted(a, "10.0.0.50", t + 10)
    # anyone who sent no wrong PIN, and another channel, are not touched
    assert admitted(a, "10.0.0.99", t)
    assert admitted(a, "10.0.0.1", t, channel="pink")
    # an hour on, the guessers may try again
    assert admitted(a, "10.0.0.1", t + 3600)


def test_a_phone_with_a_pass_is_never_locked_by_its_networks_guesses():
    a = auth()
    t = 1000.0
    pin = "123456"
    ok = a.pin_pass("main", pin)
    phone = a.pass_holder("main", pin, ok)
    assert phone is not None and phone.startswith(PASS)
    # a pass is this channel's and this PIN's, and cannot be made up
    assert a.pass_holder("pink", pin, ok) is None
    assert a.pass_holder("main", "654321", ok) is None  # a new PIN ends every pass
    assert a.pass_holder("main", pin, ok[:-1] + ("0" if ok[-1] != "0" else "1")) is None
    assert a.pass_holder("main", pin, "x" * 500) is None
    other = PinLock(b"another server's key")
    assert other.pass_holder("main", pin, ok) is None  # another operator token's server
    # its network (one /64: a host takes any of its addresses) guesses with others, and the
    # channel locks
    net = "2001:db8:47:1::"
    assert guess(a, f"{net}1", t) is None and guess(a, f"{net}2", t) is None
    assert guess(a, f"{net}3", t) is not None  # every address of the /64: one guesser
    attack(a, t)
    t += 5
    assert a.locked_for("main", t) > 3000
    assert not admitted(a, f"{net}ffff", t)
    assert admitted(a, phone, t)
    # the phone's own typo is its own: it does not count with the crowd's
    before = a.locked_for("main", t)
    assert guess(a, phone, t) is None and admitted(a, phone, t)
    assert a.locked_for("main", t) == pytest.approx(before)


def test_a_new_pin_forgets_the_guesses_and_the_guessers():
    a = auth()
    t = 1000.0
    attack(a, t)
    first = guess(a, "10.0.0.1", t + 5)
    assert first is not None
    a.unlock("main")  # the operator gives a new PIN
    assert admitted(a, "10.0.0.1", t + 6)  # the guessers are forgotten
    attack(a, t + 6, prefix="10.0.1.")
    # and the next lock is no longer than the first: nothing of the old guesses is left
    assert guess(a, "10.0.1.1", t + 11) == pytest.approx(first)


def test_a_guesser_that_keeps_under_the_minutes_count_is_locked_within_the_hour():
    a = auth()
    t = 1000.0
    # a wrong PIN every 2.1 s from three addresses, for an hour: never 30 in a minute
    looked_at = sum(guess(a, f"10.0.0.{1 + n % 3}", t + n * 2.1) is None
                    for n in range(int(3600 / 2.1)))
    assert looked_at <= 30, f"{looked_at} wrong PINs were looked at in the hour"


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
def test_on_the_wire_the_guessers_are_locked_not_a_phone_that_joined_nor_a_typist(tmp_path):
    s = Server(tmp_path, {"voice": {"engine": "estimate"}, "audio": {"output": "null"},
                          "server": {"channels": [{"name": "side"}, {"name": "quiet"}],
                                     "security": {"trusted_proxies": ["127.0.0.1"]}}},
               TOKEN).start()
    try:
        def pin_of(ch: str) -> str:
            return str(httpx2.get(f"{s.base}/api/channels/{ch}/pin", headers=s.op).json()["pin"])

        pin = pin_of("side")
        wrong = f"{(int(pin) + 1) % 10 ** len(pin):0{len(pin)}d}"

        def post(address: str, p: str, c: httpx2.Client | None = None, ch: str = "side",
                 name: str = "mat") -> httpx2.Response:
            return (c or httpx2).post(f"{s.base}/api/channels/{ch}/referees",
                                      json={"pin": p, "name": name},
                                      headers={"X-Forwarded-For": address})

        # a phone joins before the attack, from the /64 the attacker will guess from: the
        # answer gives it a pass (a cookie for this channel's joins)
        phone = httpx2.Client()
        r = post("2001:db8:47:1::10", pin, phone)
        assert r.status_code == 200, r.text
        cookie = r.headers["set-cookie"]
        assert "yomite_pin_pass=" in cookie and "HttpOnly" in cookie
        assert "Path=/api/channels/side/referees" in cookie
        assert "samesite=strict" in cookie.lower()

        # the attacker: its /64's addresses are one guesser, whose second wrong PIN makes it
        # wait 2 s (before: each address of the /64 had ten tries a minute)
        net = "2001:db8:47:1::"
        codes = [post(f"{net}{i:x}", wrong).status_code for i in (1, 2)]
        r = post(f"{net}3", wrong)
        assert codes == [403, 403] and r.status_code == 429, (codes, r.text)
        assert r.json()["params"] == {"seconds": 2, "why": "pin_own"}
        assert r.headers["retry-after"] == "2" and "wait 2 s" in r.json()["hint"]
        # and fourteen IPv4 hosts, two wrong PINs each: 30, the channel locks for them all
        codes = [post(f"10.47.0.{1 + i % 14}", wrong).status_code for i in range(28)]
        assert codes == [403] * 28, codes
        for guesser in (f"{net}ffff", "10.47.0.1"):
            r = post(guesser, pin)
            assert r.status_code == 429, r.text
            body = r.json()
            assert body["error"] == "rate_limited" and body["params"]["why"] == "pin_channel"
            # until the hour's wrong PINs are an hour old, less the seconds since
            assert 3500 <= int(r.headers["retry-after"]) <= 3601
            assert body["params"]["seconds"] == int(r.headers["retry-after"])
            assert "ask the operator for a new PIN" in body["hint"]

        # the phone that joined before, from another address of the attacker's /64, joins
        # again at once (its referee was removed, or the page was opened anew)
        r = post(f"{net}20", pin, phone, name="mat again")
        assert r.status_code == 200, r.text
        # its own typo costs nothing, and is not counted with the attacker's
        assert post(f"{net}20", wrong, phone).status_code == 403
        assert post(f"{net}20", pin, phone).status_code == 200

        # a referee who mistypes once during the attack, then types the right PIN: in at once
        t0 = time.monotonic()
        assert post("10.47.9.9", wrong).status_code == 403
        r = post("10.47.9.9", pin, name="typist")
        assert r.status_code == 200, r.text
        assert time.monotonic() - t0 < 30

        # a typist's two mistakes on a quiet channel: a wait of seconds, then in
        quiet = pin_of("quiet")
        bad = f"{(int(quiet) + 1) % 10 ** len(quiet):0{len(quiet)}d}"
        assert [post("10.47.8.8", bad, ch="quiet").status_code for _ in range(2)] == [403, 403]
        r = post("10.47.8.8", quiet, ch="quiet")
        assert r.status_code == 429 and int(r.headers["retry-after"]) <= 2, r.text
        time.sleep(int(r.headers["retry-after"]) + 0.2)
        assert post("10.47.8.8", quiet, ch="quiet").status_code == 200

        # the operator gives a new PIN: the guessers are forgotten, the passes end with the
        # old PIN (the phone is a guesser like any other until it joins with the new one)
        new = httpx2.post(f"{s.base}/api/channels/side/pin", headers=s.op).json()["pin"]
        assert post("10.47.0.1", new, name="mat 1").status_code == 200
        phone.close()
    finally:
        s.stop()


@pytest.mark.server
@pytest.mark.browser
def test_the_referee_page_says_how_long_to_wait_and_what_to_do(tmp_path):
    """The 429's words on the phone, in its language, with the seconds (a typist's second
    wrong PIN: 2 s)."""
    from playwright.sync_api import expect

    from .chromium import launched, watch_errors

    s = Server(tmp_path, {"voice": {"engine": "estimate"}, "audio": {"output": "null"},
                          "server": {"channels": [{"name": "side"}]}}, TOKEN).start()
    errors: list[str] = []
    try:
        pin = str(httpx2.get(f"{s.base}/api/channels/side/pin", headers=s.op).json()["pin"])
        wrong = f"{(int(pin) + 1) % 10 ** len(pin):0{len(pin)}d}"
        for browser in launched():
            ctx = browser.new_context(locale="ja-JP", viewport={"width": 360, "height": 740})
            page = watch_errors(ctx.new_page(), errors)
            page.goto(f"{s.base}/referee/side")
            page.fill("#pin", wrong)
            page.fill("#name", "mat 1")
            toast = page.locator(".toast strong")
            for n in (1, 2):
                page.click("#join-button")
                expect(toast).to_have_count(n)
                expect(toast.last).to_contain_text("違います")
            page.evaluate("Y.clearErrors()")
            page.click("#join-button")  # the third try: this phone waits 2 s
            expect(toast).to_have_count(1)
            said = toast.last.inner_text().replace("\u200b", "")
            assert "2 秒待ってから" in said and "倍" in said, said
            page.click("button.lang")
            # (if the 2 s went by on a slow machine, that try is a third wrong PIN: 4 s then)
            for _ in range(2):
                page.evaluate("Y.clearErrors()")
                page.click("#join-button")
                expect(page.locator(".toast")).to_have_count(1)
                said = page.locator(".toast").last.inner_text()
                if "rate_limited" in said:
                    break
            assert re.search(r"Wrong PIN from this phone: wait [1-4] s", said), said
            assert "doubles the wait" in said, said
            ctx.close()
    finally:
        s.stop()
    assert not errors, errors
