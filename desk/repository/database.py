"""Opening the desk's database: the URL, SQLite's pragmas, a PostgreSQL connection's limits and
its watch (desk.repository.watch), and Alembic's migrations brought up to date."""

from __future__ import annotations

import logging
from pathlib import Path
from typing import Any

from sqlalchemy import (
    Engine,
    create_engine,
    event,
    text,
)
from sqlalchemy.engine import make_url
from sqlalchemy.exc import ArgumentError, SQLAlchemyError

from ..errors import StorageError
from .store import Repository
from .watch import Watch

log = logging.getLogger("yomite.desk")

MIGRATIONS = Path(__file__).resolve().parent.parent / "migrations"
# PostgreSQL's advisory lock held while the schema is brought up to date: the processes of a
# cluster start together on one database, and two migrations at once would both create the
# tables (the second fails); the second waits, then finds the schema at the head
MIGRATION_LOCK = 0x796F6D69  # "yomi"


def _sqlite_pragmas(dbapi_connection: Any, _record: Any) -> None:
    cur = dbapi_connection.cursor()
    cur.execute("PRAGMA journal_mode=WAL")  # readers never wait for the writer
    cur.execute("PRAGMA synchronous=FULL")  # a commit that returned survives a power cut
    cur.execute("PRAGMA foreign_keys=ON")
    cur.execute("PRAGMA busy_timeout=5000")
    cur.close()


def migrate(engine: Engine, revision: str = "head") -> None:
    """Bring the schema to `revision` with the migrations shipped in this package."""
    # alembic says at INFO what it loads and does, a dozen lines at every start: only its
    # warnings belong in the hall's log
    logging.getLogger("alembic").setLevel(logging.WARNING)
    from alembic import command
    from alembic.config import Config as AlembicConfig

    cfg = AlembicConfig()
    cfg.set_main_option("script_location", str(MIGRATIONS))
    with engine.begin() as conn:
        if engine.dialect.name == "postgresql":
            conn.execute(text("SELECT pg_advisory_xact_lock(:k)"), {"k": MIGRATION_LOCK})
        cfg.attributes["connection"] = conn
        command.upgrade(cfg, revision)


def _watched(engine: Engine, watch: Watch) -> None:
    """Every PostgreSQL connection opened with the watch's limits, and its socket watched from
    its opening to its closing."""

    def do_connect(_dialect: Any, _record: Any, _cargs: Any, cparams: dict[str, Any]) -> None:
        watch.server_options(cparams)

    def connected(dbapi_connection: Any, _record: Any) -> None:
        watch.track(dbapi_connection)

    def closing(dbapi_connection: Any, *_rest: Any) -> None:
        watch.forget(dbapi_connection)

    event.listen(engine, "do_connect", do_connect)
    event.listen(engine, "connect", connected)
    for name in ("close", "close_detached", "detach"):
        event.listen(engine, name, closing)


def open_repository(url: str, *, run_migrations: bool = True,
                    watch: Watch | None = None) -> Repository:
    """Open (and create, for SQLite) the database at `url` and migrate it to the latest
    schema. Raises StorageError naming the URL's problem (never its password). `watch`: the
    calls' allowance and the connections' sockets (a default one if not given)."""
    watch = watch or Watch()
    try:
        u = make_url(url)
    except ArgumentError as e:
        raise StorageError(f"desk.database_url is not a database URL ({e})",
                           "e.g. sqlite:///var/desk.sqlite3 or "
                           "postgresql+psycopg://user@host/yomite") from None
    shown = u.render_as_string(hide_password=True)
    if u.get_backend_name() == "sqlite" and u.database and u.database != ":memory:":
        try:
            Path(u.database).parent.mkdir(parents=True, exist_ok=True)
        except OSError as e:
            raise StorageError(f"cannot make the folder of the desk's database {shown}: "
                               f"{e.strerror or e}",
                               "check desk.database_url and that the folder can be "
                               "written") from None
    try:
        engine = create_engine(u, pool_pre_ping=True)
    except (ArgumentError, ImportError) as e:
        raise StorageError(f"desk.database_url {shown}: {e}",
                           "install the database's driver, or use sqlite") from None
    if engine.dialect.name == "sqlite":
        event.listen(engine, "connect", _sqlite_pragmas)
    elif engine.dialect.name == "postgresql":
        _watched(engine, watch)
    try:
        if run_migrations:
            with watch.waiting():
                migrate(engine)
    except SQLAlchemyError as e:
        engine.dispose()
        watch.forget_all()
        # a server that does not answer (or refuses the connection) may answer in a moment:
        # the desk tries again (hall.deskstore); a URL, a password or a certificate wrong does
        # not mend itself, but is said the same way and tried again as cheaply
        raise StorageError(f"cannot open the desk's database {shown}: "
                           f"{str(e).splitlines()[0][:200]}",
                           "check desk.database_url and that the database is reachable",
                           code="storage_unreachable"
                           if engine.dialect.name != "sqlite" else None) from None
    log.info("desk database: %s", shown)
    return Repository(engine, watch)


def database_text(url: str) -> str:
    """The URL as it may be shown (password hidden)."""
    try:
        return make_url(url).render_as_string(hide_password=True)
    except ArgumentError:
        return "(not a URL)"
