"""The match journal: an append-only log, one JSON object a line, flushed and fsynced per record.

Line 1 is the engine's header (the match settings, the deck and its order); every later line is
one event the engine applied, with the clock time, the output frame and the facts it produced
(segments started, cuts, holds, clip lengths). Replaying the events through a fresh engine with
the recorded clip lengths rebuilds the exact state: the match history, the audit log and crash
recovery all stand on this.
"""

import json
import os
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import IO, Any

from .clip import Clip
from .clock import ManualClock
from .config import MatchConfig
from .deck import Deck
from .engine import JOURNAL_VERSION, Engine
from .errors import JournalError
from .events import event_from_dict
from .poems import Color


class JournalWriter:
    """Appends records durably: each line is written, flushed and fsynced before returning."""

    def __init__(self, path: str | os.PathLike[str]) -> None:
        self.path = Path(path)
        self.path.parent.mkdir(parents=True, exist_ok=True)
        self._f: IO[str] | None = open(self.path, "a", encoding="utf-8")  # noqa: SIM115

    def append(self, entry: dict[str, Any]) -> None:
        if self._f is None:
            raise JournalError(f"{self.path}: journal is closed")
        self._f.write(json.dumps(entry, ensure_ascii=False, separators=(",", ":")) + "\n")
        self._f.flush()
        os.fsync(self._f.fileno())

    def close(self) -> None:
        if self._f is not None:
            self._f.close()
            self._f = None


@dataclass(frozen=True, slots=True)
class JournalContents:
    header: dict[str, Any]
    records: tuple[dict[str, Any], ...]
    torn: str | None  # the text of a last line cut short by a crash, dropped


def parse_lines(lines: Iterable[str], source: str = "journal", *,
                replayable: bool = True) -> JournalContents:
    """The header and records of a journal. `replayable=False` reads a journal of any version
    (its log, for the match history) without promising that it can be replayed."""
    rows: list[str] = [ln for ln in lines if ln.strip()]
    parsed: list[dict[str, Any]] = []
    torn: str | None = None
    for i, line in enumerate(rows):
        try:
            obj = json.loads(line)
            if not isinstance(obj, dict):
                raise ValueError("not an object")
        except ValueError as e:
            if i == len(rows) - 1:
                torn = line  # the crash cut the last write short: drop it, report it
                break
            raise JournalError(f"{source}: line {i + 1} is not valid JSON ({e})") from None
        parsed.append(obj)
    if not parsed or parsed[0].get("type") != "header":
        raise JournalError(f"{source}: the first line must be the match header")
    version = parsed[0].get("version")
    if replayable and version != JOURNAL_VERSION:
        raise JournalError(f"{source}: {_version_words(version)}")
    return JournalContents(parsed[0], tuple(parsed[1:]), torn)


def _version_words(version: Any) -> str:
    if version == 1:
        return ("journal version 1 was written by an earlier yomite (before the bow, extra-card "
                f"and closing calls of rules 1, 16 and 18) and cannot be replayed by this one "
                f"(version {JOURNAL_VERSION}): its match is not recovered; its log can still "
                "be read")
    return (f"journal version {version!r} is not one this yomite can replay (version "
            f"{JOURNAL_VERSION})")


def read_journal(path: str | os.PathLike[str], *, replayable: bool = True) -> JournalContents:
    p = Path(path)
    return parse_lines(p.read_text("utf-8").splitlines(), str(p), replayable=replayable)


def repair(path: str | os.PathLike[str]) -> str | None:
    """Cut a torn last line off the file (so appending can go on); return what was cut."""
    p = Path(path)
    data = p.read_bytes()
    contents = read_journal(p)
    if contents.torn is None:
        if data and not data.endswith(b"\n"):
            p.write_bytes(data + b"\n")
        return None
    keep = data[: data.rstrip(b"\n").rfind(b"\n") + 1]
    with open(p, "r+b") as f:
        f.truncate(len(keep))
        f.flush()
        os.fsync(f.fileno())
    return contents.torn


class RecordedDurations:
    """The clip lengths a journal recorded: replay never needs the voice that rendered them."""

    def __init__(self, frames: dict[str, int]) -> None:
        self._frames = frames

    def frames(self, clip: Clip) -> int:
        try:
            return self._frames[clip.key]
        except KeyError:
            raise JournalError(f"the journal has no length for clip {clip.key}") from None


def engine_from_header(header: dict[str, Any], voice: Any, clock: Any) -> Engine:
    d = header["deck"]
    deck = Deck(
        poems=tuple(d["poems"]),
        colors=tuple(Color(c) for c in d["colors"]),
        seed=int(d["seed"]),
        order=tuple(d["order"]),
    )
    return Engine(
        match=MatchConfig.model_validate(header["match"]),
        deck=deck,
        voice=voice,
        clock=clock,
        rate=int(header["rate"]),
        cards=int(header["cards"]),
        schedule_lead=int(header.get("schedule_lead", 0)),
    )


def recorded_durations(records: Iterable[dict[str, Any]]) -> RecordedDurations:
    frames: dict[str, int] = {}
    for r in records:
        for f in r.get("facts", ()):
            if f.get("fact") == "clip":
                frames[f["key"]] = int(f["frames"])
    return RecordedDurations(frames)


def replay_steps(contents: JournalContents) -> Iterator[Engine]:
    """Rebuild the engine and apply each recorded event; yields the engine after each one."""
    clock = ManualClock(float(contents.header["t"]))
    engine = engine_from_header(contents.header, recorded_durations(contents.records), clock)
    for r in contents.records:
        clock.set(max(clock.now(), float(r["t"])))
        engine.handle(event_from_dict(r["event"]))
        yield engine


def replay(contents: JournalContents) -> Engine:
    last: Engine | None = None
    for last in replay_steps(contents):  # noqa: B007 - the last engine is the result
        pass
    if last is None:
        clock = ManualClock(float(contents.header["t"]))
        last = engine_from_header(contents.header, RecordedDurations({}), clock)
    return last
