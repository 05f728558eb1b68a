"""The desk's blocks and referees: the draw, a block's reader and mats, the referees' mats
(and a referee's own list of them)."""

from __future__ import annotations

import secrets

from fastapi import APIRouter, Request

from api.deps import Op, Who
from api.desk.answers import (
    AssignedMats,
    DeskView,
    RefereesView,
)
from api.desk.deps import (
    ERRORS,
    PREFIX,
    desk_answer,
    desk_of,
)
from api.desk.models import (
    BlockPatch,
    Draw,
    RefereeAssign,
)
from api.errors import ApiError
from desk import tournament as ops
from desk.errors import Invalid, NotFound
from desk.model import Method
from desk.views import round_view
from hall.auth import Role
from hall.wire import to_wire

router = APIRouter(prefix=PREFIX, tags=["tournaments"])


@router.get("/assigned", summary="A referee's mats and their current matches",
            responses=ERRORS,
            response_model=list[AssignedMats], response_model_exclude_unset=True)
async def assigned(request: Request, p: Who) -> list[AssignedMats]:
    if p.role is not Role.REFEREE:
        raise ApiError(401 if p.role is Role.VIEWER else 403, "unauthorized",
                       "this is a referee's list of mats: send the referee's token",
                       "join a channel as a referee first")
    out: list[AssignedMats] = []
    for t in desk_of(request).tournaments():
        mine = next((x for x in t.referees if x.referee == p.referee), None)
        if mine is None:
            continue
        matches = []
        for mat in mine.mats:
            found = None
            for r in sorted(t.rounds, key=lambda r: -r.number):
                m = r.match_at(mat)
                if m is not None:
                    found = (r, m)
                    break
            if found is None:
                continue
            r, m = found
            rv = round_view(t, r)
            mv = next(x for x in rv["matches"] if x["mat"] == mat)
            later = any(x.number > r.number for x in t.rounds_of(r.block))
            matches.append({**mv, "round": r.number, "block": r.block, "final": r.final,
                            "colour": r.colour, "cards_read": rv["cards_read"],
                            "closed": later or r.confirmed is not None,
                            "confirmed": r.confirmed is not None,
                            "flags": [f for f in rv["flags"] if f["mat"] == mat]})
        out.append(AssignedMats(tournament=t.id, name=t.name, version=t.version,
                                mats=list(mine.mats), matches=matches))
    return out


@router.post("/{tid}/blocks/draw", summary="Draw the blocks", responses=ERRORS,
             response_model=DeskView, response_model_exclude_unset=True)
async def draw(tid: str, body: Draw, request: Request, _p: Op) -> DeskView:
    d = desk_of(request)
    hall = d.hall
    channels = body.channels
    colours: dict[str, str] = {}
    if hall is not None:
        known = [c.name for c in hall.config.server.channels]
        if channels is None:
            channels = known
        bad = [c for c in channels if c not in known]
        if bad:
            raise Invalid(f"no channel {bad[0]!r} in this hall", f"channels: {', '.join(known)}")
        for c in hall.config.server.channels:
            if c.colors:
                colours[c.name] = c.colors[0]
    seed = body.seed if body.seed is not None else secrets.randbelow(1_000_000)
    t = await d.change(tid, lambda t: ops.draw_blocks(t, body.blocks, Method(body.method), seed,
                                                      channels or [], colours,
                                                      size=body.block_size))
    return desk_answer(d, t)


@router.patch("/{tid}/blocks/{name}", summary="A block's reader, colours and first mat",
              responses=ERRORS,
              response_model=DeskView, response_model_exclude_unset=True)
async def patch_block(tid: str, name: str, body: BlockPatch, request: Request, _p: Op
                      ) -> DeskView:
    d = desk_of(request)
    if body.channel is not None and d.hall is not None and body.channel not in d.hall.channels:
        raise Invalid(f"no channel {body.channel!r} in this hall",
                      f"channels: {', '.join(d.hall.channels)}")
    channel: str | bool | None = False
    if body.unassign_channel:
        channel = None
    elif body.channel is not None:
        channel = body.channel
    t = await d.change(tid, lambda t: ops.change_block(t, name, channel=channel,
                                                       colours=body.colours,
                                                       first_mat=body.first_mat))
    return desk_answer(d, t)


@router.get("/{tid}/referees", summary="Referees of the blocks' channels and their mats",
            responses=ERRORS,
            response_model=RefereesView, response_model_exclude_unset=True)
async def referees(tid: str, request: Request, _p: Op) -> RefereesView:
    d = desk_of(request)
    t = d.get(tid)
    channels = sorted({b.channel for b in t.blocks if b.channel})
    return RefereesView(assigned=[{"referee": x.referee, "name": x.name, "channel": x.channel,
                                   "mats": list(x.mats)} for x in t.referees],
                        channels={c: to_wire(d.block_of_channel_referee(c))
                                  for c in channels})


@router.put("/{tid}/referees/{referee}", summary="The mats a referee enters results for",
            responses=ERRORS,
            response_model=DeskView, response_model_exclude_unset=True)
async def assign(tid: str, referee: str, body: RefereeAssign, request: Request, _p: Op
                 ) -> DeskView:
    d = desk_of(request)
    auth = request.app.state.auth
    ref = auth.referee(referee)
    if ref is None:
        raise NotFound(f"no referee {referee!r} has joined",
                       "the referee joins its block's channel with the PIN first")
    t = await d.change(tid, lambda t: ops.assign_referee(t, ref.id, ref.name, ref.channel,
                                                         body.mats))
    return desk_answer(d, t)
