"""Guards at the door: what is refused before a request reaches a route, and before anything
is known of who sends it (ASGI middleware; the request head's cap and the connections' deadlines
are in the server's protocols: api/serverglue.py, api/doors.py).

- A request body is capped at `server.limits.body_bytes` (413): a declared Content-Length
  over the cap is refused before one byte of the body is read, a chunked body as soon as it
  passes the cap.
- The Host header must name this server (DNS rebinding: a page on a foreign name that
  resolves to the hall's address would otherwise reach the API with the victim's browser):
  an IP address (a browser sends one only to a page loaded from that address), `localhost`,
  this machine's names, `server.public_url`'s host, or `server.security.allowed_hosts`.
- A client without a token of the hall's own may send `server.limits.anonymous_requests_per_s`
  GETs (and WebSocket handshakes) a second from one address (an IPv6 /64: several times as
  many), with bursts: past them 429 with Retry-After. A hold carries a referee's token, and
  is never counted.
- Pages get a strict Content-Security-Policy (scripts, styles and connections only from the
  server itself, no framing: a 止める button cannot be clickjacked), and every response
  `nosniff` and `no-referrer` (a join link carries the PIN).
"""

from __future__ import annotations

import ipaddress
import json
import math
import re
import socket
import time
from collections.abc import Awaitable, Callable, MutableMapping
from typing import Any
from urllib.parse import urlsplit

from api.doors import address_of, credentials, exempt_addresses, group_of, is_net
from cluster.peers import origin_of
from hall.config import Config

Scope = MutableMapping[str, Any]
Message = MutableMapping[str, Any]
Receive = Callable[[], Awaitable[Message]]
Send = Callable[[Message], Awaitable[None]]
ASGIApp = Callable[[Scope, Receive, Send], Awaitable[None]]

# media-src: the recording page plays a take back from a blob: URL of the bytes it fetched
PAGE_CSP = ("default-src 'self'; script-src 'self'; style-src 'self'; img-src 'self' data:; "
            "media-src 'self' blob:; "
            "connect-src 'self'; font-src 'self'; object-src 'none'; base-uri 'none'; "
            "form-action 'self'; frame-ancestors 'none'")


def error_body(code: str, detail: str, hint: str) -> bytes:
    return json.dumps({"error": code, "detail": detail, "hint": hint}).encode()


async def _respond(send: Send, status: int, body: bytes, close: bool = False,
                   extra: tuple[tuple[bytes, bytes], ...] = ()) -> None:
    headers = [(b"content-type", b"application/json"),
               (b"content-length", str(len(body)).encode()), *extra]
    if close:  # the rest of the request is not read: the connection cannot be reused
        headers.append((b"connection", b"close"))
    await send({"type": "http.response.start", "status": status, "headers": headers})
    await send({"type": "http.response.body", "body": body})


# ---------------------------------------------------------------------- the body
class BodyLimit:
    """`max_bytes` for every body, or the cap of the first of `larger` that the path starts
    with (a text) or matches whole (a pattern): a route that takes files and checks its own,
    larger, limit."""

    def __init__(self, app: ASGIApp, max_bytes: int,
                 larger: dict[str | re.Pattern[str], int] | None = None) -> None:
        self.app = app
        self.max_bytes = max_bytes
        self.larger = dict(larger or {})

    def _cap(self, path: str) -> int:
        return next((cap for route, cap in self.larger.items()
                     if (path.startswith(route) if isinstance(route, str)
                         else route.fullmatch(path))), self.max_bytes)

    def _refusal(self, size: str, cap: int) -> bytes:
        return error_body("body_too_large", f"the request body is {size}; at most {cap} bytes",
                      "send a smaller body (see /docs)")

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        cap = self._cap(scope.get("path", ""))
        for name, value in scope.get("headers", ()):
            if name == b"content-length":
                try:
                    declared = int(value)
                except ValueError:
                    declared = cap + 1
                if declared > cap:
                    await _respond(send, 413, self._refusal(f"{declared} bytes", cap),
                                   close=True)
                    return
        seen = 0
        started = refused = False

        async def counted() -> Message:
            # past the cap the 413 is sent from here and the app is told the client left:
            # raising would not do (FastAPI turns an error while reading a body into a 400)
            nonlocal seen, refused
            if refused:
                return {"type": "http.disconnect"}
            message = await receive()
            if message["type"] == "http.request":
                seen += len(message.get("body", b""))
                if seen > cap:
                    refused = True
                    if not started:
                        await _respond(send, 413, self._refusal(f"over {cap} bytes", cap),
                                       close=True)
                    return {"type": "http.disconnect"}
            return message

        async def watched(message: Message) -> None:
            nonlocal started
            if refused:
                return  # whatever the app answers after the refusal goes nowhere
            if message["type"] == "http.response.start":
                started = True
            await send(message)

        await self.app(scope, counted, watched)


