"""Every process's copy of every channel's journal, from the broker's stream.

A process reads the whole stream once at start and then each line as it is stored. For each
channel it keeps the latest match's lines in memory, and, for a channel it does not own,
writes them to its own `journal_dir/<channel>/` as the owner wrote them (the history and the
match log of any channel are served by any process). When it takes a channel's lease it first
waits until it has every line the stream holds for the channel (`caught_up`), then writes the
latest match's file from them exactly (`restore`), and the runtime recovers from that file.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
from pathlib import Path
from typing import Any

from nats.aio.msg import Msg
from nats.js.api import ConsumerConfig, DeliverPolicy
from nats.js.errors import NotFoundError

from cluster import journalline
from cluster.bus import Bus

log = logging.getLogger("yomite.cluster")


class JournalMirror:
    def __init__(self, bus: Bus, journal_dir: Path) -> None:
        self.bus = bus
        self.journal_dir = journal_dir
        self.owned: set[str] = set()  # channels whose file this process's runtime writes
        self.latest: dict[str, tuple[str, list[bytes]]] = {}  # channel: (file, lines)
        self.seen = 0  # the stream's sequence number of the last line read
        self._seen_changed = asyncio.Event()
        self._sub: Any = None
        self._resubscribing: asyncio.Task[None] | None = None

    async def start(self) -> None:
        self._sub = await self.bus.js.subscribe(
            self.bus.subjects.journal_all, ordered_consumer=True,
            deliver_policy=DeliverPolicy.ALL, cb=self._on_msg)
        self.bus.on_reconnect.append(self._again)

    async def _again(self) -> None:
        """The broker is back: read on from the line after the last one read (a restarted
        broker has forgotten the consumer; waiting for the ordered consumer to notice takes
        its heartbeat's seconds). Tried again until it is made (a broker cluster whose node
        was lost has no leader for the stream for seconds: the subscription fails meanwhile,
        and a mirror that gave up would never let this process take a channel again)."""
        if self._resubscribing is not None and not self._resubscribing.done():
            return
        self._resubscribing = asyncio.get_running_loop().create_task(self._resubscribe())

    async def _resubscribe(self) -> None:
        wait = 0.25
        while True:
            old, self._sub = self._sub, None
            if old is not None:
                with contextlib.suppress(Exception):
                    await old.unsubscribe()
            try:
                self._sub = await self.bus.js.subscribe(
                    self.bus.subjects.journal_all, ordered_consumer=True, cb=self._on_msg,
                    config=ConsumerConfig(deliver_policy=DeliverPolicy.BY_START_SEQUENCE,
                                          opt_start_seq=self.seen + 1))
                return
            except Exception as e:
                log.info("mirror: the journal not followed again yet (%s): again in %.1f s",
                         e, wait)
                await asyncio.sleep(wait)
                wait = min(wait * 2, 4.0)

    async def stop(self) -> None:
        if self._resubscribing is not None:
            self._resubscribing.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._resubscribing
        if self._sub is not None:
            try:
                await self._sub.unsubscribe()
            except Exception as e:
                log.debug("mirror: unsubscribing failed: %s", e)

    async def _on_msg(self, msg: Msg) -> None:
        if msg.metadata.sequence.stream <= self.seen:
            return  # read already (a subscription made again after the broker came back)
        channel = msg.subject.rsplit(".", 1)[-1]
        try:
            file, line = journalline.decode(self.bus, msg.subject, msg.data)
            if "/" in file or file.startswith(".") or not isinstance(line, dict):
                raise ValueError(f"bad file {file!r}")
        except (ValueError, KeyError, TypeError) as e:
            log.warning("mirror: a journal line for %s that is not ours: %s", channel, e)
        else:
            raw = json.dumps(line, ensure_ascii=False, separators=(",", ":")).encode("utf-8")
            first = line.get("type") == "header"
            known = self.latest.get(channel)
            if first or known is None or known[0] != file:
                self.latest[channel] = (file, [raw])
            else:
                known[1].append(raw)
            if channel not in self.owned:
                self._write(channel, file, raw, first)
        self.seen = max(self.seen, msg.metadata.sequence.stream)
        self._seen_changed.set()

    def _write(self, channel: str, file: str, raw: bytes, first: bool) -> None:
        folder = self.journal_dir / channel
        try:
            folder.mkdir(parents=True, exist_ok=True)
            with open(folder / file, "wb" if first else "ab") as f:
                f.write(raw + b"\n")
        except OSError as e:
            log.warning("mirror: cannot write %s/%s: %s", channel, file, e)

    async def caught_up(self, channel: str, timeout_s: float = 5.0) -> int:
        """Wait until every line the stream holds for `channel` has been read here; the
        stream's sequence number of its last line (0: none)."""
        try:
            last = await self.bus.js.get_last_msg(self.bus.subjects.stream,
                                                  self.bus.subjects.journal(channel))
            target = last.seq or 0
        except NotFoundError:
            return 0
        async with asyncio.timeout(timeout_s):
            while self.seen < target:
                self._seen_changed.clear()
                await self._seen_changed.wait()
        return target

    def restore(self, channel: str) -> Path | None:
        """Write the channel's latest match file as the stream has it (the runtime recovers
        from it); its path, or None if the stream holds no match of the channel."""
        known = self.latest.get(channel)
        if known is None:
            return None
        file, lines = known
        folder = self.journal_dir / channel
        folder.mkdir(parents=True, exist_ok=True)
        path = folder / file
        tmp = path.with_suffix(".restoring")
        with open(tmp, "wb") as f:
            f.write(b"".join(raw + b"\n" for raw in lines))
        tmp.replace(path)
        return path

    def set_aside(self, channel: str, path: Path) -> Path | None:
        """The channel was read here until a moment ago and is not any more (its lease lost):
        the lines its journal file here has that the stream does not (written while the
        broker was out of reach) are moved to `<file>.unshared` beside it, and the file is
        the stream's again (the lines the next owner writes are added to it here, as to any
        channel's). Returns the `.unshared` file, if there were such lines."""
        known = self.latest.get(channel)
        if known is None or known[0] != path.name:
            return None  # the stream has another match by now: the file is left as it is
        try:
            mine = path.read_bytes().splitlines()
        except OSError:
            return None
        stored = [json.loads(raw) for raw in known[1]]
        kept = 0
        for raw in mine:
            try:
                same = kept < len(stored) and json.loads(raw) == stored[kept]
            except ValueError:
                same = False
            if not same:
                break
            kept += 1
        if kept == len(mine):
            return None
        aside = path.with_name(path.name + ".unshared")
        try:
            with open(aside, "ab") as f:
                f.write(b"".join(raw + b"\n" for raw in mine[kept:]))
            self.restore(channel)
        except OSError as e:
            log.warning("mirror: %s's lines not in the stream not set aside: %s", channel, e)
            return None
        log.warning("channel %s: %d journal lines written here were not taken by the cluster's "
                    "journal: kept in %s", channel, len(mine) - kept, aside)
        return aside

    def header(self, channel: str) -> dict[str, Any] | None:
        known = self.latest.get(channel)
        if known is None:
            return None
        h: dict[str, Any] = json.loads(known[1][0])
        return h

    def file(self, channel: str) -> str | None:
        known = self.latest.get(channel)
        return known[0] if known is not None else None
