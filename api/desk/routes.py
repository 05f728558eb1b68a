"""The tournament desk: `/api/tournaments/...` (entries, blocks, rounds, results, standings,
exports), its pages (`/desk`, `/standings/{t}`, `/results/{ch}`) and the printable pages.

Roles: the desk is the operator's; a referee (a channel's token) enters results at the mats the
desk assigned it; the standings, the pairings and their printouts are public.
"""

from __future__ import annotations

import asyncio
import json
import re
import secrets
from collections.abc import Awaitable, Callable
from functools import partial
from typing import Annotated, Any

from fastapi import APIRouter, Query, Request
from fastapi.responses import HTMLResponse, JSONResponse, Response

from api.deps import Op, Who
from api.desk import printing as desk_print
from api.desk.answers import (
    AssignedMats,
    Deleted,
    DeskView,
    EntriesAdded,
    MatResult,
    PublicView,
    RefereesView,
    ResultChange,
    RoundClosed,
    RoundStarted,
    RoundView,
    TournamentDocument,
    TournamentSummary,
)
from api.desk.models import (
    BlockPatch,
    Blocks,
    Draw,
    Entries,
    ExtraCardRequest,
    NewTournament,
    PlayerPatch,
    RefereeAssign,
    ResultIn,
    StartRound,
    TournamentPatch,
)
from api.errors import ApiError
from api.routes.pages import STATIC
from desk import tournament as ops
from desk.checks import complete
from desk.entries import entry, read_entries, write_csv
from desk.errors import Conflict, DeskError, Invalid, NotFound
from desk.export import from_document, to_document
from desk.model import Method, Tournament
from desk.standings import outcomes
from desk.views import desk_view, history_view, public_view, round_view
from hall.auth import Principal, Role
from hall.desk import Desk, now_iso
from hall.deskviews import json_bytes

router = APIRouter(prefix="/api/tournaments", tags=["tournaments"])
pages = APIRouter(include_in_schema=False)

ERRORS: dict[int | str, dict[str, Any]] = {
    s: {"description": d, "content": {"application/json": {"example": {
        "error": c, "detail": "what was wrong", "hint": "what to do"}}}}
    for s, d, c in ((401, "no operator token", "unauthorized"),
                    (403, "a referee at a mat not its own", "forbidden"),
                    (404, "no such tournament, block, round or mat", "not_found"),
                    (409, "a step out of order (round 3 before round 2's results)",
                     "out_of_order"),
                    (413, "a file over desk.max_upload_kb", "too_large"),
                    (422, "a bad body or file", "invalid"))
}
CSV = "text/csv; charset=utf-8"
CSV_ANSWER: dict[int | str, dict[str, Any]] = {
    200: {"description": "the file, as an attachment", "content": {"text/csv": {}}}}
# the routes that take a file (the JSON backup, the entries CSV): the door lets their bodies
# reach desk.max_upload_kb, which they check themselves as they read (every other route keeps
# server.limits.body_bytes)
UPLOADS = re.compile(r"/api/tournaments/(import|[^/]+/entries\.csv)")


def desk_of(request: Request) -> Desk:
    d: Desk = request.app.state.desk
    return d


def _t(request: Request, tid: str) -> Tournament:
    return desk_of(request).get(tid)


def _view(d: Desk, t: Tournament) -> dict[str, Any]:
    v = desk_view(t)
    for rv, r in zip(v["rounds"], t.rounds, strict=True):
        rv["live"] = d.reading_state(r)
    return v


def _json(body: bytes) -> Response:
    return Response(body, media_type="application/json")


async def _gone(request: Request) -> None:
    """Returns when the client has left (its connection closed)."""
    while (await request.receive())["type"] != "http.disconnect":
        pass


async def _long_poll(request: Request, answer: Awaitable[bytes]) -> Response:
    """A live page's wait for the next version, ended when the page leaves (a projector
    switched off, a phone asleep, fifty pages reloaded): its wait is not kept for
    desk.long_poll_s, nor left for the server's shutdown to cancel."""
    work = asyncio.ensure_future(answer)
    left = asyncio.ensure_future(_gone(request))
    try:
        done, _ = await asyncio.wait((work, left), return_when=asyncio.FIRST_COMPLETED)
    finally:
        left.cancel()
        if not work.done():
            work.cancel()
    if work not in done:
        return Response(status_code=204)  # nobody is there to read it
    return _json(work.result())


