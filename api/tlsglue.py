"""https and plain http on one port (part of the server's glue, api/serverglue.py): the door's
HTTP protocol sees a connection's first bytes; when they begin a TLS handshake (a record of
type 0x16: a ClientHello) the connection is wrapped in the event loop's own TLS protocol
(asyncio's or uvloop's: what `loop.start_tls` uses, with the app's connection_made not called
again) and the bytes already read are fed to it. Any other connection stays plain HTTP, which
the app answers only with the CA certificate and redirects to https (api/https.py). So a phone
that does not trust the server yet fetches `http://<address>/ca.crt` at the address it will
use, and the console on the server's own machine opens over loopback.

What is relied on (the TLS protocols' constructor, `_get_app_transport`, `get_buffer` and
`buffer_updated`) is checked by tests/test_serverglue.py, under asyncio and uvloop.
"""

from __future__ import annotations

import asyncio
import contextlib
import importlib
import ssl
from typing import Any


def tls_protocol(loop: asyncio.AbstractEventLoop, app: Any, context: ssl.SSLContext,
                 handshake_s: float) -> Any:
    """The event loop's own TLS protocol (what `loop.start_tls` uses) over `app`, as a server,
    `app`'s connection_made not called again (its transport is the one returned first)."""
    kind: Any = None
    with contextlib.suppress(ImportError):
        import uvloop

        if isinstance(loop, uvloop.Loop):
            kind = importlib.import_module("uvloop.loop").SSLProtocol
    if kind is None:
        kind = importlib.import_module("asyncio.sslproto").SSLProtocol
    return kind(loop, app, context, None, server_side=True, call_connection_made=False,
                ssl_handshake_timeout=handshake_s)


def feed(proto: Any, data: bytes) -> None:
    """Give a buffered protocol (a TLS protocol) bytes already read from its socket."""
    view = memoryview(data)
    while view:
        buf = proto.get_buffer(len(view))
        n = min(len(buf), len(view))
        if n == 0:
            raise RuntimeError("the TLS protocol offered an empty buffer")
        buf[:n] = view[:n]
        proto.buffer_updated(n)
        view = view[n:]
