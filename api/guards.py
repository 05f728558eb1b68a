"""Guards at the door: what is refused before a request reaches a route, and before anything
is known of who sends it.

- The request head (request line and headers) is capped in the HTTP protocol itself, while it
  arrives: more than `server.limits.header_bytes`, or more than `server.limits.headers`
  headers, is answered 431 and the connection closed, so a client cannot make the server hold
  a 50 MB header (httptools has no limit of its own). WebSocket handshakes pass through the
  same protocol.
- A request body is capped at `server.limits.body_bytes` (413): a declared Content-Length
  over the cap is refused before one byte of the body is read, a chunked body as soon as it
  passes the cap.
- The Host header must name this server (DNS rebinding: a page on a foreign name that
  resolves to the hall's address would otherwise reach the API with the victim's browser):
  an IP address (a browser sends one only to a page loaded from that address), `localhost`,
  this machine's names, `server.public_url`'s host, or `server.security.allowed_hosts`.
- Pages get a strict Content-Security-Policy (scripts, styles and connections only from the
  server itself, no framing: a 止める button cannot be clickjacked), and every response
  `nosniff` and `no-referrer` (a join link carries the PIN).
- Connections (`Doors`): a request head must arrive within `server.limits.request_head_s`
  (408), a body that stops coming for as long is answered 408, a kept-alive connection is
  closed after `keep_alive_s` without a request, and a WebSocket that does not answer the
  server's pings (`ws_ping_s`) is closed. The server holds at most
  `connections_per_address` connections from one address and `connections` in all, the
  latter lowered at start below the open-files limit so that the journal and the desk's
  database always have files to open (`door_limits`). A new connection past a cap takes
  the place of the oldest connection that only waits for a request; if none does (they all
  serve requests, or are WebSockets, which count like any other), it is answered 503.

uvicorn's internals are used here and nowhere else (the hub reads the WebSocket protocol's
transport, found through it): its httptools HTTP protocol and its sans-I/O WebSocket protocol
are subclassed, their hooks checked by tests/test_door.py. Checked with uvicorn 0.54.0
(httptools 0.9.0, websockets 17.4), under uvloop 0.23.0 and asyncio.
"""

from __future__ import annotations

import asyncio
import contextlib
import ipaddress
import json
import re
import socket
from collections.abc import Awaitable, Callable, MutableMapping
from dataclasses import dataclass
from typing import Any
from urllib.parse import urlsplit

from hall.config import Config, LimitsConfig

Scope = MutableMapping[str, Any]
Message = MutableMapping[str, Any]
Receive = Callable[[], Awaitable[Message]]
Send = Callable[[Message], Awaitable[None]]
ASGIApp = Callable[[Scope, Receive, Send], Awaitable[None]]

PAGE_CSP = ("default-src 'self'; script-src 'self'; style-src 'self'; img-src 'self' data:; "
            "connect-src 'self'; font-src 'self'; object-src 'none'; base-uri 'none'; "
            "form-action 'self'; frame-ancestors 'none'")


def _error(code: str, detail: str, hint: str) -> bytes:
    return json.dumps({"error": code, "detail": detail, "hint": hint}).encode()


async def _respond(send: Send, status: int, body: bytes, close: bool = False) -> None:
    headers = [(b"content-type", b"application/json"),
               (b"content-length", str(len(body)).encode())]
    if close:  # the rest of the request is not read: the connection cannot be reused
        headers.append((b"connection", b"close"))
    await send({"type": "http.response.start", "status": status, "headers": headers})
    await send({"type": "http.response.body", "body": body})


# ---------------------------------------------------------------------- connections
@dataclass(frozen=True)
class DoorLimits:
    """The door's sizes, from `server.limits` and the open-files limit at start."""

    open_files: int
    connections: int  # held at once, in all
    per_address: int
    backlog: int  # connections the kernel queues before they are accepted

    @property
    def reserve(self) -> int:
        return self.open_files - self.connections


