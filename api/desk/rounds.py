"""The desk's rounds: pairing (preliminaries and finals), a round's view and CSV, undoing a
pairing, starting the reading, the move call, an extra card, confirming the results."""

from __future__ import annotations

from collections.abc import Callable
from functools import partial
from typing import Annotated

from fastapi import APIRouter, Query, Request
from fastapi.responses import Response

from api.deps import Op, Who
from api.desk.access import reader
from api.desk.answers import (
    DeskView,
    RoundClosed,
    RoundMemorising,
    RoundStarted,
    RoundView,
)
from api.desk.deps import (
    CSV_ANSWER,
    ERRORS,
    PREFIX,
    csv_answer,
    desk_answer,
    desk_of,
    json_answer,
    paired,
    view_answer,
)
from api.desk.models import (
    Blocks,
    ExtraCardRequest,
    StartRound,
)
from desk import tournament as ops
from desk.checks import complete, round_flags
from desk.entries import write_csv
from desk.errors import Conflict, NotFound
from desk.model import Tournament
from desk.standings import outcomes
from desk.views import details_shown, round_view
from hall.auth import Role
from hall.deskstore import now_iso
from hall.deskviews import json_bytes

router = APIRouter(prefix=PREFIX, tags=["tournaments"])


@router.post("/{tid}/rounds", summary="Pair the next preliminary round of blocks",
             responses=ERRORS,
             response_model=DeskView, response_model_exclude_unset=True)
async def pair(tid: str, request: Request, _p: Op, body: Blocks | None = None
               ) -> DeskView:
    d = desk_of(request)
    at = now_iso()

    def make(t: Tournament) -> list[ops.Change]:
        if not t.blocks:
            raise Conflict("draw the blocks first", "", params={"why": "no_blocks"})
        return _pair_each(t, body, ops.pair_next, at)

    return desk_answer(d, await d.changes(tid, make))


def _pair_each(t: Tournament, body: Blocks | None,
               pair: Callable[[Tournament, str, str], ops.Change], at: str) -> list[ops.Change]:
    """One pairing change per named block (every block by default), each applied before the
    next block is paired."""
    names = body.blocks if body and body.blocks else [b.name for b in t.blocks]
    out: list[ops.Change] = []
    for name in names:
        ch = pair(t, name, at)
        out.append(ch)
        t = ops.apply(t, ch)
    return out


@router.post("/{tid}/final", summary="Pair the finals (top two of each block)",
             responses=ERRORS,
             response_model=DeskView, response_model_exclude_unset=True)
async def final(tid: str, request: Request, _p: Op, body: Blocks | None = None
                ) -> DeskView:
    d = desk_of(request)
    at = now_iso()

    def make(t: Tournament) -> list[ops.Change]:
        return _pair_each(t, body, ops.pair_final, at)

    return desk_answer(d, await d.changes(tid, make))


def _round_csv(t: Tournament, number: int) -> bytes:
    rows: list[list[object]] = []
    for r in sorted((r for r in t.rounds if r.number == number), key=lambda r: r.block):
        for m in r.matches:
            res = outcomes(m.players, m.result, r.final) if m.result else {}
            for seat, no in enumerate(m.players):
                p = t.player(no)
                rows.append([r.block, m.mat, r.colour, seat + 1, no, p.name if p else "",
                             p.furigana if p else "",
                             p.club if p and details_shown(t, public=True) else "",
                             m.result.cards[seat] if m.result else None,
                             res[no].value if no in res else None])
    return write_csv(["block", "mat", "colour", "seat", "no", "name", "furigana", "club",
                      "cards", "outcome"], rows).encode()


# the public files and pages below are built once per version of the tournament, off the
# event loop when it is large (hall/deskviews.py): the desk and the holders of the public link
# (api.desk.access) may ask for them as often as they like; clubs only where published
@router.get("/{tid}/rounds/{number}.csv", summary="A round's pairings and results as CSV "
            "(the desk, or ?view=KEY)", response_class=Response,
            responses={**ERRORS, **CSV_ANSWER})
async def round_csv(tid: str, number: int, request: Request) -> Response:
    d = desk_of(request)
    t, _ = reader(request, tid)
    paired(t, number)
    body = await d.views.made(tid, f"rounds/{number}.csv", partial(_round_csv, number=number))
    return csv_answer(body, f"{tid}-round{number}.csv")


@router.get("/{tid}/rounds/{number}",
            summary="A round of every block (the desk, a referee, or ?view=KEY)",
            response_class=Response,
            responses={**ERRORS, **view_answer(list[RoundView], polled=False)})
async def get_round(tid: str, number: int, request: Request, p: Who) -> Response:
    d = desk_of(request)
    # a referee or an operator is at the hall; anyone else needs the public link
    t = reader(request, tid)[0] if p.role is Role.VIEWER else d.get(tid)
    paired(t, number)
    public = not p.admin  # (an organisation's operator sees what the public sees)

    def build(t: Tournament) -> bytes:
        return json_bytes([round_view(t, r, public=public) for r in t.rounds
                           if r.number == number])

    key = f"rounds/{number}" + ("" if public else "/desk")
    return json_answer(await d.views.made(tid, key, build))


