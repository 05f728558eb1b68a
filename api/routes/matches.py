"""Channels and their matches: state, prepare, bow, start, extra card, close, abort, resume,
the log."""

from __future__ import annotations

import csv
import io
from typing import Annotated, Any

from fastapi import APIRouter, Query
from fastapi.responses import Response

from reader.events import Abort, Bow, ClearHolds, Close, Event, ExtraCard, Start
from reader.timeline import build_timeline

from ..auth import Principal
from ..deps import Ch, HallDep, Op, Who, submit, view
from ..errors import ApiError
from ..hall import ChannelService
from ..models import AbortRequest, MatchRequest
from ..runtime import PrepareMatch

router = APIRouter(tags=["matches"])


@router.get("/api/channels")
async def channels(h: HallDep, p: Who) -> list[dict[str, Any]]:
    return [view(s, p) for s in h.channels.values()]


@router.get("/api/channels/{ch}")
async def channel_state(svc: Ch, p: Who) -> dict[str, Any]:
    return view(svc, p)


@router.post("/api/channels/{ch}/match")
async def prepare(svc: Ch, p: Op, body: MatchRequest) -> dict[str, Any]:
    await submit(svc, PrepareMatch(tuple(body.colors), tuple(body.poems), body.seed,
                                   body.overrides))
    return view(svc, p)


async def _engine_event(svc: ChannelService, p: Principal, ev: Event) -> dict[str, Any]:
    await submit(svc, ev)
    return view(svc, p)


@router.post("/api/channels/{ch}/match/bow")
async def bow(svc: Ch, p: Op) -> dict[str, Any]:
    """Rule 1: read the bow call alone; the match stays ready (game 1 and the final: the
    players shuffle and choose their cards after the bow). 409 once bowed or if disabled."""
    return await _engine_event(svc, p, Bow())


@router.post("/api/channels/{ch}/match/start")
async def start(svc: Ch, p: Op) -> dict[str, Any]:
    """Rule 4: the bow call (unless already read or disabled), then 「札を覚えてください」."""
    return await _engine_event(svc, p, Start())


@router.post("/api/channels/{ch}/match/extra-card")
async def extra(svc: Ch, p: Op) -> dict[str, Any]:
    """Rule 16, a final's tie: the extra call, then one more card; only when finished."""
    return await _engine_event(svc, p, ExtraCard())


@router.post("/api/channels/{ch}/match/close")
async def close(svc: Ch, p: Op) -> dict[str, Any]:
    """Rule 18, once every mat is ready for the next match: 「ありがとうございました」, then the
    move call; the match is then closed. Only when finished."""
    return await _engine_event(svc, p, Close())


@router.post("/api/channels/{ch}/match/abort")
async def abort(svc: Ch, p: Op, body: AbortRequest | None = None) -> dict[str, Any]:
    return await _engine_event(svc, p, Abort(body.reason if body else "aborted by operator"))


@router.post("/api/channels/{ch}/match/resume")
async def resume(svc: Ch, p: Op) -> dict[str, Any]:
    return await _engine_event(svc, p, ClearHolds())


@router.get("/api/channels/{ch}/match/log", response_model=None)
async def match_log(svc: Ch, _p: Op,
                    format: Annotated[str, Query(pattern="^(json|csv)$")] = "json"
                    ) -> Response | dict[str, Any]:
    rt = svc.runtime
    assert rt is not None
    if rt.engine is None:
        raise ApiError(404, "no_match", "no match has been prepared on this channel",
                       "POST .../match first")
    header = rt.engine.header()
    records = list(rt.records)
    timeline = build_timeline(records, rt.rate)
    if format == "csv":
        return Response(timeline_csv(timeline), media_type="text/csv; charset=utf-8",
                        headers={"Content-Disposition":
                                 f'attachment; filename="{svc.name}-match.csv"'})
    return {"header": header, "records": records, "timeline": timeline,
            "journal": str(rt.journal_path) if rt.journal_path else None}


def timeline_csv(timeline: list[dict[str, Any]]) -> str:
    cols = ["kind", "label", "card", "poem", "verse", "start_s", "end_s", "cut", "clip"]
    buf = io.StringIO()
    w = csv.DictWriter(buf, cols, extrasaction="ignore")
    w.writeheader()
    for row in timeline:
        w.writerow({k: row.get(k, "") for k in cols})
    return buf.getvalue()
