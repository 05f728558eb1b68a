"""The match history of a channel (or of a closed room): every journal in its folder (today's
and earlier days', the versions before this one too), newest first, with the wall-clock start
of each, and each match's log and timeline as JSON or CSV."""

from __future__ import annotations

import asyncio
from dataclasses import dataclass
from datetime import datetime, timedelta
from pathlib import Path
from typing import Annotated, Any

from fastapi import APIRouter, Depends, Query, Request
from fastapi import Path as PathParam
from fastapi.responses import Response

from api.deps import Op, hall_of, no_such_channel, rooms_of
from api.errors import ApiError
from api.models import ERRORS, HistoryEntry
from api.routes.matches import LOG_RESPONSES, log_response
from hall.errors import RoomRefused
from reader.errors import JournalError
from reader.facts import CardRead, facts_of
from reader.journal import read_journal

router = APIRouter(tags=["history"], responses=ERRORS)

MATCH_ID = r"^[0-9]{8}T[0-9]{6}\.[0-9]{6}-seed[0-9]{1,16}$"


@dataclass(frozen=True, slots=True)
class Journals:
    """A channel's journals: an open channel's, or a closed room's (its history is read after
    it closed, by its organisation's operators and the admin)."""

    name: str
    folder: Path
    current: Path | None  # the match the channel is on (a closed room has none)


async def journals(ch: str, request: Request, p: Op) -> Journals:
    h = hall_of(request)
    svc = h.channels.get(ch)
    if svc is not None and svc.runtime is not None:  # (Op checked whose it is)
        return Journals(svc.name, svc.runtime.journal_dir, svc.runtime.journal_path)
    try:
        room = rooms_of(request).room(ch, p.org)
    except RoomRefused:
        raise no_such_channel(h, rooms_of(request), p, ch) from None
    return Journals(room.name, h.config.journal_dir / room.name, None)


Src = Annotated[Journals, Depends(journals)]


def _files(src: Journals) -> list[Path]:
    return sorted(src.folder.glob("*.jsonl"), reverse=True)


def summary(path: Path, current: Path | None) -> HistoryEntry:
    """One line of the history: when, which deck, how far it went."""
    base: dict[str, Any] = {"id": path.stem, "current": path == current}
    try:
        c = read_journal(path, replayable=False)
    except (JournalError, OSError, ValueError) as e:
        return HistoryEntry.model_validate({**base, "error": str(e)})
    h = c.header
    deck = h.get("deck", {})
    wall = h.get("wall")
    start = next((r for r in c.records if r.get("event", {}).get("type") in ("start", "bow")),
                 None)
    started_at = None
    if wall and start is not None:
        try:
            at = datetime.fromisoformat(wall) + timedelta(seconds=float(start["t"]) - float(h["t"]))
            started_at = at.isoformat()
        except (KeyError, TypeError, ValueError):
            started_at = None
    try:
        read = sum(isinstance(f, CardRead) for r in c.records for f in facts_of(r))
    except JournalError as e:
        return HistoryEntry.model_validate({**base, "error": str(e)})
    return HistoryEntry.model_validate({
        **base, "version": h.get("version"), "prepared_at": wall, "started_at": started_at,
        "seed": deck.get("seed"), "colors": deck.get("colors", []), "cards": h.get("cards"),
        "cards_read": read, "phase": c.records[-1].get("phase") if c.records else "ready",
        "records": len(c.records)})


# the most journals one call reads to find `limit` started matches among prepared-only ones
SCAN_MAX = 1000


@router.get("/api/channels/{ch}/matches", response_model=list[HistoryEntry])
async def history(src: Src,
                  limit: Annotated[int, Query(ge=1, le=500)] = 50,
                  started: Annotated[bool, Query(
                      description="only the matches that were started (and the current "
                                  "one): a match prepared and replaced before its start is "
                                  "left out")] = False) -> list[HistoryEntry]:
    """The channel's matches, newest first: `id`, `prepared_at` and `started_at` (wall
    clock, UTC), seed, colours, cards planned and read, the last phase, and which one is the
    current match."""
    current = src.current
    files = _files(src)

    def rows() -> list[HistoryEntry]:
        if not started:
            return [summary(f, current) for f in files[:limit]]
        out: list[HistoryEntry] = []
        for f in files[:SCAN_MAX]:
            e = summary(f, current)
            if e.started_at is not None or e.current or e.error is not None:
                out.append(e)
                if len(out) == limit:
                    break
        return out

    return await asyncio.to_thread(rows)


@router.get("/api/channels/{ch}/matches/{match}/log", response_model=None,
            responses=LOG_RESPONSES)
async def past_log(src: Src,
                   match: Annotated[str, PathParam(pattern=MATCH_ID, max_length=64)],
                   format: Annotated[str, Query(pattern="^(json|csv)$")] = "json"
                   ) -> Response | dict[str, Any]:
    """A past (or the current) match's journal and timeline, as JSON or CSV."""
    path = next((f for f in _files(src) if f.stem == match), None)
    if path is None:
        raise ApiError(404, "no_match", f"channel {src.name} has no match {match!r}",
                       "GET .../matches lists them")
    try:
        c = await asyncio.to_thread(read_journal, path, replayable=False)
    except (JournalError, OSError) as e:
        raise ApiError(422, "bad_journal", str(e), "the file is damaged") from None
    # formatting a long journal takes a while: never on the event loop
    return await asyncio.to_thread(log_response, f"{src.name}-{match}", c.header,
                                   list(c.records), int(c.header.get("rate", 48000)),
                                   str(path), format)
