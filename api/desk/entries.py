"""The desk's entries: players added (by hand or from a CSV file), corrected, withdrawn;
the entries as CSV."""

from __future__ import annotations

from collections.abc import Callable

from fastapi import APIRouter, Request
from fastapi.responses import Response

from api.deps import Op
from api.desk.answers import (
    DeskView,
    EntriesAdded,
)
from api.desk.deps import (
    CSV_ANSWER,
    ERRORS,
    PREFIX,
    csv_answer,
    desk_answer,
    desk_of,
    read_body,
    tournament_of,
)
from api.desk.models import (
    Entries,
    PlayerPatch,
)
from desk import tournament as ops
from desk.entries import BadField, Entry, entry, read_entries, write_csv
from desk.errors import Invalid, NotFound
from desk.model import Tournament
from desk.views import desk_view

router = APIRouter(prefix=PREFIX, tags=["tournaments"])


def _adding(es: list[Entry], *, late: bool = False
            ) -> tuple[list[int], Callable[[Tournament], ops.Change]]:
    """The step that adds `es`, and the numbers it gave them once it ran (the players added
    just before by another desk, or another process, are not these)."""
    added: list[int] = []

    def op(t: Tournament) -> ops.Change:
        ch = ops.add_players(t, es, late=late)
        added[:] = [p.no for p in ch.players]
        return ch

    return added, op


@router.post("/{tid}/entries", summary="Add players (or late entries)", responses=ERRORS,
             response_model=EntriesAdded, response_model_exclude_unset=True)
async def add_entries(tid: str, body: Entries, request: Request, _p: Op) -> EntriesAdded:
    d = desk_of(request)
    try:
        es = [entry(e.name, e.furigana, e.club, e.grade, e.block) for e in body.players]
    except BadField as e:
        raise Invalid(str(e), "correct the entry", code="bad_entry",
                      params={"column": e.column, "reason": e.reason, **e.params}) from None
    added, op = _adding(es, late=body.late)
    t = await d.change(tid, op)
    return EntriesAdded(added=added, tournament=desk_answer(d, t))


@router.post("/{tid}/entries.csv", summary="Import entries from a CSV file", responses=ERRORS,
             openapi_extra={"requestBody": {"required": True, "content": {
                 "text/csv": {"schema": {"type": "string"}}}}},
             response_model=EntriesAdded, response_model_exclude_unset=True)
async def import_csv(tid: str, request: Request, _p: Op) -> EntriesAdded:
    d = desk_of(request)
    d.get(tid)
    raw = await read_body(request, d.config.desk.max_upload_kb)
    es, warnings = read_entries(raw)
    added, op = _adding(es)
    t = await d.change(tid, op)
    return EntriesAdded(added=added,
                        warnings=[w.detail for w in warnings],
                        notices=[{"code": w.code, "detail": w.detail, "params": w.params}
                                 for w in warnings],
                        tournament=desk_answer(d, t))


@router.get("/{tid}/players.csv", summary="The entries as CSV (re-importable)",
            response_class=Response, responses={**ERRORS, **CSV_ANSWER})
async def players_csv(tid: str, request: Request, _p: Op) -> Response:
    t = tournament_of(request, tid)
    v = desk_view(t)
    rows: list[list[object]] = [[p["name"], p["furigana"], p["club"], p["grade"], p["block"],
                                 p["no"], p["joined_round"], p["withdrawn_round"], p["lottery"]]
                                for p in v["players"]]
    return csv_answer(write_csv(["name", "furigana", "club", "grade", "block", "no",
                                    "joined_round", "withdrawn_round", "lottery"], rows),
                         f"{t.id}-players.csv")


@router.patch("/{tid}/players/{no}", summary="Correct, move, withdraw or reinstate a player",
              responses=ERRORS,
              response_model=DeskView, response_model_exclude_unset=True)
async def patch_player(tid: str, no: int, body: PlayerPatch, request: Request, _p: Op
                       ) -> DeskView:
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
        except BadField as err:
            raise Invalid(str(err), "correct the entry", code="bad_entry",
                          params={"column": err.column, "reason": err.reason,
                                  **err.params}) from None
        return ops.edit_player(t, no, e)

    return desk_answer(d, await d.change(tid, op))