# a live page's view is JSON kept per version (Desk.view_json), built by desk/views.py: its
# model (api/desk/answers.py) documents it, the bytes go out as they are
def _view_answer(model: Any, long_poll: bool = True
                 ) -> dict[int | str, dict[str, Any]]:
    out: dict[int | str, dict[str, Any]] = {
        200: {"description": "the view (see the desk's pages)", "model": model}}
    if long_poll:
        out[204] = {"description": "the page left before the next version (a long poll)"}
    return out


async def _body(request: Request, limit_kb: int) -> bytes:
    """The request's body, refused (413) past `limit_kb` without reading it all."""
    limit = limit_kb * 1024
    declared = request.headers.get("content-length")
    if declared is not None and declared.isdigit() and int(declared) > limit:
        raise ApiError(413, "too_large", f"the file is {int(declared) // 1024} KiB; the desk "
                       f"takes at most {limit_kb} KiB", "split it, or raise desk.max_upload_kb")
    buf = bytearray()
    async for chunk in request.stream():
        buf += chunk
        if len(buf) > limit:
            raise ApiError(413, "too_large", f"the file is over {limit_kb} KiB",
                           "split it, or raise desk.max_upload_kb")
    return bytes(buf)


def _csv_response(text: str | bytes, filename: str) -> Response:
    return Response(text, media_type=CSV,
                    headers={"Content-Disposition": f'attachment; filename="{filename}"'})


# ---------------------------------------------------------------------- tournaments
@router.get("", summary="The tournaments (anyone)",
            response_model=list[TournamentSummary], response_model_exclude_unset=True)
async def list_tournaments(request: Request) -> list[dict[str, Any]]:
    return [{"id": t.id, "name": t.name, "day": t.day, "players": len(t.players),
             "version": t.version} for t in desk_of(request).tournaments()]


@router.post("", summary="Create a tournament", responses=ERRORS,
             response_model=DeskView, response_model_exclude_unset=True)
async def create(body: NewTournament, request: Request, _p: Op) -> dict[str, Any]:
    d = desk_of(request)
    t = await d.create(body.id, body.name, body.day, body.rounds, body.cards)
    return _view(d, t)


@router.get("/assigned", summary="A referee's mats and their current matches",
            responses=ERRORS,
            response_model=list[AssignedMats], response_model_exclude_unset=True)
async def assigned(request: Request, p: Who) -> list[dict[str, Any]]:
    if p.role is not Role.REFEREE:
        raise ApiError(401 if p.role is Role.VIEWER else 403, "unauthorized",
                       "this is a referee's list of mats: send the referee's token",
                       "join a channel as a referee first")
    out = []
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
        out.append({"tournament": t.id, "name": t.name, "version": t.version,
                    "mats": list(mine.mats), "matches": matches})
    return out


@router.post("/import", summary="Import a tournament from its JSON export", responses=ERRORS,
             openapi_extra={"requestBody": {"required": True, "content": {
                 "application/json": {"schema": {"type": "object"}}}}},
             response_model=DeskView, response_model_exclude_unset=True)
async def import_tournament(request: Request, _p: Op,
                            replace: Annotated[bool, Query()] = False) -> dict[str, Any]:
    d = desk_of(request)
    raw = await _body(request, d.config.desk.max_upload_kb)
    try:
        data = json.loads(raw)
    except (ValueError, UnicodeDecodeError) as e:
        raise Invalid(f"the file is not JSON ({e})", "send the file /export gave") from None
    t = from_document(data)
    t = await d.store(t, replace_existing=replace)
    return _view(d, t)


@router.get("/{tid}", summary="The desk's whole view of a tournament",
            response_class=Response, responses={**ERRORS, **_view_answer(DeskView)})
async def get_tournament(tid: str, request: Request, _p: Op,
                         after: Annotated[int | None, Query(ge=-1, description=(
                             "wait until the version is past this (long poll)"))] = None
                         ) -> Response:
    d = desk_of(request)
    if after is None:
        return _json(await d.view_json(tid, "desk"))
    d.get(tid)  # an unknown tournament is a 404 at once
    return await _long_poll(request, d.view_json(tid, "desk", after))


@router.patch("/{tid}", summary="Rename, or change rounds and cards", responses=ERRORS,
              response_model=DeskView, response_model_exclude_unset=True)
async def patch_tournament(tid: str, body: TournamentPatch, request: Request, _p: Op
                           ) -> dict[str, Any]:
    d = desk_of(request)
    t = await d.change(tid, lambda t: ops.change_settings(t, name=body.name, day=body.day,
                                                         rounds=body.rounds, cards=body.cards))
    return _view(d, t)


