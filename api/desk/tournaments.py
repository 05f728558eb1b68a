"""The desk's tournaments: list, create, import and export, the desk's and the public views
(long polled by the live pages), settings, deletion, the results' history."""

from __future__ import annotations

import json
import secrets
from typing import Annotated

from fastapi import APIRouter, Query, Request
from fastapi.responses import JSONResponse, Response

from api.deps import Op
from api.desk.access import PRINT_AGE_S, give_print_pass, reader
from api.desk.answers import (
    Deleted,
    DeskView,
    PresetAnswer,
    PrintPass,
    PublicView,
    ResultChange,
    TournamentDocument,
    TournamentSummary,
)
from api.desk.deps import (
    ERRORS,
    PREFIX,
    desk_answer,
    desk_of,
    json_answer,
    long_poll,
    read_body,
    tournament_of,
    view_answer,
)
from api.desk.models import (
    NewTournament,
    TournamentPatch,
)
from desk import tournament as ops
from desk.errors import Invalid
from desk.export import from_document, to_document
from desk.presets import PRESETS, preset
from desk.views import history_view

router = APIRouter(prefix=PREFIX, tags=["tournaments"])


@router.get("", summary="The tournaments (the desk's: an association's server lists every "
            "school's)", responses=ERRORS,
            response_model=list[TournamentSummary], response_model_exclude_unset=True)
async def list_tournaments(request: Request, _p: Op) -> list[TournamentSummary]:
    return [TournamentSummary(id=t.id, name=t.name, day=t.day, players=len(t.players),
                              version=t.version) for t in desk_of(request).tournaments()]


@router.post("/print-pass", summary="The desk's pass for its printed pages (a cookie)",
             responses=ERRORS, response_model=PrintPass)
async def print_pass(request: Request, response: Response, _p: Op) -> PrintPass:
    """A printed page opens in a tab of its own, which cannot send the operator's token: this
    sets a cookie (HttpOnly, SameSite=Strict, path /print/) that lets this browser open the
    desk's printed pages for the next `seconds`."""
    give_print_pass(request, response)
    return PrintPass(seconds=PRINT_AGE_S)


@router.post("", summary="Create a tournament", responses=ERRORS,
             response_model=DeskView, response_model_exclude_unset=True)
async def create(body: NewTournament, request: Request, _p: Op) -> DeskView:
    d = desk_of(request)
    rounds: int | None = body.rounds
    finalists: int | None = body.finalists
    if body.preset is not None:
        p = preset(body.preset)
        assert p is not None  # the body's Literal lists them
        rounds = rounds or p.rounds
        finalists = finalists or p.finalists
    t = await d.create(body.id, body.name, body.day, rounds, body.cards, finalists or 2)
    return desk_answer(d, t)


@router.get("/presets", summary="Regional rules a new tournament can be made with (anyone)",
            response_model=list[PresetAnswer])
async def presets() -> list[PresetAnswer]:
    return [PresetAnswer(id=p.id, rounds=p.rounds, finalists=p.finalists,
                         method=p.method.value, block_size=p.block_size) for p in PRESETS]


@router.post("/import", summary="Import a tournament from its JSON export", responses=ERRORS,
             openapi_extra={"requestBody": {"required": True, "content": {
                 "application/json": {"schema": {"type": "object"}}}}},
             response_model=DeskView, response_model_exclude_unset=True)
async def import_tournament(request: Request, _p: Op,
                            replace: Annotated[bool, Query()] = False) -> DeskView:
    d = desk_of(request)
    raw = await read_body(request, d.config.desk.max_upload_kb)
    try:
        data = json.loads(raw)
    except (ValueError, UnicodeDecodeError) as e:
        raise Invalid(f"the file is not JSON ({e})", "send the file /export gave") from None
    t = from_document(data)
    t = await d.store(t, replace_existing=replace)
    return desk_answer(d, t)


@router.get("/{tid}", summary="The desk's whole view of a tournament",
            response_class=Response, responses={**ERRORS, **view_answer(DeskView)})
