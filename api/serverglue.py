"""The one place that uses uvicorn's and Starlette's internals (and nothing else does): the
door's subclasses of uvicorn's httptools HTTP protocol and its sans-I/O WebSocket protocol, the
options `yomite serve` gives uvicorn, and the direct path to a WebSocket's socket that the
hub writes states to.

- The request head (request line and headers) is capped in the HTTP protocol itself, while it
  arrives: more than `server.limits.header_bytes`, or more than `server.limits.headers`
  headers, is answered 431 and the connection closed, so a client cannot make the server hold
  a 50 MB header (httptools has no limit of its own). WebSocket handshakes pass through the
  same protocol.
- A request head must arrive within `server.limits.request_head_s` (408), a body that stops
  coming for as long is answered 408, a kept-alive connection is closed after `keep_alive_s`
  without a request, and a WebSocket that does not answer the server's pings (`ws_ping_s`) is
  closed. Every connection is held by the door (api/doors.py) from its accept to its close.
- https and plain http on one port (a server with TLS): a connection whose first byte begins
  a TLS handshake is wrapped in TLS right there (api/tlsglue.py), any other is plain HTTP
  (api/https.py says what it may have). The door holds the TCP connection (`_yh_door`).

What is relied on (the classes, hooks and attributes) is checked by tests/test_serverglue.py:
run it before widening the version bounds in pyproject.toml. Checked with uvicorn 0.54.0
(httptools 0.9.0, websockets 17.4), Starlette 1.10.0, under uvloop 0.23.0 and asyncio.
"""

from __future__ import annotations

import asyncio
import contextlib
import socket
import ssl
from typing import Any, cast

from fastapi import WebSocket

from api.doors import Doors, address_of, close_frame, make_doors
from api.guards import error_body
from api.tlsglue import feed, tls_protocol
from hall.config import Config, LimitsConfig
from hall.hub import Transport


def _refusal(status: bytes, code: str, detail: str, hint: str, *extra: bytes) -> bytes:
    body = error_body(code, detail, hint)
    return (b"HTTP/1.1 " + status + b"\r\ncontent-type: application/json\r\ncontent-length: "
            + str(len(body)).encode() + b"\r\n" + b"".join(extra)
            + b"connection: close\r\n\r\n" + body)


def door_protocols(limits: LimitsConfig, doors: Doors,
                   tls: ssl.SSLContext | None = None) -> tuple[type, type]:
    """uvicorn's httptools HTTP protocol and its sans-I/O WebSocket protocol, with the door:
    the request head's cap (431), its deadline and the body's (408), and every connection
    held by `doors` from its accept to its close. `tls`: connections that begin a TLS
    handshake are served https (wss), the others plain http."""
    from uvicorn.protocols.http.httptools_impl import HttpToolsProtocol
    from uvicorn.protocols.websockets.websockets_sansio_impl import WebSocketsSansIOProtocol

    header_bytes, max_headers = limits.header_bytes, limits.headers
    head_s = limits.request_head_s
    receive_buffer = 65536
    # a chunk read from the socket may end a request's body and begin the next one's head:
    # an unfinished head is refused once more than a whole read past the cap has arrived
    # since it began, so memory stays bounded and no honest head is refused
    slack = 65536
    # a TLS transport upgraded to a WebSocket -> the TCP transport the door holds it by
    door_of: dict[Any, Any] = {}

    class DoorHttpProtocol(HttpToolsProtocol):
        _yh_closed = False  # refused at the door: nothing it sends is read
        _yh_timer: asyncio.TimerHandle | None = None
        _yh_heard = False  # a byte of the awaited head has come
        _yh_upgraded = False
        _yh_sniff = False  # the first bytes decide: TLS or plain
        _yh_door: Any = None  # the TCP connection's transport, as the door holds it

        def connection_made(self, transport: Any) -> None:
            super().connection_made(transport)
            self._yh_door = transport
            self._yh_sniff = tls is not None
            sock = transport.get_extra_info("socket")
            if sock is not None:
                # what a client sent and the server has not read yet stays in the kernel:
                # by default up to 6 MB a connection, of a flood's tiny frames as much as of
                # anything (2,000 sockets: gigabytes). 64 KiB moves an 8 MiB take in a second
                # or two over a slow Wi-Fi
                with contextlib.suppress(OSError):
                    sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, receive_buffer)
            if not doors.admit(transport, address_of(self.client)):
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
            doors.release(self._yh_door)
            super().connection_lost(exc)

        def _yh_start_tls(self, hello: bytes) -> None:
            """The connection is TLS from here: its protocol wraps this one, and this one
            speaks HTTP over the TLS transport (uvicorn's connection_made again: the scheme
            becomes https, the flow control the TLS transport's)."""
            assert tls is not None
            raw = self.transport
            proto = tls_protocol(self.loop, self, tls, head_s)
            # as loop.start_tls does: reading paused across the change of protocol, so that
            # uvloop reads into the TLS protocol's buffers from the next byte
            raw.pause_reading()
            raw.set_protocol(proto)
            proto.connection_made(raw)
            HttpToolsProtocol.connection_made(self, proto._get_app_transport())
            feed(proto, hello)
            raw.resume_reading()

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
            doors.idle(self._yh_door, self._yh_give_way)

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
            doors.busy(self._yh_door)
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
                doors.idle(self._yh_door, self._yh_give_way)

        def handle_websocket_upgrade(self) -> None:
            # the transport passes to the WebSocket protocol, held by the door as before: as
            # the hall's own, or in the viewers' share (refused here, before the handshake)
            self._yh_upgraded = True
            self._yh_cancel()
            transport = self.transport  # the TLS transport on an https connection
            anonymous = doors.anonymous(self.scope["headers"], self.url)

            def make_room() -> None:  # a viewer's socket closed for someone else
                if not transport.is_closing():
                    transport.write(close_frame(1013, "make_room"))
                    transport.close()

            if not doors.upgrade(self._yh_door, address_of(self.client), anonymous, make_room):
                self._yh_send(_refusal(
                    b"503 Service Unavailable", "too_many_viewers",
                    "this server holds as many viewers' connections as it takes, from this "
                    "address or in all", "try again in a moment", b"retry-after: 5\r\n"))
                return
            door_of[transport] = self._yh_door
            try:
                super().handle_websocket_upgrade()
            finally:
                door_of.pop(transport, None)

        def _yh_refuse(self, why: str) -> None:
            self._yh_refused = why
            raise ValueError(why)  # stops the parser: httptools raises HttpParserCallbackError

        def data_received(self, data: bytes) -> None:
            if self._yh_closed or getattr(self, "_yh_refused", None) is not None:
                return
            if self._yh_sniff:
                self._yh_sniff = False
                if data[:1] == b"\x16":  # a TLS record of the handshake: a ClientHello
                    self._yh_start_tls(data)
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
        _yh_door: Any = None

        def connection_made(self, transport: Any) -> None:
            self._yh_door = door_of.get(transport, transport)
            super().connection_made(transport)

        def connection_lost(self, exc: Exception | None) -> None:
            doors.release(self._yh_door)
            self._yh_backlog = b""
            super().connection_lost(exc)

        def data_received(self, data: bytes) -> None:
            doors.heard(self._yh_door)
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


