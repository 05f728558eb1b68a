"""The API's errors: every failure answers `{"error": code, "detail": what was wrong,
"hint": what to do}` with a 4xx/5xx status."""

from __future__ import annotations

from typing import Any

from fastapi import FastAPI, Request
from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse
from starlette.exceptions import HTTPException as StarletteHTTPException

from audio.errors import AudioError, VoiceError
from desk.errors import DeskError
from hall.errors import (
    ChannelFault,
    ChannelStopped,
    Expired,
    JournalUnavailable,
    NotSent,
    RoomRefused,
)
from reader.errors import (
    BadDeck,
    ConfigError,
    IllegalMove,
    ReaderError,
    SpeedNotOffered,
    TooManyCards,
)


class ApiError(Exception):
    def __init__(self, status: int, code: str, detail: str, hint: str = "",
                 headers: dict[str, str] | None = None,
                 params: dict[str, int | str] | None = None) -> None:
        self.status, self.code, self.detail, self.hint = status, code, detail, hint
        self.headers = headers
        self.params = params
        super().__init__(detail)


def body(code: str, detail: str, hint: str = "",
         params: dict[str, int | str] | None = None) -> dict[str, Any]:
    """`params`: the figures a page puts in its own words for the code (err_<code>)."""
    out: dict[str, Any] = {"error": code, "detail": detail, "hint": hint}
    if params:
        out["params"] = params
    return out


# hall.errors.RoomRefused's codes: another organisation's room or organisation is answered as
# one that does not exist; a quota reached is a conflict the asker can resolve
ROOM_STATUS = {"no_such_org": 404, "no_such_room": 404, "wrong_code": 403,
               "too_many_rooms": 409, "server_full": 409, "bad_deck": 422}


def install_handlers(app: FastAPI) -> None:
    """Map every error the layers below raise to its status and JSON body."""

    @app.exception_handler(ApiError)
    async def _api_error(_r: Request, e: ApiError) -> JSONResponse:
        return JSONResponse(body(e.code, e.detail, e.hint, e.params), e.status,
                            headers=e.headers)

    @app.exception_handler(DeskError)
    async def _desk(_r: Request, e: DeskError) -> JSONResponse:
        # a database that did not answer: a moment, and the same request again
        retry = {"Retry-After": "2"} if e.code == "storage_unreachable" else None
        return JSONResponse(body(e.code, e.detail, e.hint, e.params), e.status, headers=retry)

    @app.exception_handler(RoomRefused)
    async def _room(_r: Request, e: RoomRefused) -> JSONResponse:
        return JSONResponse(body(e.code, e.detail, e.hint), ROOM_STATUS.get(e.code, 409))

    @app.exception_handler(IllegalMove)
    async def _illegal(_r: Request, e: IllegalMove) -> JSONResponse:
        return JSONResponse(body("illegal_move", str(e), "GET the channel to see its phase"), 409)

    @app.exception_handler(VoiceError)  # before AudioError: the most specific class answers
    async def _voice(_r: Request, e: VoiceError) -> JSONResponse:
        return JSONResponse(body("voice_unavailable", str(e),
                                 "the voice cannot read this match: do what the detail says, "
                                 "or choose another voice or speed"), 503)

    @app.exception_handler(AudioError)
    async def _audio(_r: Request, e: AudioError) -> JSONResponse:
        return JSONResponse(body("audio_unavailable", str(e),
                                 "check the speakers or the sound server, then resume again"),
                            503)

    @app.exception_handler(JournalUnavailable)
    async def _journal(_r: Request, e: JournalUnavailable) -> JSONResponse:
        return JSONResponse(body("journal_unavailable", str(e),
                                 "free disk space or make the journal folder writable "
                                 "(journal_dir), then resume"), 503)

    @app.exception_handler(ChannelFault)
    async def _fault(_r: Request, e: ChannelFault) -> JSONResponse:
        return JSONResponse(body("reader_failed", str(e),
                                 "the channel is paused by @fault: fix the cause (the voice, "
                                 "the pack), then resume, or abort and prepare another match"),
                            503)

    @app.exception_handler(ChannelStopped)
    async def _stopped(_r: Request, e: ChannelStopped) -> JSONResponse:
        # one process: the server is shutting down; a cluster's: the channel's owner is being
        # replaced (seconds) or the broker is out of reach. The message says which; the code
        # says whether the command may have been applied (hall.errors: NotSent, Expired)
        if isinstance(e, NotSent):
            hint = ("nothing was applied: send it again once the page says the server reaches "
                    "the cluster again (sending it again cannot apply it twice)")
        elif isinstance(e, Expired):
            hint = ("it is not applied after this; look at the channel's state before sending "
                    "it again")
        else:
            hint = ("try again in a few seconds; if it goes on, start the server (or the "
                    "cluster's broker) again")
        return JSONResponse(body(e.code, str(e), hint), 503, headers={"Retry-After": "2"})

    @app.exception_handler(ReaderError)
    async def _reader(_r: Request, e: ReaderError) -> JSONResponse:
        if isinstance(e, TooManyCards):
            return JSONResponse(body("too_many_cards", str(e),
                                     f"choose {e.poems} cards or fewer, or add colours or poems",
                                     {"cards": e.cards, "poems": e.poems}), 422)
        if isinstance(e, SpeedNotOffered):
            return JSONResponse(body("speed_not_offered", str(e),
                                     f"choose a speed from {e.low:g} to {e.high:g} in steps of "
                                     f"{e.step:g}, as the console's reading speed offers",
                                     {"speed": f"{e.speed:g}", "min": f"{e.low:g}",
                                      "max": f"{e.high:g}", "step": f"{e.step:g}"}), 422)
        code = "bad_deck" if isinstance(e, BadDeck) else (
            "bad_settings" if isinstance(e, ConfigError) else "refused")
        return JSONResponse(body(code, str(e), "correct the request and send it again"), 422)

    @app.exception_handler(RequestValidationError)
    async def _invalid(_r: Request, e: RequestValidationError) -> JSONResponse:
        problems = []
        for err in e.errors()[:10]:
            where = ".".join(str(p) for p in err.get("loc", ()))
            problems.append(f"{where}: {err.get('msg')}")
        return JSONResponse(body("invalid_request", "; ".join(problems),
                                 "see /docs for the request's schema"), 422)

    @app.exception_handler(StarletteHTTPException)
    async def _http(_r: Request, e: StarletteHTTPException) -> JSONResponse:
        hint = ("see /docs for the API" if e.status_code in (404, 405)
                else "send valid JSON of the request's schema (see /docs)"
                if e.status_code == 400 else "")
        return JSONResponse(body("http_error", str(e.detail), hint), e.status_code)
