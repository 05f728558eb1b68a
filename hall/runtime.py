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
import threading
import time
from collections.abc import Callable
from concurrent.futures import Future
from dataclasses import asdict, dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any, Protocol, assert_never

import numpy as np

from audio.config import VOICE_MATCH_KEYS, VoiceConfig, with_voice_overrides
from audio.errors import AudioError, VoiceError
from audio.output.events import DeviceFault, SinkEvent
from audio.output.sink import Reopenable, Sink
from hall.config import Config
from reader.clip import Clip
from reader.clock import Clock, OffsetClock
from reader.commands import Command, PlayClip, Publish, Record, StopAudio
from reader.config import MatchConfig, merge_overrides, with_match_overrides
from reader.deck import Deck
from reader.engine import Engine
from reader.errors import BadDeck, ConfigError, IllegalMove, JournalError, ReaderError
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
from reader.kimariji import teaching
from reader.programme import Phase
from reader.snapshot import Snapshot

log = logging.getLogger("yomite.runtime")

# phases in which nothing is being read and a new match may be prepared
ENDED = (Phase.READY, Phase.FINISHED, Phase.CLOSED, Phase.ABORTED)
# a finished match older than this at a restart is yesterday's: not brought back
RESTORE_FINISHED_S = 3600.0


class VoiceLike(Protocol):
    def lacks(self, poems: list[int]) -> list[int]: ...
    def frames(self, clip: Clip) -> int: ...
    def pcm(self, clip: Clip) -> np.ndarray: ...
    def prefetch(self, clips: list[Clip], progress: Any = None, *,
                 stop: threading.Event | None = None) -> Any: ...


@dataclass(frozen=True, slots=True)
class PrepareMatch:
    """Prepare the next match: the deck (colours or poems, a seed or a new one), a preset,
    then per-match overrides of `match` and of the voice (config.VOICE_MATCH_KEYS) on top.
    `replay`: the last match again, deck, order, settings and voice (感想戦); nothing else
    may be given with it."""

    colors: tuple[str, ...] = ()
    poems: tuple[int, ...] = ()
    seed: int | None = None
    overrides: dict[str, Any] = field(default_factory=dict)
    voice: dict[str, Any] = field(default_factory=dict)
    preset: str | None = None
    replay: bool = False


VoiceFactory = Callable[[VoiceConfig], VoiceLike]


class SpeakersLike(Protocol):
    """The channel's browser speakers (hall.speaker.SpeakerFeed)."""

    def carry_out(self, commands: list[Command], engine: Engine | None,
                  voice: VoiceLike) -> None: ...
    def refresh(self, engine: Engine | None, voice: VoiceLike) -> None: ...