def uvicorn_options(config: Config, open_files: int | None = None,
                    doors: Doors | None = None,
                    tls: ssl.SSLContext | None = None) -> dict[str, Any]:
    """What `yomite serve` gives uvicorn: the door's protocols (HTTP and WebSocket), its
    timeouts and backlog, forwarded headers trusted only from configured proxies, and a
    bounded graceful shutdown. `open_files`: the open-files limit the server runs with
    (default: this process's soft limit now). `doors`: the door to hold connections with
    (the app tells it which tokens are the hall's own: api.app), else one of its own.
    `tls`: the server's TLS, which the door's protocol applies to the connections that
    begin with a handshake (not uvicorn's `ssl` options: those would refuse the plain http
    that fetches the CA)."""
    lim, sec = config.server.limits, config.server.security
    own, backlog = make_doors(config, open_files)
    http, ws = door_protocols(lim, doors if doors is not None else own, tls)
    return {
        "http": http,
        "ws": ws,
        "timeout_keep_alive": lim.keep_alive_s,
        "ws_ping_interval": lim.ws_ping_s,
        "ws_ping_timeout": lim.ws_ping_s,
        "backlog": backlog,
        "proxy_headers": bool(sec.trusted_proxies),
        "forwarded_allow_ips": list(sec.trusted_proxies) or None,
        "timeout_graceful_shutdown": 5,
    }


# ---------------------------------------------------------------------- the hub's direct path
_SANSIO = "uvicorn.protocols.websockets.websockets_sansio_impl"


def _sansio_protocol(send: Any, depth: int = 6) -> Any:
    """The protocol object `send` ends in: Starlette and FastAPI wrap the server's ASGI send in
    closures (`sender`) that only pass messages on."""
    owner = getattr(send, "__self__", None)
    # uvicorn's class, or the door's subclass of it (above)
    if owner is not None and any(c.__module__ == _SANSIO for c in type(owner).__mro__):
        return owner
    if depth == 0:
        return None
    for cell in getattr(send, "__closure__", None) or ():
        try:
            inner = cell.cell_contents
        except ValueError:  # an empty cell
            continue
        if callable(inner):
            found = _sansio_protocol(inner, depth - 1)
            if found is not None:
                return found
    return None


def direct_transport(websocket: WebSocket) -> Transport | None:
    """The socket under an accepted WebSocket, when frames may be written to it directly: the
    server's ASGI `send` (Starlette keeps it as `_send`) belongs to uvicorn's sans-I/O
    protocol, its handshake is done and no extension (compression) was negotiated, so a frame
    is the same bytes for every client. Else None (another server, a test client): the hub
    then sends through ASGI."""
    proto = _sansio_protocol(getattr(websocket, "_send", None))
    if proto is None:
        return None
    transport = getattr(proto, "transport", None)
    conn = getattr(proto, "conn", None)
    if not getattr(proto, "handshake_complete", False) or conn is None \
            or getattr(conn, "extensions", None) or transport is None:
        return None
    # uvloop's transports are not asyncio.WriteTransport subclasses, but have its methods
    if all(callable(getattr(transport, m, None))
           for m in ("write", "is_closing", "get_write_buffer_size", "abort")):
        return cast(Transport, transport)
    return None
