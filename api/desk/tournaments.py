"""The desk's tournaments: list, create, import and export, the desk's and the public views
(long polled by the live pages), settings, deletion, the results' history."""

from __future__ import annotations

import json
from typing import Annotated

from fastapi import APIRouter, Query, Request
from fastapi.responses import JSONResponse, Response

from api.deps import Op
from api.desk.answers import (
    Deleted,
    DeskView,
    PresetAnswer,
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


@router.get("", summary="The tournaments (anyone)",
            response_model=list[TournamentSummary], response_model_exclude_unset=True)
async def list_tournaments(request: Request) -> list[TournamentSummary]:
    return [TournamentSummary(id=t.id, name=t.name, day=t.day, players=len(t.players),
                              version=t.version) for t in desk_of(request).tournaments()]


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
    t = await d.change(tid, lambda t: ops.change_settings(t, name=body.name, day=body.day,
                                                         rounds=body.rounds, cards=body.cards,
                                                         finalists=body.finalists))
    return desk_answer(d, t)


@router.delete("/{tid}", summary="Delete a tournament (export it first)", responses=ERRORS,
               response_model=Deleted, response_model_exclude_unset=True)
async def delete_tournament(tid: str, request: Request, _p: Op) -> Deleted:
    await desk_of(request).delete(tid)
    return Deleted(deleted=tid)


@router.get("/{tid}/public", summary="Standings, current pairings and next mats (anyone)",
            response_class=Response, responses={**ERRORS, **view_answer(PublicView)})
async def public(tid: str, request: Request,
                 after: Annotated[int | None, Query(ge=-1, description=(
                     "wait until the version is past this (long poll)"))] = None
                 ) -> Response:
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
