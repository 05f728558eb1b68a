"""The clips the browser speakers play: Ogg Opus, immutable, by the id a schedule names."""

from __future__ import annotations

import re

from fastapi import APIRouter
from fastapi.responses import Response

from audio.errors import AudioError

from ..deps import HallDep
from ..errors import ApiError

router = APIRouter(tags=["speakers"])

_ID = re.compile(r"^[0-9a-f]{32}$")


@router.get("/api/clips/{name}", response_class=Response,
            responses={200: {"content": {"audio/ogg": {}}}})
async def clip(name: str, h: HallDep) -> Response:
    """One clip of a speaker schedule (`url` in a `speaker` message). The URL never changes
    for the same voice, text and settings, so browsers keep it for a year."""
    cid = name.removesuffix(".ogg")
    store = h.clips
    if not name.endswith(".ogg") or not _ID.match(cid) or store is None or not store.known(cid):
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
                    headers={"Cache-Control": "public, max-age=31536000, immutable",
                             "ETag": f'"{cid}"'})