@router.delete("/{tid}", summary="Delete a tournament (export it first)", responses=ERRORS,
               response_model=Deleted, response_model_exclude_unset=True)
async def delete_tournament(tid: str, request: Request, _p: Op) -> dict[str, Any]:
    await desk_of(request).delete(tid)
    return {"deleted": tid}


@router.get("/{tid}/public", summary="Standings, current pairings and next mats (anyone)",
            response_class=Response, responses={**ERRORS, **_view_answer(PublicView)})
async def public(tid: str, request: Request,
                 after: Annotated[int | None, Query(ge=-1, description=(
                     "wait until the version is past this (long poll)"))] = None
                 ) -> Response:
    d = desk_of(request)
    if after is None:
        return _json(await d.view_json(tid, "public"))
    d.get(tid)  # an unknown tournament is a 404 at once
    return await _long_poll(request, d.view_json(tid, "public", after))


@router.get("/{tid}/export", summary="The whole tournament as one JSON document",
            responses={**ERRORS, 200: {"model": TournamentDocument,
                                       "description": "the document, as an attachment"}})
async def export(tid: str, request: Request, _p: Op) -> JSONResponse:
    t = _t(request, tid)
    return JSONResponse(to_document(t), headers={
        "Content-Disposition": f'attachment; filename="{t.id}.json"'})


@router.get("/{tid}/history", summary="Every entry and correction of a result",
            responses=ERRORS,
            response_model=list[ResultChange], response_model_exclude_unset=True)
async def history(tid: str, request: Request, _p: Op) -> list[dict[str, Any]]:
    return history_view(_t(request, tid))


# ---------------------------------------------------------------------- entries
@router.post("/{tid}/entries", summary="Add players (or late entries)", responses=ERRORS,
             response_model=EntriesAdded, response_model_exclude_unset=True)
async def add_entries(tid: str, body: Entries, request: Request, _p: Op) -> dict[str, Any]:
    d = desk_of(request)
    try:
        es = [entry(e.name, e.furigana, e.club, e.grade, e.block) for e in body.players]
    except ValueError as e:
        raise Invalid(str(e), "correct the entry") from None
    before = len(d.get(tid).players)
    t = await d.change(tid, lambda t: ops.add_players(t, es, late=body.late))
    return {"added": [p.no for p in t.players[before:]], "tournament": _view(d, t)}


@router.post("/{tid}/entries.csv", summary="Import entries from a CSV file", responses=ERRORS,
             openapi_extra={"requestBody": {"required": True, "content": {
                 "text/csv": {"schema": {"type": "string"}}}}},
             response_model=EntriesAdded, response_model_exclude_unset=True)
async def import_csv(tid: str, request: Request, _p: Op) -> dict[str, Any]:
    d = desk_of(request)
    d.get(tid)
    raw = await _body(request, d.config.desk.max_upload_kb)
    es, warnings = read_entries(raw)
    before = len(d.get(tid).players)
    t = await d.change(tid, lambda t: ops.add_players(t, es))
    return {"added": [p.no for p in t.players[before:]], "warnings": warnings,
            "tournament": _view(d, t)}


@router.get("/{tid}/players.csv", summary="The entries as CSV (re-importable)",
            response_class=Response, responses={**ERRORS, **CSV_ANSWER})
async def players_csv(tid: str, request: Request, _p: Op) -> Response:
    t = _t(request, tid)
    v = desk_view(t)
    rows: list[list[object]] = [[p["name"], p["furigana"], p["club"], p["grade"], p["block"],
                                 p["no"], p["joined_round"], p["withdrawn_round"], p["lottery"]]
                                for p in v["players"]]
    return _csv_response(write_csv(["name", "furigana", "club", "grade", "block", "no",
                                    "joined_round", "withdrawn_round", "lottery"], rows),
                         f"{t.id}-players.csv")


@router.patch("/{tid}/players/{no}", summary="Correct, move, withdraw or reinstate a player",
              responses=ERRORS,
              response_model=DeskView, response_model_exclude_unset=True)