# ---------------------------------------------------------------------- anonymous requests
class AnonymousRate:
    """Requests without a token of the hall's own (`hall_own`), GET and HEAD and WebSocket
    handshakes, at `anonymous_requests_per_s` per client address (its /64 for IPv6: as many
    as `ipv6_net_addresses` addresses), with bursts of `anonymous_requests_burst`; past
    them 429 `too_many_requests` with Retry-After (a WebSocket: closed before its
    handshake). Exempt: `connections_exempt` (the server's own machine). A referee's hold,
    the operator's moves, a speaker's clips carry their token and are never counted."""

    MAX_ADDRESSES = 65536  # past this many, the addresses with a full allowance are forgotten

    def __init__(self, app: ASGIApp, config: Config,
                 hall_own: Callable[[str], bool] = lambda _t: False,
                 clock: Callable[[], float] = time.monotonic) -> None:
        self.app = app
        lim = config.server.limits
        self.rate, self.burst = lim.anonymous_requests_per_s, float(lim.anonymous_requests_burst)
        self.net = lim.ipv6_net_addresses
        self.hall_own = hall_own
        self.exempt = exempt_addresses(config)
        self.clock = clock
        self._exempt_seen: dict[str, bool] = {}
        self._tokens: dict[str, tuple[float, float]] = {}  # group: (tokens, at)
        self.refused = 0

    def _wait(self, address: str) -> float:
        """0 if a request from `address` may go now, else how long until it may."""
        exempt = self._exempt_seen.get(address)
        if exempt is None:
            if len(self._exempt_seen) > 4096:
                self._exempt_seen.clear()
            exempt = self._exempt_seen[address] = self.exempt(address)
        if exempt:
            return 0.0
        group = group_of(address)
        k = self.net if is_net(group) else 1
        rate, burst = self.rate * k, self.burst * k
        now = self.clock()
        tokens, at = self._tokens.get(group, (burst, now))
        tokens = min(burst, tokens + (now - at) * rate)
        if tokens < 1.0:
            self._tokens[group] = (tokens, now)
            return (1.0 - tokens) / rate
        self._tokens[group] = (tokens - 1.0, now)
        if len(self._tokens) > self.MAX_ADDRESSES:
            self._forget(now)
        return 0.0

    def _forget(self, now: float) -> None:
        full = [g for g, (tok, at) in self._tokens.items()
                if tok + (now - at) * self.rate >= self.burst]
        for g in full:
            del self._tokens[g]
        if len(self._tokens) > self.MAX_ADDRESSES:  # all of them busy: start afresh
            self._tokens.clear()

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        kind = scope["type"]
        if not (kind == "websocket" or (kind == "http" and scope["method"] in ("GET", "HEAD"))):
            await self.app(scope, receive, send)
            return
        token = credentials(scope.get("headers", ()),
                            b"?" + scope.get("query_string", b""))
        if token is not None and self.hall_own(token):
            await self.app(scope, receive, send)
            return
        address = address_of(scope.get("client"))
        # (Starlette's in-process TestClient is no network peer)
        wait = 0.0 if address == "testclient" else self._wait(address)
        if wait <= 0:
            await self.app(scope, receive, send)
            return
        self.refused += 1
        retry = max(1, math.ceil(wait))
        if kind == "websocket":
            await receive()  # websocket.connect
            await send({"type": "websocket.close", "code": 1013,
                        "reason": "too_many_requests"})
            return
        await _respond(send, 429, error_body(
            "too_many_requests",
            f"this address sent more than {self.rate:g} requests a second without a token",
            f"wait {retry} s and try again; a page loads in a few requests"),
            extra=((b"retry-after", str(retry).encode()),))


# ---------------------------------------------------------------------- the host
def own_hosts(config: Config) -> frozenset[str]:
    """The names this server answers to (IP addresses are always accepted)."""
    names = {"localhost", "localhost.localdomain"}
    # the machine's own name (and its mDNS name), never looked up: a hall without internet
    # may have a resolver that only times out
    host = socket.gethostname()
    names |= {host, f"{host}.local"}
    for url in (config.server.public_url, config.cluster.advertise):
        h = urlsplit(url).hostname if url else None
        if h:
            names.add(h)
    if config.server.host not in ("0.0.0.0", "::", ""):
        names.add(config.server.host)
    names |= set(config.server.security.allowed_hosts)
    return frozenset(n.lower().rstrip(".") for n in names if n)


def host_of(value: str) -> str:
    """The host part of a Host header ("[::1]:8080" -> "::1", "a.b:80" -> "a.b")."""
    v = value.strip().lower()
    if v.startswith("["):
        return v[1:v.find("]")] if "]" in v else v
    return v.rsplit(":", 1)[0] if v.count(":") == 1 else v


