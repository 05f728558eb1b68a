"""Hostile clients against a real `yomite serve`: each attack of the hardening review, reproduced
over real sockets, and what the server does instead now (issue 9, items 3 to 12, and the
operator's remove-a-referee and new-PIN of issue 8).

One server for the module: channel `main` for the match, `side` for PIN guessing (its join
gets locked), `cap` for the referee cap."""

import asyncio
import itertools
import json
import re
import socket
import time
from pathlib import Path

import httpx2
import pytest
import websockets

from .serverproc import Server

pytestmark = pytest.mark.server

TOKEN = "hostile-operator-token-0123456789abcdef"
PUBLIC = "hall.example"
MAX_REFEREES = 5
CONFIG = {
    "match": {"memorise_s": 600, "cards": 2},
    "voice": {"engine": "estimate"},
    "audio": {"output": "null"},
    "server": {
        "channels": [{"name": "main"}, {"name": "side"}, {"name": "cap"}],
        "public_url": f"http://{PUBLIC}:8080",
        "referees": {"max_per_channel": MAX_REFEREES, "changes_per_s": 4, "changes_burst": 6},
        "limits": {"ws_messages_per_s": 100, "ws_burst": 40},
    },
}


@pytest.fixture(scope="module")
def server(tmp_path_factory):
    s = Server(tmp_path_factory.mktemp("hostile"), CONFIG, TOKEN).start()
    try:
        with httpx2.Client(base_url=s.base, headers=s.op, timeout=30) as c:
            c.post("/api/channels/main/match", json={"seed": 1})
            c.post("/api/channels/main/match/start")
        yield s
    finally:
        s.stop()


def pin_of(s: Server, ch: str = "main") -> str:
    return httpx2.get(f"{s.base}/api/channels/{ch}/pin", headers=s.op).json()["pin"]


def join(s: Server, name: str, ch: str = "main") -> dict:
    r = httpx2.post(f"{s.base}/api/channels/{ch}/referees", json={"pin": pin_of(s, ch),
                                                                  "name": name})
    assert r.status_code == 200, r.text
    return r.json()


def rss_kib(pid: int) -> int:
    status = Path(f"/proc/{pid}/status").read_text()
    return int(re.search(r"VmRSS:\s+(\d+)", status).group(1))


def raw_request(port: int, head: bytes, body_chunks=(), read: bool = True) -> bytes:
    """Send a request over a plain socket (what no polite client library would send)."""
    with socket.create_connection(("127.0.0.1", port), timeout=10) as sock:
        try:
            sock.sendall(head)
            for chunk in body_chunks:
                sock.sendall(chunk)
        except (BrokenPipeError, ConnectionResetError):
            pass  # the server answered and closed before the rest was sent: the point
        if not read:
            return b""
        out = b""
        try:
            while b"\r\n\r\n" not in out or len(out) < 600:
                b = sock.recv(65536)
                if not b:
                    break
                out += b
        except (ConnectionResetError, TimeoutError):
            pass
        return out


def status_of(response: bytes) -> int:
    return int(response.split(b" ", 2)[1])


def json_body(response: bytes) -> dict:
    return json.loads(response.split(b"\r\n\r\n", 1)[1])


