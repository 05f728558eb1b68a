"""The hall service: `create_app(config)` builds the FastAPI app; nothing is created at import.

Handlers validate, put an item on the channel's inbox, and return the state it produced. Errors
are JSON: `{"error": code, "detail": what was wrong, "hint": what to do}`.
"""

import asyncio
import csv
import io
import json
import logging
from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager
from dataclasses import asdict
from pathlib import Path
from typing import Annotated, Any

from fastapi import Depends, FastAPI, Query, Request, WebSocket, WebSocketDisconnect
from fastapi.exceptions import RequestValidationError
from fastapi.responses import HTMLResponse, JSONResponse, RedirectResponse, Response
from pydantic import BaseModel, ConfigDict, Field
from starlette.exceptions import HTTPException as StarletteHTTPException

from audio.errors import AudioError
from reader.config import Config
from reader.deck import SEED_MAX
from reader.errors import BadDeck, ConfigError, IllegalMove, ReaderError
from reader.events import (
    OPERATOR,
    SYSTEM_PREFIX,
    Abort,
    ClearHolds,
    Event,
    ExtraCard,
    Hold,
    Release,
    Start,
)
from reader.poems import all_poems, poem
from reader.timeline import build_timeline

from .auth import Auth, Principal, RateLimited, Role, fingerprint, pin_matches
from .hall import ChannelService, Hall, SinkFactory, default_sink, public_view
from .runtime import PrepareMatch, VoiceLike

log = logging.getLogger("yomite.api")


class ApiError(Exception):
    def __init__(self, status: int, code: str, detail: str, hint: str = "",
                 headers: dict[str, str] | None = None) -> None:
        self.status, self.code, self.detail, self.hint = status, code, detail, hint
        self.headers = headers
        super().__init__(detail)


def _body(code: str, detail: str, hint: str = "") -> dict[str, str]:
    return {"error": code, "detail": detail, "hint": hint}


class Strict(BaseModel):
    model_config = ConfigDict(extra="forbid")


class MatchRequest(Strict):
    colors: list[Annotated[str, Field(max_length=16)]] = Field(default=[], max_length=5)
    poems: list[Annotated[int, Field(ge=1, le=100)]] = Field(default=[], max_length=100)
    seed: int | None = Field(default=None, ge=0, le=SEED_MAX)
    overrides: dict[str, Any] = Field(default={})


class JoinRequest(Strict):
    pin: str = Field(pattern=r"^[0-9]{4,8}$")
    name: str = Field(min_length=1, max_length=40)


class HoldRequest(Strict):
    name: str = Field(default="", max_length=40)


class AbortRequest(Strict):
    reason: str = Field(default="", max_length=200)


def _token(request: Request | WebSocket) -> str | None:
    auth = request.headers.get("authorization", "")
    if auth.lower().startswith("bearer "):
        return auth[7:].strip() or None
    return request.headers.get("x-yomite-token") or request.query_params.get("token") or None


