"""Reference data: poems, voices, devices, the WebSocket protocol, who the token is (the
service's health: api/routes/health.py)."""

from __future__ import annotations

import asyncio
from dataclasses import asdict

from fastapi import APIRouter, Request

from api.answers import (
    DevicesAnswer,
    PoemAnswer,
    SessionAnswer,
    VoicesAnswer,
    WsProtocolAnswer,
)
from api.deps import HallDep, Op, Who
from api.errors import ApiError
from api.models import ERRORS
from audio.errors import AudioError
from reader.poems import all_poems, poem

router = APIRouter(tags=["reference"], responses=ERRORS)


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
    """Who the bearer token is: viewer, referee (with its channel and id), speaker or operator
    (with `org` for an organisation's operator)."""
    return SessionAnswer(role=p.role.value, channel=p.channel, referee=p.referee, name=p.name,
                         org=p.org)


def poem_answer(no: int) -> PoemAnswer:
    p = poem(no)
    return PoemAnswer(no=p.no, author=p.author, kami=p.kami, shimo=p.shimo,
                      kami_kana=p.kami_kana, shimo_kana=p.shimo_kana, kami_yomi=p.kami_yomi,
                      shimo_yomi=p.shimo_yomi, kimariji=p.kimariji, color=p.color.value)
