"""Fuzz the API against a real server: the HTTP API from its own OpenAPI schema, the WebSocket
messages from their JSON Schema (both with schemathesis), and the hostile inputs of the
hardening review as explicit cases. No 5xx, no hang (every message is answered before the
next ping's pong), no channel task ended, no socket closed without a close frame."""

import contextlib
import json
import os
import socket

import httpx2
import pytest
import requests
import schemathesis
from hypothesis import HealthCheck, settings
from schemathesis.core import NOT_SET
from websockets.exceptions import ConnectionClosed
from websockets.sync.client import ClientConnection, connect

from api.app import create_app
from api.protocol import CLIENT, Ping
from hall.config import parse_config

from .serverproc import Server

pytestmark = pytest.mark.server

TOKEN = "fuzz-operator-token-0123456789abcdef"
CONFIG = {
    "match": {"memorise_s": 2, "cards": 2},
    "voice": {"engine": "estimate"},
    "audio": {"output": "null"},
    "server": {"security": {"pin_attempts_per_minute": 1000}},
}
# cases per operation in the fuzzing phase (plus the coverage phase's): 35 gives about 1,800
# HTTP cases a run, each run drawing new ones; a deeper search: YOMITE_FUZZ_EXAMPLES=500
EXAMPLES = int(os.environ.get("YOMITE_FUZZ_EXAMPLES", "35"))


def focused_spec():
    """The app's own schema, with the channel and referee path parameters drawn from names
    that exist, so the cases reach the handlers instead of 404s."""
    spec = create_app(parse_config(CONFIG)).openapi()
    # the desk's routes are fuzzed with a tournament to reach (tests/test_desk_fuzz.py)
    spec["paths"] = {k: v for k, v in spec["paths"].items()
                     if not k.startswith("/api/tournaments")}
    for item in spec["paths"].values():
        for op in item.values():
            for p in op.get("parameters", []):
                if p["in"] == "path" and p["name"] == "ch":
                    p["schema"] = {"type": "string", "enum": ["main"]}
                elif p["in"] == "path" and p["name"] == "referee":
                    p["schema"] = {"type": "string", "enum": ["@operator", "@audio", "r1", "x"]}
    return spec


@pytest.fixture(scope="module")
def api_schema():
    return schemathesis.openapi.from_dict(focused_spec())


# built when the test runs, on the worker that runs it, not by every worker's collection (the
# cases of its coverage phase took 6 s of CPU to collect, four times over)
schema = schemathesis.pytest.from_fixture("api_schema")
calls = {"n": 0, "by_status": {}}
# one kept-alive connection, and no proxy lookup in the environment for each of the cases
SESSION = requests.Session()
SESSION.trust_env = False


@pytest.fixture(scope="module")
def server(tmp_path_factory):
    s = Server(tmp_path_factory.mktemp("fuzz"), CONFIG, TOKEN).start()
    yield s
    s.stop()


# the settings outside: the lazy runner reads them from the test it returns
@settings(max_examples=EXAMPLES, deadline=None,
          suppress_health_check=list(HealthCheck))
@schema.parametrize()
def test_no_server_errors(case, server):
    # half the cases as the operator (deep paths), half as whoever the schema makes up
    headers = {"Authorization": f"Bearer {TOKEN}"} if calls["n"] % 2 == 0 else None
    response = case.call(base_url=server.base, session=SESSION, headers=headers, timeout=10)
    calls["n"] += 1
    calls["by_status"][response.status_code] = calls["by_status"].get(response.status_code, 0) + 1
    assert response.status_code < 500, (case.method, case.formatted_path, response.text)
    if response.status_code == 400 and response.text == "Invalid HTTP request received.":
        return  # uvicorn's parser refused it (a header no HTTP parser takes): not the app's answer
    if response.status_code >= 400:
        body = response.json()
        assert body["detail"], body


# ---------------------------------------------------------------------- the WebSocket
def ws_spec() -> dict:
    """The WebSocket's client messages as an OpenAPI document of one pseudo-operation whose
    body is a message: schemathesis draws bodies from it (valid ones and, in its negative
    mode, ones that break the schema), and the test sends each over a real socket."""
    schema = CLIENT.json_schema(ref_template="#/components/schemas/{model}")
    defs = schema.pop("$defs")
    return {"openapi": "3.1.0", "info": {"title": "yomite WebSocket", "version": "1"},
            "paths": {"/ws/channels/main": {"post": {
                "requestBody": {"required": True,
                                "content": {"application/json": {"schema": schema}}},
                "responses": {"200": {"description": "a state, a pong or an error"}}}}},
            "components": {"schemas": defs}}