@router.delete("/{tid}/rounds/{number}", summary="Undo a pairing that has not started",
               responses=ERRORS,
               response_model=DeskView, response_model_exclude_unset=True)
async def unpair(tid: str, number: int, request: Request, _p: Op,
                 block: Annotated[str, Query(pattern=r"^[A-Z0-9]{1,4}$")]) -> DeskView:
    d = desk_of(request)
    return desk_answer(d, await d.change(tid, lambda t: ops.unpair(t, block, number)))


@router.post("/{tid}/rounds/{number}/pair-again",
             summary="Pair a round that has not started again, with the players active now",
             responses=ERRORS,
             response_model=DeskView, response_model_exclude_unset=True)
async def pair_again(tid: str, number: int, request: Request, _p: Op,
                     body: Blocks | None = None) -> DeskView:
    """After a withdrawal or a late entry: every named block's round `number` (default: each
    block whose round `number` was paired before one, and so cannot start)."""
    d = desk_of(request)
    at = now_iso()

    def make(t: Tournament) -> list[ops.Change]:
        rounds = [r for r in t.rounds if r.number == number]
        if not rounds:
            raise NotFound(f"round {number} is not paired", "")
        names = body.blocks if body and body.blocks else [
            r.block for r in rounds
            if any(f.code in ops.STALE for f in round_flags(t, r))]
        if not names:
            raise Conflict(f"no block's round {number} needs pairing again", "",
                           params={"why": "nothing_to_pair_again", "round": number})
        out: list[ops.Change] = []
        for name in names:
            for ch in ops.pair_again(t, name, number, at):
                out.append(ch)
                t = ops.apply(t, ch)
        return out

    return desk_answer(d, await d.changes(tid, make))


@router.post("/{tid}/rounds/{number}/start",
             summary="Start reading a round: each block's channel match in its colour",
             responses=ERRORS,
             response_model=RoundStarted, response_model_exclude_unset=True)
async def start(tid: str, number: int, request: Request, _p: Op,
                body: StartRound | None = None) -> RoundStarted:
    d = desk_of(request)
    t, started = await d.start_round(tid, number, body.blocks if body else None,
                                     again=body.again if body else False)
    return RoundStarted(started=started, tournament=desk_answer(d, t))


@router.post("/{tid}/rounds/{number}/memorise",
             summary="Rule 4: the mats are ready after the bow: read 札を覚えてください",
             responses=ERRORS,
             response_model=RoundMemorising, response_model_exclude_unset=True)
async def memorise(tid: str, number: int, request: Request, _p: Op,
                   body: Blocks | None = None) -> RoundMemorising:
    """In round 1 and the final (desk.ready_after_bow) a started round's channels read 礼
    alone and wait while the players shuffle, play janken and choose (rule 2): this goes on
    on every named block's channel (default: each one waiting)."""
    d = desk_of(request)
    told = await d.memorise(tid, number, body.blocks if body and body.blocks else None)
    return RoundMemorising(memorising=told, tournament=desk_answer(d, d.get(tid)))


@router.post("/{tid}/rounds/{number}/close",
             summary="Rule 18: thanks and the move call on the round's finished channels",
             responses=ERRORS,
             response_model=RoundClosed, response_model_exclude_unset=True)
async def close(tid: str, number: int, request: Request, _p: Op,
                body: Blocks | None = None) -> RoundClosed:
    d = desk_of(request)
    closed = await d.close_round(tid, number, body.blocks if body and body.blocks else None)
    return RoundClosed(closed=closed, tournament=desk_answer(d, d.get(tid)))


@router.post("/{tid}/rounds/{number}/extra-card",
             summary="Read one more card on the round's channel (a final's tie)",
             responses=ERRORS,
             response_model=DeskView, response_model_exclude_unset=True)
async def extra(tid: str, number: int, body: ExtraCardRequest, request: Request, _p: Op
                ) -> DeskView:
    d = desk_of(request)
    return desk_answer(d, await d.extra_card(tid, number, body.block))


@router.post("/{tid}/rounds/{number}/confirm",
             summary="Confirm (確定) a round's results: from then on only the desk changes them",
             responses=ERRORS,
             response_model=DeskView, response_model_exclude_unset=True)
async def confirm(tid: str, number: int, request: Request, _p: Op,
                  body: Blocks | None = None) -> DeskView:
    """A final above all: no next round locks its result. Every named block's round (default:
    every block whose round `number` is complete and not yet confirmed)."""
    d = desk_of(request)
    at = now_iso()

    def make(t: Tournament) -> list[ops.Change]:
        rounds = [r for r in t.rounds if r.number == number]
        if not rounds:
            raise NotFound(f"round {number} is not paired", "")
        names = body.blocks if body and body.blocks else [
            r.block for r in rounds if r.confirmed is None and complete(t, r)]
        if not names:
            raise Conflict(f"no block's round {number} is complete and waiting to be "
                           "confirmed", "enter or correct its results first",
                           params={"why": "nothing_to_confirm", "round": number})
        out: list[ops.Change] = []
        for name in names:
            ch = ops.confirm_round(t, name, number, "operator", at)
            if ch is not None:
                out.append(ch)
                t = ops.apply(t, ch)
        return out

    return desk_answer(d, await d.changes(tid, make))
