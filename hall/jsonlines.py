"""A file of JSON lines kept by appending (the referees, the rooms, the organisations): each
line is written whole and synced before it counts, or not at all, and the file is compacted by
writing it again beside itself and renaming."""

from __future__ import annotations

import contextlib
import json
import os
from collections.abc import Iterable
from pathlib import Path
from typing import Any


def append_line(path: Path, row: dict[str, Any]) -> None:
    """`row` as one more line of `path` (made, readable by this user only), synced; an
    OSError leaves the file as it was (never half a line)."""
    path.parent.mkdir(parents=True, exist_ok=True)
    data = (json.dumps(row, ensure_ascii=False) + "\n").encode()
    fd = os.open(path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o600)
    try:
        size = os.fstat(fd).st_size
        try:
            done = 0
            while done < len(data):
                done += os.write(fd, data[done:])
            os.fsync(fd)
        except OSError:
            with contextlib.suppress(OSError):
                os.ftruncate(fd, size)
            raise
    finally:
        os.close(fd)


def rewrite_lines(path: Path, rows: Iterable[dict[str, Any]]) -> None:
    """`path` written again with exactly `rows` (beside it, then renamed over it)."""
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_suffix(".tmp")
    tmp.write_text("".join(json.dumps(r, ensure_ascii=False) + "\n" for r in rows), "utf-8")
    os.replace(tmp, path)
