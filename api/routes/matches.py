"""Channels and their matches: state, prepare, bow, start, extra card, close, abort, resume,
the log."""

from __future__ import annotations

import asyncio
import csv
import io
from typing import Annotated, Any

from fastapi import APIRouter, Query, Request
from fastapi.responses import Response

from api.answers import PresetAnswer, PresetSets
from api.deps import Ch, HallDep, Op, Who, listed, rooms_of, submit, view
from api.errors import ApiError
from api.models import (
    ERRORS,
    AbortRequest,
    ChannelState,
    MatchLog,
    MatchRequest,
    ProjectorRequest,
    VolumeRequest,
)
from audio.config import voice_view, with_voice_overrides
from hall.auth import Principal
from hall.channel import ChannelService
from hall.config import Config
from hall.inbox import PrepareMatch
from hall.states import ProjectorView
from reader.config import with_match_overrides
from reader.events import Abort, Bow, ClearHolds, Close, Event, ExtraCard, ReadAgain, Skip, Start
from reader.timeline import build_timeline

router = APIRouter(tags=["matches"], responses=ERRORS)


@router.get("/api/channels", response_model=list[ChannelState],
            response_model_exclude_unset=True)
async def channels(h: HallDep, p: Who, request: Request) -> list[dict[str, Any]]:
    """Every channel's state (as the asker may see it). An organisation's operator gets its
    open rooms only; a viewer, a referee or a speaker config.yaml's channels (and the room it
    joined): no room's name is listed to anyone its operators did not give it to."""
    return [view(h.channels[n], p) for n in listed(h, rooms_of(request), p)]


@router.get("/api/channels/{ch}", response_model=ChannelState,
             response_model_exclude_unset=True)
async def channel_state(svc: Ch, p: Who, request: Request) -> dict[str, Any]:
    """The channel's full state: phase, card n/N, the current segment (its poem hidden from
    non-operators until read), countdown, hands up with names, cards read, referees. A room's
    state is its class's: 403 `viewer_link_needed` without one of its links or tokens."""
    if (rooms_of(request).owner(svc.name) is not None and p.channel != svc.name
            and not p.operates(rooms_of(request).owner(svc.name))):
        raise ApiError(403, "viewer_link_needed",
                       "this room is watched with the link its teacher hands out",
                       "ask the teacher for the room's viewer link")
    return view(svc, p)


@router.post("/api/channels/{ch}/match", response_model=ChannelState,
             response_model_exclude_unset=True)
async def prepare(svc: Ch, p: Op, body: MatchRequest) -> dict[str, Any]:
    """Prepare a match: a deck (`colors`, or `poems`), a seed (random if omitted), and
    `overrides` with the keys of config.yaml's `match`. Possible from ready, finished, closed
    or aborted."""
    await submit(svc, PrepareMatch(tuple(body.colors), tuple(body.poems), body.seed,
                                   body.overrides, body.voice, body.preset))
    return view(svc, p)


@router.post("/api/channels/{ch}/match/replay", response_model=ChannelState,
             response_model_exclude_unset=True)
async def replay(svc: Ch, p: Op) -> dict[str, Any]:
    """感想戦: prepare the last match again, the same deck, order, settings and voice."""
    await submit(svc, PrepareMatch(replay=True))
    return view(svc, p)


@router.get("/api/presets", response_model=list[PresetAnswer], response_model_exclude_unset=True)
async def presets(request: Request) -> list[PresetAnswer]:
    """The presets (built-in, then config.yaml's `presets:`), each with the settings a match
    prepared with it gets: the configuration with the preset's keys on top."""
    config: Config = request.app.state.config
    out = []
    for pid, pr in config.all_presets().items():
        m = with_match_overrides(config.match, pr.match)
        v = with_voice_overrides(config.voice, pr.voice)
        out.append(PresetAnswer(
            id=pid, label=pr.label, label_en=pr.label_en or pr.label,
            description=pr.description, description_en=pr.description_en or pr.description,
            sets=PresetSets(match=pr.match, voice=pr.voice),
            match={"cards": m.cards, "memorise_s": m.memorise_s,
                   "lower_verse_times": m.lower_verse_times,
                   "gaps": m.gaps.model_dump(mode="json")},
            voice=voice_view(v)))
    return out


@router.put("/api/channels/{ch}/volume", response_model=ChannelState,
            response_model_exclude_unset=True)
async def volume(svc: Ch, p: Op, body: VolumeRequest) -> dict[str, Any]:
    """The channel's volume, at once on the speaker pages and from the next clip on the
    server's own output."""
    svc.set_volume(body.volume_db)
    return view(svc, p)


@router.put("/api/channels/{ch}/projector", response_model=ChannelState,
            response_model_exclude_unset=True)
async def projector(svc: Ch, p: Op, body: ProjectorRequest) -> dict[str, Any]:
    """What the channel's projector pages show, at once on every one: the torifuda of the
    card just read beside its poem or over the whole screen, and the cards still on the mats
    by colour (a class's teacher)."""
    svc.set_projector(ProjectorView(torifuda=body.torifuda, left=body.left))
    return view(svc, p)


async def _engine_event(svc: ChannelService, p: Principal, ev: Event) -> dict[str, Any]:
    await submit(svc, ev)
    return view(svc, p)


