"""The WebSocket of a channel: `hello`, the full state on connect and after every change;
referees (and the operator) send hold / release; anyone may ping. A speaker page connects with
`?audience=speaker` and also gets the channel's audio schedule (`speaker` messages, see
api.speaker); `sync` probes the timeline's clock (`{"type": "sync", "id", "c"}` is answered at
once with the same fields and `s`, the timeline's time)."""

from __future__ import annotations

import json
import logging
from typing import Any

from fastapi import APIRouter, WebSocket, WebSocketDisconnect

from reader.config import Config
from reader.errors import ReaderError
from reader.events import OPERATOR, Hold, Release

from ..auth import Auth, Principal, Role
from ..deps import token_of, view
from ..hall import ChannelService, Hall
from ..hub import direct_transport

log = logging.getLogger("yomite.api")

router = APIRouter()


@router.websocket("/ws/channels/{ch}")
async def ws(websocket: WebSocket, ch: str) -> None:
    h: Hall = websocket.app.state.hall
    auth: Auth = websocket.app.state.auth
    config: Config = websocket.app.state.config
    svc = h.channels.get(ch)
    if not origin_ok(websocket, config):
        await websocket.close(code=1008, reason="origin not allowed")
        return
    if svc is None:
        await websocket.close(code=1008, reason=f"no channel {ch}")
        return
    try:
        p = auth.identify(token_of(websocket))
    except PermissionError:
        await websocket.close(code=1008, reason="unknown token: join again")
        return
    speaker = websocket.query_params.get("audience") == "speaker"
    refusal = None
    if speaker and svc.speakers is None:
        refusal = (1008, f"channel {ch} has no browser speakers "
                         "(server.channels[].output: browser or both)")
    elif speaker and len(svc.hub.speakers) >= config.server.speakers.max_per_channel:
        refusal = (1013, "too many speaker pages on this channel")
    await websocket.accept()
    if refusal is not None:  # accepted first, so that a browser can read the reason
        await websocket.close(code=refusal[0], reason=refusal[1])
        return
    client = svc.hub.add(websocket.send_text, websocket.close,
                         operator=p.role is Role.OPERATOR,
                         referee=p.referee if p.channel == ch else None, name=p.name,
                         speaker=speaker,
                         transport=direct_transport(websocket._send))
    svc.hub.send_to(client, {"type": "hello", "role": p.role.value, "referee": p.referee,
                             "channel": ch})
    svc.hub.send_to(client, {"type": "state", **view(svc, p)})
    if speaker and svc.speakers is not None:
        svc.hub.send_to(client, svc.speakers.message())
    if client.referee or speaker:
        svc.broadcast()  # the console shows who is connected, and how many speakers
    try:
        while True:
            text = await websocket.receive_text()
            await _message(svc, p, client, text)
    except WebSocketDisconnect:
        pass
    except Exception as e:  # a per-client edge: log, drop this client only
        log.info("websocket on %s closed: %s", ch, e)
    finally:
        svc.hub.remove(client)
        if client.referee or speaker:
            svc.broadcast()


async def _message(svc: ChannelService, p: Principal, client: Any, text: str) -> None:
    if len(text) > 4096:
        svc.hub.send_to(client, {"type": "error", "error": "too_large",
                                 "detail": "messages are at most 4096 bytes"})
        return
    try:
        msg = json.loads(text)
        kind = msg["type"] if isinstance(msg, dict) else None
    except (ValueError, KeyError, TypeError):
        kind = None
    if kind == "ping":
        svc.hub.send_to(client, {"type": "pong", "seq": svc.seq})
        return
    if kind == "sync":
        svc.hub.send_to(client, svc.sync(msg))
        return
    if kind not in ("hold", "release"):
        svc.hub.send_to(client, {"type": "error", "error": "bad_message",
                                 "detail": 'send {"type": "hold"} or {"type": "release"}'})
        return
    if p.role is Role.OPERATOR:
        rid = str(msg.get("referee") or OPERATOR)
    elif p.role is Role.REFEREE and p.channel == svc.name and p.referee:
        rid = p.referee
    else:
        svc.hub.send_to(client, {"type": "error", "error": "forbidden",
                                 "detail": "only a referee of this channel may hold"})
        return
    ev: Hold | Release = Hold(rid, p.name) if kind == "hold" else Release(rid)
    try:
        await svc.hand(ev)
    except ReaderError as e:
        svc.hub.send_to(client, {"type": "error", "error": "illegal_move", "detail": str(e)})


def origin_ok(ws: WebSocket, config: Config) -> bool:
    """Browsers always send Origin; accept our own host and configured origins. Non-browser
    clients (no Origin) are accepted: the token, not the origin, is what authorises them."""
    origin = ws.headers.get("origin")
    if origin is None:
        return True
    host = ws.headers.get("host", "")
    if origin in (f"http://{host}", f"https://{host}"):
        return True
    return origin in config.server.security.allowed_origins
