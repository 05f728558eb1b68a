"""The WebSocket of a channel: `hello`, the full state on connect and after every change;
referees (and the operator) send hold / release; anyone may ping. A speaker page connects with
`?audience=speaker` and the channel's speaker key (the console's speaker link) and also gets
the channel's audio schedule (`speaker` messages, see hall.speaker); `sync` probes the
timeline's clock (`{"type": "sync", "id", "c"}` is answered at once with the same fields and
`s`, the timeline's time)."""

from __future__ import annotations

import asyncio
import logging
from typing import Any

from fastapi import APIRouter, WebSocket, WebSocketDisconnect
from pydantic import ValidationError

from api.deps import peers_of, presses_of, rooms_of, token_of, typed_view
from api.doors import WS_PROTOCOL, offered_protocols
from api.errors import ApiError
from api.protocol import CLIENT, ClientMessage, HoldMessage, Ping, Report, Sync
from api.routes.holds import hold_target, refusal
from api.serverglue import direct_transport
from cluster.peers import Peers, origin_of
from hall.auth import VIEWER, Auth, Principal, Role
from hall.budget import Budget
from hall.channel import ChannelService
from hall.config import Config
from hall.errors import ChannelStopped
from hall.hall import Hall
from hall.hub import state_message
from hall.presses import ChannelPresses, Outcome
from reader.errors import ReaderError
from reader.events import OPERATOR, Hold, Release

log = logging.getLogger("yomite.api")

PING_TEXT = '{"type":"ping"}'
PING = Ping(type="ping")

router = APIRouter()