async def patch_player(tid: str, no: int, body: PlayerPatch, request: Request, _p: Op
                       ) -> dict[str, Any]:
    d = desk_of(request)

    def op(t: Tournament) -> ops.Change:
        p = t.player(no)
        if p is None:
            raise NotFound(f"there is no player no. {no}", "")
        if body.withdrawn is not None:
            return ops.withdraw(t, no, body.withdrawn)
        # a field left out, or sent as null, stays as it is
        fields = {k: v for k, v in body.model_dump(exclude_unset=True).items() if v is not None}
        try:
            e = entry(fields.get("name", p.name), fields.get("furigana", p.furigana),
                      fields.get("club", p.club), fields.get("grade", p.grade),
                      fields.get("block", p.block))
        except ValueError as err:
            raise Invalid(str(err), "") from None
        return ops.edit_player(t, no, e)

    return _view(d, await d.change(tid, op))


# ---------------------------------------------------------------------- blocks and referees
@router.post("/{tid}/blocks/draw", summary="Draw the blocks", responses=ERRORS,
             response_model=DeskView, response_model_exclude_unset=True)
async def draw(tid: str, body: Draw, request: Request, _p: Op) -> dict[str, Any]:
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
                                                      channels or [], colours))
    return _view(d, t)


@router.patch("/{tid}/blocks/{name}", summary="A block's reader, colours and first mat",
              responses=ERRORS,
              response_model=DeskView, response_model_exclude_unset=True)
async def patch_block(tid: str, name: str, body: BlockPatch, request: Request, _p: Op
                      ) -> dict[str, Any]:
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
    return _view(d, t)


@router.get("/{tid}/referees", summary="Referees of the blocks' channels and their mats",
            responses=ERRORS,
            response_model=RefereesView, response_model_exclude_unset=True)
async def referees(tid: str, request: Request, _p: Op) -> dict[str, Any]:
    d = desk_of(request)
    t = d.get(tid)
    channels = sorted({b.channel for b in t.blocks if b.channel})
    return {"assigned": [{"referee": x.referee, "name": x.name, "channel": x.channel,
                          "mats": list(x.mats)} for x in t.referees],
            "channels": {c: d.block_of_channel_referee(c) for c in channels}}


@router.put("/{tid}/referees/{referee}", summary="The mats a referee enters results for",
            responses=ERRORS,
            response_model=DeskView, response_model_exclude_unset=True)
async def assign(tid: str, referee: str, body: RefereeAssign, request: Request, _p: Op
                 ) -> dict[str, Any]:
    d = desk_of(request)
    auth = request.app.state.auth
    ref = auth.referee(referee)
    if ref is None:
        raise NotFound(f"no referee {referee!r} has joined",
                       "the referee joins its block's channel with the PIN first")
    t = await d.change(tid, lambda t: ops.assign_referee(t, ref.id, ref.name, ref.channel,
                                                         body.mats))
    return _view(d, t)


# ---------------------------------------------------------------------- rounds
@router.post("/{tid}/rounds", summary="Pair the next preliminary round of blocks",
             responses=ERRORS,
             response_model=DeskView, response_model_exclude_unset=True)
async def pair(tid: str, request: Request, _p: Op, body: Blocks | None = None
               ) -> dict[str, Any]:
    d = desk_of(request)
    at = now_iso()

    def make(t: Tournament) -> list[ops.Change]:
        if not t.blocks:
            raise Conflict("draw the blocks first", "")
        return _pair_each(t, body, ops.pair_next, at)

    return _view(d, await d.changes(tid, make))


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
                ) -> dict[str, Any]:
    d = desk_of(request)
    at = now_iso()

    def make(t: Tournament) -> list[ops.Change]:
        return _pair_each(t, body, ops.pair_final, at)

    return _view(d, await d.changes(tid, make))


def _round_csv(t: Tournament, number: int) -> bytes:
    rows: list[list[object]] = []
    for r in sorted((r for r in t.rounds if r.number == number), key=lambda r: r.block):
        for m in r.matches:
            res = outcomes(m.players, m.result, r.final) if m.result else {}
            for seat, no in enumerate(m.players):
                p = t.player(no)
                rows.append([r.block, m.mat, r.colour, seat + 1, no, p.name if p else "",
                             p.furigana if p else "", p.club if p else "",
                             m.result.cards[seat] if m.result else None,
                             res[no].value if no in res else None])
    return write_csv(["block", "mat", "colour", "seat", "no", "name", "furigana", "club",
                      "cards", "outcome"], rows).encode()


def _paired(t: Tournament, number: int) -> None:
    if not any(r.number == number for r in t.rounds):
        raise NotFound(f"round {number} is not paired", "")


