"""The voice preview: the jokā in a reading style, for the operator's console (hall.preview)."""

from __future__ import annotations

from typing import Annotated, Literal

from fastapi import APIRouter, Query, Request
from fastapi.responses import Response

from api.deps import Ch, HallDep, Op
from api.models import ERRORS
from hall.preview import plan_preview

router = APIRouter(tags=["matches"])


@router.get("/api/channels/{ch}/voice/preview", response_class=Response,
            responses={200: {"content": {"audio/ogg": {}},
                             "description": "the jokā read in the style (Ogg Opus)"},
                       304: {"description": "the browser's copy is this preview"}, **ERRORS})
async def voice_preview(
    svc: Ch, h: HallDep, _p: Op, request: Request,
    style: Annotated[Literal["reader", "natural"] | None,
                     Query(description="reader or natural; omitted: as configured")] = None,
    speed: Annotated[float | None, Query(
        description="one the console offers (0.25 to 3 in steps of 0.05) or the configured "
                    "one; omitted: as configured; another is refused (422 speed_not_offered)"
    )] = None,
) -> Response:
    """How a match's voice will sound, before it is prepared: the jokā (`match.prelude`, never
    a card of the deck), upper and lower verse, read by the hall's voice in `style` at `speed`
    (the console's 読み方 and 読む速さ). Operator only. It goes to the asker alone and never
    touches the channel's output: allowed during a match, rendered behind the match's own
    clips. Rendered once, then kept in the render cache (a second request is a file read, until
    the cache's bound evicts it); `X-Yomite-Style` says the style heard (`none`: an engine
    without styles, e.g. a recorded pack)."""
    preview = plan_preview(h.config, h.voices, h.clip_store(), svc.name, style, speed)
    headers = {"Cache-Control": "private, no-cache", "ETag": f'"{preview.clip_id}"',
               "X-Yomite-Style": preview.style}
    if request.headers.get("if-none-match") == headers["ETag"]:
        return Response(status_code=304, headers=headers)
    return Response(await preview.data(), media_type="audio/ogg", headers=headers)
