"""The desk's results: a mat's result entered or corrected (by its referee or the operator),
the standings as CSV."""

from __future__ import annotations

from fastapi import APIRouter, Request
from fastapi.responses import Response

from api.deps import Op, Who
from api.desk.access import reader
from api.desk.answers import (
    MatResult,
)
from api.desk.deps import (
    CSV_ANSWER,
    ERRORS,
    PREFIX,
    csv_answer,
    desk_of,
)
from api.desk.models import (
    AbsentIn,
    PlayersConfirm,
    ResultIn,
)
from api.errors import ApiError
from desk import tournament as ops
from desk.entries import write_csv
from desk.errors import DeskError
from desk.model import Tournament
from desk.views import public_view, round_view
from hall.auth import Principal, Role
from hall.deskstore import now_iso

router = APIRouter(prefix=PREFIX, tags=["tournaments"])


@router.put("/{tid}/rounds/{number}/mats/{mat}",
            summary="Enter or correct a match's result (its referee, or the operator)",
            responses=ERRORS,
            response_model=MatResult, response_model_exclude_unset=True)
async def result(tid: str, number: int, mat: int, body: ResultIn, request: Request, p: Who
                 ) -> MatResult:
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
    return _mat_answer(t, number, mat, extra_card)


@router.post("/{tid}/rounds/{number}/mats/{mat}/players-confirm",
             summary="The match's players confirm its result (on the referee's phone)",
             responses=ERRORS,
             response_model=MatResult, response_model_exclude_unset=True)
async def players_confirm(tid: str, number: int, mat: int, body: PlayersConfirm,
                          request: Request, p: Who) -> MatResult:
    d = desk_of(request)
    referee = _result_author(p)
    by = ("players at the desk" if referee is None
          else f"players with referee {p.referee} {p.name}")
    t = await d.change(tid, lambda t: ops.confirm_by_players(
        t, number, mat, body.cards, body.tiebreak, by, now_iso(), referee=referee))
    return _mat_answer(t, number, mat, None)


@router.post("/{tid}/rounds/{number}/mats/{mat}/absent",
             summary="不戦勝: a player did not come; the opponent wins by desk.walkover_cards",
             responses=ERRORS,
             response_model=MatResult, response_model_exclude_unset=True)
async def absent(tid: str, number: int, mat: int, body: AbsentIn, request: Request, _p: Op
                 ) -> MatResult:
    d = desk_of(request)
    t = await d.change(tid, lambda t: ops.walkover(
        t, number, mat, body.player, d.config.desk.walkover_cards, "operator", now_iso()))
    return _mat_answer(t, number, mat, None)


def _mat_answer(t: Tournament, number: int, mat: int, extra_card: str | None) -> MatResult:
    """The mat's match after a result, as in its round's view, with its round's figures."""
    r, _m = ops.locate(t, number, mat)
    rv = round_view(t, r)
    mv = next(x for x in rv["matches"] if x["mat"] == mat)
    return MatResult.model_validate({
        **mv, "round": number, "block": r.block, "final": r.final, "version": t.version,
        "cards_read": rv["cards_read"], "extra_card": extra_card,
        "flags": [f for f in rv["flags"] if f["mat"] == mat]})


def _result_author(p: Principal) -> str | None:
    """None for the operator; the referee's id for a referee; refused for a viewer."""
    if p.admin:
        return None
    if p.role is Role.REFEREE and p.referee:
        return p.referee
    raise ApiError(401, "unauthorized", "results are entered by the mat's referee or the desk",
                   "join the block's channel as a referee")


def _standings_csv(t: Tournament) -> bytes:
    v = public_view(t)
    rows: list[list[object]] = []
    for b in v["blocks"]:
        for s in b["standings"]:
            rows.append([b["name"], s["rank"], s["no"], s["name"], s["furigana"],
                         s.get("club", ""),
                         s["played"], s["wins"], s["draws"], s["losses"], s["cards"],
                         s["lottery"], int(s["by_lottery"]), int(s["withdrawn"]),
                         s["final_place"]])
    return write_csv(["block", "rank", "no", "name", "furigana", "club", "played", "wins",
                      "draws", "losses", "cards", "lottery", "by_lottery", "withdrawn",
                      "final_place"], rows).encode()


@router.get("/{tid}/standings.csv", summary="The standings as CSV (the desk, or ?view=KEY)",
            response_class=Response, responses={**ERRORS, **CSV_ANSWER})
async def standings_csv(tid: str, request: Request) -> Response:
    reader(request, tid)
    body = await desk_of(request).views.made(tid, "standings.csv", _standings_csv)
    return csv_answer(body, f"{tid}-standings.csv")
