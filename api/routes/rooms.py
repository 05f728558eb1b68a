"""Rooms (hall.rooms): an organisation's operator opens one with one request and gets its pages'
links and QR codes; lists its organisation's rooms (open, and closed with their history);
closes one. The admin does the same for any organisation."""

from __future__ import annotations

import asyncio
import logging
from typing import Annotated, Literal
from urllib.parse import quote

from fastapi import APIRouter, Path, Query, Request
from fastapi.responses import Response

from api.deps import AnyOp, hall_of, rooms_of
from api.errors import ApiError
from api.models import ERRORS
from api.roommodels import (
    ORG_ID,
    ROOM_NAME,
    OrgSummary,
    RoomAnswer,
    RoomLinks,
    RoomQr,
    RoomRequest,
    RoomsAnswer,
)
from api.routes.orgs import cannot_keep, iso, orgs_of
from api.routes.referees import join_bases, join_url, qr_svg
from hall.auth import Principal
from hall.errors import RoomRefused
from hall.roomstore import Room

log = logging.getLogger("yomite.api")

router = APIRouter(tags=["rooms"], responses=ERRORS)

RoomPath = Annotated[str, Path(pattern=ROOM_NAME)]
Kind = Literal["console", "projector", "viewer", "speaker", "referee"]
KINDS = ("console", "projector", "viewer", "speaker", "referee")


def links(request: Request, name: str) -> RoomLinks | None:
    svc = hall_of(request).channels.get(name)
    if svc is None or svc.speaker_link is None or svc.view_links is None:
        return None
    base = join_bases(request)[0].base
    q = quote(name)
    return RoomLinks(console=f"{base}/console?ch={q}",
                     projector=svc.view_links.projector_url(base),
                     viewer=svc.view_links.viewer_url(base),
                     speaker=svc.speaker_link.url(base), referee=join_url(base, svc))


def room_answer(request: Request, room: Room) -> RoomAnswer:
    q = quote(room.name)
    out = RoomAnswer(room=room.name, org=room.org, open=room.closed is None,
                     opened_at=iso(room.opened), opened_by=room.opened_by,
                     closed_at=iso(room.closed) if room.closed is not None else None,
                     closed_why=room.closed_why,
                     colors=list(room.colors) if room.colors is not None else None,
                     history=f"/api/channels/{q}/matches")
    svc = hall_of(request).channels.get(room.name)
    if room.closed is None and svc is not None:
        m = svc.latest().state.match
        out.clients = len(svc.hub.clients)
        out.phase = m.snapshot.phase.value if m is not None else None
        out.links = links(request, room.name)
        out.qr = RoomQr(**{k: f"/api/rooms/{q}/qr/{k}.svg" for k in KINDS})
    return out


def whose(p: Principal, org: str | None) -> str:
    """The organisation a request of `p` is about: an operator's own (another one named is
    answered as one that does not exist); the admin must name one."""
    if p.org is not None:
        if org is not None and org != p.org:
            raise RoomRefused("no_such_org", f"there is no organisation {org!r}",
                              "leave org out: your rooms are your organisation's")
        return p.org
    if org is None:
        raise ApiError(422, "org_needed", "the admin opens a room for an organisation",
                       "send {\"org\": \"o-…\"} (GET /api/orgs lists them)")
    return org


@router.post("/api/rooms", response_model=RoomAnswer, status_code=201)
async def open_room(request: Request, p: AnyOp, body: RoomRequest | None = None) -> RoomAnswer:
    """Open a room (a channel read by the browsers) for the organisation: its console,
    projector, speaker and referee links, with their QR codes. 409 `too_many_rooms` when the
    organisation's rooms open reach its quota (close one, or ask the admin for more)."""
    body = body or RoomRequest()
    org = whose(p, body.org)
    try:
        room = await rooms_of(request).open(org, p.name,
                                            tuple(body.colors) if body.colors else None)
    except OSError as e:
        raise cannot_keep(e) from None
    return room_answer(request, room)


@router.get("/api/rooms", response_model=RoomsAnswer)
async def list_rooms(request: Request, p: AnyOp,
                     org: Annotated[str | None, Query(pattern=ORG_ID)] = None) -> RoomsAnswer:
    """The organisation's rooms, open ones first, then those closed in the last
    `rooms.closed_kept_days` with their history. The admin gets every organisation's (or
    `org`'s)."""
    rooms = rooms_of(request)
    mine = whose(p, org) if (p.org is not None or org is not None) else None
    summary = None
    if mine is not None:
        o = orgs_of(request).get(mine)
        summary = OrgSummary(id=o.id, name=o.name, max_open_rooms=o.max_open_rooms,
                             max_clients_per_room=o.max_clients_per_room)
    return RoomsAnswer(org=summary, open=rooms.open_count(mine),
                       rooms=[room_answer(request, r) for r in rooms.rooms(mine)])


@router.get("/api/rooms/{room}", response_model=RoomAnswer)
async def get_room(room: RoomPath, request: Request, p: AnyOp) -> RoomAnswer:
    return room_answer(request, rooms_of(request).room(room, p.org))


@router.delete("/api/rooms/{room}", response_model=RoomAnswer)
async def close_room(room: RoomPath, request: Request, p: AnyOp) -> RoomAnswer:
    """Close a room: its pages are disconnected (`room_closed`, each says so in its
    language), its reading stops; its history stays readable by its organisation."""
    rooms = rooms_of(request)
    rooms.room(room, p.org)
    try:
        closed = await rooms.close(room, "operator")
    except OSError as e:
        raise cannot_keep(e) from None
    return room_answer(request, closed)


@router.get("/api/rooms/{room}/qr/{kind}.svg", response_class=Response,
            responses={200: {"content": {"image/svg+xml": {}}, "description": "the QR code"}})
async def room_qr(room: RoomPath, kind: Kind, request: Request, p: AnyOp) -> Response:
    """The QR code of one of an open room's links (drawn in a worker thread, then kept)."""
    rooms_of(request).room(room, p.org)
    found = links(request, room)
    if found is None:
        raise RoomRefused("no_such_room", f"room {room} is closed",
                          "open a new room; a closed one keeps only its history")
    svg = await asyncio.to_thread(qr_svg, getattr(found, kind))
    return Response(svg, media_type="image/svg+xml", headers={"Cache-Control": "no-store"})