# the public files and pages below are built once per version of the tournament, off the
# event loop when it is large (api/desk_views.py): anyone may ask for them, as often as they
# like
@router.get("/{tid}/rounds/{number}.csv", summary="A round's pairings and results as CSV",
            response_class=Response, responses={**ERRORS, **CSV_ANSWER})
async def round_csv(tid: str, number: int, request: Request) -> Response:
    d = desk_of(request)
    _paired(d.get(tid), number)
    body = await d.views.made(tid, f"rounds/{number}.csv", partial(_round_csv, number=number))
    return _csv_response(body, f"{tid}-round{number}.csv")


@router.get("/{tid}/rounds/{number}", summary="A round of every block (anyone)",
            response_class=Response,
            responses={**ERRORS, **_view_answer(list[RoundView], long_poll=False)})
async def get_round(tid: str, number: int, request: Request, p: Who) -> Response:
    d = desk_of(request)
    _paired(d.get(tid), number)
    public = p.role is not Role.OPERATOR

    def build(t: Tournament) -> bytes:
        return json_bytes([round_view(t, r, public=public) for r in t.rounds
                           if r.number == number])

    return _json(await d.views.made(tid, f"rounds/{number}" + ("" if public else "/desk"), build))


@router.delete("/{tid}/rounds/{number}", summary="Undo a pairing that has not started",
               responses=ERRORS,
               response_model=DeskView, response_model_exclude_unset=True)
async def unpair(tid: str, number: int, request: Request, _p: Op,
                 block: Annotated[str, Query(pattern=r"^[A-Z0-9]{1,4}$")]) -> dict[str, Any]:
    d = desk_of(request)
    return _view(d, await d.change(tid, lambda t: ops.unpair(t, block, number)))


@router.post("/{tid}/rounds/{number}/start",
             summary="Start reading a round: each block's channel match in its colour",
             responses=ERRORS,
             response_model=RoundStarted, response_model_exclude_unset=True)
async def start(tid: str, number: int, request: Request, _p: Op,
                body: StartRound | None = None) -> dict[str, Any]:
    d = desk_of(request)
    t, started = await d.start_round(tid, number, body.blocks if body else None,
                                     again=body.again if body else False)
    return {"started": started, "tournament": _view(d, t)}


@router.post("/{tid}/rounds/{number}/close",
             summary="Rule 18: thanks and the move call on the round's finished channels",
             responses=ERRORS,
             response_model=RoundClosed, response_model_exclude_unset=True)
async def close(tid: str, number: int, request: Request, _p: Op,
                body: Blocks | None = None) -> dict[str, Any]:
    d = desk_of(request)
    closed = await d.close_round(tid, number, body.blocks if body and body.blocks else None)
    return {"closed": closed, "tournament": _view(d, d.get(tid))}


@router.post("/{tid}/rounds/{number}/extra-card",
             summary="Read one more card on the round's channel (a final's tie)",
             responses=ERRORS,
             response_model=DeskView, response_model_exclude_unset=True)
async def extra(tid: str, number: int, body: ExtraCardRequest, request: Request, _p: Op
                ) -> dict[str, Any]:
    d = desk_of(request)
    return _view(d, await d.extra_card(tid, number, body.block))


@router.post("/{tid}/rounds/{number}/confirm",
             summary="Confirm (確定) a round's results: from then on only the desk changes them",
             responses=ERRORS,
             response_model=DeskView, response_model_exclude_unset=True)
async def confirm(tid: str, number: int, request: Request, _p: Op,
                  body: Blocks | None = None) -> dict[str, Any]:
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
                           "confirmed", "enter or correct its results first")
        out: list[ops.Change] = []
        for name in names:
            ch = ops.confirm_round(t, name, number, "operator", at)
            if ch is not None:
                out.append(ch)
                t = ops.apply(t, ch)
        return out

    return _view(d, await d.changes(tid, make))


@router.put("/{tid}/rounds/{number}/mats/{mat}",
            summary="Enter or correct a match's result (its referee, or the operator)",
            responses=ERRORS,
            response_model=MatResult, response_model_exclude_unset=True)
