"""The match journal: an append-only log, one JSON object a line, flushed and fsynced per record.

Line 1 is the engine's header (the match settings, the deck and its order); every later line is
one event the engine applied, with the clock time, the output frame and the facts it produced
(segments started, cuts, holds, clip lengths: typed in reader.facts). Replaying the events
through a fresh engine with the recorded clip lengths rebuilds the exact state: the match
history, the audit log and crash recovery all stand on this.
"""

import contextlib
import json
import os
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from .clip import Clip
from .clock import ManualClock
from .config import MatchConfig
from .deck import Deck
from .engine import JOURNAL_VERSION, Engine
from .errors import JournalError
from .events import event_from_dict
from .facts import ClipLength, facts_of
from .poems import Color

# records kept in memory while the journal cannot be written (the reading is paused by then:
# only hands and aborts add records, at a bounded rate)
MAX_PENDING = 10000


class JournalWriter:
    """Appends records durably: each line goes to the file in one write and is fsynced before
    `append` returns.

    A record that cannot be written (a full disk, a file size limit, a read-only or immutable
    file or folder) is kept in `pending`, in order, and `append` raises JournalError saying
    why; the file is left as it was (a line written only in part is cut off again), so it
    always holds a prefix of the records, never a torn line in its middle. `flush()` tries
    again: when it succeeds every pending record is on disk, in order, and the journal is
    complete. Opening an existing file first cuts off a torn last line (a crash cut the last
    write short). The constructor never raises: a file that cannot be opened is `fault`, and
    is opened again by the next `append` or `flush`.
    """

    def __init__(self, path: str | os.PathLike[str]) -> None:
        self.path = Path(path)
        self.pending: list[dict[str, Any]] = []
        self.lost = 0
        self.fault: str | None = None
        self._fd: int | None = None
        self._size = 0
        self._closed = False
        try:
            self._open()
        except (OSError, JournalError) as e:
            self.fault = self._why(e) if isinstance(e, OSError) else str(e)

    def _why(self, e: OSError) -> str:
        return f"{self.path}: {e.strerror or e}"

    def _open(self) -> None:
        self.path.parent.mkdir(parents=True, exist_ok=True)
        fd = os.open(self.path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
        try:
            if os.fstat(fd).st_size:
                repair(self.path)
            self._size = os.fstat(fd).st_size
        except BaseException:
            os.close(fd)
            raise
        self._fd = fd

    def append(self, entry: dict[str, Any]) -> None:
        if self._closed:
            raise JournalError(f"{self.path}: journal is closed")
        if len(self.pending) >= MAX_PENDING:
            # memory is bounded too: past this the journal can never be completed again
            self.lost += 1
            raise JournalError(f"{self.path}: {self.lost} records lost while it could not "
                               "be written; a new match starts a new journal")
        self.pending.append(entry)
        self.flush()

    def flush(self) -> None:
        """Write every pending record, in order; JournalError (and they stay pending) if not.
        A journal that lost records is never written again: after a gap, replaying it would
        not rebuild the match, while the prefix on disk still does."""
        if self._closed:
            raise JournalError(f"{self.path}: journal is closed")
        if self.lost:
            raise JournalError(f"the journal cannot be completed: {self.lost} records were "
                               "lost; a new match starts a new journal")
        try:
            if self._fd is None:
                self._open()
            while self.pending:
                self._write(self.pending[0])
                self.pending.pop(0)
        except (OSError, JournalError) as e:
            # JournalError: a file whose content cannot be read back to be repaired
            self.fault = self._why(e) if isinstance(e, OSError) else str(e)
            raise JournalError(f"the journal cannot be written: {self.fault}") from None
        self.fault = None

    def _write(self, entry: dict[str, Any]) -> None:
        assert self._fd is not None
        data = (json.dumps(entry, ensure_ascii=False, separators=(",", ":")) + "\n").encode()
        done = 0
        try:
            while done < len(data):
                done += os.write(self._fd, data[done:])
            os.fsync(self._fd)
        except OSError:
            if done:  # a line written in part: cut it off, so the file stays a prefix
                with contextlib.suppress(OSError):
                    os.ftruncate(self._fd, self._size)
            raise
        self._size += len(data)

    def close(self) -> None:
        self._closed = True
        if self._fd is not None:
            with contextlib.suppress(OSError):
                os.close(self._fd)
            self._fd = None


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
            with open(p, "ab") as f:  # appended, never rewritten: a full disk loses nothing
                f.write(b"\n")
                f.flush()
                os.fsync(f.fileno())
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
        for f in facts_of(r):
            if isinstance(f, ClipLength):
                frames[f.key] = f.frames
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
