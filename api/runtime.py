"""The runtime of one channel (one reader, one output): the task that drives the engine.

One inbox, one task: every REST call, WebSocket message, audio fault and timer becomes an item on
the inbox and is applied in order, so two referees pressing stop at once need no locks. The task
waits for the next item or the engine's next deadline, whichever comes first, then carries out
the engine's commands: silence first, then the journal line (durable before anything new is
heard), then the clips, then publication.

Nothing an item raises ends the task: an illegal move is answered, and anything unforeseen (a
voice that cannot say a clip, a bug) pauses the channel with yomite's own `@fault` hold and
its reason. A journal that cannot be written pauses it with `@journal`: the reading never goes
on without its record. When the task ends (shutdown), every request still waiting is answered.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any, Protocol, assert_never

import numpy as np

from audio.device import DeviceSink
from audio.errors import AudioError
from audio.sink import DeviceFault, Sink, SinkEvent
from reader.clip import Clip
from reader.clock import Clock, OffsetClock
from reader.commands import Command, PlayClip, Publish, Record, StopAudio
from reader.config import Config, MatchConfig, with_match_overrides
from reader.deck import Deck
from reader.engine import Engine
from reader.errors import BadDeck, IllegalMove, JournalError, ReaderError
from reader.events import (
    AUDIO_FAULT,
    FAULT,
    JOURNAL,
    RECOVERED,
    Abort,
    Bow,
    ClearHolds,
    Close,
    Event,
    ExtraCard,
    Hold,
    Release,
    Start,
    Tick,
    event_name,
)
from reader.journal import JournalWriter, parse_lines, read_journal, replay
from reader.programme import Phase
from reader.snapshot import Snapshot

log = logging.getLogger("yomite.runtime")

# phases in which nothing is being read and a new match may be prepared
ENDED = (Phase.READY, Phase.FINISHED, Phase.CLOSED, Phase.ABORTED)


class VoiceLike(Protocol):
    def lacks(self, poems: list[int]) -> list[int]: ...
    def frames(self, clip: Clip) -> int: ...
    def pcm(self, clip: Clip) -> np.ndarray: ...
    def prefetch(self, clips: list[Clip], progress: Any = None) -> Any: ...


@dataclass(frozen=True, slots=True)
class PrepareMatch:
    colors: tuple[str, ...] = ()
    poems: tuple[int, ...] = ()
    seed: int | None = None
    overrides: dict[str, Any] = field(default_factory=dict)


@dataclass(frozen=True, slots=True)
class AudioFault:
    reason: str


Item = PrepareMatch | AudioFault | Event

# phases with nothing to pause
_AT_REST = ENDED
# moves that take the reading forward: refused while the journal cannot record them (a new
# match is not: it has a journal of its own)
_FORWARD = (Bow, Start, ExtraCard, Close, ClearHolds)
# what a journal failure during an item does not make a failure of that item: a hand, an
# abort, the passing of time (their effect, a stop, never waits for the journal)
_STOPS = (Hold, Release, Abort, Tick, AudioFault)


class ChannelFault(Exception):
    """Applying an item failed in a way no rule foresaw (a voice that cannot say a clip): the
    channel is paused by `@fault` and the message says why."""


class ChannelStopped(Exception):
    """The channel's task has ended (the server is shutting down): nothing more is applied."""


class JournalUnavailable(Exception):
    """The journal cannot be written: the move is refused (or paused) until it can."""


