"""The hall service: `create_app(config)` builds the FastAPI app; nothing is created at import.

The app is a table of contents: the lifespan (the hall: one runtime per channel), the error
handlers (`api.errors`) and the routers by concern (`api.routes`). Handlers validate, put an
item on the channel's inbox, and return the state it produced. Errors are JSON:
`{"error": code, "detail": what was wrong, "hint": what to do}`.
"""

from __future__ import annotations

import time
from collections.abc import AsyncIterator, Callable
from contextlib import AbstractAsyncContextManager, asynccontextmanager
from typing import TYPE_CHECKING, Any

from fastapi import FastAPI
from fastapi_offline import FastAPIOffline

from api.certs import Https
from api.deps import peers_of
from api.desk import routes as tournaments
from api.doors import Doors, hall_own
from api.errors import ApiError, install_handlers
from api.guards import AnonymousRate, BodyLimit, HostCheck, PeerCors, SecurityHeaders
from api.https import HttpsOnly
from api.routes import (
    clips,
    health,
    history,
    holds,
    matches,
    orgs,
    pages,
    preview,
    recording,
    referees,
    reference,
    rooms,
    speakers,
    trust,
    ws,
)
from api.routes import (
    cluster as cluster_routes,
)
from audio.config import VoiceConfig, VoiceEngine
from audio.output.sink import WallClock
from audio.voices.cachefolder import CacheFolder
from audio.voices.recording import MAX_UPLOAD_BYTES, RecordingPack
from hall.auth import Auth
from hall.config import Config
from hall.desk import Desk
from hall.gcpolicy import GcPolicy
from hall.hall import Hall
from hall.orgs import Orgs
from hall.rooms import Rooms
from hall.roomstore import FileBucket, OrgStore, RoomStore
from hall.sinks import SinkFactory, default_sink
from hall.voices import VoiceLike
from reader.clock import Clock

if TYPE_CHECKING:
    from audio.voices.renderpool import RenderPool

__all__ = ["ApiError", "create_app"]

DESCRIPTION = """The hall service of yomite, an automated reader for Goshiki Hyakunin Isshu
karuta: one reader per channel, referees' phones that stop the reading, projectors.

**Roles.** A viewer needs no token (read only; never sees a poem before its lower verse has
been read). A referee joins a channel with its PIN (`POST /api/channels/{ch}/referees`) and
gets a bearer token that raises and lowers only its own hand. The operator's token is printed
by `yomite serve` (or set in `server.security.operator_token`). Send it as
`Authorization: Bearer <token>`.

**Errors** are JSON `{"error": code, "detail": what was wrong, "hint": what to do}`: 401, 403,
404, 409 (an illegal move, naming the phase), 422, 429 (PIN guessing, with Retry-After), 503.

**A match**: prepare (`POST …/match`), the bow (`…/match/bow`, optional), start, (the
reading runs by itself), then after the planned cards `…/match/extra-card` (a tie) and
`…/match/close` (the end and move calls). Hands: `PUT`/`DELETE …/holds/{referee}`.

**The WebSocket** `/ws/channels/{ch}`: `hello`, then the full state at once and after every
change with a rising `seq`; send `{"type": "hold"}`, `{"type": "release"}`, `{"type":
"ping"}`. Its messages, both ways, are a JSON Schema at
[/api/ws-protocol.json](/api/ws-protocol.json).
"""

TAGS = [
    {"name": "matches", "description": "a channel's state and its match: a voice's preview, "
     "prepare, bow, start, extra card, close, abort, resume, the log"},
    {"name": "history", "description": "every match of a channel, and each one's log"},
    {"name": "holds", "description": "referees' hands (rule 10)"},
    {"name": "referees", "description": "joining with the PIN; the PIN, join links and QR"},
    {"name": "reference", "description": "health, poems, voices, devices, who a token is"},
    {"name": "organisations", "description": "the admin's organisations and their invite "
     "codes; a teacher redeems one for a token that operates its organisation's rooms"},
    {"name": "rooms", "description": "rooms opened on demand by an organisation's operators: "
     "their links and QR codes, the list, closing (docs/rooms.md)"},
]