@router.post("/api/channels/{ch}/match/bow", response_model=ChannelState,
             response_model_exclude_unset=True)
async def bow(svc: Ch, p: Op) -> dict[str, Any]:
    """Rule 1: read the bow call alone; the match stays ready (game 1 and the final: the
    players shuffle and choose their cards after the bow). 409 once bowed or if disabled."""
    return await _engine_event(svc, p, Bow())


@router.post("/api/channels/{ch}/match/start", response_model=ChannelState,
             response_model_exclude_unset=True)
async def start(svc: Ch, p: Op) -> dict[str, Any]:
    """Rule 4: the bow call (unless already read or disabled), then 「札を覚えてください」."""
    return await _engine_event(svc, p, Start())


@router.post("/api/channels/{ch}/match/extra-card", response_model=ChannelState,
             response_model_exclude_unset=True)
async def extra(svc: Ch, p: Op) -> dict[str, Any]:
    """Rule 16, a final's tie: the extra call, then one more card; only when finished."""
    return await _engine_event(svc, p, ExtraCard())


@router.post("/api/channels/{ch}/match/read-again", response_model=ChannelState,
             response_model_exclude_unset=True)
async def read_again(svc: Ch, p: Op) -> dict[str, Any]:
    """A teacher's control: 「もう一度読みます」 (`match.again_call`), then the last card again,
    upper and lower verse, then on with the next card. Between cards (a hand up or not) or once
    finished; 409 while a card is being read. Journalled (`read_again`)."""
    return await _engine_event(svc, p, ReadAgain())


@router.post("/api/channels/{ch}/match/skip", response_model=ChannelState,
             response_model_exclude_unset=True)
async def skip(svc: Ch, p: Op) -> dict[str, Any]:
    """A teacher's control: on at once to the next card's upper verse, leaving the rest of
    the memorisation, the prelude or the card being read (the end, after the last card). A hand
    up stays up. Journalled (`skip`)."""
    return await _engine_event(svc, p, Skip())


@router.post("/api/channels/{ch}/match/close", response_model=ChannelState,
             response_model_exclude_unset=True)
async def close(svc: Ch, p: Op) -> dict[str, Any]:
    """Rule 18, once every mat is ready for the next match: 「ありがとうございました」, then the
    move call; the match is then closed. Only when finished."""
    return await _engine_event(svc, p, Close())


@router.post("/api/channels/{ch}/match/abort", response_model=ChannelState,
             response_model_exclude_unset=True)
async def abort(svc: Ch, p: Op, body: AbortRequest | None = None) -> dict[str, Any]:
    """Stop the match for good (from ready or any phase before finished)."""
    return await _engine_event(svc, p, Abort(body.reason if body else "aborted by operator"))


@router.post("/api/channels/{ch}/match/resume", response_model=ChannelState,
             response_model_exclude_unset=True)
async def resume(svc: Ch, p: Op) -> dict[str, Any]:
    """Lower every hand (yomite's own too: after an audio fault the output is reopened first,
    503 if it is still down); reading resumes after the lead-in."""
    return await _engine_event(svc, p, ClearHolds())


LOG_RESPONSES: dict[int | str, dict[str, Any]] = {
    200: {"model": MatchLog, "content": {"text/csv": {"schema": {"type": "string"}}},
          "description": "JSON, or with format=csv the timeline as CSV"}}


@router.get("/api/channels/{ch}/match/log", response_model=None, responses=LOG_RESPONSES)
async def match_log(svc: Ch, _p: Op,
                    format: Annotated[str, Query(pattern="^(json|csv)$")] = "json"
                    ) -> Response | dict[str, Any]:
    """The current match's journal and timeline (JSON), or the timeline as CSV."""
    rt = svc.runtime
    assert rt is not None
    if rt.engine is None:
        raise ApiError(404, "no_match", "no match has been prepared on this channel",
                       "POST .../match first")
    header = rt.header or rt.engine.header()
    journal = str(rt.journal_path) if rt.journal_path else None
    # reading and formatting a long journal takes a while: never on the event loop
    return await asyncio.to_thread(
        lambda: log_response(f"{svc.name}-match", header, rt.journal_records(), rt.rate,
                             journal, format))


def log_response(name: str, header: dict[str, Any], records: list[dict[str, Any]], rate: int,
                 journal: str | None, format: str) -> Response | dict[str, Any]:
    timeline = build_timeline(records, rate)
    if format == "csv":
        return Response(timeline_csv(timeline), media_type="text/csv; charset=utf-8",
                        headers={"Content-Disposition": f'attachment; filename="{name}.csv"'})
    return {"header": header, "records": records, "timeline": timeline, "journal": journal}


CSV_COLUMNS = ["kind", "label", "card", "poem", "verse", "start_s", "end_s", "cut", "held_by",
               "clip"]


def timeline_csv(timeline: list[dict[str, Any]]) -> str:
    """One row per stretch of the timeline; a hold's row says who held (`held_by`, names
    separated by "; ")."""
    buf = io.StringIO()
    w = csv.DictWriter(buf, CSV_COLUMNS, extrasaction="ignore")
    w.writeheader()
    for row in timeline:
        out = {k: row.get(k, "") for k in CSV_COLUMNS}
        if "held_by" in row:
            out["held_by"] = "; ".join(row["held_by"])
        w.writerow(out)
    return buf.getvalue()
