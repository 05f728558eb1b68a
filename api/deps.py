"""What the routes share: who is asking (from the token), the hall, the channel of the path,
and the view of a channel's state that the asker may see.

The isolation of organisations is here: an organisation's operator operates its rooms only
(`Principal.operates`), and every channel route answers it about any other channel exactly as
about a channel that does not exist (404 no_such_channel); routes that are not a channel's
(`Op` without `{ch}` in the path: the desk, the recording pack, the devices) are the admin's."""

from __future__ import annotations

from typing import Annotated, Any

from fastapi import Depends, Request, WebSocket
from fastapi.security import HTTPAuthorizationCredentials, HTTPBearer

from api.doors import token_in
from api.errors import ApiError
from cluster.peers import Peers
from hall.auth import Auth, Principal, Role
from hall.channel import ChannelService
from hall.hall import Hall
from hall.inbox import Item
from hall.presses import ChannelPresses
from hall.rooms import Rooms
from hall.seam import ChannelPort
from hall.states import OperatorView
from hall.views import PublicView, public_view
from hall.wire import to_wire


def token_of(request: Request | WebSocket) -> str | None:
    # the door reads a request's token by the same rule before a route sees it (api.doors)
    protocols = (request.headers.get("sec-websocket-protocol")
                 if isinstance(request, WebSocket) else None)
    return token_in(request.headers.get("authorization"), request.headers.get("x-yomite-token"),
                    request.query_params.get("token"), protocols)


def peers_of(app: Any) -> Peers | None:
    """One of a cluster's processes: the addresses of the cluster's processes (cluster.peers);
    None on one machine."""
    return getattr(getattr(app.state, "cluster", None), "peers", None)


def presses_of(request: Request | WebSocket, ch: str) -> ChannelPresses:
    """A channel's referees' presses (hall.presses): the rule in front of its hands."""
    h: Hall = request.app.state.hall
    return h.presses[ch]


def hall_of(request: Request) -> Hall:
    h: Hall = request.app.state.hall
    return h


def auth_of(request: Request) -> Auth:
    a: Auth = request.app.state.auth
    return a


# declares the bearer scheme in the OpenAPI (the token itself is read by token_of, which also
# takes ?token= on a WebSocket URL); it never refuses by itself: a viewer needs no token
bearer = HTTPBearer(auto_error=False, scheme_name="token",
                    description="the operator's token (printed by yomite serve) or a "
                    "referee's (from POST /api/channels/{ch}/referees)")


# The dependencies are coroutines, though none of them awaits: FastAPI runs a plain `def`
# dependency in its thread pool, and a request paid a hop to a worker thread and back for each
# (four for a hold, each a wake-up on the other core and a GIL hand-over: 1.2 of a GET's
# 2.4 ms here). They only read memory, so they run on the loop.
async def who(request: Request,
              _declared: Annotated[HTTPAuthorizationCredentials | None, Depends(bearer)] = None
              ) -> Principal:
    try:
        return auth_of(request).identify(token_of(request))
    except PermissionError as e:
        raise ApiError(401, "unauthorized", str(e), "open the join page again") from None


def rooms_of(request: Request | WebSocket) -> Rooms:
    r: Rooms = request.app.state.rooms
    return r


def listed(h: Hall, rooms: Rooms, p: Principal) -> list[str]:
    """The channels `p` may know of: the admin every one; an organisation's operator its open
    rooms; anyone else config.yaml's channels and the room it joined (a room's name is given
    only to those its operators hand its links to)."""
    if p.org is not None:
        return [n for n in h.channels if rooms.owner(n) == p.org]
    if p.admin:
        return list(h.channels)
    return [n for n in h.channels if rooms.owner(n) is None or n == p.channel]


def no_such_channel(h: Hall, rooms: Rooms, p: Principal, ch: str) -> ApiError:
    return ApiError(404, "no_such_channel", f"there is no channel {ch[:40]!r}",
                    f"channels: {', '.join(listed(h, rooms, p)) or 'none'}")


async def operator(request: Request, p: Annotated[Principal, Depends(who)]) -> Principal:
    if p.admin:
        return p
    if p.role is Role.OPERATOR:  # an organisation's operator: its rooms' routes only
        ch = request.path_params.get("ch")
        if ch is None:
            raise ApiError(403, "admin_only", "an organisation's token operates its rooms "
                           "only", "ask the association's admin")
        if not p.operates(rooms_of(request).owner(ch)):
            raise no_such_channel(hall_of(request), rooms_of(request), p, ch)
        return p
    if p.role is Role.VIEWER:
        raise ApiError(401, "unauthorized", "this needs the operator's token",
                       "send Authorization: Bearer <operator token>")
    raise ApiError(403, "forbidden", "referees may only raise and lower their own hand",
                   "ask the operator")


async def any_operator(p: Annotated[Principal, Depends(who)]) -> Principal:
    """The admin or an organisation's operator: the route checks what it may reach."""
    if p.role is Role.OPERATOR:
        return p
    if p.role is Role.VIEWER:
        raise ApiError(401, "unauthorized", "this needs an operator's token",
                       "sign in with your organisation's invite code on /start")
    raise ApiError(403, "forbidden", "referees may only raise and lower their own hand",
                   "ask the operator")


async def channel(ch: str, request: Request, p: Annotated[Principal, Depends(who)]
                  ) -> ChannelService:
    h = hall_of(request)
    svc = h.channels.get(ch)
    rooms = rooms_of(request)
    if (svc is None or svc.runtime is None
            or (p.org is not None and not p.operates(rooms.owner(ch)))):
        raise no_such_channel(h, rooms, p, ch)
    return svc


async def hall_dep(request: Request) -> Hall:
    return hall_of(request)


Op = Annotated[Principal, Depends(operator)]
AnyOp = Annotated[Principal, Depends(any_operator)]
Who = Annotated[Principal, Depends(who)]
Ch = Annotated[ChannelService, Depends(channel)]
HallDep = Annotated[Hall, Depends(hall_dep)]


def typed_view(svc: ChannelPort, p: Principal) -> OperatorView | PublicView:
    """The channel's state as `p` may see it (poems hidden from non-operators until read)."""
    op = svc.latest().state
    return op if p.role is Role.OPERATOR else public_view(op)


def view(svc: ChannelPort, p: Principal) -> dict[str, Any]:
    """`typed_view` as the routes answer it (JSON values, hall.wire)."""
    out: dict[str, Any] = to_wire(typed_view(svc, p))
    return out


async def submit(svc: ChannelPort, item: Item) -> None:
    await svc.apply(item)