def hall_voice(config: Config,
               folder: CacheFolder | None = None) -> tuple[VoiceLike, RenderPool | None]:
    """The configured voice, cached through `folder` (the server's render cache); rendered
    ahead in processes (`audio.render_workers`) when it is a real voice with a disk cache to
    share."""
    from audio.voices.factory import make_voice
    from audio.voices.renderpool import PooledVoice, RenderPool

    local = make_voice(config.voice, config.audio.rate, folder)
    workers = config.audio.render_workers
    if workers == 0 or local.cache_dir is None:
        return local, None
    pool = RenderPool(workers or 0)
    return PooledVoice(config.voice, config.audio.rate, pool, local), pool


def warm_routes(app: FastAPI) -> None:
    """Build every included router's routes now, at start-up. FastAPI (0.16x) builds them on
    the first request that reaches each router, generating its pydantic schemas: 50-80 ms on
    the event loop in the middle of a match (a hold waits meanwhile). Older versions built them
    when the router was included; there is nothing to do then."""
    for route in app.router.routes:
        for name in ("effective_candidates", "effective_low_priority_routes"):
            build = getattr(route, name, None)
            if callable(build):
                build()


def create_app(
    config: Config,
    *,
    voice: VoiceLike | None = None,
    make_sink: SinkFactory = default_sink,
    operator_token: str | None = None,
    on_ready: Callable[[Hall, str, bool], None] | None = None,
    listen: tuple[str, int] | None = None,
    cluster: Callable[[Hall], AbstractAsyncContextManager[Any]] | None = None,
    clock: Clock | None = None,
    doors: Doors | None = None,
    https: Https | None = None,
) -> FastAPI:
    """`listen`: the host and port the server is bound to (the join links' port); default
    the config's. `https`: how the server speaks to the network (api/certs.py; default plain
    http): the links it gives are https, and plain http from the network is redirected or
    refused (api/https.py). `cluster`: this process is one of a cluster's
    (cluster.service.joined): the hall starts no channel itself, the cluster starts those
    whose lease it takes. `clock`: what the rooms' idle time and the PIN waits are measured
    by (monotonic seconds; a test moves a `reader.clock.ManualClock` by hand). `doors`: the
    server's door (api.serverglue), told which tokens are the hall's own."""
    sec, refs = config.server.security, config.server.referees
    auth = Auth(operator_token or sec.operator_token, sec.pin_attempts_per_minute,
                store=config.journal_dir / "referees.jsonl",
                max_per_channel=refs.max_per_channel,
                pin_failures_per_channel_minute=sec.pin_failures_per_channel_minute,
                pin_failures_per_channel_hour=sec.pin_failures_per_channel_hour,
                keep_across_days=refs.keep_across_days,
                clock=clock.now if clock is not None else time.monotonic)
    own = hall_own(auth)
    if doors is not None:
        doors.hall_own = own

    @asynccontextmanager
    async def lifespan(app: FastAPI) -> AsyncIterator[None]:
        from audio.voices.factory import cache_folder, make_voice

        rate = config.audio.rate
        pool: RenderPool | None = None
        # the render cache's folder, under its bound (voice.cache_max_mb); its keeper starts
        # once the channels have pinned the clips of the matches they recovered
        folder = (None if config.voice.engine is VoiceEngine.ESTIMATE
                  else cache_folder(config.voice))
        v = voice
        if v is None:
            v, pool = hall_voice(config, folder)

        def voice_for(cfg: VoiceConfig) -> VoiceLike:
            """A match's own voice (the console's voice speed), rendered ahead like the
            configured one: in the pool's processes when there is a pool."""
            local = make_voice(cfg, rate, folder)
            if pool is None or local.cache_dir is None:
                return local
            from audio.voices.renderpool import PooledVoice

            return PooledVoice(cfg, rate, pool, local)

        hall = Hall(config, v, auth, make_sink, make_voice=voice_for, cache=folder)
        app.state.hall = hall
        await hall.start(own=cluster is None)
        member = cluster(hall) if cluster is not None else None
        if member is not None:
            try:
                app.state.cluster = await member.__aenter__()
            except BaseException:
                await hall.stop()
                raise
        if member is None:
            registry = Rooms(
                config, hall, Orgs(OrgStore(FileBucket(config.journal_dir / "orgs.jsonl")),
                                   auth, config.rooms),
                RoomStore(FileBucket(config.journal_dir / "rooms.jsonl")),
                clock or WallClock())
            await registry.start()  # the rooms open before a restart, their journals recovered
        else:  # the cluster's: organisations and rooms shared by its processes
            registry = await app.state.cluster.make_rooms(auth, clock or WallClock())
        app.state.rooms = registry
        if pool is not None:
            pool.start(config.voice, rate)
        desk = Desk(config, hall)  # after the hall: it matches rounds with channel journals
        app.state.desk = desk
        desk_watch = None
        try:
            await desk.start()
            if member is not None:  # the other processes' changes to the tournaments
                desk_watch = await app.state.cluster.watch_desk(desk.tournament_store)
        except BaseException:
            await registry.stop()
            if member is not None:
                await member.__aexit__(None, None, None)
            await hall.stop()
            if pool is not None:
                pool.close()
            if folder is not None:
                folder.close()
            raise
        if folder is not None:
            folder.start()
        # what start-up made lives as long as the server: the collector never walks it again,
        # and full collections wait for a moment when no match is being read (hall/gcpolicy)
        warm_routes(app)
        app.state.gc = GcPolicy(hall.at_rest)
        app.state.gc.start()
        hall.loop_watch.start()  # from here on a late wake-up is a request's (or a render's)
        if on_ready is not None:
            on_ready(hall, auth.operator_token, auth.generated)
        try:
            yield
        finally:
            await app.state.gc.stop()
            if desk_watch is not None:
                await desk_watch.stop()
            await desk.stop()
            await registry.stop()
            if member is not None:
                await member.__aexit__(None, None, None)
            await hall.stop()
            if pool is not None:
                pool.close()
            if folder is not None:
                folder.close()

    # the docs' Swagger UI assets come from the fastapi-offline package, served by this
    # server: a hall has no internet (FastAPI's own /docs loads them from a CDN). No ReDoc:
    # its bundle fetches a logo from its makers' CDN, which a hall cannot reach.
    app = FastAPIOffline(title="yomite", version="0.1.0", lifespan=lifespan,
                         description=DESCRIPTION, static_url="/static-offline-docs",
                         openapi_tags=TAGS, redoc_url=None)
    app.state.auth = auth
    app.state.config = config
    app.state.doors = doors
    app.state.recording = RecordingPack(config.voice.recording_pack, config.match)
    app.state.listen = listen or (config.server.host, config.server.port)
    app.state.https = https or Https("plain")
    install_handlers(app)
    app.include_router(tournaments.pages)  # before pages' /static/{name}: its strings
    for module in (health, cluster_routes, reference, trust, matches, preview, history, holds,
                   referees, speakers, clips, ws, recording, orgs, rooms, tournaments, pages):
        app.include_router(module.router)
    # the door, outermost last: a foreign Host, then an oversized body, are refused before
    # any route (or token check) sees the request
    app.add_middleware(SecurityHeaders, peers=lambda: (
        p.live if (p := peers_of(app)) is not None else []))
    app.add_middleware(PeerCors, known=lambda: (
        p.known if (p := peers_of(app)) is not None else set()))
    # (a recorded take, the desk's backup and entries are files: their routes check their
    # own, larger, limits as they read, and their 413 names the file, so the door lets one
    # byte more through)
    app.add_middleware(BodyLimit, max_bytes=config.server.limits.body_bytes,
                       larger={"/api/recording/slots/": MAX_UPLOAD_BYTES + 1,
                               tournaments.UPLOADS: config.desk.max_upload_kb * 1024 + 1})
    # anonymous GETs rate-limited per address before any route does their work
    app.add_middleware(AnonymousRate, config=config, hall_own=own)
    if app.state.https.tls:  # plain http from the network: the CA, redirects, refusals
        app.add_middleware(HttpsOnly)
    app.add_middleware(HostCheck, config=config)
    return app