def door_limits(limits: LimitsConfig, open_files: int) -> DoorLimits:
    """A quarter of the open files (at least 256) is kept from connections: the server's own
    files (journals, the desk's database and its journal, clips, the render and audio
    processes' pipes) and the connections accepted in one go before the door sees them
    (an event loop accepts every queued connection at once: the listen backlog bounds them,
    and is kept to a quarter of the reserve)."""
    reserve = max(256, open_files // 4)
    total = max(16, min(limits.connections, open_files - reserve))
    return DoorLimits(open_files, total, min(limits.connections_per_address, total),
                      max(16, min(2048, reserve // 4)))


def _address(client: Any) -> str:
    host = client[0] if isinstance(client, tuple | list) and client else ""
    if host.startswith("::ffff:"):
        host = host[7:]  # an IPv4 client of a dual-stack socket
    return str(host)


class Doors:
    """The connections the server holds: `total` at most in all, `per_address` from one
    address (but those `exempt` says are not). Each is held by its transport, from its
    accept to its close, through a WebSocket upgrade; one that only waits for a request (a
    head not yet complete, a kept-alive connection) may give way to a new one."""

    def __init__(self, total: int, per_address: int,
                 exempt: Callable[[str], bool] = lambda _a: False) -> None:
        self.total = total
        self.per_address = per_address
        self._exempt = exempt
        self._exempt_seen: dict[str, bool] = {}
        self._held: dict[Any, str] = {}  # transport: client address
        self._count: dict[str, int] = {}
        # the connections that only wait for a request, oldest first: transport -> close
        self._idle: dict[Any, Callable[[], None]] = {}
        self._idle_at: dict[str, dict[Any, None]] = {}
        self.refused = 0
        self.gave_way = 0

    def __len__(self) -> int:
        return len(self._held)

    def _capped(self, address: str) -> bool:
        exempt = self._exempt_seen.get(address)
        if exempt is None:
            if len(self._exempt_seen) > 4096:
                self._exempt_seen.clear()
            exempt = self._exempt_seen[address] = self._exempt(address)
        return not exempt

    def admit(self, transport: Any, address: str) -> bool:
        """Hold a new connection (an idle one may give way to it); False: refuse it."""
        if (self._capped(address) and self._count.get(address, 0) >= self.per_address
                and not self._give_way(self._idle_at.get(address))):
            self.refused += 1
            return False
        if len(self._held) >= self.total and not self._give_way(self._idle):
            self.refused += 1
            return False
        self._held[transport] = address
        self._count[address] = self._count.get(address, 0) + 1
        return True

    def idle(self, transport: Any, close: Callable[[], None]) -> None:
        """The connection waits for a request: it may give way (`close`) to a new one."""
        address = self._held.get(transport)
        if address is None:
            return
        self._idle.pop(transport, None)
        self._idle[transport] = close  # the newest idle last
        at = self._idle_at.setdefault(address, {})
        at.pop(transport, None)
        at[transport] = None

    def busy(self, transport: Any) -> None:
        """The connection serves a request (or is a WebSocket): it does not give way."""
        if self._idle.pop(transport, None) is not None:
            address = self._held[transport]
            at = self._idle_at[address]
            del at[transport]
            if not at:
                del self._idle_at[address]

    def release(self, transport: Any) -> None:
        self.busy(transport)
        address = self._held.pop(transport, None)
        if address is None:
            return
        n = self._count[address] - 1
        if n:
            self._count[address] = n
        else:
            del self._count[address]

    def _give_way(self, idle: dict[Any, Any] | None) -> bool:
        if not idle:
            return False
        transport = next(iter(idle))
        close = self._idle[transport]
        self.release(transport)
        self.gave_way += 1
        close()
        return True


def _refusal(status: bytes, code: str, detail: str, hint: str, *extra: bytes) -> bytes:
    body = _error(code, detail, hint)
    return (b"HTTP/1.1 " + status + b"\r\ncontent-type: application/json\r\ncontent-length: "
            + str(len(body)).encode() + b"\r\n" + b"".join(extra)
            + b"connection: close\r\n\r\n" + body)


def door_protocols(limits: LimitsConfig, doors: Doors) -> tuple[type, type]:
    """uvicorn's httptools HTTP protocol and its sans-I/O WebSocket protocol, with the door:
    the request head's cap (431), its deadline and the body's (408), and every connection
    held by `doors` from its accept to its close."""
    from uvicorn.protocols.http.httptools_impl import HttpToolsProtocol
    from uvicorn.protocols.websockets.websockets_sansio_impl import WebSocketsSansIOProtocol

    header_bytes, max_headers = limits.header_bytes, limits.headers
    head_s = limits.request_head_s
    receive_buffer = 65536
    # a chunk read from the socket may end a request's body and begin the next one's head:
    # an unfinished head is refused once more than a whole read past the cap has arrived
    # since it began, so memory stays bounded and no honest head is refused
    slack = 65536

    class DoorHttpProtocol(HttpToolsProtocol):
        _yh_closed = False  # refused at the door: nothing it sends is read
        _yh_timer: asyncio.TimerHandle | None = None
        _yh_heard = False  # a byte of the awaited head has come
        _yh_upgraded = False

        def connection_made(self, transport: Any) -> None:
            super().connection_made(transport)
            sock = transport.get_extra_info("socket")
            if sock is not None:
                # what a client sent and the server has not read yet stays in the kernel:
                # by default up to 6 MB a connection, of a flood's tiny frames as much as of
                # anything (2,000 sockets: gigabytes). 64 KiB moves an 8 MiB take in a second
                # or two over a slow Wi-Fi
                with contextlib.suppress(OSError):
                    sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, receive_buffer)
            if not doors.admit(transport, _address(self.client)):
                self._yh_closed = True
                transport.write(_refusal(
                    b"503 Service Unavailable", "too_many_connections",
                    "this server holds as many connections as it takes, from this address "
                    "or in all", "try again in a moment", b"retry-after: 5\r\n"))
                transport.close()
                return
            self._yh_wait_head()

        def connection_lost(self, exc: Exception | None) -> None:
            self._yh_cancel()
            doors.release(self.transport)
            super().connection_lost(exc)

        # -- what a connection waits for
        def _yh_cancel(self) -> None:
            if self._yh_timer is not None:
                self._yh_timer.cancel()
                self._yh_timer = None

        def _yh_waiting(self) -> bool:
            return self.cycle is None or self.cycle.response_complete

        def _yh_wait_head(self) -> None:
            """The connection waits for a request: its head has `head_s` to come, whatever
            comes before it (a trickle, the rest of a body no route read)."""
            self._yh_cancel()
            self._yh_heard = False
            self._yh_timer = self.loop.call_later(head_s, self._yh_head_late)
            doors.idle(self.transport, self._yh_give_way)

        def _yh_give_way(self) -> None:
            self._yh_cancel()
            self.transport.close()

        def _yh_head_late(self) -> None:
            self._yh_timer = None
            if self.transport.is_closing():
                return
            if self._yh_heard:
                self._yh_send(_refusal(
                    b"408 Request Timeout", "request_timeout",
                    f"the request did not arrive within {head_s:g} s",
                    "send the whole request at once"))
            else:
                self.transport.close()

        def _yh_body_late(self) -> None:
            self._yh_timer = None
            cycle = self.cycle
            if (self.transport.is_closing() or cycle is None or not cycle.more_body
                    or cycle.response_complete):
                return
            if self.flow.read_paused:  # the app has not read what came: not the client's fault
                self._yh_timer = self.loop.call_later(head_s, self._yh_body_late)
                return
            if cycle.response_started:
                self.transport.close()
            else:
                self._yh_send(_refusal(
                    b"408 Request Timeout", "request_timeout",
                    f"the request's body stopped coming for {head_s:g} s",
                    "send the whole request at once"))

        def _yh_send(self, response: bytes) -> None:
            self._yh_closed = True
            self.transport.write(response)
            self.transport.close()

        # -- uvicorn's hooks
        def on_message_begin(self) -> None:
            super().on_message_begin()
            self._yh_in_head = True
            self._yh_fed = 0
            self._yh_size = 0
            self._yh_count = 0
            self._yh_refused: str | None = None

        def on_url(self, url: bytes) -> None:
            self._yh_size += len(url)
            if self._yh_size > header_bytes:
                self._yh_refuse(f"the request line is over {header_bytes} bytes")
            super().on_url(url)

        def on_header(self, name: bytes, value: bytes) -> None:
            self._yh_size += len(name) + len(value) + 4
            self._yh_count += 1
            if self._yh_count > max_headers:
                self._yh_refuse(f"more than {max_headers} headers")
            if self._yh_size > header_bytes:
                self._yh_refuse(f"the headers are over {header_bytes} bytes")
            super().on_header(name, value)

        def on_headers_complete(self) -> None:
            self._yh_in_head = False
            self._yh_cancel()
            doors.busy(self.transport)
            super().on_headers_complete()
            if not (self.parser.should_upgrade() and self._should_upgrade()):
                # the body (if any) must keep coming: see _yh_body_late
                self._yh_timer = self.loop.call_later(head_s, self._yh_body_late)

        def on_body(self, body: bytes) -> None:
            super().on_body(body)
            if self._yh_timer is not None and not self._yh_waiting():
                self._yh_timer.cancel()
                self._yh_timer = self.loop.call_later(head_s, self._yh_body_late)

        def on_message_complete(self) -> None:
            super().on_message_complete()
            if not self._yh_waiting():
                self._yh_cancel()

        def on_response_complete(self) -> None:
            super().on_response_complete()
            # (a pipelined request that was waiting has just started: not idle then)
            if not self.transport.is_closing() and self._yh_waiting():
                self._yh_cancel()
                doors.idle(self.transport, self._yh_give_way)

        def handle_websocket_upgrade(self) -> None:
            # the transport passes to the WebSocket protocol, held by the door as before
            self._yh_upgraded = True
            self._yh_cancel()
            super().handle_websocket_upgrade()

        def _yh_refuse(self, why: str) -> None:
            self._yh_refused = why
            raise ValueError(why)  # stops the parser: httptools raises HttpParserCallbackError

        def data_received(self, data: bytes) -> None:
            if self._yh_closed or getattr(self, "_yh_refused", None) is not None:
                return
            if self._yh_timer is None and not self._yh_upgraded and self._yh_waiting():
                # after a response: uvicorn times the silence (keep_alive_s); from the first
                # byte the next head has its deadline
                self._yh_wait_head()
            self._yh_heard = True
            super().data_received(data)
            if getattr(self, "_yh_in_head", False) and self._yh_refused is None:
                self._yh_fed += len(data)
                if self._yh_fed > header_bytes + slack:
                    self._yh_refused = f"the request head is over {header_bytes} bytes"
            if self._yh_refused is not None and not self.transport.is_closing():
                self._yh_send_431(self._yh_refused)

        def send_400_response(self, msg: str) -> None:
            refused: str | None = getattr(self, "_yh_refused", None)
            if refused is not None:
                self._yh_send_431(refused)
            else:
                super().send_400_response(msg)

        def _yh_send_431(self, why: str) -> None:
            if self.transport.is_closing():
                return
            self._yh_cancel()
            self._yh_send(_refusal(
                b"431 Request Header Fields Too Large", "headers_too_large", why,
                "send fewer or shorter headers (a browser's own are far below)"))

    # a read may bring a quarter of a megabyte of small frames: parsed at once, that is
    # 13,000 messages and 60 ms of this event loop (measured: websockets 17.4). They are
    # parsed a slice at a time, and no further while the route has `unread` of them to read:
    # the rest waits as bytes (reading paused: the sender's TCP window closes), so a flooding
    # socket costs the loop what its route reads of it (server.limits.ws_messages_per_s).
    unread = 32
    slice_bytes = 4096

    class DoorWebSocketProtocol(WebSocketsSansIOProtocol):
        _yh_backlog = b""

        def connection_lost(self, exc: Exception | None) -> None:
            doors.release(self.transport)
            self._yh_backlog = b""
            super().connection_lost(exc)

        def data_received(self, data: bytes) -> None:
            self._yh_backlog += data
            self._yh_parse()

        def _yh_parse(self) -> None:
            backlog = self._yh_backlog
            at = 0
            while at < len(backlog) and self.queue.qsize() < unread:
                super().data_received(backlog[at:at + slice_bytes])
                at += slice_bytes
                if self.transport.is_closing():
                    at = len(backlog)
            self._yh_backlog = backlog[at:]
            if self._yh_backlog and not self.read_paused:
                self.read_paused = True
                self.transport.pause_reading()

        async def receive(self) -> Any:
            message = await super().receive()  # resumes reading once nothing is queued
            if self._yh_backlog and self.queue.empty():
                self._yh_parse()
            return message

        async def send(self, message: Any) -> None:
            await super().send(message)
            if message.get("type") == "websocket.close" and self._yh_backlog:
                # the peer's answer to the close waits behind what it flooded: it is not read
                # (nor waited for); the close frame goes out, then the connection ends
                self._yh_backlog = b""
                self.transport.close()

    return DoorHttpProtocol, DoorWebSocketProtocol


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
        return _error("body_too_large", f"the request body is {size}; at most {cap} bytes",
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


# ---------------------------------------------------------------------- the host
def own_hosts(config: Config) -> frozenset[str]:
    """The names this server answers to (IP addresses are always accepted)."""
    names = {"localhost", "localhost.localdomain"}
    # the machine's own name (and its mDNS name), never looked up: a hall without internet
    # may have a resolver that only times out
    host = socket.gethostname()
    names |= {host, f"{host}.local"}
    if config.server.public_url:
        h = urlsplit(config.server.public_url).hostname
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
        await _respond(send, 421, _error(
            "unknown_host", f"this server does not answer to the name {shown!r}",
            "open it by its address, or add the name to server.security.allowed_hosts"))


# ---------------------------------------------------------------------- response headers
class SecurityHeaders:
    """nosniff and no-referrer on every response; the strict CSP and no framing on pages."""

    def __init__(self, app: ASGIApp) -> None:
        self.app = app

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
                        headers.append((b"content-security-policy", PAGE_CSP.encode()))
                message["headers"] = headers
            await send(message)

        await self.app(scope, receive, add_headers)


def exempt_addresses(config: Config) -> Callable[[str], bool]:
    """Whether an address is exempt from the per-address cap: `connections_exempt`, and the
    trusted proxies (every client behind one comes from its address)."""
    nets = [ipaddress.ip_network(a, strict=False)
            for a in (*config.server.limits.connections_exempt,
                      *config.server.security.trusted_proxies)]

    def exempt(address: str) -> bool:
        try:
            ip = ipaddress.ip_address(address)
        except ValueError:
            return False
        return any(ip in net for net in nets)

    return exempt


def uvicorn_options(config: Config, open_files: int | None = None) -> dict[str, Any]:
    """What `yomite serve` gives uvicorn: the door's protocols (HTTP and WebSocket), its
    timeouts and backlog, forwarded headers trusted only from configured proxies, and a
    bounded graceful shutdown. `open_files`: the open-files limit the server runs with
    (default: this process's soft limit now)."""
    import resource

    lim, sec = config.server.limits, config.server.security
    if open_files is None:
        open_files = resource.getrlimit(resource.RLIMIT_NOFILE)[0]
    sizes = door_limits(lim, open_files)
    doors = Doors(sizes.connections, sizes.per_address, exempt_addresses(config))
    http, ws = door_protocols(lim, doors)
    return {
        "http": http,
        "ws": ws,
        "timeout_keep_alive": lim.keep_alive_s,
        "ws_ping_interval": lim.ws_ping_s,
        "ws_ping_timeout": lim.ws_ping_s,
        "backlog": sizes.backlog,
        "proxy_headers": bool(sec.trusted_proxies),
        "forwarded_allow_ips": list(sec.trusted_proxies) or None,
        "timeout_graceful_shutdown": 5,
    }
