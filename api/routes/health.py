"""The service's health, off the hold path: each channel's part made again only when that
channel changed (hall/healthcache.py)."""

from __future__ import annotations

import asyncio
import json
from collections.abc import Hashable
from functools import partial

from fastapi import APIRouter, Request, Response

from api.answers import ChannelHealth, Health, HealthCacheCounts, RenderWait, RoomsHealth
from api.deps import HallDep
from api.models import ERRORS
from hall.channel import ChannelService
from hall.gcpolicy import GcPolicy
from hall.hall import Hall
from hall.healthcache import HealthCache
from hall.rooms import Rooms

router = APIRouter(tags=["reference"], responses=ERRORS)


@router.get("/api/health", response_model=Health, response_model_exclude_unset=True)
async def health(h: HallDep, request: Request) -> Response:
    """Per channel: the output, `audio` ("ok", "no_device", "fault: ..."), clients, dropped
    clients, the runtime task, the fan-out lag. At most a second old; a channel's part is made
    again only when that channel changed (hall/healthcache.py)."""
    cache: HealthCache | None = getattr(request.app.state, "health", None)
    if cache is None:
        cache = request.app.state.health = HealthCache()
    gc = getattr(request.app.state, "gc", None)
    rooms: Rooms = request.app.state.rooms
    # the rooms by their counts only: a room's name is for those its operators give it to
    shown = {n: s for n, s in h.channels.items() if rooms.owner(n) is None}
    in_rooms = [s for n, s in h.channels.items() if n not in shown]
    counts = RoomsHealth(open=len(in_rooms), clients=sum(len(s.hub.clients) for s in in_rooms))
    key = (tuple((n, channel_key(s)) for n, s in shown.items()), counts.open, counts.clients)
    body = await cache.get(lambda: made_health(h, gc, cache, shown, counts), key)
    return Response(body, media_type="application/json")


def channel_key(s: ChannelService) -> Hashable:
    """What a channel's part says that can change, each read in O(1): a state published (its
    number), a client come or dropped, a send measured (the fan-out lags), the output's
    counters, a fault."""
    return (s.seq, len(s.hub.clients), s.hub.dropped, s.hub.lag_key(), s.audio,
            tuple((s.output_stats() or {}).values()),
            (s.runtime.fault, s.runtime.running) if s.runtime else None)


async def made_channel(s: ChannelService) -> bytes:
    """One channel's part (the fan-out lags summarised in a worker thread, `Hub.lag_summary`)."""
    r = s.runtime
    state = r.state() if r else None
    return ChannelHealth(
        output=s.audio,
        output_stats=s.output_stats(),
        audio=state.audio if state else None,
        journal=state.journal if state else None,
        fault=r.fault if r else None,
        clients=len(s.hub.clients),
        direct_clients=sum(c.transport is not None for c in s.hub.clients),
        runtime="running" if r and r.running else "stopped",
        dropped_clients=s.hub.dropped,
        fanout_lag_ms=await s.hub.lag_summary(),
        recent_publishes=list(s.hub.published)).model_dump_json(exclude_unset=True).encode()


async def made_health(h: Hall, gc: GcPolicy | None, cache: HealthCache,
                      shown: dict[str, ChannelService] | None = None,
                      rooms: RoomsHealth | None = None) -> bytes:
    """The channels' parts kept where the channel did not change; the others made one at a
    time, the loop given back after each (a hold waiting runs there). `shown`: the channels
    named (default every one; the server names config.yaml's and counts the rooms)."""
    parts = cache.parts
    channels: list[bytes] = []
    shown = h.channels if shown is None else shown
    for n, s in list(shown.items()):
        made = parts.made
        body = await parts.part(n, channel_key(s), partial(made_channel, s))
        channels.append(json.dumps(n).encode() + b":" + body)
        if parts.made != made:
            await asyncio.sleep(0)
    parts.keep_only(set(shown))
    top = Health(
        status="ok",
        event_loop={**h.loop_watch.report(), "scheduling": h.scheduling},
        gc=gc.report() if gc else None,
        render_waits=[RenderWait(clip=k, ms=round(w * 1000, 1))
                      for k, w in getattr(h.voice, "waits", [])[-20:]],
        cache=HealthCacheCounts(answers_made=cache.made, channel_parts_made=parts.made),
        rooms=rooms,
        channels={}).model_dump_json(exclude_unset=True).encode()
    # `channels` is the model's last field: its parts go in as they were kept
    assert top.endswith(b'"channels":{}}')
    return top[:-2] + b",".join(channels) + b"}}"
