"""A channel's journal as the runtime keeps it: the current match's file, whether it can be
written (`status`: "ok" or "fault: why"), trying again, and the records read back."""

from __future__ import annotations

import contextlib
import logging
from collections.abc import Callable
from pathlib import Path
from typing import Any

from hall.errors import JournalUnavailable
from reader.errors import JournalError
from reader.journal import JournalWriter, parse_lines

log = logging.getLogger("yomite.runtime")


class JournalKeeper:
    """The journal files of one channel, in `directory` (one file per match). A record that
    cannot be written is kept pending by the writer and the status says why; `on_restored`
    is called when every record is on disk again."""

    def __init__(self, channel: str, directory: Path, on_restored: Callable[[], None]) -> None:
        self.channel = channel
        self.directory = directory
        self.writer: JournalWriter | None = None
        self.path: Path | None = None
        self.status = "ok"
        self._on_restored = on_restored
        # a copy of every line, with its file's name, as it is written (a cluster's owner
        # sends them to the broker's stream: cluster.journalstream)
        self.tap: Callable[[str, dict[str, Any]], None] | None = None

    @property
    def ok(self) -> bool:
        return self.status == "ok"

    def trouble(self, why: str) -> None:
        if self.status == "ok":
            log.error("channel %s: the journal cannot be written (%s): the reading pauses "
                      "until it can", self.channel, why)
        self.status = f"fault: {why}"

    def why(self) -> str:
        return self.status.removeprefix("fault: ")

    def words(self) -> str:
        return (f"the journal cannot be written ({self.why()}); the reading is paused by "
                "@journal until it can")

    def writable(self) -> bool:
        """True when every record is on disk (trying the pending ones again first)."""
        if self.status == "ok":
            return True
        try:
            if self.writer is not None:
                self.writer.flush()
            else:
                self._probe()
        except JournalError:
            self.trouble(self.writer.fault if self.writer and self.writer.fault else "?")
            return False
        except OSError as e:
            self.trouble(f"{self.directory}: {e.strerror or e}")
            return False
        log.info("channel %s: the journal can be written again", self.channel)
        self.status = "ok"
        self._on_restored()
        return True

    def record(self, entry: dict[str, Any]) -> bool:
        """Append a record; False (and the status says why) if it cannot be written."""
        if self.writer is None:
            return True
        if self.tap is not None and self.path is not None:
            self.tap(self.path.name, entry)
        try:
            self.writer.append(entry)  # writes the records still pending first, in order
        except JournalError:
            self.trouble(self.writer.fault or "?")
            return False
        self.status = "ok"  # the publication that follows says so
        return True

    def begin(self, path: Path, header: dict[str, Any]) -> None:
        """Start a new match's journal with its header line, closing the last one; raises
        JournalUnavailable (the last one is kept) if the header cannot be written."""
        journal = JournalWriter(path)
        try:
            journal.append(header)
        except JournalError:
            # no half-made journal may become "the latest match" at the next start; the
            # channel is left as it was
            journal.close()
            with contextlib.suppress(OSError):
                path.unlink(missing_ok=True)
            self.trouble(journal.fault or "?")
            raise JournalUnavailable(self.words()) from None
        if self.writer is not None:
            if self.writer.pending or self.writer.lost:
                try:
                    self.writer.flush()
                except JournalError as e:
                    log.warning("channel %s: the last match's journal ends early (%s)",
                                self.channel, e)
            self.writer.close()
        self.writer, self.path = journal, path
        self.status = "ok"
        if self.tap is not None:
            self.tap(path.name, header)

    def adopt(self, path: Path) -> None:
        """Go on writing a recovered match's journal (cutting a torn last line off, if it
        can write)."""
        self.path = path
        self.writer = JournalWriter(path)
        if self.writer.fault:
            self.trouble(self.writer.fault)

    def probe_dir(self) -> bool:
        """False (and the status says why) if the journal folder cannot take a file."""
        try:
            self._probe()
        except OSError as e:
            self.trouble(f"{self.directory}: {e.strerror or e}")
            return False
        return True

    def _probe(self) -> None:
        probe = self.directory / ".yomite-probe"
        self.directory.mkdir(parents=True, exist_ok=True)
        probe.write_bytes(b"")
        probe.unlink()

    def records(self) -> list[dict[str, Any]]:
        """Every record of the current match: the file's, then those still waiting to be
        written. Reads the file: call it in a worker thread, not on the event loop."""
        if self.path is None:
            return []
        pending = list(self.writer.pending) if self.writer is not None else []
        try:
            contents = parse_lines(self.path.read_text("utf-8").splitlines(), str(self.path))
            records = list(contents.records)
        except (OSError, JournalError):
            records = []
        last = records[-1].get("seq", 0) if records else 0
        return records + [r for r in pending if r.get("type") == "event"
                          and r.get("seq", 0) > last]

    def close(self) -> None:
        if self.writer is not None:
            self.writer.close()