# ---------------------------------------------------------------------- 3. sizes
def test_oversized_bodies_and_headers_are_refused_before_they_cost_memory(server):
    port = server.port
    before = rss_kib(server.proc.pid)
    big = b"x" * (1 << 20)
    for _ in range(10):  # ten anonymous 50 MB bodies to the join endpoint
        r = raw_request(port, b"POST /api/channels/main/referees HTTP/1.1\r\n"
                        b"Host: 127.0.0.1\r\nContent-Type: application/json\r\n"
                        b"Content-Length: 52428800\r\n\r\n", [big] * 50)
        assert status_of(r) == 413 and json_body(r)["error"] == "body_too_large"
    # the same without a declared length: refused as it passes the cap
    chunk = b"%x\r\n%s\r\n" % (len(big), big)
    r = raw_request(port, b"POST /api/channels/main/referees HTTP/1.1\r\nHost: 127.0.0.1\r\n"
                    b"Content-Type: application/json\r\nTransfer-Encoding: chunked\r\n\r\n",
                    [chunk] * 50)
    assert status_of(r) == 413
    # a 50 MB header, a 20 KB request line, 200 headers: 431, also on the WebSocket handshake
    r = raw_request(port, b"GET /api/health HTTP/1.1\r\nHost: 127.0.0.1\r\nX-Big: ",
                    [big] * 50 + [b"\r\n\r\n"])
    assert status_of(r) == 431 and json_body(r)["error"] == "headers_too_large"
    r = raw_request(port, b"GET /api/health?" + b"a" * 20000 + b" HTTP/1.1\r\n\r\n")
    assert status_of(r) == 431
    many = b"".join(b"X-H%d: v\r\n" % i for i in range(200))
    r = raw_request(port, b"GET /ws/channels/main HTTP/1.1\r\nHost: 127.0.0.1\r\n"
                    b"Upgrade: websocket\r\nConnection: Upgrade\r\nSec-WebSocket-Version: 13\r\n"
                    b"Sec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\n" + many + b"\r\n")
    assert status_of(r) == 431 and b"more than 64 headers" in r
    grown_mib = (rss_kib(server.proc.pid) - before) / 1024
    assert grown_mib < 30, f"the server grew by {grown_mib:.0f} MiB"
    # an honest request on the same server still works
    assert httpx2.get(f"{server.base}/api/health").status_code == 200


# ---------------------------------------------------------------------- 4. PIN guessing
def test_forwarded_headers_do_not_make_one_client_many(server):
    codes, sent, answered = [], [], []
    for i in range(12):
        sent.append(time.monotonic())
        r = httpx2.post(f"{server.base}/api/channels/side/referees",
                        json={"pin": "00000000", "name": "guess"},
                        headers={"X-Forwarded-For": f"10.0.{i}.1"})
        answered.append(time.monotonic())
        codes.append(r.status_code)
    # one client, whatever it claims: its second wrong PIN makes it wait (2 s, then doubling),
    # so a later guess is heard (403) only once that wait is over: on a loaded machine twelve
    # requests may outlast it. Twelve addresses would each have been heard at once
    assert codes[:2] == [403] * 2 and 429 in codes, codes
    # (a guess heard after the second was answered at least 2 s after the one before it was sent)
    heard = [k for k, c in enumerate(codes) if c == 403]
    waits = [answered[b] - sent[a] for a, b in itertools.pairwise(heard[1:])]
    assert all(w >= 2.0 for w in waits), (codes, [round(w, 2) for w in waits])
    assert len(pin_of(server, "side")) >= 6


