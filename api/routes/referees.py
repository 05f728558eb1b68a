"""Referees join a channel with its PIN; the operator reads the PIN and the join QR code."""

from __future__ import annotations

import io
import logging
from typing import Any

from fastapi import APIRouter, Request
from fastapi.responses import Response

from ..auth import RateLimited, TooManyReferees, fingerprint, pin_matches
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
        auth.check_pin_rate(f"{svc.name}/{client}", channel=svc.name)
    except RateLimited as e:
        raise ApiError(429, "rate_limited", str(e), "wait, then enter the PIN again",
                       headers={"Retry-After": str(int(e.retry_after_s) + 1)}) from None
    if not pin_matches(body.pin, svc.pin):
        auth.pin_failed(svc.name)
        raise ApiError(403, "wrong_pin", "that PIN is not this channel's",
                       "read the PIN on the operator's console")
    try:
        ref, token = auth.join(svc.name, body.name)
    except TooManyReferees as e:
        raise ApiError(409, "too_many_referees", str(e),
                       "the operator can remove referees who have left") from None
    except OSError as e:
        raise ApiError(503, "cannot_record", f"the referee cannot be recorded ({e.strerror})",
                       "free disk space or make the journal folder writable") from None
    log.info("referee %s (%r) joined channel %s, token %s…", ref.id, ref.name, svc.name,
             fingerprint(token))
    svc.broadcast()
    return {"referee": ref.id, "name": ref.name, "channel": svc.name, "token": token}


@router.delete("/api/channels/{ch}/referees/{referee}")
async def remove(svc: Ch, _p: Op, referee: str) -> dict[str, Any]:
    """Forget a referee: its token dies at once, its hand is lowered, its phone is
    disconnected (it can join again with the PIN)."""
    try:
        removed = await svc.remove_referee(referee)
    except OSError as e:
        raise ApiError(503, "cannot_record", f"the removal cannot be recorded ({e.strerror})",
                       "free disk space or make the journal folder writable") from None
    if not removed:
        raise ApiError(404, "no_such_referee", f"channel {svc.name} has no referee "
                       f"{referee[:40]!r}", "GET the channel (as the operator) for its referees")
    log.info("referee %s removed from channel %s by the operator", referee, svc.name)
    return {"removed": referee, "channel": svc.name}


@router.get("/api/channels/{ch}/pin")
async def pin(svc: Ch, _p: Op, request: Request) -> dict[str, Any]:
    return {"pin": svc.pin, "join_url": join_url(request, svc)}


@router.post("/api/channels/{ch}/pin")
async def rotate_pin(svc: Ch, _p: Op, request: Request) -> dict[str, Any]:
    """A new PIN (the old join links and QR codes stop working; joined referees stay)."""
    try:
        svc.rotate_pin()
    except OSError as e:
        raise ApiError(503, "cannot_record", f"the new PIN cannot be kept ({e.strerror})",
                       "free disk space or make the journal folder writable") from None
    log.info("channel %s: the operator gave a new PIN", svc.name)
    return {"pin": svc.pin, "join_url": join_url(request, svc)}


@router.get("/api/channels/{ch}/qr.svg")
async def qr(svc: Ch, _p: Op, request: Request) -> Response:
    return Response(qr_svg(join_url(request, svc)), media_type="image/svg+xml")


def join_url(request: Request, svc: ChannelService) -> str:
    base = str(request.base_url).rstrip("/")
    return f"{base}/referee/{svc.name}?pin={svc.pin}"


def qr_svg(text: str) -> bytes:
    import qrcode
    import qrcode.image.svg

    img = qrcode.make(text, image_factory=qrcode.image.svg.SvgPathImage, border=2)
    buf = io.BytesIO()
    img.save(buf)
    return buf.getvalue()