@pytest.fixture(scope="module")
def ws_api_schema():
    return schemathesis.openapi.from_dict(ws_spec())


ws_schema = schemathesis.pytest.from_fixture("ws_api_schema")
ws_calls = {"n": 0, "replies": {}}
WS_EXAMPLES = 150


class Sockets:
    """One connection per role, kept for the whole fuzz: a message that closed one would fail
    the next case."""

    def __init__(self, server: Server) -> None:
        with httpx2.Client(base_url=server.base, headers=server.op) as c:
            # whatever the HTTP fuzz left, a match is under way for the hands to pause
            c.post("/api/channels/main/match/abort")
            c.post("/api/channels/main/match", json={"seed": 1, "overrides": {
                "memorise_s": 600}})
            c.post("/api/channels/main/match/start")
        pin = httpx2.get(f"{server.base}/api/channels/main/pin", headers=server.op).json()["pin"]
        ref = httpx2.post(f"{server.base}/api/channels/main/referees",
                          json={"pin": pin, "name": "fuzz"}).json()
        uri = f"ws://127.0.0.1:{server.port}/ws/channels/main"
        self.stack = contextlib.ExitStack()
        # no keep-alive pings: websockets draws each ping's payload from the global `random`
        # in its own thread, and one landing while hypothesis draws a case is reported as the
        # strategy using `random` (a deprecation, an error here; seen on a loaded run). The
        # exchanges below ping for themselves.
        self.conns = [self.stack.enter_context(connect(u, max_size=None, ping_interval=None))
                      for u in (f"{uri}?token={TOKEN}", f"{uri}?token={ref['token']}", uri)]
        for c in self.conns:
            assert json.loads(c.recv(timeout=5))["type"] == "hello"

    def exchange(self, conn: ClientConnection, text: str | bytes) -> list[str]:
        """Send one message, then a ping; return what came back up to the ping's pong (an
        error kind, "state"...; a message that is itself a ping is answered by a pong
        first). A hang or a close fails."""
        try:
            pongs = 2 if isinstance(CLIENT.validate_json(text), Ping) else 1
        except (ValueError, RecursionError):
            pongs = 1
        conn.send(text)
        conn.send('{"type":"ping"}')
        seen = []
        while True:
            m = json.loads(conn.recv(timeout=10))
            if m["type"] == "pong":
                pongs -= 1
                if not pongs:
                    return seen
            else:
                seen.append(m["error"] if m["type"] == "error" else m["type"])

    def close(self) -> None:
        self.stack.close()


@pytest.fixture(scope="module")
def sockets(server):
    s = Sockets(server)
    yield s
    s.close()


@settings(max_examples=WS_EXAMPLES, deadline=None, suppress_health_check=list(HealthCheck))
@ws_schema.parametrize()
def test_websocket_messages_from_their_schema(case, server, sockets):
    # a body the negative mode left out is an empty message; bytes go as text (a binary
    # frame closes the socket by design: tests/test_reliability.py)
    body = case.body
    if body is NOT_SET:
        text = ""
    elif isinstance(body, bytes):
        text = body.decode("utf-8", "replace")
    else:
        text = body if isinstance(body, str) else json.dumps(body, default=str)
    conn = sockets.conns[ws_calls["n"] % 3]  # operator, referee, viewer in turn
    ws_calls["n"] += 1
    try:
        replies = sockets.exchange(conn, text)
    except ConnectionClosed as e:
        raise AssertionError(f"{text!r} closed the socket ({e})") from None
    for r in replies:
        ws_calls["replies"][r] = ws_calls["replies"].get(r, 0) + 1
    assert not {"unavailable"} & set(replies), (text, replies)


# ---------------------------------------------------------------------- hostile, explicitly
HOSTILE_WS = [
    ("[" * 1000 + "]" * 1000, ["bad_message"]),  # deeper than the JSON parser goes
    ('{"type":"hold","referee":"@recovered"}', ["forbidden"]),
    ('{"type":"hold","referee":{"id":"x"}}', ["bad_message"]),
    ('{"type":"hold","referee":"a\nb"}', ["bad_message"]),
    ('{"type":"hold","referee":"' + "r" * 5000 + '"}', ["too_large"]),
    ('{"type":true}', ["bad_message"]),
    ('{"type":"ping","x":1}', ["bad_message"]),
    ("\u0000\u202e", ["bad_message"]),
    ('"hold"', ["bad_message"]),
]


