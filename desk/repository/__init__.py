"""The desk's storage: SQLAlchemy 2 over SQLite by default (a file under var/, nothing to
install), or any database SQLAlchemy reaches by URL (PostgreSQL for an association with its
own server). The schema is Alembic's (desk/migrations), brought up to date when the database
is opened.

Every Change is one transaction: the tournament's version is raised only if it is still the
version the change was computed from (another process cannot slip a change in between), and
the change's rows are written with it. SQLite runs in WAL mode with synchronous=FULL: a commit
that returned is on disk, so `kill -9` (or a power cut) loses nothing that was answered.

The package's modules: tables (the schema and the conversions to rows), store (the
Repository), database (opening a URL, SQLite's pragmas, migrations), watch (how long a call may
wait on the database, and the connections cut when it waits longer).

Importing the package loads watch alone: the hall keeps a watch from its start, and SQLAlchemy
and Alembic (0.4 s of CPU) are loaded when the database is first opened, so the other names are
each loaded from their module at first use (PEP 562).
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

from ..errors import StorageError
from .watch import Abandoned, Attempt, Watch

if TYPE_CHECKING:
    from .database import MIGRATIONS, database_text, migrate, open_repository
    from .store import Repository, Summary
    from .tables import Base

__all__ = ["MIGRATIONS", "Abandoned", "Attempt", "Base", "Repository", "StorageError", "Summary",
           "Watch", "database_text", "migrate", "open_repository"]

_LOADED_LATER = {"MIGRATIONS": "database", "database_text": "database", "migrate": "database",
                 "open_repository": "database", "Repository": "store", "Summary": "store",
                 "Base": "tables"}


def __getattr__(name: str) -> Any:
    module = _LOADED_LATER.get(name)
    if module is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    value = getattr(importlib.import_module(f".{module}", __name__), name)
    globals()[name] = value
    return value