def test_guesses_from_many_addresses_lock_the_channel_and_a_new_pin_unlocks_it(server):
    side = pin_of(server, "side")
    codes = []
    for n in range(2, 21):  # 19 clients, two guesses each: under every per-client limit
        with httpx2.Client(transport=httpx2.HTTPTransport(local_address=f"127.0.0.{n}")) as c:
            for k in range(2):
                r = c.post(f"{server.base}/api/channels/side/referees",
                           json={"pin": f"{n:06d}{k:02d}", "name": "guess"})
                codes.append(r.status_code)
    # each address's guesses are looked at (issue 25, item 11: a lock never refuses an
    # address that has not guessed wrong), and past 30 the channel is locked for them all
    # (issue 47: for those that sent more than one)
    assert codes == [403] * 38, codes
    with httpx2.Client(transport=httpx2.HTTPTransport(local_address="127.0.0.2")) as c:
        r = c.post(f"{server.base}/api/channels/side/referees", json={"pin": side, "name": "ok"})
        assert r.status_code == 429 and r.json()["params"]["why"] == "pin_channel"
        assert "many wrong PINs were sent here" in r.json()["detail"]
        # until the hour's wrong PINs are an hour old, less the few requests since (seconds
        # at most on a busy machine); a missing or zero Retry-After is the bug
        assert 3500 <= int(r.headers["retry-after"]) <= 3601
    # a referee from any other phone is let in with the right PIN, lock or not
    with httpx2.Client(transport=httpx2.HTTPTransport(local_address="127.0.0.77")) as c:
        r = c.post(f"{server.base}/api/channels/side/referees", json={"pin": side, "name": "ok"})
        assert r.status_code == 200, r.text
    with httpx2.Client(transport=httpx2.HTTPTransport(local_address="127.0.0.3")) as c:
        # the operator gives a new PIN: the old one is dead, the new one works at once, for
        # the guessers too (they are forgotten)
        new = httpx2.post(f"{server.base}/api/channels/side/pin", headers=server.op).json()
        assert new["pin"] != side and len(new["pin"]) >= 6 and new["pin"] in new["join_url"]
        assert c.post(f"{server.base}/api/channels/side/referees",
                      json={"pin": side, "name": "ok"}).status_code == 403
        r = c.post(f"{server.base}/api/channels/side/referees",
                   json={"pin": new["pin"], "name": "ok"})
        assert r.status_code == 200
    assert httpx2.get(f"{server.base}/api/channels/side/pin",
                      headers=server.op).json()["pin"] == new["pin"]
    assert (server.tmp / "journal" / "side" / "pin").read_text() == new["pin"]


# ---------------------------------------------------------------------- 5. a flood
def test_a_referee_flooding_hold_and_release_is_throttled_then_closed(server):
    ref = join(server, "flood")
    uri = f"ws://127.0.0.1:{server.port}/ws/channels/main?token={ref['token']}"
    n = 2000

    async def flood() -> int | None:
        async with websockets.connect(uri, max_size=None) as ws:
            try:
                for i in range(n):  # hold, release, ... as fast as the socket takes them
                    await ws.send(json.dumps({"type": "hold" if i % 2 == 0 else "release"}))
                async with asyncio.timeout(60):
                    while True:
                        await ws.recv()
            except websockets.ConnectionClosed as e:
                return e.rcvd.code if e.rcvd else None
        return None

    def changes() -> list[str]:
        log = httpx2.get(f"{server.base}/api/channels/main/match/log", headers=server.op,
                         timeout=30).json()
        return [r["event"]["type"] for r in log["records"]
                if r["event"]["type"] in ("hold", "release")
                and r["event"].get("referee") == ref["referee"]]

    t0 = time.monotonic()
    code = asyncio.run(flood())
    assert code == 1008  # 40 at once, 40 more read at 100 a second, then closed
    # the state and the journal at one moment (a change still waiting for the hand's rate may
    # be applied at any time: read the journal either side of the state until it did not
    # change in between)
    for _ in range(100):
        mine = changes()
        st = httpx2.get(f"{server.base}/api/channels/main", headers=server.op, timeout=30).json()
        if changes() == mine:
            break
    took = time.monotonic() - t0
    # lowering the hand is limited (6, then 4 a second) and raising it needs it lowered
    # first: at most twice that over the flood (and the time since: a busy machine only
    # allows more), not 2,000 fsyncs
    assert 2 <= len(mine) <= 2 * (6 + 4 * took) + 2, (len(mine), took)
    # the match is where the last change that was applied left it
    held = ref["referee"] in [h["referee"] for h in st["match"]["holds"]]
    assert held == (mine[-1] == "hold")
    # the phone comes back, politely, and its hand goes where it says
    async def polite() -> None:
        async with websockets.connect(uri) as ws:
            await ws.recv()
            await ws.send(json.dumps({"type": "hold" if not held else "release"}))
            async with asyncio.timeout(60):
                while True:
                    m = json.loads(await ws.recv())
                    if m["type"] == "state" and (ref["referee"] in [
                            h["referee"] for h in m["match"]["holds"]]) != held:
                        return

    # the referee still owes the burst it flooded (issue 25, item 7: connecting again does not
    # renew it): its next sockets are closed at once until it has kept quiet that long, and
    # the page connects again, as its own code does
    deadline = time.monotonic() + 60
    while True:
        try:
            asyncio.run(polite())
            break
        except websockets.ConnectionClosed as e:
            assert e.rcvd is not None and e.rcvd.reason == "too many messages", e
            assert time.monotonic() < deadline
            time.sleep(0.1)  # the page's back-off
    httpx2.delete(f"{server.base}/api/channels/main/holds/{ref['referee']}", headers=server.op)