class Gained:
    """A voice whose samples are scaled by the channel's volume for the device (the speaker
    pages apply the volume themselves, to the same clips). Scaled copies are made off the
    audio thread, when a clip is sent, and the last few are kept."""

    def __init__(self, voice: VoiceLike, volume_db: float) -> None:
        self.voice = voice
        self.gain = 10 ** (volume_db / 20)
        self._scaled: dict[str, np.ndarray] = {}

    def frames(self, clip: Clip) -> int:
        return self.voice.frames(clip)

    def pcm(self, clip: Clip) -> np.ndarray:
        x = self.voice.pcm(clip)
        if self.gain == 1.0:
            return x
        hit = self._scaled.get(clip.key)
        if hit is None or hit.shape != x.shape:
            hit = (x * np.float32(self.gain)).astype(np.float32)
            hit.flags.writeable = False
            if len(self._scaled) >= 8:
                self._scaled.pop(next(iter(self._scaled)))
            self._scaled[clip.key] = hit
        return hit

    def prefetch(self, clips: list[Clip], progress: Any = None, *,
                 stop: threading.Event | None = None) -> Any:
        return self.voice.prefetch(clips, progress, stop=stop)

    def lacks(self, poems: list[int]) -> list[int]:
        return self.voice.lacks(poems)


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
        voices: VoiceFactory | None = None,
        speakers: SpeakersLike | None = None,
        volume_db: float = 0.0,
        colors: tuple[str, ...] | None = None,
        deck_key: bytes | None = None,
    ) -> None:
        """`colors`: the channel's deck when a match names none (else match.colors).
        `deck_key`: the server's key of the reading orders (reader.deck.keyed_seed); None
        (the command line) shuffles by the seed alone."""
        self.name = name
        self.colors = colors
        self.deck_key = deck_key
        self.config = config
        self.voice = voice  # the current match's voice
        self.default_voice = voice
        self.voice_config: VoiceConfig = config.voice
        self.preset: str | None = None  # the prepared match's preset
        self.header: dict[str, Any] | None = None  # the journal's first line
        self._voices = voices
        self.speakers = speakers
        self.volume_db = volume_db
        self._device_voice = Gained(voice, volume_db)
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
        self._no_device: str | None = None
        self._prefetch: asyncio.Future[Any] | None = None
        self._teaching: tuple[Any, dict[str, Any]] | None = None
        self._prefetch_stop: threading.Event | None = None
        self._render: dict[str, Any] | None = None  # render-ahead progress, in the state
        self._render_published = 0.0
        self._task: asyncio.Task[None] | None = None
        self.recovered: dict[str, Any] | None = None
        self._publish_state(None)

    # ------------------------------------------------------------------ the inbox
    async def submit(self, item: Item) -> dict[str, Any]:
        """Queue an item and wait until it has been applied; returns the channel state.
        Raises the ReaderError the engine raised (an illegal move, a bad deck), ChannelFault,
        JournalUnavailable, or ChannelStopped once the task has ended: never waits for ever.

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

    def no_device(self, reason: str) -> None:
        """The speakers could not be opened: the channel reads into nothing, and says so."""
        self._audio_status = "no_device"
        self._no_device = reason
        self._publish_state(self._state.get("match"))

    @property
    def match_clock(self) -> Clock:
        """The engine's clock: the output's, shifted for a match recovered from its journal."""
        return self._match_clock

    @property
    def at_rest(self) -> bool:
        """No match, or one that is not being read (ready, finished, closed, aborted)."""
        return self.engine is None or self.engine.phase in ENDED

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

        if isinstance(item, ClearHolds) and isinstance(self.sink, Reopenable) \
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
        what = ("planning" if item is None
                else type(item).__name__ if isinstance(item, PrepareMatch | AudioFault | RenderGate)
                else event_name(item))
        log.error("channel %s: %s failed: %s", self.name, what, reason,
                  exc_info=None if isinstance(e, AudioError | ReaderError) else e)
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
        if self.engine is not None and not self._broken and self.engine.phase not in ENDED:
            raise IllegalMove("prepare a new match", f"the match is {self.engine.phase.value}",
                              "abort it first" if self.engine.phase is not Phase.CLOSING
                              else "wait for the closing calls to end")
        if p.replay:
            match_cfg, voice_cfg, deck, cards = self._replay_of_last(p)
        else:
            match_over: dict[str, Any] = {}
            voice_over: dict[str, Any] = {}
            if p.preset is not None:
                presets = self.config.all_presets()
                preset = presets.get(p.preset)
                if preset is None:
                    raise ConfigError(f"there is no preset {p.preset!r}; presets: "
                                      f"{', '.join(presets)}")
                match_over, voice_over = dict(preset.match), dict(preset.voice)
            match_over = merge_overrides(match_over, p.overrides)
            voice_over = {**voice_over, **p.voice}
            match_cfg = self.config.match
            if self.colors and "colors" not in match_over:
                # the channel's own deck: validated as the match's default deck (cards fit)
                match_cfg = with_match_overrides(match_cfg, {"colors": list(self.colors)})
            if match_over:
                match_cfg = with_match_overrides(match_cfg, match_over)
            voice_cfg = with_voice_overrides(self.config.voice, voice_over)
            colors = p.colors or (() if p.poems else match_cfg.colors)
            deck = Deck.build(colors=colors, poems=p.poems, seed=p.seed, key=self.deck_key)
            cards = None
        voice = self._voice_for(voice_cfg)
        check_voice_covers(voice, deck)
        lead_ms = self.config.audio.schedule_lead_ms
        if self.speakers is not None:  # a page must fetch and decode the first clip
            lead_ms = max(lead_ms, self.config.server.speakers.lead_ms)
        lead = round(lead_ms * self.rate / 1000)
        engine = Engine(match=match_cfg, deck=deck, voice=voice, clock=self.clock,
                        rate=self.rate, schedule_lead=lead, cards=cards)
        # named by UTC time to the microsecond: the newest match sorts last
        stamp = datetime.now(UTC).strftime("%Y%m%dT%H%M%S.%f")
        path = self.journal_dir / f"{stamp}-seed{deck.seed}.jsonl"
        journal = JournalWriter(path)
        header = engine.header()
        header["wall"] = datetime.now(UTC).isoformat()
        header["channel"] = self.name
        # the voice the match reads with, so that a recovered match reads with the same one
        header["voice"] = voice_cfg.model_dump(mode="json")
        header["preset"] = self.preset if p.replay else p.preset
        try:
            journal.append(header)
        except JournalError:
            # no half-made journal may become "the latest match" at the next start; the
            # channel is left as it was
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
        self._use_voice(voice, voice_cfg)
        self._frame_offset = 0
        self._match_clock = self.clock
        self.header = header
        self.engine = engine
        if not p.replay:
            self.preset = p.preset
        self.recovered = None
        self.fault = None
        self._broken = False
        self._start_prefetch(engine)
        if self.speakers is not None:
            self.speakers.refresh(engine, self.voice)
        self._publish_state(self._match_view(engine.snapshot()))

    def _replay_of_last(self, p: PrepareMatch
                        ) -> tuple[MatchConfig, VoiceConfig, Deck, int]:
        """The last match's settings, voice, deck and order (感想戦)."""
        if p.colors or p.poems or p.seed is not None or p.overrides or p.voice or p.preset:
            raise ConfigError("a replay reads the last match as it was: send no deck, seed, "
                              "preset or overrides with it")
        if self.engine is None:
            raise IllegalMove("replay the last match", "no match has been read on this channel",
                              "prepare and read a match first")
        e = self.engine
        return e.match, self.voice_config, e.deck, e.cards_planned

    def _voice_for(self, cfg: VoiceConfig) -> VoiceLike:
        """The voice for `cfg`: the hall's own for the configured voice, else the factory's
        (voices are cached by their settings)."""
        if cfg == self.config.voice or self._voices is None:
            if cfg != self.config.voice:
                raise ConfigError("this server cannot change the voice per match")
            return self.default_voice
        return self._voices(cfg)

    def _use_voice(self, voice: VoiceLike, cfg: VoiceConfig) -> None:
        self.voice = voice
        self.voice_config = cfg
        self._device_voice = Gained(voice, self.volume_db)

    def set_volume(self, volume_db: float) -> None:
        """The channel's volume: the device takes it from the next clip sent."""
        self.volume_db = volume_db
        self._device_voice = Gained(self.voice, volume_db)

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

        A torn last line (the crash cut a write short) is dropped, reported, and cut off the
        file before anything is appended. A match that was under way comes back paused by
        yomite's own hold at the place of its last record (the countdown remainder, the cut
        card and verse, the holds that were up); the operator resumes it. A match that is
        over (closed, aborted, or finished more than an hour ago: yesterday's) is not brought
        back: the channel starts with no match, and the journal stays in the history. A match
        finished just before the restart comes back as it was (an extra card or the closing
        calls may still follow). A journal that cannot be appended (a full disk, an immutable
        file) does not stop the start: the channel comes up flagged, paused by `@journal` if
        a match was under way.
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
        age_s = time.time() - path.stat().st_mtime
        if engine.phase in (Phase.CLOSED, Phase.ABORTED) or (
                engine.phase is Phase.FINISHED and age_s > RESTORE_FINISHED_S):
            self.recovered = {"journal": str(path), "records": len(contents.records),
                              "torn_line_dropped": torn is not None,
                              "ended": engine.phase.value}
            self._publish_state(None)
            log.info("channel %s: the latest match (%s) is over (%s): starting with none",
                     self.name, path.name, engine.phase.value)
            return self.recovered
        voice_cfg = self.config.voice
        if isinstance(contents.header.get("voice"), dict):
            try:
                voice_cfg = VoiceConfig.model_validate(contents.header["voice"])
            except ValueError as e:
                log.error("channel %s: the journal's voice is unusable (%s); reading with the "
                          "configured one", self.name, e)
        try:
            voice = self._voice_for(voice_cfg)
        except (ReaderError, AudioError) as e:
            log.error("channel %s: cannot make the journal's voice (%s); reading with the "
                      "configured one", self.name, e)
            voice_cfg, voice = self.config.voice, self.default_voice
        self._use_voice(voice, voice_cfg)
        self.preset = contents.header.get("preset")
        self.header = contents.header
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
                # after a second restart the journal holds this hand already: raising it
                # again changes nothing and publishes nothing, so the state is published
                # below whatever the engine said
                self._event(Hold(RECOVERED, "recovered after a restart"))
                self._start_prefetch(engine)
                if self.speakers is not None:
                    self.speakers.refresh(engine, self.voice)
            self._publish_state(self._match_view(engine.snapshot()))
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
            carry_out(commands, self._device_voice, self.sink, self._record,
                      self._publish_match, self._frame_offset)
        finally:
            try:
                # the speaker pages after the device: a stop silences the hall's own output
                # first
                if self.speakers is not None:
                    self.speakers.carry_out(commands, self.engine, self.voice)
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
        self._publish_state(self._match_view(snap))

    def _match_view(self, snap: Snapshot) -> dict[str, Any]:
        """The snapshot, with the kimariji of the cards read and of those still on the mats
        (recomputed when a card has been read)."""
        out = snap.to_dict()
        if self.engine is not None:
            read = tuple(c.poem for c in sorted(snap.cards, key=lambda c: c.n)
                         if c.finished_s is not None)
            key = (self.engine.deck.poems, read)
            if self._teaching is None or self._teaching[0] != key:
                t = teaching(self.engine.deck.poems, read)
                self._teaching = (key, {"read": [asdict(c) for c in t.read],
                                        "left": [asdict(c) for c in t.left]})
            out["kimariji"] = self._teaching[1]
        return out

    def _publish_state(self, match: dict[str, Any] | None) -> None:
        self._seq += 1
        self._state = {
            "channel": self.name,
            "seq": self._seq,
            "audio": self._audio_status,
            "journal": self._journal_status,
            "fault": self.fault,
            "no_device": self._no_device,
            "recovered": self.recovered,
            "render": self._render,
            "match": match,
            # the prepared match's voice and preset (the console shows and compares them)
            "voice": {k: getattr(self.voice_config, k) for k in VOICE_MATCH_KEYS},
            "preset": self.preset,
        }
        self._on_publish(self._state)

    def _on_sink_event(self, ev: SinkEvent) -> None:
        if isinstance(ev, DeviceFault):
            self.post(AudioFault(ev.reason))