def carry_out(
    commands: list[Command],
    voice: VoiceLike,
    sink: Sink,
    record: Callable[[dict[str, Any]], bool | None],
    publish: Callable[[Snapshot], None],
    frame_offset: int = 0,
) -> None:
    """Carry out engine commands: silence first, then the record, then the news.

    Every `StopAudio` first (a hold silences the output whatever else fails, and before any
    fsync), then the journal records in order, then the clips, then publication. A clip sent
    before the last stop of the batch is one that stop would forget (`Sink.stop`), so it is
    not sent. If a record cannot be written (`record` returns False or raises), no clip is
    sent: nothing new is heard that the journal does not hold. Every command is attempted;
    the first exception is raised at the end. `frame_offset` is the engine's frame minus the
    sink's (non-zero for a match recovered after a restart)."""
    stops: list[StopAudio] = []
    records: list[Record] = []
    plays: list[PlayClip] = []
    publishes: list[Publish] = []
    for c in commands:
        match c:
            case StopAudio():
                stops.append(c)
                plays.clear()
            case Record():
                records.append(c)
            case PlayClip():
                plays.append(c)
            case Publish():
                publishes.append(c)
            case _:
                assert_never(c)
    errors: list[Exception] = []
    for stop in stops:
        try:
            sink.stop(stop.at_frame - frame_offset)
        except Exception as e:
            errors.append(e)
    durable = True
    for r in records:
        try:
            durable = record(r.entry) is not False and durable
        except Exception as e:
            errors.append(e)
            durable = False
    for p in plays if durable else ():
        try:
            sink.play(voice.pcm(p.clip), p.at_frame - frame_offset, p.offset, p.segment)
        except Exception as e:
            errors.append(e)
    for pub in publishes:
        try:
            publish(pub.snapshot)
        except Exception as e:
            errors.append(e)
    if errors:
        raise errors[0]


class _PinnedClock:
    """A clock that stays at one time: a fault hold is raised where the engine last was, so
    raising it never needs what failed (the length of a clip not reached yet)."""

    def __init__(self, t: float) -> None:
        self._t = t

    def now(self) -> float:
        return self._t


def check_voice_covers(voice: VoiceLike, deck: Deck) -> None:
    """BadDeck (422) naming the deck's poems the voice cannot read (a partial pack)."""
    lacking = voice.lacks(list(deck.poems))
    if lacking:
        raise BadDeck(
            f"the voice pack lacks poems {', '.join(map(str, lacking))} of this deck: record "
            "them, choose a deck it covers, or set voice.pack_fallback: true (--pack-fallback "
            "on the command line)"
        )


class SinkClock:
    """The engine's clock on real audio: the output's own frame clock."""

    def __init__(self, sink: Sink) -> None:
        self._sink = sink

    def now(self) -> float:
        return self._sink.now()