async def result(tid: str, number: int, mat: int, body: ResultIn, request: Request, p: Who
                 ) -> dict[str, Any]:
    d = desk_of(request)
    referee = _result_author(p)
    by = "operator" if referee is None else f"referee {p.referee} {p.name}"
    t = await d.change(tid, lambda t: ops.record_result(
        t, number, mat, body.cards, body.tiebreak, by, now_iso(), referee=referee))
    r, m = ops.locate(t, number, mat)
    extra_card: str | None = None
    if (r.final and m.result is not None and len(set(m.result.cards)) == 1
            and m.result.tiebreak is None and r.extra_cards == 0):
        # a tied final: the channel reads one more card; the referee then enters who took it
        try:
            t = await d.extra_card(tid, number, r.block)
            extra_card = "reading"
        except DeskError as e:
            extra_card = f"not read: {e.detail}"
    rv = round_view(t, ops.locate(t, number, mat)[0])
    mv = next(x for x in rv["matches"] if x["mat"] == mat)
    return {**mv, "round": number, "block": r.block, "final": r.final, "version": t.version,
            "cards_read": rv["cards_read"], "extra_card": extra_card,
            "flags": [f for f in rv["flags"] if f["mat"] == mat]}


def _result_author(p: Principal) -> str | None:
    """None for the operator; the referee's id for a referee; refused for a viewer."""
    if p.role is Role.OPERATOR:
        return None
    if p.role is Role.REFEREE and p.referee:
        return p.referee
    raise ApiError(401, "unauthorized", "results are entered by the mat's referee or the desk",
                   "join the block's channel as a referee")


# ---------------------------------------------------------------------- files
def _standings_csv(t: Tournament) -> bytes:
    v = public_view(t)
    rows: list[list[object]] = []
    for b in v["blocks"]:
        for s in b["standings"]:
            rows.append([b["name"], s["rank"], s["no"], s["name"], s["furigana"], s["club"],
                         s["played"], s["wins"], s["draws"], s["losses"], s["cards"],
                         s["lottery"], int(s["by_lottery"]), int(s["withdrawn"]),
                         s["final_place"]])
    return write_csv(["block", "rank", "no", "name", "furigana", "club", "played", "wins",
                      "draws", "losses", "cards", "lottery", "by_lottery", "withdrawn",
                      "final_place"], rows).encode()


@router.get("/{tid}/standings.csv", summary="The standings as CSV", response_class=Response,
            responses={**ERRORS, **CSV_ANSWER})
async def standings_csv(tid: str, request: Request) -> Response:
    body = await desk_of(request).views.made(tid, "standings.csv", _standings_csv)
    return _csv_response(body, f"{tid}-standings.csv")


# ---------------------------------------------------------------------- pages
def desk_strings_js() -> str:
    """The desk pages' strings (api/static/desk-strings.<lang>.json), added to the pages'
    own (strings.js) before common.js reads them."""
    data = {lang: json.loads((STATIC / f"desk-strings.{lang}.json").read_text("utf-8"))
            for lang in ("ja", "en")}
    return ("(function (s, d) { for (const l of Object.keys(d)) s[l] = Object.assign("
            "s[l] || {}, d[l]); })(window.YOMITE_STRINGS = window.YOMITE_STRINGS || "
            "{ ja: {}, en: {} }, " + json.dumps(data, ensure_ascii=False) + ");\n")


@pages.get("/static/desk-strings.js")
async def desk_strings() -> Response:
    return Response(desk_strings_js(), media_type="text/javascript",
                    headers={"Cache-Control": "no-cache"})


def _page(name: str) -> HTMLResponse:
    return HTMLResponse((STATIC / f"{name}.html").read_text("utf-8"),
                        headers={"Cache-Control": "no-cache"})


@pages.get("/desk")
async def desk_page() -> HTMLResponse:
    return _page("desk")


@pages.get("/standings/{tid}")
async def standings_page(tid: str) -> HTMLResponse:
    return _page("standings")


@pages.get("/results/{ch}")
async def results_page(ch: str) -> HTMLResponse:
    return _page("results")


@pages.get("/print/{tid}/rounds/{number}")
async def print_round(tid: str, number: int, request: Request) -> HTMLResponse:
    d = desk_of(request)
    _paired(d.get(tid), number)
    page = await d.views.made(tid, f"print/rounds/{number}",
                              partial(desk_print.round_page, number=number))
    return HTMLResponse(page, headers={"Content-Security-Policy": desk_print.CSP})


@pages.get("/print/{tid}/standings")
async def print_standings(tid: str, request: Request) -> HTMLResponse:
    page = await desk_of(request).views.made(tid, "print/standings", desk_print.standings_page)
    return HTMLResponse(page, headers={"Content-Security-Policy": desk_print.CSP})


__all__ = ["pages", "router"]