@pytest.mark.parametrize(("text", "expected"), HOSTILE_WS)
def test_hostile_websocket_messages(server, sockets, text, expected):
    replies = sockets.exchange(sockets.conns[0], text)
    assert [r for r in replies if r != "state"] == expected


def raw(port: int, data: bytes) -> int:
    with socket.create_connection(("127.0.0.1", port), timeout=10) as s:
        with contextlib.suppress(BrokenPipeError, ConnectionResetError):
            s.sendall(data)  # the server may answer and close before all is sent
        head = b""
        while b"\r\n" not in head:
            b = s.recv(4096)
            if not b:
                break
            head += b
    return int(head.split(b" ", 2)[1])


def _h(path: str, extra: bytes = b"", host: bytes = b"127.0.0.1", method: bytes = b"GET",
       body: bytes = b"", declared: int | None = None) -> bytes:
    n = len(body) if declared is None else declared
    length = b"Content-Length: %d\r\n" % n if n or method == b"POST" else b""
    return (method + b" " + path.encode() + b" HTTP/1.1\r\nHost: " + host + b"\r\n"
            + b"Content-Type: application/json\r\n" + length + extra + b"\r\n" + body)


HOSTILE_HTTP = [
    ("50 MB body", _h("/api/channels/main/referees", method=b"POST", declared=50 << 20)
     + b"{" * 65536, {413}),
    ("1 MB header", _h("/api/health", extra=b"X-Big: " + b"a" * (1 << 20) + b"\r\n"), {431}),
    ("200 headers", _h("/api/health", extra=b"".join(b"X-%d: 1\r\n" % i for i in range(200))),
     {431}),
    ("nested JSON", _h("/api/channels/main/match", method=b"POST",
                       extra=b"Authorization: Bearer " + TOKEN.encode() + b"\r\n",
                       body=b"[" * 10000 + b"]" * 10000), {400, 413, 422}),
    ("true as a seed", _h("/api/channels/main/match", method=b"POST",
                          extra=b"Authorization: Bearer " + TOKEN.encode() + b"\r\n",
                          body=b'{"seed": true}'), {422}),
    ("a name with ANSI", _h("/api/channels/main/referees", method=b"POST",
                            body=b'{"pin": "00000000", "name": "\\u001b[2J"}'), {422}),
    ("long static name", _h("/static/" + "a" * 300), {404}),
    ("foreign Host", _h("/api/health", host=b"evil.example"), {421}),
    ("no Host", b"GET /api/health HTTP/1.0\r\n\r\n", {421}),
    ("forwarded for", _h("/api/channels/main/referees", method=b"POST",
                         extra=b"X-Forwarded-For: 10.9.9.9\r\n",
                         body=b'{"pin": "00000000", "name": "x"}'), {403, 429}),
    ("percent-encoded token", _h("/api/session?%74oken=not-a-token"), {401}),
    ("odd hold id", _h("/api/channels/main/holds/a%0Ab", method=b"PUT",
                       extra=b"Authorization: Bearer " + TOKEN.encode() + b"\r\n"), {422}),
]


@pytest.mark.parametrize(("what", "request_bytes", "expected"), HOSTILE_HTTP,
                         ids=[h[0] for h in HOSTILE_HTTP])
def test_hostile_http_requests(server, what, request_bytes, expected):
    assert raw(server.port, request_bytes) in expected


def test_fuzz_ran_enough_cases_and_the_reader_survived(server, sockets):
    print("fuzz cases by status:", dict(sorted(calls["by_status"].items())))
    print("websocket fuzz replies:", dict(sorted(ws_calls["replies"].items())))
    assert calls["n"] >= 1000, calls
    assert ws_calls["n"] >= WS_EXAMPLES, ws_calls
    assert ws_calls["replies"].get("bad_message", 0) > 0, "no invalid message was drawn"
    assert ws_calls["replies"].get("state", 0) > 0, "no valid hold was drawn"
    for c in sockets.conns:  # every socket is still open and answers (states may pass by)
        assert [r for r in sockets.exchange(c, '{"type":"ping"}') if r != "state"] == []
    health = httpx2.get(f"{server.base}/api/health").json()
    assert all(ch["runtime"] == "running" for ch in health["channels"].values()), health
    assert server.proc.poll() is None
    assert "Traceback" not in server.log()
