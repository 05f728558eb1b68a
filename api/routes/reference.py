"""Reference data and the service's health: poems, voices, devices, who the token is."""

from __future__ import annotations

import asyncio
from dataclasses import asdict
from typing import Any

from fastapi import APIRouter, Request

from api.answers import (
    DevicesAnswer,
    Health,
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


@router.get("/api/health", response_model=Health, response_model_exclude_unset=True)
async def health(h: HallDep, request: Request) -> dict[str, Any]:
    """Per channel: the output, `audio` ("ok", "no_device", "fault: ..."), clients, dropped
    clients, the runtime task, the fan-out lag."""
    return {"status": "ok",
            "event_loop": {**h.loop_watch.report(), "scheduling": h.scheduling},
            "gc": gc.report() if (gc := getattr(request.app.state, "gc", None)) else None,
            "render_waits": [{"clip": k, "ms": round(w * 1000, 1)}
                             for k, w in getattr(h.voice, "waits", [])[-20:]],
            "channels": {n: {"output": s.audio,
                             "output_stats": s.output_stats(),
                             "audio": s.runtime.state().get("audio") if s.runtime else None,
                             "journal": s.runtime.state().get("journal") if s.runtime
                             else None,
                             "fault": s.runtime.fault if s.runtime else None,
                             "clients": len(s.hub.clients),
                             "direct_clients": sum(c.transport is not None
                                                   for c in s.hub.clients),
                             "runtime": "running" if s.runtime and s.runtime.running
                             else "stopped",
                             "dropped_clients": s.hub.dropped,
                             "fanout_lag_ms": s.hub.lag_ms(),
                             "recent_publishes": list(s.hub.published)}
                         for n, s in h.channels.items()}}


@router.get("/api/poems", response_model=list[PoemAnswer], response_model_exclude_unset=True)
async def poems() -> list[dict[str, Any]]:
    return [poem_dict(p.no) for p in all_poems()]


@router.get("/api/poems/{no}", response_model=PoemAnswer, response_model_exclude_unset=True)
async def poem_one(no: int) -> dict[str, Any]:
    if not 1 <= no <= 100:
        raise ApiError(404, "no_such_poem", f"there is no poem {no}", "poems are 1..100")
    return poem_dict(no)


@router.get("/api/voices", response_model=VoicesAnswer, response_model_exclude_unset=True)
async def voices(request: Request, h: HallDep) -> dict[str, Any]:
    from audio.voices.catalogue import list_voices

    config = request.app.state.config
    return {"current": getattr(h.voice, "name", "?"),
            "voices": await asyncio.to_thread(list_voices, config.voice)}


@router.get("/api/devices", response_model=DevicesAnswer, response_model_exclude_unset=True)
async def devices(_p: Op) -> dict[str, Any]:
    from audio.output.device import list_devices

    try:
        devs = await asyncio.to_thread(list_devices)
    except AudioError as e:
        return {"devices": [], "error": str(e)}
    return {"devices": [asdict(d) for d in devs]}


@router.get("/api/ws-protocol.json", response_model=WsProtocolAnswer,
            response_model_exclude_unset=True)
async def ws_protocol() -> dict[str, Any]:
    """The WebSocket protocol of /ws/channels/{ch} as a JSON Schema: what the server sends
    (hello, state, pong, error) and what a client may send (hold, release, ping)."""
    from api.protocol import protocol_schema

    return protocol_schema()


@router.get("/api/session", response_model=SessionAnswer, response_model_exclude_unset=True)
async def session(p: Who) -> dict[str, Any]:
    """Who the bearer token is: viewer, referee (with its channel and id) or operator."""
    return {"role": p.role.value, "channel": p.channel, "referee": p.referee, "name": p.name}


def poem_dict(no: int) -> dict[str, Any]:
    p = poem(no)
    return {"no": p.no, "author": p.author, "kami": p.kami, "shimo": p.shimo,
            "kami_kana": p.kami_kana, "shimo_kana": p.shimo_kana, "kami_yomi": p.kami_yomi,
            "shimo_yomi": p.shimo_yomi, "kimariji": p.kimariji, "color": p.color.value}
