"""The desk's storage: SQLAlchemy 2 over SQLite by default (a file under var/, nothing to
install), or any database SQLAlchemy reaches by URL (PostgreSQL for an association with its
own server). The schema is Alembic's (desk/migrations), brought up to date when the database
is opened.

Every Change is one transaction: the tournament's version is raised only if it is still the
version the change was computed from (another process cannot slip a change in between), and
the change's rows are written with it. SQLite runs in WAL mode with synchronous=FULL: a commit
that returned is on disk, so `kill -9` (or a power cut) loses nothing that was answered.

The package's modules: tables (the schema and the conversions to rows), store (the
Repository), database (opening a URL, SQLite's pragmas, migrations).
"""

from ..errors import StorageError
from .database import MIGRATIONS, database_text, migrate, open_repository
from .store import Repository, Summary
from .tables import Base

__all__ = ["MIGRATIONS", "Base", "Repository", "StorageError", "Summary", "database_text",
           "migrate", "open_repository"]
