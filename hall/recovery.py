"""Crash recovery: what a channel's latest journal gives back at a start (a match under way, one
that is over, or a journal that cannot be read), and the voice it was read with."""

from __future__ import annotations

import logging
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from audio.config import VoiceConfig
from hall.wire import OMIT_NONE
from reader.engine import Engine
from reader.errors import JournalError
from reader.journal import JournalContents, read_journal, replay
from reader.programme import Phase

log = logging.getLogger("yomite.runtime")

# a finished match older than this at a restart is yesterday's: not brought back
RESTORE_FINISHED_S = 3600.0


@dataclass(frozen=True, slots=True)
class RecoveryReport:
    """What the state's `recovered` says of the latest journal at a start: the journal, and
    either why it could not be read, or its records, whether a torn last line was dropped
    and (a match not brought back) how it ended."""

    journal: str
    records: int | None = field(default=None, metadata=OMIT_NONE)
    torn_line_dropped: bool | None = field(default=None, metadata=OMIT_NONE)
    ended: Phase | None = field(default=None, metadata=OMIT_NONE)
    error: str | None = field(default=None, metadata=OMIT_NONE)


@dataclass(frozen=True, slots=True)
class Unreadable:
    """The latest journal cannot be read or replayed: the channel starts empty."""

    path: Path
    error: str

    def report(self) -> RecoveryReport:
        return RecoveryReport(str(self.path), error=self.error)


@dataclass(frozen=True, slots=True)
class Over:
    """The latest match is over (closed, aborted, or finished more than an hour ago): it is
    not brought back, and stays in the history."""

    path: Path
    records: int
    torn: bool
    phase: Phase

    def report(self) -> RecoveryReport:
        return RecoveryReport(str(self.path), self.records, self.torn, self.phase)


@dataclass(frozen=True, slots=True)
class Resumable:
    """The latest match comes back: under way (it is paused on return) or just finished."""

    path: Path
    contents: JournalContents
    engine: Engine

    def report(self) -> RecoveryReport:
        return RecoveryReport(str(self.path), len(self.contents.records),
                              self.contents.torn is not None)


Latest = Unreadable | Over | Resumable


def latest_match(directory: Path, channel: str) -> Latest | None:
    """The channel's latest match from its journal folder, or None if it has none. A torn
    last line (the crash cut a write short) is dropped and reported."""
    files = sorted(directory.glob("*.jsonl")) if directory.is_dir() else []
    if not files:
        return None
    path = files[-1]
    try:
        contents = read_journal(path)
        engine = replay(contents)
    except (JournalError, OSError, ValueError, KeyError) as e:
        log.error("channel %s: cannot recover the latest match: %s; starting empty", channel, e)
        return Unreadable(path, str(e))
    torn = contents.torn
    if torn is not None:
        log.warning("channel %s: dropped a torn last line of %s: %r", channel, path, torn[:200])
    age_s = time.time() - path.stat().st_mtime
    if engine.phase in (Phase.CLOSED, Phase.ABORTED) or (
            engine.phase is Phase.FINISHED and age_s > RESTORE_FINISHED_S):
        log.info("channel %s: the latest match (%s) is over (%s): starting with none",
                 channel, path.name, engine.phase.value)
        return Over(path, len(contents.records), torn is not None, engine.phase)
    return Resumable(path, contents, engine)


def journal_voice(header: dict[str, Any], configured: VoiceConfig, channel: str) -> VoiceConfig:
    """The voice a journal's match was read with (its header's), or the configured one if the
    header names none or an unusable one."""
    if isinstance(header.get("voice"), dict):
        try:
            return VoiceConfig.model_validate(header["voice"])
        except ValueError as e:
            log.error("channel %s: the journal's voice is unusable (%s); reading with the "
                      "configured one", channel, e)
    return configured