def create_app(
    config: Config,
    *,
    voice: VoiceLike | None = None,
    make_sink: SinkFactory = default_sink,
    operator_token: str | None = None,
    on_ready: Callable[[Hall, str, bool], None] | None = None,
) -> FastAPI:
    sec = config.server.security
    auth = Auth(operator_token or sec.operator_token, sec.pin_attempts_per_minute,
                store=config.journal_dir / "referees.json")

    @asynccontextmanager
    async def lifespan(app: FastAPI) -> AsyncIterator[None]:
        v = voice
        if v is None:
            from audio.voice import make_voice

            v = make_voice(config.voice, config.audio.rate)
        hall = Hall(config, v, auth, make_sink)
        app.state.hall = hall
        await hall.start()
        if on_ready is not None:
            on_ready(hall, auth.operator_token, auth.generated)
        try:
            yield
        finally:
            await hall.stop()

    app = FastAPI(title="yomite", version="0.1.0", lifespan=lifespan,
                  description="The hall service of yomite, an automated karuta reader.")
    app.state.auth = auth
    app.state.config = config

    # ------------------------------------------------------------------ errors
    @app.exception_handler(ApiError)
    async def _api_error(_r: Request, e: ApiError) -> JSONResponse:
        return JSONResponse(_body(e.code, e.detail, e.hint), e.status, headers=e.headers)

    @app.exception_handler(IllegalMove)
    async def _illegal(_r: Request, e: IllegalMove) -> JSONResponse:
        return JSONResponse(_body("illegal_move", str(e), "GET the channel to see its phase"), 409)

    @app.exception_handler(AudioError)
    async def _audio(_r: Request, e: AudioError) -> JSONResponse:
        return JSONResponse(_body("audio_unavailable", str(e),
                                  "check the speakers or the sound server, then resume again"),
                            503)

    @app.exception_handler(ReaderError)
    async def _reader(_r: Request, e: ReaderError) -> JSONResponse:
        code = "bad_deck" if isinstance(e, BadDeck) else (
            "bad_settings" if isinstance(e, ConfigError) else "refused")
        return JSONResponse(_body(code, str(e), "correct the request and send it again"), 422)

    @app.exception_handler(RequestValidationError)
    async def _invalid(_r: Request, e: RequestValidationError) -> JSONResponse:
        problems = []
        for err in e.errors()[:10]:
            where = ".".join(str(p) for p in err.get("loc", ()))
            problems.append(f"{where}: {err.get('msg')}")
        return JSONResponse(_body("invalid_request", "; ".join(problems),
                                  "see /docs for the request's schema"), 422)

    @app.exception_handler(StarletteHTTPException)
    async def _http(_r: Request, e: StarletteHTTPException) -> JSONResponse:
        hint = "see /docs for the API" if e.status_code in (404, 405) else ""
        return JSONResponse(_body("http_error", str(e.detail), hint), e.status_code)

    # ------------------------------------------------------------------ dependencies
    def hall_of(request: Request) -> Hall:
        h: Hall = request.app.state.hall
        return h

    def who(request: Request) -> Principal:
        try:
            return auth.identify(_token(request))
        except PermissionError as e:
            raise ApiError(401, "unauthorized", str(e), "open the join page again") from None

    def operator(p: Annotated[Principal, Depends(who)]) -> Principal:
        if p.role is Role.OPERATOR:
            return p
        if p.role is Role.VIEWER:
            raise ApiError(401, "unauthorized", "this needs the operator's token",
                           "send Authorization: Bearer <operator token>")
        raise ApiError(403, "forbidden", "referees may only raise and lower their own hand",
                       "ask the operator")

    def channel(ch: str, request: Request) -> ChannelService:
        h = hall_of(request)
        svc = h.channels.get(ch)
        if svc is None or svc.runtime is None:
            raise ApiError(404, "no_such_channel", f"there is no channel {ch!r}",
                           f"channels: {', '.join(h.channels)}")
        return svc

    Op = Annotated[Principal, Depends(operator)]
    Who = Annotated[Principal, Depends(who)]
    Ch = Annotated[ChannelService, Depends(channel)]

    def view(svc: ChannelService, p: Principal) -> dict[str, Any]:
        op = svc.operator_view()
        return op if p.role is Role.OPERATOR else public_view(op)

    async def submit(svc: ChannelService, item: Any) -> None:
        assert svc.runtime is not None
        await svc.runtime.submit(item)

    # ------------------------------------------------------------------ reference data
    @app.get("/api/health")
    async def health(request: Request) -> dict[str, Any]:
        h = hall_of(request)
        return {"status": "ok",
                "channels": {n: {"output": s.audio,
                                 "audio": s.runtime.state().get("audio") if s.runtime else None,
                                 "clients": len(s.hub.clients),
                                 "runtime": "running" if s.runtime and s.runtime.running
                                 else "stopped",
                                 "dropped_clients": s.hub.dropped,
                                 "fanout_lag_ms": s.hub.lag_ms()}
                             for n, s in h.channels.items()}}

    @app.get("/api/poems")
    async def poems() -> list[dict[str, Any]]:
        return [_poem(p.no) for p in all_poems()]

    @app.get("/api/poems/{no}")
    async def poem_one(no: int) -> dict[str, Any]:
        if not 1 <= no <= 100:
            raise ApiError(404, "no_such_poem", f"there is no poem {no}", "poems are 1..100")
        return _poem(no)

    @app.get("/api/voices")
    async def voices(request: Request) -> dict[str, Any]:
        from audio.catalogue import list_voices

        h = hall_of(request)
        return {"current": getattr(h.voice, "name", "?"),
                "voices": await asyncio.to_thread(list_voices, config.voice)}

    @app.get("/api/devices")
    async def devices(_p: Op) -> dict[str, Any]:
        from audio.device import list_devices
        from audio.errors import AudioError

        try:
            devs = await asyncio.to_thread(list_devices)
        except AudioError as e:
            return {"devices": [], "error": str(e)}
        return {"devices": [asdict(d) for d in devs]}

    # ------------------------------------------------------------------ channels
    @app.get("/api/session")
    async def session(p: Who) -> dict[str, Any]:
        return {"role": p.role.value, "channel": p.channel, "referee": p.referee,
                "name": p.name}

    @app.get("/api/channels")
    async def channels(request: Request, p: Who) -> list[dict[str, Any]]:
        return [view(s, p) for s in hall_of(request).channels.values()]

    @app.get("/api/channels/{ch}")
    async def channel_state(svc: Ch, p: Who) -> dict[str, Any]:
        return view(svc, p)

    @app.post("/api/channels/{ch}/match")
    async def prepare(svc: Ch, p: Op, body: MatchRequest) -> dict[str, Any]:
        await submit(svc, PrepareMatch(tuple(body.colors), tuple(body.poems), body.seed,
                                       body.overrides))
        return view(svc, p)

    async def engine_event(svc: ChannelService, p: Principal, ev: Event) -> dict[str, Any]:
        await submit(svc, ev)
        return view(svc, p)

    @app.post("/api/channels/{ch}/match/start")
    async def start(svc: Ch, p: Op) -> dict[str, Any]:
        return await engine_event(svc, p, Start())

    @app.post("/api/channels/{ch}/match/extra-card")
    async def extra(svc: Ch, p: Op) -> dict[str, Any]:
        return await engine_event(svc, p, ExtraCard())

    @app.post("/api/channels/{ch}/match/abort")
    async def abort(svc: Ch, p: Op, body: AbortRequest | None = None) -> dict[str, Any]:
        return await engine_event(svc, p, Abort(body.reason if body else "aborted by operator"))

    @app.post("/api/channels/{ch}/match/resume")
    async def resume(svc: Ch, p: Op) -> dict[str, Any]:
        return await engine_event(svc, p, ClearHolds())

    def hold_target(svc: ChannelService, p: Principal, referee: str) -> str:
        if p.role is Role.OPERATOR:
            if referee.startswith(SYSTEM_PREFIX) and referee != OPERATOR:
                raise ApiError(403, "forbidden", f"{referee} is yomite's own hold",
                               "clear it with POST .../match/resume")
            return referee
        if p.role is Role.VIEWER:
            raise ApiError(401, "unauthorized", "join the channel as a referee first",
                           "POST /api/channels/{ch}/referees with the PIN")
        if p.channel != svc.name:
            raise ApiError(403, "forbidden", "this referee joined another channel",
                           f"join channel {svc.name} with its PIN")
        if referee != p.referee:
            raise ApiError(403, "forbidden", "a referee may only raise and lower its own hand",
                           f"use /holds/{p.referee}")
        return referee

    @app.put("/api/channels/{ch}/holds/{referee}")
    async def raise_hold(svc: Ch, p: Who, referee: str,
                         body: HoldRequest | None = None) -> dict[str, Any]:
        rid = hold_target(svc, p, referee)
        ref = auth.referee(rid)
        name = (body.name if body and body.name else "") or (ref.name if ref else "") or (
            "operator" if rid == OPERATOR else rid)
        await svc.hand(Hold(rid, name))
        return view(svc, p)

    @app.delete("/api/channels/{ch}/holds/{referee}")
    async def lower_hold(svc: Ch, p: Who, referee: str) -> dict[str, Any]:
        rid = hold_target(svc, p, referee)
        await svc.hand(Release(rid))
        return view(svc, p)

    @app.post("/api/channels/{ch}/referees")
    async def join(svc: Ch, body: JoinRequest, request: Request) -> dict[str, Any]:
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

    @app.get("/api/channels/{ch}/pin")
    async def pin(svc: Ch, _p: Op, request: Request) -> dict[str, Any]:
        return {"pin": svc.pin, "join_url": _join_url(request, svc)}

    @app.get("/api/channels/{ch}/qr.svg")
    async def qr(svc: Ch, _p: Op, request: Request) -> Response:
        return Response(_qr_svg(_join_url(request, svc)), media_type="image/svg+xml")

    @app.get("/api/channels/{ch}/match/log", response_model=None)
    async def match_log(svc: Ch, _p: Op,
                        format: Annotated[str, Query(pattern="^(json|csv)$")] = "json"
                        ) -> Response | dict[str, Any]:
        rt = svc.runtime
        assert rt is not None
        if rt.engine is None:
            raise ApiError(404, "no_match", "no match has been prepared on this channel",
                           "POST .../match first")
        header = rt.engine.header()
        records = list(rt.records)
        timeline = build_timeline(records, rt.rate)
        if format == "csv":
            return Response(_csv(timeline), media_type="text/csv; charset=utf-8",
                            headers={"Content-Disposition":
                                     f'attachment; filename="{svc.name}-match.csv"'})
        return {"header": header, "records": records, "timeline": timeline,
                "journal": str(rt.journal_path) if rt.journal_path else None}

    # ------------------------------------------------------------------ WebSocket
    @app.websocket("/ws/channels/{ch}")
    async def ws(websocket: WebSocket, ch: str) -> None:
        h: Hall = websocket.app.state.hall
        svc = h.channels.get(ch)
        if not _origin_ok(websocket, config):
            await websocket.close(code=1008, reason="origin not allowed")
            return
        if svc is None:
            await websocket.close(code=1008, reason=f"no channel {ch}")
            return
        try:
            p = auth.identify(_token(websocket))
        except PermissionError:
            await websocket.close(code=1008, reason="unknown token: join again")
            return
        await websocket.accept()
        client = svc.hub.add(websocket.send_text, websocket.close,
                             operator=p.role is Role.OPERATOR,
                             referee=p.referee if p.channel == ch else None, name=p.name)
        svc.hub.send_to(client, {"type": "hello", "role": p.role.value, "referee": p.referee,
                                 "channel": ch})
        svc.hub.send_to(client, {"type": "state", **view(svc, p)})
        if client.referee:
            svc.broadcast()  # the console shows who is connected
        try:
            while True:
                text = await websocket.receive_text()
                await _ws_message(svc, p, client, text)
        except WebSocketDisconnect:
            pass
        except Exception as e:  # a per-client edge: log, drop this client only
            log.info("websocket on %s closed: %s", ch, e)
        finally:
            svc.hub.remove(client)
            if client.referee:
                svc.broadcast()

    async def _ws_message(svc: ChannelService, p: Principal, client: Any, text: str) -> None:
        if len(text) > 4096:
            svc.hub.send_to(client, {"type": "error", "error": "too_large",
                                     "detail": "messages are at most 4096 bytes"})
            return
        try:
            msg = json.loads(text)
            kind = msg["type"] if isinstance(msg, dict) else None
        except (ValueError, KeyError, TypeError):
            kind = None
        if kind == "ping":
            svc.hub.send_to(client, {"type": "pong", "seq": svc.seq})
            return
        if kind not in ("hold", "release"):
            svc.hub.send_to(client, {"type": "error", "error": "bad_message",
                                     "detail": 'send {"type": "hold"} or {"type": "release"}'})
            return
        if p.role is Role.OPERATOR:
            rid = str(msg.get("referee") or OPERATOR)
        elif p.role is Role.REFEREE and p.channel == svc.name and p.referee:
            rid = p.referee
        else:
            svc.hub.send_to(client, {"type": "error", "error": "forbidden",
                                     "detail": "only a referee of this channel may hold"})
            return
        ev: Hold | Release = Hold(rid, p.name) if kind == "hold" else Release(rid)
        try:
            await svc.hand(ev)
        except ReaderError as e:
            svc.hub.send_to(client, {"type": "error", "error": "illegal_move", "detail": str(e)})

    # ------------------------------------------------------------------ pages
    @app.get("/", include_in_schema=False)
    async def root() -> RedirectResponse:
        return RedirectResponse("/console")

    for page, path in (("console", "/console"), ("referee", "/referee/{ch}"),
                       ("display", "/display/{ch}")):
        app.add_api_route(path, _page_handler(page), methods=["GET"], include_in_schema=False,
                          response_class=HTMLResponse)

    @app.get("/static/{name}", include_in_schema=False)
    async def static(name: str) -> Response:
        return _static(name)

    return app


