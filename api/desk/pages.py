"""The desk's pages (`/desk`, `/standings/{t}`, `/results/{ch}`), their strings, and the
printable pages: a round's pairings and slips, the standings, name cards, mat labels and
certificates (who may see which: api.desk.access)."""

from __future__ import annotations

import json
from functools import partial
from urllib.parse import quote

from fastapi import APIRouter, Request
from fastapi.responses import HTMLResponse, Response

from api.desk import printing as desk_print
from api.desk.access import VIEW, reader
from api.desk.deps import desk_of, paired
from api.routes.pages import STATIC, page_response
from api.routes.referees import join_bases, qr_svg
from desk.errors import Conflict, NotFound
from desk.model import Tournament

router = APIRouter(include_in_schema=False)


def desk_strings_js() -> str:
    """The desk pages' strings (api/static/desk-strings.<lang>.json), added to the pages'
    own (strings.js); common.js reads them when a string is asked for, so this script may
    come after it in the page."""
    data = {lang: json.loads((STATIC / f"desk-strings.{lang}.json").read_text("utf-8"))
            for lang in ("ja", "en")}
    return ("(function (s, d) { for (const l of Object.keys(d)) s[l] = Object.assign("
            "s[l] || {}, d[l]); })(window.YOMITE_STRINGS = window.YOMITE_STRINGS || "
            "{ ja: {}, en: {} }, " + json.dumps(data, ensure_ascii=False) + ");\n")


@router.get("/static/desk-strings.js")
async def desk_strings() -> Response:
    return Response(desk_strings_js(), media_type="text/javascript",
                    headers={"Cache-Control": "no-cache"})


@router.get("/desk")
async def desk_page() -> HTMLResponse:
    return page_response("desk")


@router.get("/standings/{tid}")
async def standings_page(tid: str) -> HTMLResponse:
    return page_response("standings")


@router.get("/results/{ch}")
async def results_page(ch: str) -> HTMLResponse:
    return page_response("results")


# The printed pages: the desk's (its token, or its print pass: the pages open in a tab of their
# own); the pairings and the standings also through the tournament's public link (api.desk.access)
@router.get("/print/{tid}/rounds/{number}")
async def print_round(tid: str, number: int, request: Request) -> HTMLResponse:
    d = desk_of(request)
    t, _ = reader(request, tid)
    paired(t, number)
    page = await d.views.made(tid, f"print/rounds/{number}",
                              partial(desk_print.round_page, number=number))
    return HTMLResponse(page, headers=PRINT_HEADERS)


@router.get("/print/{tid}/standings")
async def print_standings(tid: str, request: Request) -> HTMLResponse:
    reader(request, tid)
    page = await desk_of(request).views.made(tid, "print/standings", desk_print.standings_page)
    return HTMLResponse(page, headers=PRINT_HEADERS)


@router.get("/api/tournaments/{tid}/qr.svg")
async def public_qr(tid: str, request: Request) -> Response:
    """The QR code of the tournament's public link (its standings page), at the address
    phones use (server.public_url, else this machine's default-route address): the projector
    shows it, so that players follow the 対戦表 and the standings on their phones. The desk's,
    or the link's holder's; 409 while the tournament has no public link."""
    t, _ = reader(request, tid)
    if t.public_link is None:
        raise Conflict("the tournament has no public link", "make one at the desk (the "
                       "tournament's settings)", code="no_public_link")
    base = join_bases(request)[0].base
    return Response(qr_svg(public_url(base, t)), media_type="image/svg+xml",
                    headers={"Cache-Control": "no-store"})


def public_url(base: str, t: Tournament) -> str:
    return f"{base}/standings/{quote(t.id)}?{VIEW}={t.public_link}"


@router.get("/print/{tid}/slips/{number}")
async def print_slips(tid: str, number: int, request: Request) -> HTMLResponse:
    d = desk_of(request)
    t, _ = reader(request, tid, public=False)
    paired(t, number)
    page = await d.views.made(tid, f"print/slips/{number}",
                              partial(desk_print.slips_page, number=number))
    return HTMLResponse(page, headers=PRINT_HEADERS)


@router.get("/print/{tid}/{what}")
async def print_sheets(tid: str, what: str, request: Request) -> HTMLResponse:
    """名札 (names), mat labels (mats), 賞状 (certificates): the desk's."""
    make = {"names": desk_print.names_page, "mats": desk_print.mats_page,
            "certificates": desk_print.certificates_page}.get(what)
    d = desk_of(request)
    reader(request, tid, public=False)  # 404 for an unknown tournament
    if make is None:
        raise NotFound(f"there is no printed page {what!r}",
                       "names, mats, certificates, standings, rounds/{n}, slips/{n}")
    page = await d.views.made(tid, f"print/{what}", make)
    return HTMLResponse(page, headers=PRINT_HEADERS)


# a printed page is nobody's to keep in a shared machine's cache (its public link's key is kept
# out of every Referer by api.guards)
PRINT_HEADERS = {"Content-Security-Policy": desk_print.CSP, "Cache-Control": "no-store"}
