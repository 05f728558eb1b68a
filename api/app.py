"""The hall service: `create_app(config)` builds the FastAPI app; nothing is created at import.

The app is a table of contents: the lifespan (the hall: one runtime per channel), the error
handlers (`api.errors`) and the routers by concern (`api.routes`). Handlers validate, put an
item on the channel's inbox, and return the state it produced. Errors are JSON:
`{"error": code, "detail": what was wrong, "hint": what to do}`.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager

from fastapi import FastAPI

from audio.recording import RecordingPack
from reader.config import Config

from .auth import Auth
from .desk import Desk
from .errors import ApiError, install_handlers
from .hall import Hall, SinkFactory, default_sink
from .routes import (
    clips,
    holds,
    matches,
    pages,
    recording,
    referees,
    reference,
    tournaments,
    ws,
)
from .runtime import VoiceLike

__all__ = ["ApiError", "create_app"]


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
        from audio.voice import make_voice

        rate = config.audio.rate
        v = voice if voice is not None else make_voice(config.voice, rate)
        # a match's own voice settings (the console's voice speed) go through the same factory
        hall = Hall(config, v, auth, make_sink, make_voice=lambda cfg: make_voice(cfg, rate))
        app.state.hall = hall
        await hall.start()
        desk = Desk(config, hall)  # after the hall: it matches rounds with channel journals
        app.state.desk = desk
        try:
            await desk.start()
        except BaseException:
            await hall.stop()
            raise
        if on_ready is not None:
            on_ready(hall, auth.operator_token, auth.generated)
        try:
            yield
        finally:
            await desk.stop()
            await hall.stop()

    app = FastAPI(title="yomite", version="0.1.0", lifespan=lifespan,
                  description="The hall service of yomite, an automated karuta reader.")
    app.state.auth = auth
    app.state.config = config
    app.state.recording = RecordingPack(config.voice.recording_pack, config.match)
    install_handlers(app)
    app.include_router(tournaments.pages)  # before pages' /static/{name}: its strings
    for module in (reference, matches, holds, referees, clips, ws, recording, tournaments,
                   pages):
        app.include_router(module.router)
    return app