def _page_handler(page: str) -> Any:
    async def handler() -> HTMLResponse:
        return HTMLResponse(_read_static(f"{page}.html"), headers={"Cache-Control": "no-cache"})

    return handler


_TYPES = {"js": "text/javascript", "css": "text/css", "html": "text/html", "svg": "image/svg+xml",
          "png": "image/png", "json": "application/json"}


# The pages' files, found from this module rather than with importlib.resources: an editable
# install made before api/ had an __init__.py maps `api` as a namespace package outside the
# source tree, and resources.files() cannot read a namespace package.
_STATIC = Path(__file__).resolve().parent / "static"


def _read_static(name: str) -> str:
    return (_STATIC / name).read_text("utf-8")


def _static(name: str) -> Response:
    if "/" in name or name.startswith("."):
        raise ApiError(404, "not_found", f"no static file {name!r}")
    f = _STATIC / name
    if not f.is_file():
        raise ApiError(404, "not_found", f"no static file {name!r}")
    ext = name.rsplit(".", 1)[-1]
    return Response(f.read_bytes(), media_type=_TYPES.get(ext, "application/octet-stream"),
                    headers={"Cache-Control": "no-cache"})


def _poem(no: int) -> dict[str, Any]:
    p = poem(no)
    return {"no": p.no, "author": p.author, "kami": p.kami, "shimo": p.shimo,
            "kami_kana": p.kami_kana, "shimo_kana": p.shimo_kana, "kami_yomi": p.kami_yomi,
            "shimo_yomi": p.shimo_yomi, "kimariji": p.kimariji, "color": p.color.value}


