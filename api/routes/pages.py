"""The web pages (console, referee, projector, speaker, class result sheet, the teachers' start
page; the desk's and the recording page are routed with their concern but built here) with their
shared head, and their static files: no build step, nothing fetched from outside the hall's own
server."""

from __future__ import annotations

import re
from functools import cache
from pathlib import Path

from fastapi import APIRouter
from fastapi.responses import HTMLResponse, RedirectResponse, Response

from api.errors import ApiError

router = APIRouter(include_in_schema=False)

# The pages' files, found from this package rather than with importlib.resources: an editable
# install made before api/ had an __init__.py maps `api` as a namespace package outside the
# source tree, and resources.files() cannot read a namespace package.
STATIC = Path(__file__).resolve().parent.parent / "static"

_TYPES = {"js": "text/javascript", "css": "text/css", "html": "text/html", "svg": "image/svg+xml",
          "png": "image/png", "json": "application/json"}

PAGES = {"console": "/console", "referee": "/referee/{ch}", "display": "/display/{ch}",
         "speaker": "/speaker/{ch}", "sheet": "/sheet/{ch}", "start": "/start"}


@router.get("/")
async def root() -> RedirectResponse:
    return RedirectResponse("/console")


# the head every page shares (api/static/head.html: the charset, the icon, common.css, the
# strings and common.js), put in place of this line of each page's <head>: the page's own
# title, metas, style sheet and scripts follow it
HEAD_MARK = "<!-- yomite:head -->"


@cache
def page_html(page: str) -> str:
    """A page (api/static/<page>.html) with the shared head in it: read once, then kept."""
    html = (STATIC / f"{page}.html").read_text("utf-8")
    if html.count(HEAD_MARK) != 1:
        raise ValueError(f"{page}.html must hold {HEAD_MARK} once in its <head>")
    head = (STATIC / "head.html").read_text("utf-8").rstrip("\n")
    return html.replace(HEAD_MARK, head)


def page_response(page: str) -> HTMLResponse:
    return HTMLResponse(page_html(page), headers={"Cache-Control": "no-cache"})


def _page_handler(page: str) -> object:
    async def handler() -> HTMLResponse:
        return page_response(page)

    handler.__name__ = f"page_{page}"
    return handler


for _page, _path in PAGES.items():
    router.add_api_route(_path, _page_handler(_page), methods=["GET"],  # type: ignore[arg-type]
                         response_class=HTMLResponse)


LANGUAGES = ("ja", "en")


def strings_js() -> str:
    """Every page's strings (api/static/strings.<lang>.json) as one script: the pages need
    them before they draw anything, so they are loaded like code, not fetched."""
    import json

    data = {lang: json.loads((STATIC / f"strings.{lang}.json").read_text("utf-8"))
            for lang in LANGUAGES}
    return "window.YOMITE_STRINGS = " + json.dumps(data, ensure_ascii=False) + ";\n"


@router.get("/static/strings.js")
async def strings() -> Response:
    return Response(strings_js(), media_type="text/javascript",
                    headers={"Cache-Control": "no-cache"})


_STATIC_NAME = re.compile(r"[A-Za-z0-9_-][A-Za-z0-9._-]{0,99}")


@router.get("/static/{name}")
async def static(name: str) -> Response:
    # a name is checked before it touches the file system: no path, no dot-file, and no
    # name longer than the file system takes (ENAMETOOLONG would be a 500)
    if not _STATIC_NAME.fullmatch(name):
        raise ApiError(404, "not_found", f"no static file {name[:60]!r}")
    f = STATIC / name
    try:
        found = f.is_file()
    except OSError:
        found = False
    if not found:
        raise ApiError(404, "not_found", f"no static file {name!r}")
    ext = name.rsplit(".", 1)[-1]
    return Response(f.read_bytes(), media_type=_TYPES.get(ext, "application/octet-stream"),
                    headers={"Cache-Control": "no-cache"})
