"""The speaker link of a channel (hall.speakerlink): the operator reads it (a link and its QR
code at each address of the server) and replaces it."""

from __future__ import annotations

import logging
from typing import Annotated

from fastapi import APIRouter, Query, Request
from fastapi.responses import Response

from api.deps import Ch, Op
from api.errors import ApiError
from api.models import ERRORS, SpeakerBase, SpeakerLinkAnswer
from api.routes.referees import join_bases, qr_svg
from hall.channel import ChannelService

log = logging.getLogger("yomite.api")

router = APIRouter(tags=["speakers"], responses=ERRORS)


def _answer(svc: ChannelService, request: Request) -> SpeakerLinkAnswer:
    assert svc.speaker_link is not None
    found = join_bases(request)
    link = svc.speaker_link
    return SpeakerLinkAnswer(channel=svc.name, url=link.url(found[0].base),
                             bases=[SpeakerBase(base=c.base, url=link.url(c.base))
                                    for c in found],
                             mode=svc.output, connected=svc.speaker_pages())


@router.get("/api/channels/{ch}/speakers", response_model=SpeakerLinkAnswer)
async def speakers(svc: Ch, _p: Op, request: Request) -> SpeakerLinkAnswer:
    """The link that makes a browser one of this channel's speakers (it holds the channel's
    speaker key: only such a page gets the audio schedule and the clips), at every address
    phones may use, and how many speakers are connected."""
    return _answer(svc, request)


@router.post("/api/channels/{ch}/speakers/link", response_model=SpeakerLinkAnswer)
async def new_link(svc: Ch, _p: Op, request: Request) -> SpeakerLinkAnswer:
    """A new speaker link: the old one stops working and the speakers that joined with it are
    disconnected (open the new link on each)."""
    try:
        svc.new_speaker_link()
    except OSError as e:
        raise ApiError(503, "cannot_record", f"the new speaker link cannot be kept "
                       f"({e.strerror})", "free disk space or make the journal folder "
                       "writable") from None
    log.info("channel %s: the operator made a new speaker link", svc.name)
    return _answer(svc, request)


@router.get("/api/channels/{ch}/speakers/qr.svg", response_class=Response,
            responses={200: {"content": {"image/svg+xml": {}}, "description": "the QR code"}})
async def qr(svc: Ch, _p: Op, request: Request,
             base: Annotated[str | None, Query(max_length=200)] = None) -> Response:
    """The speaker link's QR code at `base` (one of `bases`; default the first)."""
    assert svc.speaker_link is not None
    found = join_bases(request)
    chosen = found[0] if base is None else next((c for c in found if c.base == base), None)
    if chosen is None:
        raise ApiError(422, "unknown_base", f"{base!r} is not an address of this server",
                       "use one of the bases GET .../speakers lists")
    return Response(qr_svg(svc.speaker_link.url(chosen.base)), media_type="image/svg+xml")