def _join_url(request: Request, svc: ChannelService) -> str:
    base = str(request.base_url).rstrip("/")
    return f"{base}/referee/{svc.name}?pin={svc.pin}"


def _qr_svg(text: str) -> bytes:
    import qrcode
    import qrcode.image.svg

    img = qrcode.make(text, image_factory=qrcode.image.svg.SvgPathImage, border=2)
    buf = io.BytesIO()
    img.save(buf)
    return buf.getvalue()


def _csv(timeline: list[dict[str, Any]]) -> str:
    cols = ["kind", "label", "card", "poem", "verse", "start_s", "end_s", "cut", "clip"]
    buf = io.StringIO()
    w = csv.DictWriter(buf, cols, extrasaction="ignore")
    w.writeheader()
    for row in timeline:
        w.writerow({k: row.get(k, "") for k in cols})
    return buf.getvalue()


def _origin_ok(ws: WebSocket, config: Config) -> bool:
    """Browsers always send Origin; accept our own host and configured origins. Non-browser
    clients (no Origin) are accepted: the token, not the origin, is what authorises them."""
    origin = ws.headers.get("origin")
    if origin is None:
        return True
    host = ws.headers.get("host", "")
    if origin in (f"http://{host}", f"https://{host}"):
        return True
    return origin in config.server.security.allowed_origins

