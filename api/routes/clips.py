"""The clips the browser speakers play: Ogg Opus, by the id a schedule names, to the channel's
admitted speakers and the operator."""

from __future__ import annotations

import re

from fastapi import APIRouter, Request
from fastapi.responses import Response

from api.deps import HallDep, Who, rooms_of
from api.errors import ApiError
from api.models import ERRORS
from audio.errors import AudioError
from hall.auth import Role

router = APIRouter(tags=["speakers"])

_ID = re.compile(r"^[0-9a-f]{32}$")


@router.get("/api/clips/{name}", response_class=Response,
            responses={200: {"content": {"audio/ogg": {}}}, **ERRORS})
async def clip(name: str, h: HallDep, p: Who, request: Request) -> Response:
    """One clip of a speaker schedule (`url` in a `speaker` message), to the channel's admitted
    speakers (the console's speaker link) and the operator only: the next card's clip is
    fetched ahead, and its length would name the poem. A match's clips have URLs of their
    own; a browser keeps them for the day."""
    if p.role not in (Role.OPERATOR, Role.SPEAKER):
        raise ApiError(401, "speaker_key_needed", "clips are for the channel's speakers",
                       "open the speaker link the operator's console shows")
    cid = name.removesuffix(".ogg")
    store = h.clips
    if not name.endswith(".ogg") or not _ID.match(cid) or store is None or not store.known(cid):
        raise ApiError(404, "no_such_clip", f"there is no clip {name!r}",
                       "clips are named by the speaker schedule (/speaker/{channel})")
    if ((p.role is Role.SPEAKER and store.channel_of(cid) != p.channel)
            or (p.org is not None and not p.operates(rooms_of(request).owner(
                store.channel_of(cid) or "")))):
        # another channel's clip (another organisation's room's): the same answer as an
        # unknown one (it says nothing)
        raise ApiError(404, "no_such_clip", f"there is no clip {name!r}",
                       "clips are named by the speaker schedule (/speaker/{channel})")
    try:
        data = await store.data(cid)
    except AudioError as e:
        raise ApiError(503, "clip_unavailable", f"the clip cannot be rendered now ({e})",
                       "check the voice; the page asks again") from None
    if data is None:
        raise ApiError(404, "no_such_clip", f"there is no clip {name!r}", "")
    return Response(data, media_type="audio/ogg",
                    headers={"Cache-Control": "private, max-age=86400, immutable",
                             "ETag": f'"{cid}"'})
