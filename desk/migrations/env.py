"""Alembic's environment for the desk: run on the connection `desk.repository.migrate` hands
over (the server's own engine), or on `sqlalchemy.url` from an alembic.ini for the command
line (`alembic -x url=... upgrade head` is not needed: the server migrates at start-up)."""

from __future__ import annotations

from alembic import context
from sqlalchemy import Connection, create_engine

from desk.repository import Base

config = context.config
target = Base.metadata


def run(connection: Connection) -> None:
    context.configure(connection=connection, target_metadata=target,
                      render_as_batch=connection.dialect.name == "sqlite")
    with context.begin_transaction():
        context.run_migrations()


conn = config.attributes.get("connection")
if conn is not None:
    run(conn)
else:
    url = config.get_main_option("sqlalchemy.url")
    if not url:
        raise SystemExit("set sqlalchemy.url, or let yomite migrate at start-up")
    with create_engine(url).connect() as c:
        run(c)
        c.commit()
