"""Referees' hands: raise and lower (idempotent); the operator may lower any."""

from __future__ import annotations

from typing import Annotated, Any

from fastapi import APIRouter, Path, Request

from api.deps import Ch, Who, auth_of, view
from api.errors import ApiError
from api.models import ERRORS, REFEREE_ID, ChannelState, HoldRequest
from hall.auth import Principal, Role
from hall.seam import ChannelPort
from reader.events import OPERATOR, SYSTEM_PREFIX, Hold, Release

router = APIRouter(tags=["holds"], responses=ERRORS)


def hold_target(svc: ChannelPort, p: Principal, referee: str) -> str:
    """Whose hand `p` may move: a referee only its own, the operator any but yomite's own."""
    if p.role is Role.OPERATOR:
        if referee.startswith(SYSTEM_PREFIX) and referee != OPERATOR:
            raise ApiError(403, "forbidden", f"{referee} is yomite's own hold",
                           "clear it with POST .../match/resume")
        return referee
    if p.role is Role.VIEWER:
        raise ApiError(401, "unauthorized", "join the channel as a referee first",
                       "POST /api/channels/{ch}/referees with the PIN")
    if p.role is Role.SPEAKER:
        raise ApiError(403, "forbidden", "a speaker plays the reading; it holds no hand",
                       "join the channel as a referee")
    if p.channel != svc.name:
        raise ApiError(403, "forbidden", "this referee joined another channel",
                       f"join channel {svc.name} with its PIN")
    if referee != p.referee:
        raise ApiError(403, "forbidden", "a referee may only raise and lower its own hand",
                       f"use /holds/{p.referee}")
    return referee


RefereePath = Annotated[str, Path(pattern=REFEREE_ID)]


@router.put("/api/channels/{ch}/holds/{referee}", response_model=ChannelState,
            response_model_exclude_unset=True)
async def raise_hold(svc: Ch, p: Who, referee: RefereePath, request: Request,
                     body: HoldRequest | None = None) -> dict[str, Any]:
    """Raise a hand (rule 10): the reading stops at once. A referee raises only its own; the
    operator any (and its own pause, @operator). Raising a raised hand changes nothing."""
    rid = hold_target(svc, p, referee)
    ref = auth_of(request).referee(rid)
    name = (body.name if body and body.name else "") or (ref.name if ref else "") or (
        "operator" if rid == OPERATOR else rid)
    await svc.hand(Hold(rid, name))
    return view(svc, p)


@router.delete("/api/channels/{ch}/holds/{referee}", response_model=ChannelState,
               response_model_exclude_unset=True)
async def lower_hold(svc: Ch, p: Who, referee: RefereePath) -> dict[str, Any]:
    """Lower a hand; when every hand is down, reading resumes after the lead-in."""
    rid = hold_target(svc, p, referee)
    await svc.hand(Release(rid), trusted=p.role is Role.OPERATOR)
    return view(svc, p)