# ---------------------------------------------------------------------- 6. mass join
def test_referees_are_capped_stored_one_line_a_join_and_viewers_see_only_raised_hands(server):
    store = server.tmp / "journal" / "referees.jsonl"
    lines = len(store.read_text().splitlines())
    refs = [join(server, f"cap {i}", ch="cap") for i in range(MAX_REFEREES)]
    assert len(store.read_text().splitlines()) == lines + MAX_REFEREES
    r = httpx2.post(f"{server.base}/api/channels/cap/referees",
                    json={"pin": pin_of(server, "cap"), "name": "one too many"})
    assert r.status_code == 409 and r.json()["error"] == "too_many_referees"
    op = httpx2.get(f"{server.base}/api/channels/cap", headers=server.op).json()
    assert len(op["referees"]) == MAX_REFEREES
    viewer = httpx2.get(f"{server.base}/api/channels/cap").json()
    assert viewer["referees"] == [] and "pin" not in viewer
    httpx2.post(f"{server.base}/api/channels/cap/match", json={"seed": 4}, headers=server.op)
    r = httpx2.put(f"{server.base}/api/channels/cap/holds/{refs[2]['referee']}",
                   headers={"Authorization": f"Bearer {refs[2]['token']}"})
    assert r.status_code == 200, r.text
    viewer = httpx2.get(f"{server.base}/api/channels/cap").json()
    assert [r["name"] for r in viewer["referees"]] == ["cap 2"]


# ---------------------------------------------------------------------- 7, 8, 9
def test_a_long_static_name_is_a_404(server):
    r = httpx2.get(f"{server.base}/static/{'a' * 300}.js")
    assert r.status_code == 404 and r.json()["error"] == "not_found"
    assert httpx2.get(f"{server.base}/static/common.js").status_code == 200
    assert "ENAMETOOLONG" not in server.log() and "File name too long" not in server.log()


@pytest.mark.parametrize("name", ["mat\n1", "mat\r1", "nul\x00", "\x1b[31mred", "ab\u202ecd",
                                  "zero\u200bwidth", "line\u2028sep", "   "])
def test_names_that_could_forge_a_log_line_or_turn_a_screen_are_refused(server, name):
    r = httpx2.post(f"{server.base}/api/channels/main/referees",
                    json={"pin": pin_of(server), "name": name})
    assert r.status_code == 422, r.text
    assert "name" in r.json()["detail"]


def test_names_are_normalised_and_logged_quoted(server):
    ref = join(server, "ｍａｔ　３")  # full-width letters, digit and space
    assert ref["name"] == "mat 3"
    assert re.search(rf"referee {ref['referee']} \('mat 3'\) joined", server.log())