@router.websocket("/ws/channels/{ch}")
async def ws(websocket: WebSocket, ch: str) -> None:
    h: Hall = websocket.app.state.hall
    auth: Auth = websocket.app.state.auth
    config: Config = websocket.app.state.config
    svc = h.channels.get(ch)
    peers = peers_of(websocket.app)
    if not origin_ok(websocket, config, peers):
        await websocket.close(code=1008, reason="origin not allowed")
        return
    speaker = websocket.query_params.get("audience") == "speaker"
    try:
        p = auth.identify(token_of(websocket))
    except PermissionError:
        p = None
    rooms = rooms_of(websocket)
    owner = rooms.owner(ch)
    # another organisation's room is, to an organisation's operator, no channel at all
    if svc is None or (p is not None and p.org is not None and not p.operates(owner)):
        await websocket.close(code=1008, reason=f"no channel {ch}")
        return
    if p is None:
        if not speaker:
            await websocket.close(code=1008, reason="unknown token: join again")
            return
        p = VIEWER  # a speaker link replaced since: refused below, with a reason it can read
    operates = p.operates(owner)
    most = rooms.max_clients(ch)
    # a room's own pages: its referees, speakers and projector (its operators' too); anyone
    # else watching a room is one of its viewers, and needs its viewer link
    own_page = operates or (p.channel == ch and (p.role is not Role.VIEWER or p.projector))
    # the close reasons a speaker page gets are codes: the page says each in its language
    refusal = None
    if owner is not None and not speaker and not operates and p.channel != ch:
        refusal = (1008, "viewer_link_needed")
    elif own_page and p.projector and sum(
            c.projector for c in svc.hub.clients) >= config.rooms.max_projectors_per_room:
        refusal = (1013, "too_many_projectors")
    elif own_page and p.referee and sum(c.referee == p.referee for c in svc.hub.clients) \
            >= config.server.referees.sockets_each:
        refusal = (1013, "too_many_sockets")
    elif speaker and svc.speakers is None:
        refusal = (1008, "no_browser_speakers")
    elif speaker and not (operates or (p.role is Role.SPEAKER and p.channel == ch)):
        # the schedule names the next card's clips ahead: only the devices the operator
        # admitted (the console's speaker link) may have it
        refusal = (1008, "speaker_key_needed")
    elif speaker and svc.speaker_pages() >= config.server.speakers.max_per_channel:
        refusal = (1013, "too_many_speakers")
    lim = config.server.limits
    # the operator's console is trusted; anyone else's socket is read at a bounded rate, so
    # that no script can keep the event loop (and every other phone's hold) waiting. A
    # referee's sockets share its allowance: connecting again does not renew it, and a
    # referee still flooding is closed before it costs anyone a state.
    budget = None if operates else (
        svc.read_budget(p.referee, lim.ws_messages_per_s, lim.ws_burst) if p.referee
        else Budget(lim.ws_messages_per_s, lim.ws_burst))
    quiet_s = 0.0 if budget is None else budget.spent(asyncio.get_running_loop().time())
    if refusal is None and quiet_s > 0:
        refusal = (1008, "too many messages")
    seated = False
    if refusal is None and most is not None and not own_page:
        # a room's quota of viewers (its organisation's): its own pages always get in
        seated = await rooms.pages.take(ch, most)
        if not seated:
            refusal = (1013, "room_full")
    try:
        # a page that sent its token as a subprotocol is answered with `yomite` (a browser
        # that offered subprotocols drops a connection that chose none)
        offered = offered_protocols(websocket.headers.get("sec-websocket-protocol"))
        chosen = WS_PROTOCOL if WS_PROTOCOL in offered else None
        await websocket.accept(subprotocol=chosen)
        if refusal is not None:  # accepted first, so that a browser can read the reason
            await websocket.close(code=refusal[0], reason=refusal[1])
            return
        if h.channels.get(ch) is not svc:  # closed while the page waited for its seat
            await websocket.close(code=1008, reason=f"no channel {ch}")
            return
        client = svc.hub.add(websocket.send_text, websocket.close,
                             operator=operates,
                             referee=p.referee if p.channel == ch else None, name=p.name,
                             speaker=speaker, viewer=not own_page,
                             projector=p.projector and p.channel == ch,
                             transport=direct_transport(websocket))
    finally:
        if seated:  # in the hub now, or gone: no longer a page being let in
            rooms.pages.seated(ch)
    hello: dict[str, Any] = {"type": "hello", "role": p.role.value, "referee": p.referee,
                             "channel": ch}
    if p.referee or operates:  # how long a press of theirs may take: the page's deadline
        hello["press_max_age_s"] = config.server.referees.press_max_age_s
    if peers is not None and peers.live:
        # a cluster's processes, this one first: where the page reconnects if this one dies
        hello["peers"] = peers.live
    svc.hub.send_to(client, hello)
    svc.hub.send_to(client, state_message(typed_view(svc, p)))
    if speaker and svc.speakers is not None:
        svc.hub.send_to(client, svc.speakers.message())
    if client.referee or speaker:
        svc.presence.changed()  # the console shows who is connected, and how many speakers
    try:
        while True:
            text = await websocket.receive_text()
            if budget is not None:
                now = asyncio.get_running_loop().time()
                wait = budget.take(now)
                if wait is None:
                    budget.cut(now)
                    await websocket.close(code=1008, reason="too many messages")
                    log.info("websocket on %s closed: too many messages (%s %s)", ch,
                             p.role.value, p.referee or "")
                    break
                if wait > 0:
                    await asyncio.sleep(wait)
            if not await _message(svc, presses_of(websocket, ch), auth, p, client, text):
                await websocket.close(code=1008, reason="removed by the operator")
                break
    except WebSocketDisconnect:
        pass
    except Exception as e:  # a per-client edge: log, drop this client only
        log.info("websocket on %s closed: %s", ch, e)
    finally:
        svc.hub.remove(client)
        if client.referee or speaker:
            svc.presence.changed()


