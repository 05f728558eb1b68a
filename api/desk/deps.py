"""What the desk's routers share: the desk and a tournament from a request, a view as JSON,
a live page's long poll, a bounded upload, a CSV attachment, and their OpenAPI answers."""

from __future__ import annotations

import asyncio
import re
from collections.abc import Awaitable
from typing import Any

from fastapi import Request
from fastapi.responses import Response

from api.desk.answers import DeskView
from api.errors import ApiError
from desk.errors import NotFound
from desk.model import Tournament
from desk.views import desk_view
from hall.desk import Desk

PREFIX = "/api/tournaments"

ERRORS: dict[int | str, dict[str, Any]] = {
    s: {"description": d, "content": {"application/json": {"example": {
        "error": c, "detail": "what was wrong", "hint": "what to do"}}}}
    for s, d, c in ((401, "no operator token", "unauthorized"),
                    (403, "a referee at a mat not its own", "forbidden"),
                    (404, "no such tournament, block, round or mat", "not_found"),
                    (409, "a step out of order (round 3 before round 2's results)",
                     "out_of_order"),
                    (413, "a file over desk.max_upload_kb", "too_large"),
                    (422, "a bad body or file", "invalid"))
}
CSV = "text/csv; charset=utf-8"
CSV_ANSWER: dict[int | str, dict[str, Any]] = {
    200: {"description": "the file, as an attachment", "content": {"text/csv": {}}}}
# the routes that take a file (the JSON backup, the entries CSV): the door lets their bodies
# reach desk.max_upload_kb, which they check themselves as they read (every other route keeps
# server.limits.body_bytes)
UPLOADS = re.compile(r"/api/tournaments/(import|[^/]+/entries\.csv)")


def desk_of(request: Request) -> Desk:
    d: Desk = request.app.state.desk
    return d


def tournament_of(request: Request, tid: str) -> Tournament:
    return desk_of(request).get(tid)


def desk_answer(d: Desk, t: Tournament) -> DeskView:
    """The desk's view of `t`, each round with its channel's reading (`live`)."""
    v = desk_view(t)
    for rv, r in zip(v["rounds"], t.rounds, strict=True):
        rv["live"] = d.reading_state(r)
    return DeskView.model_validate(v)


def json_answer(body: bytes) -> Response:
    return Response(body, media_type="application/json")


async def _gone(request: Request) -> None:
    """Returns when the client has left (its connection closed)."""
    while (await request.receive())["type"] != "http.disconnect":
        pass


async def long_poll(request: Request, answer: Awaitable[bytes]) -> Response:
    """A live page's wait for the next version, ended when the page leaves (a projector
    switched off, a phone asleep, fifty pages reloaded): its wait is not kept for
    desk.long_poll_s, nor left for the server's shutdown to cancel."""
    work = asyncio.ensure_future(answer)
    left = asyncio.ensure_future(_gone(request))
    try:
        done, _ = await asyncio.wait((work, left), return_when=asyncio.FIRST_COMPLETED)
    finally:
        left.cancel()
        if not work.done():
            work.cancel()
    if work not in done:
        return Response(status_code=204)  # nobody is there to read it
    return json_answer(work.result())


# a live page's view is JSON kept per version (Desk.view_json), built by desk/views.py: its
# model (api/desk/answers.py) documents it, the bytes go out as they are
def view_answer(model: Any, polled: bool = True) -> dict[int | str, dict[str, Any]]:
    out: dict[int | str, dict[str, Any]] = {
        200: {"description": "the view (see the desk's pages)", "model": model}}
    if polled:
        out[204] = {"description": "the page left before the next version (a long poll)"}
    return out


async def read_body(request: Request, limit_kb: int) -> bytes:
    """The request's body, refused (413) past `limit_kb` without reading it all."""
    limit = limit_kb * 1024
    declared = request.headers.get("content-length")
    if declared is not None and declared.isdigit() and int(declared) > limit:
        raise ApiError(413, "too_large", f"the file is {int(declared) // 1024} KiB; the desk "
                       f"takes at most {limit_kb} KiB", "split it, or raise desk.max_upload_kb")
    buf = bytearray()
    async for chunk in request.stream():
        buf += chunk
        if len(buf) > limit:
            raise ApiError(413, "too_large", f"the file is over {limit_kb} KiB",
                           "split it, or raise desk.max_upload_kb")
    return bytes(buf)


def csv_answer(text: str | bytes, filename: str) -> Response:
    return Response(text, media_type=CSV,
                    headers={"Content-Disposition": f'attachment; filename="{filename}"'})


def paired(t: Tournament, number: int) -> None:
    if not any(r.number == number for r in t.rounds):
        raise NotFound(f"round {number} is not paired", "")
