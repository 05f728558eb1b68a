"""Plain http on a server that speaks https (docs/tls.md): the one port answers both (the
door's protocol tells them apart: api/serverglue.py), and over plain http a client on the
network gets only what it needs before it trusts the server.

- `GET /ca.crt` (and `/api/tls`, its fingerprint): a phone fetches the CA at the address it
  will use, before it trusts it;
- a page or any other GET: a redirect to the same URL over https (`308`);
- anything else (a PIN in a POST body, a token in a header, a WebSocket): refused
  (`403 https_required`, a WebSocket closed `1008`), before any route reads it.

A client on this machine's loopback (the console `yomite` opens in this computer's browser,
a reverse proxy beside it) is served plain http as before: nothing it sends leaves the
machine.
"""

from __future__ import annotations

import ipaddress

from api.guards import ASGIApp, Receive, Scope, Send, _respond, error_body

# what a client that does not trust the server yet may fetch over plain http
PLAIN_PATHS = frozenset({"/ca.crt", "/api/tls", "/api/tls/qr.svg"})


def loopback_client(scope: Scope) -> bool:
    client = scope.get("client") or ("",)
    host = str(client[0])
    if host.startswith("::ffff:"):
        host = host[7:]
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return host == "testclient"  # Starlette's in-process TestClient: no network at all


class HttpsOnly:
    """On a server with TLS: plain http from the network is redirected to https or refused
    (the module's docstring)."""

    def __init__(self, app: ASGIApp) -> None:
        self.app = app

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        kind = scope["type"]
        if kind not in ("http", "websocket") or scope.get("scheme") in ("https", "wss") \
                or loopback_client(scope):
            await self.app(scope, receive, send)
            return
        if kind == "websocket":
            await receive()  # websocket.connect
            await send({"type": "websocket.close", "code": 1008,
                        "reason": "https_required: connect with wss://"})
            return
        path = scope.get("path", "")
        method = scope.get("method", "GET")
        if method in ("GET", "HEAD") and path in PLAIN_PATHS:
            await self.app(scope, receive, send)
            return
        host = next((v.decode("latin-1") for k, v in scope.get("headers", ())
                     if k == b"host"), "")
        if method in ("GET", "HEAD") and host:
            query = scope.get("query_string", b"").decode("latin-1")
            raw = scope.get("raw_path")
            target = raw.decode("latin-1") if isinstance(raw, bytes) else path
            location = f"https://{host}{target}" + (f"?{query}" if query else "")
            body = error_body("https_required", "this server speaks https",
                              f"open {location}")
            await send({"type": "http.response.start", "status": 308, "headers": [
                (b"location", location.encode("latin-1")),
                (b"content-type", b"application/json"),
                (b"content-length", str(len(body)).encode()),
                (b"cache-control", b"no-store")]})
            await send({"type": "http.response.body", "body": body})
            return
        await _respond(send, 403, error_body(
            "https_required", "this server takes nothing over plain http from the network",
            "open the page with https:// (trust the server's certificate once: /ca.crt)"),
            close=True)