async def _message(svc: ChannelService, presses: ChannelPresses, auth: Auth, p: Principal,
                   client: Any, text: str) -> bool:
    """Apply one message; False when the connection must end (the referee was removed)."""
    if len(text) > 4096:
        svc.hub.send_to(client, {"type": "error", "error": "too_large",
                                 "detail": "messages are at most 4096 bytes"})
        return True
    # a referee page pings twice a second: its exact ping skips the parser
    msg: ClientMessage
    try:
        msg = PING if text == PING_TEXT else CLIENT.validate_json(text)
    except (ValidationError, RecursionError, ValueError) as e:
        detail = 'send {"type": "hold"}, {"type": "release"} or {"type": "ping"}'
        if isinstance(e, ValidationError) and e.errors():
            err = e.errors()[0]
            where = ".".join(str(x) for x in err.get("loc", ())) or "message"
            detail = f"{where}: {err.get('msg')}; {detail}"
        svc.hub.send_to(client, {"type": "error", "error": "bad_message", "detail": detail})
        return True
    if isinstance(msg, Ping):
        pong: dict[str, Any] = {"type": "pong", "seq": svc.seq}
        if svc.runtime is not None:
            pong["s"] = presses.clock()  # the clock a referee page times its presses on
        svc.hub.send_to(client, pong)
        return True
    if isinstance(msg, Sync):
        svc.hub.send_to(client, svc.sync(msg.model_dump(exclude_none=True)))
        return True
    if isinstance(msg, Report):
        if not client.speaker:
            svc.hub.send_to(client, {"type": "error", "error": "forbidden",
                                     "detail": "only a speaker page reports itself"})
        else:
            svc.speaker_report(client, msg.model_dump(exclude={"type"}))
        return True
    if p.role is Role.REFEREE and p.referee and auth.referee(p.referee) is None:
        svc.hub.send_to(client, {"type": "error", "error": "unauthorized",
                                 "detail": "this referee was removed: join again"})
        return False
    if p.role is Role.VIEWER or (p.role is Role.REFEREE and p.channel != svc.name):
        svc.hub.send_to(client, {"type": "error", "error": "forbidden",
                                 "detail": "only a referee of this channel may hold"})
        return True
    # the same rule as PUT/DELETE .../holds/{referee}: a referee its own hand, the operator
    # any but yomite's own
    target = msg.referee or (p.referee if p.role is Role.REFEREE else OPERATOR)
    try:
        rid = hold_target(svc, p, target or "")
    except ApiError as e:
        svc.hub.send_to(client, {"type": "error", "error": e.code, "detail": e.detail})
        return True
    ev: Hold | Release = Hold(rid, p.name) if isinstance(msg, HoldMessage) else Release(rid)
    try:
        v = await presses.press(ev, msg.press(), trusted=p.role is Role.OPERATOR)
        if v.refused:
            no = refusal(v)
            svc.hub.send_to(client, {"type": "error", "error": no.code, "detail": no.detail,
                                     "move": v.move, "reason": v.outcome.value})
        elif v.outcome is Outcome.SUPERSEDED:
            svc.hub.send_to(client, {
                "type": "error", "error": "press_superseded", "move": v.move, "last": v.last,
                "detail": f"move {v.move} is older than move {v.last}, already taken: "
                          "ignored (the state says where the hand is)"})
        if not v.apply:  # answered with the state as it is (unchanged: no broadcast)
            svc.hub.send_to(client, state_message(typed_view(svc, p)))
    except ReaderError as e:
        svc.hub.send_to(client, {"type": "error", "error": "illegal_move", "detail": str(e)})
    except ChannelStopped as e:  # not sent, expired (a cluster), stopping: said as such
        svc.hub.send_to(client, {"type": "error", "error": e.code, "detail": str(e)[:300]})
    except Exception as e:  # a fault or a stopping channel: the socket says so and lives on
        svc.hub.send_to(client, {"type": "error", "error": "unavailable",
                                 "detail": str(e)[:300]})
    return True


def origin_ok(ws: WebSocket, config: Config, peers: Peers | None = None) -> bool:
    """Browsers always send Origin; accept our own host, configured origins and, in a
    cluster, the addresses of its processes (a page loaded from another, perhaps dead since).
    Non-browser clients (no Origin) are accepted: the token, not the origin, is what
    authorises them."""
    origin = ws.headers.get("origin")
    if origin is None:
        return True
    host = ws.headers.get("host", "")
    if origin in (f"http://{host}", f"https://{host}"):
        return True
    if peers is not None and origin_of(origin) in peers.known:
        return True
    return origin in config.server.security.allowed_origins
