"""Reference data and the service's health: poems, voices, devices, who the token is."""

from __future__ import annotations

import asyncio
from dataclasses import asdict

from fastapi import APIRouter, Request, Response

from api.answers import (
    ChannelHealth,
    DevicesAnswer,
    Health,
    PoemAnswer,
    RenderWait,
    SessionAnswer,
    VoicesAnswer,
    WsProtocolAnswer,
)
from api.deps import HallDep, Op, Who
from api.errors import ApiError
from api.models import ERRORS
from audio.errors import AudioError
from hall.gcpolicy import GcPolicy
from hall.hall import Hall
from hall.healthcache import HealthCache
from reader.poems import all_poems, poem

router = APIRouter(tags=["reference"], responses=ERRORS)


@router.get("/api/health", response_model=Health, response_model_exclude_unset=True)
async def health(h: HallDep, request: Request) -> Response:
    """Per channel: the output, `audio` ("ok", "no_device", "fault: ..."), clients, dropped
    clients, the runtime task, the fan-out lag. At most a second old (hall/healthcache.py)."""
    cache: HealthCache | None = getattr(request.app.state, "health", None)
    if cache is None:
        cache = request.app.state.health = HealthCache()
    gc = getattr(request.app.state, "gc", None)
    body = await cache.get(lambda: made_health(h, gc), health_key(h))
    return Response(body, media_type="application/json")


def health_key(h: Hall) -> tuple[object, ...]:
    """What the answer says of each channel that can change at once (a state, a client, a
    counter, a fault, a fan-out lag measured): a new answer when any did; the loop's figures may
    be a second old."""
    return tuple((n, s.seq, len(s.hub.clients), s.hub.dropped, s.hub.lag_key(), s.audio,
                  tuple((s.output_stats() or {}).values()),
                  (s.runtime.fault, s.runtime.running) if s.runtime else None)
                 for n, s in h.channels.items())


async def made_health(h: Hall, gc: GcPolicy | None) -> bytes:
    """One channel at a time, giving the loop back between them (a hold waiting runs there);
    the fan-out lags sorted in a worker thread (`Hub.lag_summary`)."""
    channels: dict[str, ChannelHealth] = {}
    for n, s in list(h.channels.items()):
        channels[n] = ChannelHealth(
            output=s.audio,
            output_stats=s.output_stats(),
            audio=s.runtime.state().audio if s.runtime else None,
            journal=s.runtime.state().journal if s.runtime else None,
            fault=s.runtime.fault if s.runtime else None,
            clients=len(s.hub.clients),
            direct_clients=sum(c.transport is not None for c in s.hub.clients),
            runtime="running" if s.runtime and s.runtime.running else "stopped",
            dropped_clients=s.hub.dropped,
            fanout_lag_ms=await s.hub.lag_summary(),
            recent_publishes=list(s.hub.published))
        await asyncio.sleep(0)
    answer = Health(
        status="ok",
        event_loop={**h.loop_watch.report(), "scheduling": h.scheduling},
        gc=gc.report() if gc else None,
        render_waits=[RenderWait(clip=k, ms=round(w * 1000, 1))
                      for k, w in getattr(h.voice, "waits", [])[-20:]],
        channels=channels)
    return answer.model_dump_json(exclude_unset=True).encode()


@router.get("/api/poems", response_model=list[PoemAnswer], response_model_exclude_unset=True)
async def poems() -> list[PoemAnswer]:
    return [poem_answer(p.no) for p in all_poems()]


@router.get("/api/poems/{no}", response_model=PoemAnswer, response_model_exclude_unset=True)
async def poem_one(no: int) -> PoemAnswer:
    if not 1 <= no <= 100:
        raise ApiError(404, "no_such_poem", f"there is no poem {no}", "poems are 1..100")
    return poem_answer(no)


@router.get("/api/voices", response_model=VoicesAnswer, response_model_exclude_unset=True)
async def voices(request: Request, h: HallDep) -> VoicesAnswer:
    from audio.voices.catalogue import list_voices

    config = request.app.state.config
    return VoicesAnswer(current=getattr(h.voice, "name", "?"),
                        voices=await asyncio.to_thread(list_voices, config.voice))


@router.get("/api/devices", response_model=DevicesAnswer, response_model_exclude_unset=True)
async def devices(_p: Op) -> DevicesAnswer:
    from audio.output.portaudio import list_devices

    try:
        devs = await asyncio.to_thread(list_devices)
    except AudioError as e:
        return DevicesAnswer(devices=[], error=str(e))
    return DevicesAnswer(devices=[asdict(d) for d in devs])


@router.get("/api/ws-protocol.json", response_model=WsProtocolAnswer,
            response_model_exclude_unset=True)
async def ws_protocol() -> WsProtocolAnswer:
    """The WebSocket protocol of /ws/channels/{ch} as a JSON Schema: what the server sends
    (hello, state, pong, error) and what a client may send (hold, release, ping)."""
    from api.protocol import protocol_schema

    return WsProtocolAnswer.model_validate(protocol_schema())


@router.get("/api/session", response_model=SessionAnswer, response_model_exclude_unset=True)
async def session(p: Who) -> SessionAnswer:
    """Who the bearer token is: viewer, referee (with its channel and id) or operator."""
    return SessionAnswer(role=p.role.value, channel=p.channel, referee=p.referee, name=p.name)


def poem_answer(no: int) -> PoemAnswer:
    p = poem(no)
    return PoemAnswer(no=p.no, author=p.author, kami=p.kami, shimo=p.shimo,
                      kami_kana=p.kami_kana, shimo_kana=p.shimo_kana, kami_yomi=p.kami_yomi,
                      shimo_yomi=p.shimo_yomi, kimariji=p.kimariji, color=p.color.value)
