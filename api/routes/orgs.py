"""Organisations (hall.orgs): the admin makes them, lists them, gives a new invite code, changes
their quotas, removes them; a teacher redeems a code for an operator token of its own."""

from __future__ import annotations

import logging
from datetime import UTC, datetime

from fastapi import APIRouter, Request

from api.deps import Op, auth_of, rooms_of
from api.errors import ApiError
from api.models import ERRORS
from api.roommodels import (
    OrgAnswer,
    OrgOperatorAnswer,
    OrgPatch,
    OrgRemoved,
    OrgRequest,
    RedeemAnswer,
    RedeemRequest,
)
from api.routes.referees import join_bases, pin_refused
from hall.auth import fingerprint
from hall.errors import RoomRefused
from hall.orgs import Orgs
from hall.pinlock import RateLimited, pin_suspect
from hall.roomstore import Org

log = logging.getLogger("yomite.api")

router = APIRouter(tags=["organisations"], responses=ERRORS)

# the invite codes' guesses are limited as a channel's PINs are, all codes together
INVITES = "*invites"


def iso(t: float) -> str:
    return datetime.fromtimestamp(t, UTC).isoformat()


def orgs_of(request: Request) -> Orgs:
    return rooms_of(request).orgs


def invite_url(request: Request, code: str) -> str:
    # the code in the fragment: never sent to a server, taken off the address bar at once
    return f"{join_bases(request)[0].base}/start#invite={code}"


def org_answer(request: Request, org: Org) -> OrgAnswer:
    orgs = orgs_of(request)
    return OrgAnswer(id=org.id, name=org.name, code=org.code,
                     invite_url=invite_url(request, org.code),
                     max_open_rooms=org.max_open_rooms,
                     max_clients_per_room=org.max_clients_per_room,
                     created_at=iso(org.created),
                     open_rooms=rooms_of(request).open_count(org.id),
                     operators=[OrgOperatorAnswer(id=op.id, name=op.name,
                                                  joined_at=iso(op.joined))
                                for op in orgs.operators(org.id)])


def cannot_keep(e: OSError) -> ApiError:
    return ApiError(503, "cannot_record", f"the change cannot be kept ({e.strerror})",
                    "free disk space or make the journal folder writable")


@router.get("/api/orgs", response_model=list[OrgAnswer])
async def list_orgs(request: Request, _p: Op) -> list[OrgAnswer]:
    """Every organisation, with its invite code and link, quotas, open rooms and operators
    (the admin's token only)."""
    return [org_answer(request, o) for o in orgs_of(request).all()]


@router.post("/api/orgs", response_model=OrgAnswer, status_code=201)
async def create_org(body: OrgRequest, request: Request, _p: Op) -> OrgAnswer:
    """A new organisation and its invite code (8 characters, no look-alikes) and link; its
    quotas default to `rooms.max_open_per_org` and `rooms.max_clients_per_room`."""
    try:
        org = await orgs_of(request).create(body.name, body.max_open_rooms,
                                            body.max_clients_per_room)
    except OSError as e:
        raise cannot_keep(e) from None
    log.info("organisation %s (%r) made by the admin", org.id, org.name)
    return org_answer(request, org)


@router.get("/api/orgs/{org}", response_model=OrgAnswer)
async def get_org(org: str, request: Request, _p: Op) -> OrgAnswer:
    return org_answer(request, orgs_of(request).get(org))


@router.patch("/api/orgs/{org}", response_model=OrgAnswer)
async def change_org(org: str, body: OrgPatch, request: Request, _p: Op) -> OrgAnswer:
    """Its name or quotas (rooms already open stay open; a lower room quota refuses new
    rooms until enough have closed)."""
    try:
        changed = await orgs_of(request).change(org, body.name, body.max_open_rooms,
                                                body.max_clients_per_room)
    except OSError as e:
        raise cannot_keep(e) from None
    return org_answer(request, changed)


@router.post("/api/orgs/{org}/code", response_model=OrgAnswer)
async def rotate_code(org: str, request: Request, _p: Op) -> OrgAnswer:
    """A new invite code: the old code and its link stop working; operators who joined keep
    their tokens."""
    try:
        changed = await orgs_of(request).rotate_code(org)
    except OSError as e:
        raise cannot_keep(e) from None
    log.info("organisation %s: the admin gave a new invite code", org)
    return org_answer(request, changed)


@router.delete("/api/orgs/{org}", response_model=OrgRemoved)
async def remove_org(org: str, request: Request, _p: Op) -> OrgRemoved:
    """Remove an organisation: its open rooms close (their clients are told `room_closed`,
    their journals stay), its operators' tokens die at once."""
    orgs, rooms = orgs_of(request), rooms_of(request)
    orgs.get(org)
    closing = [r.name for r in rooms.rooms(org) if r.closed is None]
    try:
        await rooms.close_org(org)
        await orgs.remove(org)
    except OSError as e:
        raise cannot_keep(e) from None
    log.info("organisation %s removed by the admin (%d rooms closed)", org, len(closing))
    return OrgRemoved(removed=org, rooms_closed=closing)


@router.post("/api/orgs/join", response_model=RedeemAnswer)
async def redeem(body: RedeemRequest, request: Request) -> RedeemAnswer:
    """Redeem an invite code with a name: the answer's token operates the organisation's
    rooms (and nothing else). Guesses are limited like a channel's PIN: per address a minute,
    and all codes together (429 too_many_codes)."""
    auth = auth_of(request)
    client = request.client.host if request.client else "?"
    guesser = pin_suspect(client)
    try:
        auth.pins.check(INVITES, guesser)
    except RateLimited as e:
        raise pin_refused(e, "code") from None
    orgs = orgs_of(request)
    try:
        org, op, token = await orgs.redeem(body.code, body.name)
    except OSError as e:
        raise cannot_keep(e) from None
    except RoomRefused:
        auth.pins.failed(INVITES, guesser)
        raise
    log.info("operator %s (%r) joined organisation %s, token %s…", op.id, op.name, org.id,
             fingerprint(token))
    return RedeemAnswer(org=org.id, org_name=org.name, operator=op.id, name=op.name,
                        token=token)