def test_secrets_in_percent_encoded_query_keys_are_redacted(server):
    ref = join(server, "redact")

    async def connect(query: str) -> str:
        uri = f"ws://127.0.0.1:{server.port}/ws/channels/main?{query}"
        async with websockets.connect(uri) as ws:
            return json.loads(await ws.recv())["role"]

    # the parser decodes the key: this authenticates, so it must be redacted too
    assert asyncio.run(connect(f"%74oken={ref['token']}")) == "referee"
    httpx2.get(f"{server.base}/referee/main?p%69n={pin_of(server)}&T%4fKEN=abc")
    deadline = time.monotonic() + 30  # the access log's line is written after the answer
    while "T%4fKEN=" not in server.log() and time.monotonic() < deadline:
        time.sleep(0.05)
    log = server.log()
    access = [ln for ln in log.splitlines() if '"GET ' in ln or '"WebSocket ' in ln]
    assert ref["token"] not in log
    assert not [ln for ln in access if pin_of(server) in ln]  # (the banner prints the PIN)
    assert "%74oken=***" in log and "p%69n=***" in log and "T%4fKEN=***" in log


# ---------------------------------------------------------------------- 10. DNS rebinding
def test_only_the_servers_own_names_are_answered(server):
    host = {"Host": "evil.example"}
    r = httpx2.get(f"{server.base}/api/channels/main", headers=host)
    assert r.status_code == 421 and r.json()["error"] == "unknown_host"

    async def rebind() -> int | None:
        uri = f"ws://127.0.0.1:{server.port}/ws/channels/main"
        try:
            async with websockets.connect(uri, additional_headers={
                    "Host": "evil.example", "Origin": "http://evil.example"}) as ws:
                await ws.recv()
        except websockets.InvalidStatus as e:
            return e.response.status_code
        except websockets.ConnectionClosed as e:
            return e.rcvd.code if e.rcvd else None
        return None

    assert asyncio.run(rebind()) in (403, 1008)
    for ok in (f"127.0.0.1:{server.port}", "localhost", f"{PUBLIC}:8080", "[::1]:8080",
               socket.gethostname()):
        assert httpx2.get(f"{server.base}/api/health", headers={"Host": ok}).status_code == 200


# ---------------------------------------------------------------------- 11. framing
def test_pages_forbid_framing_and_carry_a_strict_policy(server):
    for path in ("/console", "/referee/main", "/display/main"):
        r = httpx2.get(f"{server.base}{path}")
        assert r.headers["x-frame-options"] == "DENY"
        csp = r.headers["content-security-policy"]
        assert "frame-ancestors 'none'" in csp and "script-src 'self'" in csp
        assert r.headers["referrer-policy"] == "no-referrer"
    assert httpx2.get(f"{server.base}/api/health").headers["x-content-type-options"] == "nosniff"


# ---------------------------------------------------------------------- 12. odd messages
def test_odd_websocket_messages_get_an_error_and_the_socket_lives(server):
    ref = join(server, "odd")

    async def scenario() -> list[str]:
        errors = []
        uri = f"ws://127.0.0.1:{server.port}/ws/channels/main"
        async with websockets.connect(f"{uri}?token={TOKEN}") as op, \
                websockets.connect(f"{uri}?token={ref['token']}") as me:
            for ws in (op, me):
                await ws.recv()
                await ws.recv()
            cases = [
                (op, "[" * 1000 + "]" * 1000),  # deeper than the JSON parser goes
                (op, json.dumps({"type": "hold", "referee": "@recovered"})),
                (op, json.dumps({"type": "hold", "referee": {"id": "x"}})),
                (op, json.dumps({"type": "hold", "referee": "a b\n"})),
                (me, json.dumps({"type": "hold", "referee": "r00000000"})),
                (me, json.dumps({"type": "hold", "extra": 1})),
                (me, json.dumps({"type": "ping", "seq": True})),
            ]
            for ws, text in cases:
                await ws.send(text)
                async with asyncio.timeout(30):
                    while True:
                        m = json.loads(await ws.recv())
                        if m["type"] == "error":
                            errors.append(m["error"])
                            break
            await op.send(json.dumps({"type": "ping"}))
            async with asyncio.timeout(30):
                while json.loads(await op.recv())["type"] != "pong":
                    pass
        return errors

    assert asyncio.run(scenario()) == ["bad_message", "forbidden", "bad_message", "bad_message",
                                       "forbidden", "bad_message", "bad_message"]
    # REST answers the same values the same way
    r = httpx2.put(f"{server.base}/api/channels/main/holds/@recovered", headers=server.op)
    assert r.status_code == 403