async def get_tournament(tid: str, request: Request, _p: Op,
                         after: Annotated[int | None, Query(ge=-1, description=(
                             "wait until the version is past this (long poll)"))] = None
                         ) -> Response:
    d = desk_of(request)
    if after is None:
        return json_answer(await d.view_json(tid, "desk"))
    d.get(tid)  # an unknown tournament is a 404 at once
    return await long_poll(request, d.view_json(tid, "desk", after))


@router.patch("/{tid}", summary="Rename, or change rounds and cards", responses=ERRORS,
              response_model=DeskView, response_model_exclude_unset=True)
async def patch_tournament(tid: str, body: TournamentPatch, request: Request, _p: Op
                           ) -> DeskView:
    d = desk_of(request)
    t = await d.change(tid, lambda t: ops.change_settings(
        t, name=body.name, day=body.day, rounds=body.rounds, cards=body.cards,
        finalists=body.finalists, publish_details=body.publish_details))
    return desk_answer(d, t)


@router.post("/{tid}/public-link", summary="Make a new public link (the old one stops working)",
             responses=ERRORS, response_model=DeskView, response_model_exclude_unset=True)
async def make_public_link(tid: str, request: Request, _p: Op) -> DeskView:
    """The tournament's public link, for players and parents: its standings page
    (`/standings/{t}?view=KEY`), the public view and the printed pairings and standings. A new
    key each time: whoever holds an old link sees nothing more. The answer's `public_link`."""
    d = desk_of(request)
    key = secrets.token_urlsafe(24)
    return desk_answer(d, await d.change(tid, lambda t: ops.public_link(t, key)))


@router.delete("/{tid}/public-link", summary="Revoke the public link", responses=ERRORS,
               response_model=DeskView, response_model_exclude_unset=True)
async def revoke_public_link(tid: str, request: Request, _p: Op) -> DeskView:
    """Only the desk sees the tournament from now on: the link's pages get 404 no_such_link."""
    d = desk_of(request)
    return desk_answer(d, await d.change(tid, lambda t: ops.public_link(t, None)))


@router.delete("/{tid}", summary="Delete a tournament (export it first)", responses=ERRORS,
               response_model=Deleted, response_model_exclude_unset=True)
async def delete_tournament(tid: str, request: Request, _p: Op) -> Deleted:
    await desk_of(request).delete(tid)
    return Deleted(deleted=tid)


@router.get("/{tid}/public", summary="Standings, current pairings and next mats (the desk, or "
            "the public link's holder: ?view=KEY)",
            response_class=Response, responses={**ERRORS, **view_answer(PublicView)})
async def public(tid: str, request: Request,
                 after: Annotated[int | None, Query(ge=-1, description=(
                     "wait until the version is past this (long poll)"))] = None,
                 view: Annotated[str | None, Query(max_length=64, description=(
                     "the key of the tournament's public link"))] = None
                 ) -> Response:
    """Clubs (schools) and grades only where the tournament publishes them
    (`publish_details`). 401 link_needed without the desk's token or a link; 404
    no_such_link for a link that is not (or no longer) the tournament's."""
    reader(request, tid)
    d = desk_of(request)
    if after is None:
        return json_answer(await d.view_json(tid, "public"))
    d.get(tid)  # an unknown tournament is a 404 at once
    return await long_poll(request, d.view_json(tid, "public", after))


@router.get("/{tid}/export", summary="The whole tournament as one JSON document",
            responses={**ERRORS, 200: {"model": TournamentDocument,
                                       "description": "the document, as an attachment"}})
async def export(tid: str, request: Request, _p: Op) -> JSONResponse:
    t = tournament_of(request, tid)
    return JSONResponse(to_document(t), headers={
        "Content-Disposition": f'attachment; filename="{t.id}.json"'})


@router.get("/{tid}/history", summary="Every entry and correction of a result",
            responses=ERRORS,
            response_model=list[ResultChange], response_model_exclude_unset=True)
async def history(tid: str, request: Request, _p: Op) -> list[ResultChange]:
    return [ResultChange.model_validate(c) for c in history_view(tournament_of(request, tid))]
