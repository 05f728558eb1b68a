"""The runtime of one channel (one reader, one output): the task that drives the engine.

One inbox, one task: every REST call, WebSocket message, audio fault and timer becomes an item on
the inbox and is applied in order, so two referees pressing stop at once need no locks. The task
waits for the next item or the engine's next deadline, whichever comes first, then carries out
the engine's commands: the journal line first (durable before anything is heard), then audio,
then publication.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import threading
import time
from collections.abc import Callable
from concurrent.futures import Future
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any, Protocol, assert_never

import numpy as np

from audio.errors import AudioError, VoiceError
from audio.sink import DeviceFault, Reopenable, Sink, SinkEvent
from reader.clip import Clip
from reader.clock import Clock, OffsetClock
from reader.commands import Command, PlayClip, Publish, Record, StopAudio
from reader.config import Config, MatchConfig, with_match_overrides
from reader.deck import Deck
from reader.engine import Engine
from reader.errors import BadDeck, IllegalMove, JournalError, ReaderError
from reader.events import (
    AUDIO_FAULT,
    RECOVERED,
    ClearHolds,
    Event,
    Hold,
    Start,
    Tick,
    event_name,
)
from reader.journal import JournalWriter, read_journal, repair, replay
from reader.programme import Phase
from reader.snapshot import Snapshot

log = logging.getLogger("yomite.runtime")

# phases in which nothing is being read and a new match may be prepared
ENDED = (Phase.READY, Phase.FINISHED, Phase.CLOSED, Phase.ABORTED)


class VoiceLike(Protocol):
    def lacks(self, poems: list[int]) -> list[int]: ...
    def frames(self, clip: Clip) -> int: ...
    def pcm(self, clip: Clip) -> np.ndarray: ...
    def prefetch(self, clips: list[Clip], progress: Any = None, *,
                 stop: threading.Event | None = None) -> Any: ...


@dataclass(frozen=True, slots=True)
class PrepareMatch:
    colors: tuple[str, ...] = ()
    poems: tuple[int, ...] = ()
    seed: int | None = None
    overrides: dict[str, Any] = field(default_factory=dict)


@dataclass(frozen=True, slots=True)
class AudioFault:
    reason: str


@dataclass(frozen=True, slots=True)
class RenderGate:
    """Internal, queued by `submit` before a start: which of the first clips are not rendered
    yet (seen in inbox order, so after a prepare sent just before the start)."""


Item = PrepareMatch | AudioFault | RenderGate | Event

# The clips a start needs at once: the first call, the one after it (sent one clip ahead), and
# the next (sent when the second starts, as soon as two seconds later when the bow call opens).
START_CLIPS = 3
START_RENDER_TIMEOUT_S = 60.0


def carry_out(
    commands: list[Command],
    voice: VoiceLike,
    sink: Sink,
    record: Callable[[dict[str, Any]], None],
    publish: Callable[[Snapshot], None],
    frame_offset: int = 0,
) -> None:
    """Carry out engine commands in order: journal, audio, publication. `frame_offset` is the
    engine's frame minus the sink's (non-zero for a match recovered after a restart)."""
    for c in commands:
        match c:
            case Record(entry=entry):
                record(entry)
            case PlayClip(clip=clip, at_frame=at, offset=off, segment=seg):
                sink.play(voice.pcm(clip), at - frame_offset, off, seg)
            case StopAudio(at_frame=at):
                sink.stop(at - frame_offset)
            case Publish(snapshot=snap):
                publish(snap)
            case _:
                assert_never(c)


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
        self.records: list[dict[str, Any]] = []
        self._on_publish = on_publish or (lambda _s: None)
        self._on_record = on_record or (lambda _r: None)
        self._clock_speed = clock_speed  # clock seconds per loop second (dry runs run fast)
        self._inbox: asyncio.Queue[tuple[Item, asyncio.Future[Any] | None]] = asyncio.Queue()
        self._seq = 0
        self._state: dict[str, Any] = {}
        self._audio_status = "ok"
        self._prefetch: asyncio.Future[Any] | None = None
        self._prefetch_stop: threading.Event | None = None
        self._render: dict[str, Any] | None = None  # render-ahead progress, in the state
        self._render_published = 0.0
        self._task: asyncio.Task[None] | None = None
        self.recovered: dict[str, Any] | None = None
        self._publish_state(None)

    # ------------------------------------------------------------------ the inbox
    async def submit(self, item: Item) -> dict[str, Any]:
        """Queue an item and wait until it has been applied; returns the channel state.
        Raises the ReaderError the engine raised (an illegal move, a bad deck).

        A start first waits (without holding the inbox or the event loop) until the call and
        the clip after it are rendered, so a start sent together with its prepare, on a cold
        cache, never cuts the call's head; a VoiceError if they cannot be rendered."""
        if isinstance(item, Start):
            gate = (await self._submit(RenderGate())).get("gate")
            if gate is not None:
                try:
                    async with asyncio.timeout(START_RENDER_TIMEOUT_S):
                        await asyncio.wrap_future(gate)
                except TimeoutError:
                    raise VoiceError(f"the first clips were not rendered in "
                                     f"{START_RENDER_TIMEOUT_S:.0f} s: the voice is too slow "
                                     "on this machine (render the deck ahead with "
                                     "`yomite voices render`)") from None
        return await self._submit(item)

    async def _submit(self, item: Item) -> dict[str, Any]:
        fut: asyncio.Future[Any] = asyncio.get_running_loop().create_future()
        self._inbox.put_nowait((item, fut))
        result: dict[str, Any] = await fut
        return result

    def post(self, item: Item) -> None:
        """Queue an item without waiting (audio callbacks, dropped clients)."""
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
        while True:
            item, fut = await self._next()
            if isinstance(item, ClearHolds) and isinstance(self.sink, Reopenable) \
                    and self.sink.faulted:
                # the operator resumes after an audio fault: the output must come back first
                try:
                    await asyncio.to_thread(self.sink.reopen)
                except AudioError as e:
                    if fut is not None and not fut.done():
                        fut.set_exception(e)
                    continue
                self._audio_status = "ok"
            try:
                result = self._apply(item)
            except ReaderError as e:
                if fut is not None and not fut.done():
                    fut.set_exception(e)
                if self.engine is not None:
                    self._carry_out(self.engine.handle(Tick()))  # flush a kept catch-up
                continue
            except Exception as e:  # a bug must not kill the reader: log, answer, go on
                log.exception("channel %s: applying %r failed", self.name, item)
                if fut is not None and not fut.done():
                    fut.set_exception(e)
                continue
            if fut is not None and not fut.done():
                fut.set_result(result)

    async def _next(self) -> tuple[Item, asyncio.Future[Any] | None]:
        while True:
            deadline = self.engine.next_deadline() if self.engine else None
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
            case RenderGate():
                return {"gate": self._start_gate()}
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
        if self.engine is not None and self.engine.phase not in ENDED:
            raise IllegalMove("prepare a new match", f"the match is {self.engine.phase.value}",
                              "abort it first" if self.engine.phase is not Phase.CLOSING
                              else "wait for the closing calls to end")
        match_cfg: MatchConfig = self.config.match
        if p.overrides:
            match_cfg = with_match_overrides(match_cfg, p.overrides)
        colors = p.colors or (() if p.poems else match_cfg.colors)
        deck = Deck.build(colors=colors, poems=p.poems, seed=p.seed)
        check_voice_covers(self.voice, deck)
        self._frame_offset = 0
        self._match_clock = self.clock
        lead = round(self.config.audio.schedule_lead_ms * self.rate / 1000)
        engine = Engine(match=match_cfg, deck=deck, voice=self.voice, clock=self.clock,
                        rate=self.rate, schedule_lead=lead)
        if self.journal is not None:
            self.journal.close()
        # named by UTC time to the microsecond: the newest match sorts last
        stamp = datetime.now(UTC).strftime("%Y%m%dT%H%M%S.%f")
        self.journal_path = self.journal_dir / f"{stamp}-seed{deck.seed}.jsonl"
        self.journal = JournalWriter(self.journal_path)
        header = engine.header()
        header["wall"] = datetime.now(UTC).isoformat()
        header["channel"] = self.name
        self.journal.append(header)
        self.engine = engine
        self.records = []
        self.recovered = None
        self._start_prefetch(engine)
        self._publish_state(engine.snapshot().to_dict())

    def _start_prefetch(self, engine: Engine) -> None:
        """Render the clips still to come, in reading order, from the moment the match is
        prepared (in the voice's render processes, or a worker thread); the state's `render`
        shows the progress."""
        if self._prefetch_stop is not None:
            self._prefetch_stop.set()  # the previous match's clips are no longer needed
        clips = list(dict.fromkeys(engine.upcoming_clips()))
        loop = asyncio.get_running_loop()
        stop = self._prefetch_stop = threading.Event()
        self._render = {"done": 0, "total": len(clips), "error": None}

        def progress(done: int, total: int, _clip: Clip) -> None:
            loop.call_soon_threadsafe(self._render_progress, stop, done, total, None)

        def run() -> Any:
            return self.voice.prefetch(clips, progress, stop=stop)

        self._prefetch = loop.run_in_executor(None, run)
        self._prefetch.add_done_callback(lambda f: self._prefetched(f, stop))

    def _prefetched(self, fut: asyncio.Future[Any], stop: threading.Event) -> None:
        if not fut.cancelled() and fut.exception() is not None:
            # the clip will be rendered (and fail loudly) on demand; say why now
            log.error("channel %s: rendering ahead failed: %s", self.name, fut.exception())
            r = self._render or {}
            self._render_progress(stop, r.get("done", 0), r.get("total", 0),
                                  str(fut.exception()))

    def _render_progress(self, stop: threading.Event, done: int, total: int,
                         error: str | None) -> None:
        if stop is not self._prefetch_stop:
            return  # a previous match's
        self._render = {"done": done, "total": total, "error": error}
        now = time.monotonic()
        if done == total or error or now - self._render_published >= 0.5:
            self._render_published = now
            self._publish_state(self._state.get("match"))

    def _start_gate(self) -> Future[None] | None:
        """A future that is done when the clips a start needs first are rendered, or None."""
        when_ready = getattr(self.voice, "when_ready", None)
        if self.engine is None or when_ready is None or self.engine.phase is not Phase.READY:
            return None
        gate: Future[None] | None = when_ready(self.engine.upcoming_clips()[:START_CLIPS])
        return gate

    # ------------------------------------------------------------------ crash recovery
    def recover(self) -> dict[str, Any] | None:
        """Bring back the channel's latest match from its journal.

        A torn last line (the crash cut a write short) is cut off and reported. A match that
        was under way comes back paused by yomite's own hold at the place of its last record
        (the countdown remainder, the cut card and verse, the holds that were up); the
        operator resumes it. A finished or aborted match comes back as it was.
        """
        files = sorted(self.journal_dir.glob("*.jsonl"))
        if not files:
            return None
        path = files[-1]
        try:
            torn = repair(path)
            contents = read_journal(path)
            engine = replay(contents)
        except (JournalError, OSError, ValueError, KeyError) as e:
            log.error("channel %s: cannot recover the latest match: %s; starting empty",
                      self.name, e)
            self.recovered = {"journal": str(path), "error": str(e)}
            self._publish_state(None)
            return self.recovered
        if torn is not None:
            log.warning("channel %s: dropped a torn last line of %s: %r", self.name, path,
                        torn[:200])
        engine.use_voice(self.voice)
        # the new output clock starts again near 0: go on in the match's own timeline
        self._frame_offset = round(engine.now_s * self.rate) - round(self.clock.now() * self.rate)
        self._match_clock = OffsetClock(self.clock, self._frame_offset / self.rate)
        engine.use_clock(self._match_clock)
        self.engine = engine
        self.records = list(contents.records)
        self.journal_path = path
        self.journal = JournalWriter(path)
        self.recovered = {"journal": str(path), "records": len(contents.records),
                          "torn_line_dropped": torn is not None}
        if engine.phase not in ENDED:
            self._event(Hold(RECOVERED, "recovered after a restart"))
            self._start_prefetch(engine)
        else:
            self._publish_state(engine.snapshot().to_dict())
        log.info("channel %s: recovered %s (%d records, phase %s)", self.name, path,
                 len(contents.records), engine.phase.value)
        return self.recovered

    # ------------------------------------------------------------------ commands
    def _carry_out(self, commands: list[Command]) -> None:
        carry_out(commands, self.voice, self.sink, self._record, self._publish_match,
                  self._frame_offset)

    def _record(self, entry: dict[str, Any]) -> None:
        if self.journal is not None:
            self.journal.append(entry)
        self.records.append(entry)
        self._on_record(entry)

    def _publish_match(self, snap: Snapshot) -> None:
        self._publish_state(snap.to_dict())

    def _publish_state(self, match: dict[str, Any] | None) -> None:
        self._seq += 1
        self._state = {
            "channel": self.name,
            "seq": self._seq,
            "audio": self._audio_status,
            "recovered": self.recovered,
            "render": self._render,
            "match": match,
        }
        self._on_publish(self._state)

    def _on_sink_event(self, ev: SinkEvent) -> None:
        if isinstance(ev, DeviceFault):
            self.post(AudioFault(ev.reason))