def test_strict_types_in_requests(server):
    with httpx2.Client(base_url=server.base, headers=server.op) as c:
        r = c.post("/api/channels/cap/match", json={"seed": True})
        assert r.status_code == 422 and "seed" in r.json()["detail"]
        r = c.post("/api/channels/cap/match", json={"overrides": {"cards": True}})
        assert r.status_code == 422 and "cards" in r.json()["detail"]
        r = c.post("/api/channels/cap/match", json={"poems": ["3"]})
        assert r.status_code == 422
        r = c.post("/api/channels/cap/match", content=b"[" * 5000 + b"]" * 5000,
                   headers={"content-type": "application/json"})
        assert r.status_code in (400, 422) and r.json()["hint"]
        assert c.post("/api/channels/cap/match", json={"seed": 3}).status_code == 200
    assert "Traceback" not in server.log()


# ---------------------------------------------------------------------- issue 8, item 16
def test_the_operator_removes_a_referee_its_token_dies_and_its_hand_goes_down(server):
    ref = join(server, "leaving")
    auth = {"Authorization": f"Bearer {ref['token']}"}
    assert httpx2.put(f"{server.base}/api/channels/main/holds/{ref['referee']}",
                      headers=auth).status_code == 200

    async def removed_while_connected() -> int | None:
        uri = f"ws://127.0.0.1:{server.port}/ws/channels/main?token={ref['token']}"
        async with websockets.connect(uri) as ws:
            await ws.recv()
            r = httpx2.delete(f"{server.base}/api/channels/main/referees/{ref['referee']}",
                              headers=server.op)
            assert r.status_code == 200, r.text
            try:
                async with asyncio.timeout(30):
                    while True:
                        await ws.recv()
            except websockets.ConnectionClosed as e:
                return e.rcvd.code if e.rcvd else None
        return None

    assert asyncio.run(removed_while_connected()) == 1008
    st = httpx2.get(f"{server.base}/api/channels/main", headers=server.op).json()
    assert ref["referee"] not in [h["referee"] for h in st["match"]["holds"]]
    assert ref["referee"] not in [r["id"] for r in st["referees"]]
    r = httpx2.put(f"{server.base}/api/channels/main/holds/{ref['referee']}", headers=auth)
    assert r.status_code == 401
    r = httpx2.delete(f"{server.base}/api/channels/main/referees/{ref['referee']}",
                      headers=server.op)
    assert r.status_code == 404


def test_yesterdays_referees_are_forgotten_at_start(tmp_path):
    """(With server.referees.keep_across_days they are kept: tests/test_auth.py.)"""
    s = Server(tmp_path, {"voice": {"engine": "estimate"}, "audio": {"output": "null"}},
               TOKEN).start()
    try:
        old, new = join(s, "yesterday"), join(s, "today")
        s.stop()
        store = tmp_path / "journal" / "referees.jsonl"
        rows = [json.loads(x) for x in store.read_text().splitlines()]
        for r in rows:
            if r["id"] == old["referee"]:
                r["joined"] -= 86400  # it joined a day earlier
        store.write_text("".join(json.dumps(r) + "\n" for r in rows))
        s.start()
        who = {r["id"] for r in httpx2.get(f"{s.base}/api/channels/main",
                                           headers=s.op).json()["referees"]}
        assert who == {new["referee"]}
        for ref, code in ((old, 401), (new, 200)):
            assert httpx2.get(f"{s.base}/api/session", headers={
                "Authorization": f"Bearer {ref['token']}"}).status_code == code
        assert len(store.read_text().splitlines()) == 1  # the file was compacted
    finally:
        s.stop()