class ChannelRuntime:
    def __init__(
        self,
        name: str,
        config: Config,
        voice: VoiceLike,
        sink: Sink,
        *,
        clock: Clock | None = None,
        journal_dir: Path | None = None,
        on_publish: Callable[[dict[str, Any]], None] | None = None,
        on_record: Callable[[dict[str, Any]], None] | None = None,
        clock_speed: float = 1.0,
    ) -> None:
        self.name = name
        self.config = config
        self.voice = voice
        self.sink = sink
        self.rate = sink.rate
        self.clock: Clock = clock or SinkClock(sink)
        # the engine's clock: the output's, shifted for a match recovered from its journal
        self._match_clock: Clock = self.clock
        self._frame_offset = 0
        self.journal_dir = Path(journal_dir or config.journal_dir) / name
        self.engine: Engine | None = None
        self.journal: JournalWriter | None = None
        self.journal_path: Path | None = None
        self._on_publish = on_publish or (lambda _s: None)
        self._on_record = on_record or (lambda _r: None)
        self._clock_speed = clock_speed  # clock seconds per loop second (dry runs run fast)
        self._inbox: asyncio.Queue[tuple[Item, asyncio.Future[Any] | None]] = asyncio.Queue()
        self._seq = 0
        self._state: dict[str, Any] = {}
        self._audio_status = "ok"
        self._journal_status = "ok"
        self.fault: str | None = None  # the last unforeseen failure, for the pages and health
        self._broken = False  # the engine could not even be paused: wait for a new match
        self._raising_journal_hold = False
        self._current: asyncio.Future[Any] | None = None
        self._prefetch: asyncio.Future[Any] | None = None
        self._task: asyncio.Task[None] | None = None
        self.recovered: dict[str, Any] | None = None
        self._publish_state(None)

    # ------------------------------------------------------------------ the inbox
    async def submit(self, item: Item) -> dict[str, Any]:
        """Queue an item and wait until it has been applied; returns the channel state.
        Raises the ReaderError the engine raised (an illegal move, a bad deck), ChannelFault,
        JournalUnavailable, or ChannelStopped once the task has ended: never waits for ever."""
        if self._task is not None and self._task.done():
            raise ChannelStopped(f"channel {self.name} is stopped")
        fut: asyncio.Future[Any] = asyncio.get_running_loop().create_future()
        self._inbox.put_nowait((item, fut))
        result: dict[str, Any] = await fut
        return result

    def post(self, item: Item) -> None:
        """Queue an item without waiting (audio callbacks, dropped clients)."""
        if self._task is not None and self._task.done():
            return
        self._inbox.put_nowait((item, None))

    def start(self) -> asyncio.Task[None]:
        self.sink.set_listener(self._on_sink_event, asyncio.get_running_loop())
        self._task = asyncio.create_task(self.run(), name=f"channel-{self.name}")
        return self._task

    async def stop(self) -> None:
        if self._task is not None:
            self._task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._task
        if self.journal is not None:
            self.journal.close()

    def state(self) -> dict[str, Any]:
        return self._state

    @property
    def running(self) -> bool:
        return self._task is not None and not self._task.done()

    async def run(self) -> None:
        try:
            while True:
                item, fut = await self._next()
                self._current = fut
                try:
                    await self._handle(item, fut)
                except Exception as e:  # _handle answers everything itself; a bug must not
                    log.exception("channel %s: handling an item failed", self.name)  # end us
                    if fut is not None and not fut.done():
                        fut.set_exception(ChannelFault(f"{type(e).__name__}: {e}"))
                self._current = None
        finally:
            self._fail_pending(ChannelStopped(f"channel {self.name} stopped"))

    def _fail_pending(self, error: Exception) -> None:
        """Answer every request still waiting: the one being applied and the queued ones."""
        waiting = [self._current]
        while not self._inbox.empty():
            waiting.append(self._inbox.get_nowait()[1])
        for fut in waiting:
            if fut is not None and not fut.done():
                fut.set_exception(error)
        self._current = None

    async def _handle(self, item: Item, fut: asyncio.Future[Any] | None) -> None:
        def fail(e: BaseException) -> None:
            if fut is not None and not fut.done():
                fut.set_exception(e)

        if isinstance(item, ClearHolds) and isinstance(self.sink, DeviceSink) \
                and self.sink.faulted:
            # the operator resumes after an audio fault: the output must come back first
            try:
                await asyncio.to_thread(self.sink.reopen)
            except AudioError as e:
                fail(e)
                return
            self._audio_status = "ok"
        if isinstance(item, _FORWARD) and not self._journal_writable():
            fail(JournalUnavailable(self._journal_words()))
            return
        journal_ok = self._journal_status == "ok"
        try:
            result = self._apply(item)
        except ReaderError as e:
            fail(e)
            if self.engine is not None and not self._broken:
                try:
                    self._carry_out(self.engine.handle(Tick()))  # flush a kept catch-up
                except Exception as e2:
                    self._on_fault(e2, item)
            return
        except JournalUnavailable as e:
            fail(e)
            return
        except Exception as e:  # unforeseen: the reader pauses and says why, and goes on
            fail(ChannelFault(self._on_fault(e, item)))
            return
        if journal_ok and self._journal_status != "ok" and not isinstance(item, _STOPS):
            fail(JournalUnavailable(self._journal_words()))
            return
        if fut is not None and not fut.done():
            fut.set_result(result)

    def _on_fault(self, e: BaseException, item: Item | None) -> str:
        """Pause the channel by `@fault` after an unforeseen failure; returns the reason."""
        reason = f"{type(e).__name__}: {e}"
        if len(reason) > 300:
            reason = reason[:297] + "..."
        log.error("channel %s: %s failed: %s", self.name,
                  "planning" if item is None else event_name(item)
                  if not isinstance(item, PrepareMatch | AudioFault) else type(item).__name__,
                  reason, exc_info=None if isinstance(e, AudioError | ReaderError) else e)
        self.fault = reason
        engine = self.engine
        try:
            if engine is not None and engine.phase not in _AT_REST:
                # raised where the engine last was: it needs nothing that may have failed
                engine.use_clock(_PinnedClock(engine.now_s))
                try:
                    commands = engine.handle(Hold(FAULT, f"reader failed: {reason}"))
                finally:
                    engine.use_clock(self._match_clock)
                self._carry_out(commands)
            else:
                self._publish_state(engine.snapshot().to_dict() if engine else None)
        except Exception as e2:
            # the engine cannot even be paused: silence, say so, and wait for a new match
            log.error("channel %s: cannot pause after the failure: %s", self.name, e2)
            self._broken = True
            with contextlib.suppress(Exception):
                self.sink.stop(self.sink.position())
            with contextlib.suppress(Exception):
                self._publish_state(self._state.get("match"))
        return reason

    async def _next(self) -> tuple[Item, asyncio.Future[Any] | None]:
        failures = 0
        while True:
            try:
                deadline = (self.engine.next_deadline()
                            if self.engine is not None and not self._broken else None)
            except Exception as e:
                failures += 1
                self._on_fault(e, None)
                if failures > 1:  # paused, and still it cannot plan: wait for a new match
                    self._broken = True
                continue
            if deadline is None:
                return await self._inbox.get()
            delay = deadline - self._match_clock.now()
            if delay <= 0:
                return Tick(), None
            try:
                async with asyncio.timeout(max(delay / self._clock_speed, 0.001)):
                    return await self._inbox.get()
            except TimeoutError:
                continue  # re-read the clock: the device clock may lag the loop's

    # ------------------------------------------------------------------ applying items
    def _apply(self, item: Item) -> dict[str, Any]:
        match item:
            case PrepareMatch():
                self._prepare(item)
            case AudioFault(reason=reason):
                self._audio_status = f"fault: {reason}"
                if self.engine is not None and self.engine.phase is not Phase.ABORTED:
                    self._event(Hold(AUDIO_FAULT, f"audio device: {reason}"))
                else:
                    self._publish_state(None)
            case _:
                if self.engine is None:
                    raise IllegalMove(event_name(item), "no match is prepared",
                                      "prepare a match first (POST .../match)")
                self._event(item)
        return self._state

    def _event(self, event: Event) -> None:
        assert self.engine is not None
        # the engine catches up with the clock first (its own journal record), then applies
        self._carry_out(self.engine.handle(event))

    def _prepare(self, p: PrepareMatch) -> None:
        if self.engine is not None and not self._broken and self.engine.phase not in ENDED:
            raise IllegalMove("prepare a new match", f"the match is {self.engine.phase.value}",
                              "abort it first" if self.engine.phase is not Phase.CLOSING
                              else "wait for the closing calls to end")
        match_cfg: MatchConfig = self.config.match
        if p.overrides:
            match_cfg = with_match_overrides(match_cfg, p.overrides)
        colors = p.colors or (() if p.poems else match_cfg.colors)
        deck = Deck.build(colors=colors, poems=p.poems, seed=p.seed)
        check_voice_covers(self.voice, deck)
        lead = round(self.config.audio.schedule_lead_ms * self.rate / 1000)
        engine = Engine(match=match_cfg, deck=deck, voice=self.voice, clock=self.clock,
                        rate=self.rate, schedule_lead=lead)
        # named by UTC time to the microsecond: the newest match sorts last
        stamp = datetime.now(UTC).strftime("%Y%m%dT%H%M%S.%f")
        path = self.journal_dir / f"{stamp}-seed{deck.seed}.jsonl"
        journal = JournalWriter(path)
        header = engine.header()
        header["wall"] = datetime.now(UTC).isoformat()
        header["channel"] = self.name
        try:
            journal.append(header)
        except JournalError:
            # no half-made journal may become "the latest match" at the next start
            journal.close()
            with contextlib.suppress(OSError):
                path.unlink(missing_ok=True)
            self._journal_trouble(journal.fault or "?")
            raise JournalUnavailable(self._journal_words()) from None
        if self.journal is not None:
            if self.journal.pending or self.journal.lost:
                try:
                    self.journal.flush()
                except JournalError as e:
                    log.warning("channel %s: the last match's journal ends early (%s)",
                                self.name, e)
            self.journal.close()
        self.journal, self.journal_path = journal, path
        self._journal_status = "ok"
        self._frame_offset = 0
        self._match_clock = self.clock
        self.engine = engine
        self.recovered = None
        self.fault = None
        self._broken = False
        self._start_prefetch(engine)
        self._publish_state(engine.snapshot().to_dict())

    def _start_prefetch(self, engine: Engine) -> None:
        """Render the clips still to come in a worker thread (during the memorisation period)."""
        clips = list(dict.fromkeys(engine.upcoming_clips()))
        loop = asyncio.get_running_loop()
        self._prefetch = loop.run_in_executor(None, self.voice.prefetch, clips)
        self._prefetch.add_done_callback(self._prefetched)

    def _prefetched(self, fut: asyncio.Future[Any]) -> None:
        if not fut.cancelled() and fut.exception() is not None:
            # the clip will be rendered (and fail loudly) on demand; say why now
            log.error("channel %s: rendering ahead failed: %s", self.name, fut.exception())

    # ------------------------------------------------------------------ crash recovery
    def recover(self) -> dict[str, Any] | None:
        """Bring back the channel's latest match from its journal.

        A torn last line (the crash cut a write short) is dropped, reported, and cut off the
        file before anything is appended. A match that was under way comes back paused by
        yomite's own hold at the place of its last record (the countdown remainder, the cut
        card and verse, the holds that were up); the operator resumes it. A finished or
        aborted match comes back as it was. A journal that cannot be appended (a full disk,
        an immutable file) does not stop the start: the channel comes up flagged, paused by
        `@journal` if a match was under way.
        """
        files = sorted(self.journal_dir.glob("*.jsonl")) if self.journal_dir.is_dir() else []
        if not files:
            self._probe_journal_dir()
            return None
        path = files[-1]
        try:
            contents = read_journal(path)
            engine = replay(contents)
        except (JournalError, OSError, ValueError, KeyError) as e:
            log.error("channel %s: cannot recover the latest match: %s; starting empty",
                      self.name, e)
            self.recovered = {"journal": str(path), "error": str(e)}
            self._publish_state(None)
            return self.recovered
        torn = contents.torn
        if torn is not None:
            log.warning("channel %s: dropped a torn last line of %s: %r", self.name, path,
                        torn[:200])
        engine.use_voice(self.voice)
        # the new output clock starts again near 0: go on in the match's own timeline
        self._frame_offset = round(engine.now_s * self.rate) - round(self.clock.now() * self.rate)
        self._match_clock = OffsetClock(self.clock, self._frame_offset / self.rate)
        engine.use_clock(self._match_clock)
        self.engine = engine
        self.journal_path = path
        self.journal = JournalWriter(path)  # cuts the torn line off, if it can write
        if self.journal.fault:
            self._journal_trouble(self.journal.fault)
        self.recovered = {"journal": str(path), "records": len(contents.records),
                          "torn_line_dropped": torn is not None}
        try:
            if engine.phase not in ENDED:
                self._event(Hold(RECOVERED, "recovered after a restart"))
                self._start_prefetch(engine)
            else:
                self._publish_state(engine.snapshot().to_dict())
        except Exception as e:  # the hall starts whatever one channel's match does
            self._on_fault(e, None)
        log.info("channel %s: recovered %s (%d records, phase %s)", self.name, path,
                 len(contents.records), engine.phase.value)
        return self.recovered

    def _probe_journal_dir(self) -> None:
        """Flag the channel at start if its journal folder cannot take a file."""
        try:
            self._probe()
        except OSError as e:
            self._journal_trouble(f"{self.journal_dir}: {e.strerror or e}")
            self._publish_state(None)

    def _probe(self) -> None:
        probe = self.journal_dir / ".yomite-probe"
        self.journal_dir.mkdir(parents=True, exist_ok=True)
        probe.write_bytes(b"")
        probe.unlink()

    # ------------------------------------------------------------------ the journal
    def _journal_trouble(self, why: str) -> None:
        if self._journal_status == "ok":
            log.error("channel %s: the journal cannot be written (%s): the reading pauses "
                      "until it can", self.name, why)
        self._journal_status = f"fault: {why}"

    def _journal_words(self) -> str:
        why = self._journal_status.removeprefix("fault: ")
        return (f"the journal cannot be written ({why}); the reading is paused by @journal "
                "until it can")

    def _journal_writable(self) -> bool:
        """True when every record is on disk (trying the pending ones again first)."""
        if self._journal_status == "ok":
            return True
        try:
            if self.journal is not None:
                self.journal.flush()
            else:
                self._probe()
        except JournalError:
            self._journal_trouble(self.journal.fault if self.journal and self.journal.fault
                                  else "?")
            return False
        except OSError as e:
            self._journal_trouble(f"{self.journal_dir}: {e.strerror or e}")
            return False
        log.info("channel %s: the journal can be written again", self.name)
        self._journal_status = "ok"
        self._publish_state(self._state.get("match"))
        return True

    def _hold_for_journal(self) -> None:
        """Pause the reading by `@journal`: it never goes on without its record."""
        engine = self.engine
        if engine is None or engine.phase in _AT_REST or self._raising_journal_hold:
            return
        self._raising_journal_hold = True
        try:
            why = self._journal_status.removeprefix("fault: ")
            self._carry_out(engine.handle(Hold(JOURNAL, f"journal cannot be written: {why}")))
        finally:
            self._raising_journal_hold = False

    def journal_records(self) -> list[dict[str, Any]]:
        """Every record of the current match: the file's, then those still waiting to be
        written. Reads the file: call it in a worker thread, not on the event loop."""
        if self.journal_path is None:
            return []
        pending = list(self.journal.pending) if self.journal is not None else []
        try:
            contents = parse_lines(self.journal_path.read_text("utf-8").splitlines(),
                                   str(self.journal_path))
            records = list(contents.records)
        except (OSError, JournalError):
            records = []
        last = records[-1].get("seq", 0) if records else 0
        return records + [r for r in pending if r.get("type") == "event"
                          and r.get("seq", 0) > last]

    # ------------------------------------------------------------------ commands
    def _carry_out(self, commands: list[Command]) -> None:
        try:
            carry_out(commands, self.voice, self.sink, self._record, self._publish_match,
                      self._frame_offset)
        finally:
            if self._journal_status != "ok":
                self._hold_for_journal()

    def _record(self, entry: dict[str, Any]) -> bool:
        self._on_record(entry)
        if self.journal is None:
            return True
        try:
            self.journal.append(entry)  # writes the records still pending first, in order
        except JournalError:
            self._journal_trouble(self.journal.fault or "?")
            return False
        self._journal_status = "ok"  # the publication that follows says so
        return True

    def _publish_match(self, snap: Snapshot) -> None:
        self._publish_state(snap.to_dict())

    def _publish_state(self, match: dict[str, Any] | None) -> None:
        self._seq += 1
        self._state = {
            "channel": self.name,
            "seq": self._seq,
            "audio": self._audio_status,
            "journal": self._journal_status,
            "fault": self.fault,
            "recovered": self.recovered,
            "match": match,
        }
        self._on_publish(self._state)

    def _on_sink_event(self, ev: SinkEvent) -> None:
        if isinstance(ev, DeviceFault):
            self.post(AudioFault(ev.reason))
