"""Referees' hands: raise and lower (idempotent); the operator may lower any. A press may carry
its referee's move and what the phone saw (hall.presses): applied once, never after a newer
move, and a stale hold is refused with 409 `press_stale`."""

from __future__ import annotations

from typing import Annotated, Any

from fastapi import APIRouter, Path, Request

from api.deps import Ch, Who, auth_of, presses_of, view
from api.errors import ApiError
from api.models import ERRORS, REFEREE_ID, HandState, HoldRequest, ReleaseRequest
from hall.auth import Principal, Role
from hall.presses import Outcome, Press, Verdict
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


def refusal(v: Verdict) -> ApiError:
    """A refused press (a stale hold), said as the REST API and the WebSocket say it."""
    if v.outcome is Outcome.STALE:
        detail = (f"this stop was pressed {v.age_s or 0:.1f} s before it reached the server "
                  "(the link was cut or slow): it was not applied")
    else:
        detail = (f"the reading had left the card or verse this stop was meant for "
                  f"{v.late_s or 0:.1f} s before it arrived (the link was slow): it was not "
                  "applied")
    params: dict[str, int | str] = {"reason": v.outcome.value}
    if v.move is not None:
        params["move"] = v.move
    return ApiError(409, "press_stale", detail,
                    "press again if the reading should still stop (a new press, a new move)",
                    params=params)


def answered(state: dict[str, Any], v: Verdict, press: Press) -> dict[str, Any]:
    """The state, and what was done with a press that carried a move."""
    if press.move is not None:
        state = {**state, "press": {"move": v.move, "outcome": v.outcome.value,
                                    "last": v.last}}
    return state


RefereePath = Annotated[str, Path(pattern=REFEREE_ID)]


@router.put("/api/channels/{ch}/holds/{referee}", response_model=HandState,
            response_model_exclude_unset=True)
async def raise_hold(svc: Ch, p: Who, referee: RefereePath, request: Request,
                     body: HoldRequest | None = None) -> dict[str, Any]:
    """Raise a hand (rule 10): the reading stops at once. A referee raises only its own; the
    operator any (and its own pause, @operator). Raising a raised hand changes nothing. With a
    `move`: applied once; 409 `press_stale` for a hold pressed too long ago or for a card or
    verse no longer read."""
    rid = hold_target(svc, p, referee)
    ref = auth_of(request).referee(rid)
    name = (body.name if body and body.name else "") or (ref.name if ref else "") or (
        "operator" if rid == OPERATOR else rid)
    press = body.press() if body else Press()
    v = await presses_of(request, svc.name).press(Hold(rid, name), press)
    if v.refused:
        raise refusal(v)
    return answered(view(svc, p), v, press)


@router.delete("/api/channels/{ch}/holds/{referee}", response_model=HandState,
               response_model_exclude_unset=True)
async def lower_hold(svc: Ch, p: Who, referee: RefereePath, request: Request,
                     body: ReleaseRequest | None = None) -> dict[str, Any]:
    """Lower a hand; when every hand is down, reading resumes after the lead-in. With a
    `move` (a JSON body): applied once, and never after a newer move; never refused for its
    age."""
    rid = hold_target(svc, p, referee)
    press = body.press() if body else Press()
    v = await presses_of(request, svc.name).press(Release(rid), press,
                                                  trusted=p.role is Role.OPERATOR)
    return answered(view(svc, p), v, press)
