"""Referees join a channel with its PIN; the operator reads the PIN and the join QR code."""

from __future__ import annotations

import functools
import io
import logging
from typing import Annotated

from fastapi import APIRouter, Query, Request
from fastapi.responses import Response

from api.addresses import Candidate, candidates
from api.answers import RemovedReferee
from api.deps import Ch, Op, auth_of
from api.errors import ApiError
from api.models import ERRORS, JoinAnswer, JoinBase, JoinRequest, PinAnswer
from hall.auth import TooManyReferees, fingerprint
from hall.channel import ChannelService
from hall.config import Config
from hall.pinlock import RateLimited, pin_matches, pin_suspect

log = logging.getLogger("yomite.api")

router = APIRouter(tags=["referees"], responses=ERRORS)


@router.post("/api/channels/{ch}/referees", response_model=JoinAnswer)
async def join(svc: Ch, body: JoinRequest, request: Request, response: Response
               ) -> JoinAnswer:
    """Join the channel as a referee with its PIN and a name (e.g. "mat 3"): the answer's
    token is the referee's identity (it raises and lowers only its own hand). Wrong PINs are
    limited per phone (its pass, a cookie this answer sets) or network (an address, an IPv6
    one by its /64), and all together per channel: 429 with Retry-After (hall.pinlock)."""
    auth = auth_of(request)
    client = request.client.host if request.client else "?"
    # a phone that joined with this PIN before is its own guesser (its pass, a cookie):
    # others' guesses from its network never lock it out
    pins = auth.pins
    guesser = (pins.pass_holder(svc.name, svc.pin, request.cookies.get(PASS_COOKIE))
               or pin_suspect(client))
    try:
        pins.check(svc.name, guesser)
    except RateLimited as e:
        raise pin_refused(e) from None
    if not pin_matches(body.pin, svc.pin):
        pins.failed(svc.name, guesser)
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
    svc.presence.changed()
    response.set_cookie(PASS_COOKIE, pins.pin_pass(svc.name, svc.pin), max_age=PASS_AGE_S,
                        path=f"/api/channels/{svc.name}/referees", httponly=True,
                        samesite="strict", secure=request.url.scheme == "https")
    return JoinAnswer(referee=ref.id, name=ref.name, channel=svc.name, token=token)


PASS_COOKIE = "yomite_pin_pass"
PASS_AGE_S = 7 * 86400  # as long as a PIN usually lives (a new PIN ends it anyway)


def pin_refused(e: RateLimited, what: str = "PIN") -> ApiError:
    """429 for a PIN (or an invite code: `what`) tried too often: why and how long to wait,
    and in the page's own words (`params`: the seconds, and `why`: pin_ or code_ + own,
    channel or attempts)."""
    n = e.retry_after
    detail, hint = {
        "own": (f"wrong {what}s were sent from this phone or network; try again in {n} s",
                f"wait {n} s, then enter the {what} again carefully (each further wrong "
                f"{what} doubles the wait)"),
        "channel": (f"many wrong {what}s were sent here, more than one of them from this "
                    f"phone or network; joining is locked for it for {n} s",
                    f"wait {n} s, or ask the operator for a new PIN; a phone that joined "
                    "with this PIN before is let in" if what == "PIN"
                    else f"wait {n} s, or ask your association's admin"),
    }.get(e.code, (f"too many {what}s tried from this phone or network in a minute; try "
                   f"again in {n} s", f"wait {n} s, then enter the {what} again"))
    pin = what == "PIN"
    return ApiError(429, "rate_limited" if pin else "too_many_codes", detail, hint,
                    headers={"Retry-After": str(n)},
                    params={"seconds": n, "why": f"{'pin' if pin else 'code'}_{e.code}"})


@router.delete("/api/channels/{ch}/referees/{referee}", response_model=RemovedReferee,
               response_model_exclude_unset=True)
async def remove(svc: Ch, _p: Op, referee: str) -> RemovedReferee:
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
    return RemovedReferee(removed=referee, channel=svc.name)


@router.get("/api/channels/{ch}/pin", response_model=PinAnswer)
async def pin(svc: Ch, _p: Op, request: Request) -> PinAnswer:
    """The PIN and the join link for phones: at `server.public_url` if set, else at this
    machine's default-route address; `bases` lists every address phones may use."""
    found = join_bases(request)
    return PinAnswer(pin=svc.pin, join_url=join_url(found[0].base, svc),
                     bases=[JoinBase.model_validate({**c.to_dict(),
                                                     "join_url": join_url(c.base, svc)})
                            for c in found],
                     projector_key=svc.view_links.projector_key if svc.view_links else None)


@router.post("/api/channels/{ch}/pin", response_model=PinAnswer)
async def rotate_pin(svc: Ch, _p: Op, request: Request) -> PinAnswer:
    """A new PIN (the old join links and QR codes stop working; joined referees stay; a join
    locked by wrong PINs opens again)."""
    try:
        svc.rotate_pin()
    except OSError as e:
        raise ApiError(503, "cannot_record", f"the new PIN cannot be kept ({e.strerror})",
                       "free disk space or make the journal folder writable") from None
    log.info("channel %s: the operator gave a new PIN", svc.name)
    return await pin(svc, _p, request)


@router.get("/api/channels/{ch}/qr.svg", response_class=Response,
            responses={200: {"content": {"image/svg+xml": {}}, "description": "the QR code"}})
async def qr(svc: Ch, _p: Op, request: Request,
             base: Annotated[str | None, Query(max_length=200)] = None) -> Response:
    """The join link's QR code, for `base` (one of the pin's `bases`; default the first)."""
    found = join_bases(request)
    chosen = found[0] if base is None else next((c for c in found if c.base == base), None)
    if chosen is None:
        raise ApiError(422, "unknown_base", f"{base!r} is not an address of this server",
                       "use one of the bases GET .../pin lists")
    return Response(qr_svg(join_url(chosen.base, svc)), media_type="image/svg+xml")


def join_bases(request: Request) -> list[Candidate]:
    config: Config = request.app.state.config
    host, port = request.app.state.listen
    scheme = "https" if request.app.state.https.tls else "http"
    return candidates(host, port, config.server.public_url, str(request.base_url), scheme)


def join_url(base: str, svc: ChannelService) -> str:
    """The join link: the PIN in its fragment, which a browser never sends (no server, proxy
    or log sees it) and the page takes off the address bar at once."""
    return f"{base}/referee/{svc.name}#pin={svc.pin}"


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
