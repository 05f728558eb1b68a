"""Referees join a channel with its PIN; the operator reads the PIN and the join QR code."""

from __future__ import annotations

import functools
import io
import logging
from typing import Any

from fastapi import APIRouter, Request
from fastapi.responses import Response

from ..auth import RateLimited, fingerprint, pin_matches
from ..deps import Ch, Op, auth_of
from ..errors import ApiError
from ..hall import ChannelService
from ..models import JoinRequest

log = logging.getLogger("yomite.api")

router = APIRouter(tags=["referees"])


@router.post("/api/channels/{ch}/referees")
async def join(svc: Ch, body: JoinRequest, request: Request) -> dict[str, Any]:
    auth = auth_of(request)
    client = request.client.host if request.client else "?"
    try:
        auth.check_pin_rate(f"{svc.name}/{client}")
    except RateLimited as e:
        raise ApiError(429, "rate_limited", str(e), "wait, then enter the PIN again",
                       headers={"Retry-After": str(int(e.retry_after_s) + 1)}) from None
    if not pin_matches(body.pin, svc.pin):
        raise ApiError(403, "wrong_pin", "that PIN is not this channel's",
                       "read the PIN on the operator's console")
    ref, token = auth.join(svc.name, body.name)
    log.info("referee %s (%s) joined channel %s, token %s…", ref.id, ref.name, svc.name,
             fingerprint(token))
    svc.broadcast()
    return {"referee": ref.id, "name": ref.name, "channel": svc.name, "token": token}


@router.get("/api/channels/{ch}/pin")
async def pin(svc: Ch, _p: Op, request: Request) -> dict[str, Any]:
    return {"pin": svc.pin, "join_url": join_url(request, svc)}


@router.get("/api/channels/{ch}/qr.svg")
async def qr(svc: Ch, _p: Op, request: Request) -> Response:
    return Response(qr_svg(join_url(request, svc)), media_type="image/svg+xml")


def join_url(request: Request, svc: ChannelService) -> str:
    base = str(request.base_url).rstrip("/")
    return f"{base}/referee/{svc.name}?pin={svc.pin}"


@functools.lru_cache(maxsize=16)
def qr_svg(text: str) -> bytes:
    """The QR code of `text` (the join link): 50-100 ms of pure Python to draw, on the event
    loop, so each link is drawn once (a console reloads it at every visit)."""
    import qrcode
    import qrcode.image.svg

    img = qrcode.make(text, image_factory=qrcode.image.svg.SvgPathImage, border=2)
    buf = io.BytesIO()
    img.save(buf)
    return buf.getvalue()
