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

from reader.config import Config

from .auth import Auth
from .errors import ApiError, install_handlers
from .hall import Hall, SinkFactory, default_sink
from .routes import history, holds, matches, pages, referees, reference, ws
from .runtime import VoiceLike

__all__ = ["ApiError", "create_app"]


def create_app(
    config: Config,
    *,
    voice: VoiceLike | None = None,
    make_sink: SinkFactory = default_sink,
    operator_token: str | None = None,
    on_ready: Callable[[Hall, str, bool], None] | None = None,
    listen: tuple[str, int] | None = None,
) -> FastAPI:
    """`listen`: the host and port the server is bound to (the join links' port); default
    the config's."""
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
    app.state.listen = listen or (config.server.host, config.server.port)
    install_handlers(app)
    for module in (reference, matches, history, holds, referees, ws, pages):
        app.include_router(module.router)
    return app