def is_ip(host: str) -> bool:
    try:
        ipaddress.ip_address(host)
    except ValueError:
        return False
    return True


class HostCheck:
    def __init__(self, app: ASGIApp, config: Config) -> None:
        self.app = app
        self.names = own_hosts(config)

    def allowed(self, host: str) -> bool:
        h = host_of(host).rstrip(".")
        return bool(h) and (is_ip(h) or h in self.names)

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] not in ("http", "websocket"):
            await self.app(scope, receive, send)
            return
        host = next((v.decode("latin-1") for k, v in scope.get("headers", ())
                     if k == b"host"), "")
        # Starlette's in-process TestClient is no network peer: no name can be rebound there
        in_process = (scope.get("client") or ("",))[0] == "testclient"
        if in_process or self.allowed(host):
            await self.app(scope, receive, send)
            return
        shown = host[:80]
        if scope["type"] == "websocket":
            await receive()  # websocket.connect
            await send({"type": "websocket.close", "code": 1008,
                        "reason": "this server does not answer to that name"[:120]})
            return
        await _respond(send, 421, error_body(
            "unknown_host", f"this server does not answer to the name {shown!r}",
            "open it by its address, or add the name to server.security.allowed_hosts"))


# ---------------------------------------------------------------------- response headers
def page_csp(peers: list[str]) -> str:
    """The pages' policy; in a cluster, its processes' addresses may be connected to too (a
    page's WebSocket moves to another when its own dies: api/static/common.js Channel)."""
    if not peers:
        return PAGE_CSP
    ws = [p.replace("http", "ws", 1) for p in peers]  # http: ws:, https: wss:
    extra = " ".join(x for pair in zip(peers, ws, strict=True) for x in pair)
    return PAGE_CSP.replace("connect-src 'self';", f"connect-src 'self' {extra};")


class SecurityHeaders:
    """nosniff and no-referrer on every response; the strict CSP and no framing on pages.
    `peers`: a cluster's live processes' addresses, for the pages' connect-src."""

    def __init__(self, app: ASGIApp, peers: Callable[[], list[str]] = list) -> None:
        self.app = app
        self.peers = peers

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return

        docs = scope.get("path", "").startswith(("/docs", "/redoc"))

        async def add_headers(message: Message) -> None:
            if message["type"] == "http.response.start":
                headers = list(message.get("headers", ()))
                headers += [(b"x-content-type-options", b"nosniff"),
                            (b"referrer-policy", b"no-referrer")]
                ctype = next((v for k, v in headers if k == b"content-type"), b"")
                if ctype.startswith(b"text/html"):
                    headers.append((b"x-frame-options", b"DENY"))
                    # FastAPI's API docs page is built with an inline script; a page that
                    # brings a policy of its own (the desk's print pages) keeps it
                    own = any(k == b"content-security-policy" for k, _ in headers)
                    if not docs and not own:
                        headers.append((b"content-security-policy",
                                        page_csp(self.peers()).encode()))
                message["headers"] = headers
            await send(message)

        await self.app(scope, receive, add_headers)


# ---------------------------------------------------------------------- a cluster's own pages
_CORS_METHODS = b"GET, POST, PUT, PATCH, DELETE"
_CORS_HEADERS = b"authorization, content-type, accept"


class PeerCors:
    """A page loaded from another process of the cluster may call this one's API (its own
    process died: api/static/common.js api() moves on to the next address): its origin is
    allowed, and only the cluster's processes' origins are (`known`: every address seen since
    this process started). No cookies are involved: the page sends its token itself."""

    def __init__(self, app: ASGIApp, known: Callable[[], set[str]] = set) -> None:
        self.app = app
        self.known = known

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        known = self.known() if scope["type"] == "http" else None
        if not known:  # a WebSocket, or no other process known (one process: always)
            await self.app(scope, receive, send)
            return
        headers = dict(scope.get("headers", ()))
        raw = headers.get(b"origin")
        origin = origin_of(raw.decode("latin-1")) if raw else None
        if origin is None or origin not in known:
            await self.app(scope, receive, send)
            return
        allow = [(b"access-control-allow-origin", origin.encode()), (b"vary", b"Origin")]
        if scope["method"] == "OPTIONS" and b"access-control-request-method" in headers:
            await send({"type": "http.response.start", "status": 204, "headers": [
                *allow, (b"access-control-allow-methods", _CORS_METHODS),
                (b"access-control-allow-headers", _CORS_HEADERS),
                (b"access-control-max-age", b"600")]})
            await send({"type": "http.response.body", "body": b""})
            return

        async def add_headers(message: Message) -> None:
            if message["type"] == "http.response.start":
                message["headers"] = [*message.get("headers", ()), *allow]
            await send(message)

        await self.app(scope, receive, add_headers)
