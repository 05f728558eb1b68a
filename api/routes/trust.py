"""How a phone or a Chromebook comes to trust this server (docs/tls.md): the server's own CA
certificate to install (`/ca.crt`, also over plain http: api/https.py), its fingerprint to
compare, and the QR code of where to download it (the console shows them)."""

from __future__ import annotations

from typing import Annotated

from fastapi import APIRouter, Query, Request, Response

from api.answers import TlsAnswer
from api.certs import Https
from api.errors import ApiError
from api.models import ERRORS
from api.routes.referees import join_bases, qr_svg

router = APIRouter(tags=["reference"], responses=ERRORS)


def https_of(request: Request) -> Https:
    found: Https = request.app.state.https
    return found


def ca_url(request: Request, base: str | None = None) -> str | None:
    """The CA's address over plain http at `base` (one of the addresses phones are given;
    default the first); None without a CA of its own."""
    if https_of(request).ca_pem is None:
        return None
    found = join_bases(request)
    chosen = found[0] if base is None else next((c for c in found if c.base == base), None)
    if chosen is None:
        raise ApiError(422, "unknown_base", f"{base!r} is not an address of this server",
                       "use one of the bases GET /api/channels/{ch}/pin lists")
    return "http://" + chosen.base.split("://", 1)[1] + "/ca.crt"


@router.get("/ca.crt", response_class=Response,
            responses={200: {"content": {"application/x-x509-ca-cert": {}},
                             "description": "the CA certificate (PEM)"}})
async def ca_certificate(request: Request) -> Response:
    """This server's own certificate authority, to install on a phone or a Chromebook once
    (compare its SHA-256 with the console's). Public, and over plain http too."""
    pem = https_of(request).ca_pem
    if pem is None:
        raise ApiError(404, "no_own_ca", "this server has no certificate authority of its own "
                       "(it serves plain http, or a certificate it was given)",
                       "nothing to install: GET /api/tls says how this server is reached")
    return Response(pem, media_type="application/x-x509-ca-cert", headers={
        "content-disposition": 'attachment; filename="yomite-ca.crt"',
        "cache-control": "no-cache"})


@router.get("/api/tls", response_model=TlsAnswer)
async def tls(request: Request) -> TlsAnswer:
    """How this server speaks to the network: https or not, and the CA to trust."""
    h = https_of(request)
    return TlsAnswer(mode=h.mode, https=h.tls, ca_url=ca_url(request),
                     fingerprint_sha256=h.fingerprint, uncovered=list(h.uncovered))


@router.get("/api/tls/qr.svg", response_class=Response,
            responses={200: {"content": {"image/svg+xml": {}},
                             "description": "the QR code of the CA's address"}})
async def ca_qr(request: Request,
                base: Annotated[str | None, Query(max_length=200)] = None) -> Response:
    """The QR code of `ca_url` at `base` (one of the pin's `bases`; default the first): a
    phone scans it, downloads the CA and installs it."""
    url = ca_url(request, base)
    if url is None:
        raise ApiError(404, "no_own_ca", "this server has no certificate authority of its own",
                       "nothing to install")
    return Response(qr_svg(url), media_type="image/svg+xml")
