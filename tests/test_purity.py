"""reader/ is pure: a test parses every module and fails on a forbidden import or clock call."""

import ast
from pathlib import Path

FORBIDDEN_MODULES = {"asyncio", "threading", "concurrent", "multiprocessing", "sounddevice",
                     "pydub", "fastapi", "starlette", "uvicorn", "time", "datetime", "audio",
                     "api", "hall", "yomite", "desk", "socket", "subprocess"}
READER = Path(__file__).resolve().parent.parent / "reader"


def imports(path: Path) -> set[str]:
    found = set()
    for node in ast.walk(ast.parse(path.read_text("utf-8"))):
        if isinstance(node, ast.Import):
            found |= {a.name.split(".")[0] for a in node.names}
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            found.add(node.module.split(".")[0])
    return found


def test_reader_imports_nothing_forbidden():
    files = sorted(READER.rglob("*.py"))
    assert len(files) >= 8
    bad = {f.name: imports(f) & FORBIDDEN_MODULES for f in files}
    assert {k: v for k, v in bad.items() if v} == {}


def test_the_checker_catches_a_forbidden_import(tmp_path):
    f = tmp_path / "x.py"
    f.write_text("import asyncio\nfrom time import monotonic\nfrom .clip import Clip\n")
    assert imports(f) & FORBIDDEN_MODULES == {"asyncio", "time"}


DESK = READER.parent / "desk"
DESK_STORAGE = DESK / "repository"  # the one package that talks to the database
DESK_FORBIDDEN = FORBIDDEN_MODULES | {"sqlalchemy", "alembic", "os", "pathlib", "shutil",
                                      "sqlite3", "reader"}


def test_the_desk_is_pure_but_for_its_repository():
    files = sorted(f for f in DESK.rglob("*.py")
                   if DESK_STORAGE not in f.parents and DESK / "migrations" not in f.parents)
    assert len(files) >= 15
    bad = {f.name: imports(f) & DESK_FORBIDDEN for f in files}
    assert {k: v for k, v in bad.items() if v} == {}
    assert "sqlalchemy" in imports(DESK_STORAGE / "tables.py")
