"""The desk's pages (`/desk`, `/standings/{t}`, `/results/{ch}`), their strings, and the
printable pages of a round's pairings and of the standings."""

from __future__ import annotations

import json
from functools import partial
from urllib.parse import quote

from fastapi import APIRouter, Request
from fastapi.responses import HTMLResponse, Response

from api.desk import printing as desk_print
from api.desk.deps import desk_of, paired
from api.routes.pages import STATIC, page_response
from api.routes.referees import join_bases, qr_svg
from desk.errors import NotFound

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


@router.get("/print/{tid}/rounds/{number}")
async def print_round(tid: str, number: int, request: Request) -> HTMLResponse:
    d = desk_of(request)
    paired(d.get(tid), number)
    page = await d.views.made(tid, f"print/rounds/{number}",
                              partial(desk_print.round_page, number=number))
    return HTMLResponse(page, headers={"Content-Security-Policy": desk_print.CSP})


@router.get("/print/{tid}/standings")
async def print_standings(tid: str, request: Request) -> HTMLResponse:
    page = await desk_of(request).views.made(tid, "print/standings", desk_print.standings_page)
    return HTMLResponse(page, headers={"Content-Security-Policy": desk_print.CSP})


@router.get("/api/tournaments/{tid}/qr.svg")
async def public_qr(tid: str, request: Request) -> Response:
    """The QR code of the tournament's public standings page (no login), at the address
    phones use (server.public_url, else this machine's default-route address): the projector
    shows it, so that players follow the 対戦表 and the standings on their phones."""
    desk_of(request).get(tid)  # 404 for an unknown tournament
    base = join_bases(request)[0].base
    return Response(qr_svg(f"{base}/standings/{quote(tid)}"), media_type="image/svg+xml",
                    headers={"Cache-Control": "no-cache"})


@router.get("/print/{tid}/slips/{number}")
async def print_slips(tid: str, number: int, request: Request) -> HTMLResponse:
    d = desk_of(request)
    paired(d.get(tid), number)
    page = await d.views.made(tid, f"print/slips/{number}",
                              partial(desk_print.slips_page, number=number))
    return HTMLResponse(page, headers={"Content-Security-Policy": desk_print.CSP})


@router.get("/print/{tid}/{what}")
async def print_sheets(tid: str, what: str, request: Request) -> HTMLResponse:
    """名札 (names), mat labels (mats), 賞状 (certificates)."""
    make = {"names": desk_print.names_page, "mats": desk_print.mats_page,
            "certificates": desk_print.certificates_page}.get(what)
    d = desk_of(request)
    d.get(tid)  # 404 for an unknown tournament
    if make is None:
        raise NotFound(f"there is no printed page {what!r}",
                       "names, mats, certificates, standings, rounds/{n}, slips/{n}")
    page = await d.views.made(tid, f"print/{what}", make)
    return HTMLResponse(page, headers={"Content-Security-Policy": desk_print.CSP})
