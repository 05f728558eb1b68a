"""The hall service: `create_app(config)` builds the FastAPI app; nothing is created at import.

The app is a table of contents: the lifespan (the hall: one runtime per channel), the error
handlers (`api.errors`) and the routers by concern (`api.routes`). Handlers validate, put an
item on the channel's inbox, and return the state it produced. Errors are JSON:
`{"error": code, "detail": what was wrong, "hint": what to do}`.
"""

from __future__ import annotations

import gc
from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager
from typing import TYPE_CHECKING

from fastapi import FastAPI

from audio.recording import RecordingPack
from reader.config import Config

from .auth import Auth
from .errors import ApiError, install_handlers
from .hall import Hall, SinkFactory, default_sink
from .routes import holds, matches, pages, recording, referees, reference, ws
from .runtime import VoiceLike

if TYPE_CHECKING:
    from audio.renderpool import RenderPool

__all__ = ["ApiError", "create_app"]


def hall_voice(config: Config) -> tuple[VoiceLike, RenderPool | None]:
    """The configured voice; rendered ahead in processes (`audio.render_workers`) when it is
    a real voice with a disk cache to share."""
    from audio.renderpool import PooledVoice, RenderPool
    from audio.voice import make_voice

    local = make_voice(config.voice, config.audio.rate)
    workers = config.audio.render_workers
    if workers == 0 or local.cache_dir is None:
        return local, None
    pool = RenderPool(workers or 0)
    return PooledVoice(config.voice, config.audio.rate, pool, local), pool


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
        pool = None
        if v is None:
            v, pool = hall_voice(config)
        hall = Hall(config, v, auth, make_sink)
        app.state.hall = hall
        await hall.start()
        if pool is not None:
            pool.start(config.voice, config.audio.rate)
        # what start-up made lives as long as the server: keep the collector from scanning it
        # again (a full collection with 200 phones connected held the loop 47-93 ms)
        gc.collect()
        gc.freeze()
        hall.loop_watch.start()  # from here on a late wake-up is a request's (or a render's)
        if on_ready is not None:
            on_ready(hall, auth.operator_token, auth.generated)
        try:
            yield
        finally:
            await hall.stop()
            if pool is not None:
                pool.close()

    app = FastAPI(title="yomite", version="0.1.0", lifespan=lifespan,
                  description="The hall service of yomite, an automated karuta reader.")
    app.state.auth = auth
    app.state.config = config
    app.state.recording = RecordingPack(config.voice.recording_pack, config.match)
    install_handlers(app)
    for module in (reference, matches, holds, referees, ws, recording, pages):
        app.include_router(module.router)
    return app
