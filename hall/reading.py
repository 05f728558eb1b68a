"""A channel's reading: its match (the engine), the voice it reads with, its journal and its
outputs. The channel's task (hall.runtime) hands it one item at a time: it applies the item to
the engine and carries out what the engine says (hall.playout), keeps the record
(hall.journalkeeper), renders ahead (hall.rendering), publishes the channel's state, and pauses
the match with `@fault` or `@journal` when something fails.
"""

from __future__ import annotations

import contextlib
import logging
from collections.abc import Callable
from concurrent.futures import Future
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from audio.config import VoiceConfig, voice_view
from audio.errors import AudioError
from audio.output.sink import Sink
from hall import playout
from hall.config import Config
from hall.inbox import AudioFault, Item, PrepareMatch, RenderGate
from hall.journalkeeper import JournalKeeper
from hall.matchplan import journal_header, journal_path, plan_match
from hall.matchview import MatchView
from hall.playout import PinnedClock, SinkClock, SpeakersLike
from hall.recovery import Over, RecoveryReport, Unreadable, journal_voice, latest_match
from hall.rendering import RenderAhead
from hall.states import ChannelState, MatchState
from hall.voices import Gained, VoiceFactory, VoiceLike, check_voice_covers
from reader.clip import Clip
from reader.clock import Clock, OffsetClock
from reader.commands import Command, StopAudio
from reader.engine import Engine
from reader.errors import ConfigError, IllegalMove, ReaderError
from reader.events import AUDIO_FAULT, FAULT, JOURNAL, RECOVERED, Event, Hold, event_name
from reader.programme import Phase
from reader.snapshot import Snapshot

log = logging.getLogger("yomite.runtime")

# phases in which nothing is being read and a new match may be prepared (and nothing is there
# to pause)
ENDED = (Phase.READY, Phase.FINISHED, Phase.CLOSED, Phase.ABORTED)


@dataclass(frozen=True, slots=True)
class Gate:
    """The answer to a RenderGate: done when a start's first clips are rendered (None: at
    once)."""

    future: Future[None] | None


class Reading:
    state: ChannelState  # the last published

    def __init__(
        self,
        name: str,
        config: Config,
        voice: VoiceLike,
        sink: Sink,
        *,
        clock: Clock | None = None,
        journal_dir: Path | None = None,
        on_publish: Callable[[ChannelState], None] | None = None,
        on_record: Callable[[dict[str, Any]], None] | None = None,
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
        self.device_voice = Gained(voice, volume_db)
        self.sink = sink
        self.rate = sink.rate
        self.clock: Clock = clock or SinkClock(sink)
        # the engine's clock: the output's, shifted for a match recovered from its journal
        self._match_clock: Clock = self.clock
        self._frame_offset = 0
        self.journal = JournalKeeper(name, Path(journal_dir or config.journal_dir) / name,
                                     self._republish)
        self.engine: Engine | None = None
        self._on_publish = on_publish or (lambda _s: None)
        self._on_record = on_record or (lambda _r: None)
        self._seq = 0
        self.audio_status = "ok"
        self.fault: str | None = None  # the last unforeseen failure, for the pages and health
        self.broken = False  # the engine could not even be paused: wait for a new match
        self._raising_journal_hold = False
        self._no_device: str | None = None
        self._view = MatchView()
        self._render = RenderAhead(name, self._republish)
        # told the clips of each match prepared or recovered (the hall pins them in the
        # render cache: hall.Hall._pin)
        self.pin_clips: Callable[[VoiceLike, list[Clip]], None] | None = None
        self.recovered: RecoveryReport | None = None
        self._publish_state(None)

    @property
    def journal_dir(self) -> Path:
        return self.journal.directory

    @property
    def journal_path(self) -> Path | None:
        return self.journal.path

    def no_device(self, reason: str) -> None:
        """The speakers could not be opened: the channel reads into nothing, and says so."""
        self.audio_status = "no_device"
        self._no_device = reason
        self._publish_state(self.state.match)

    @property
    def match_clock(self) -> Clock:
        """The engine's clock: the output's, shifted for a match recovered from its journal."""
        return self._match_clock

    @property
    def at_rest(self) -> bool:
        """No match, or one that is not being read (ready, finished, closed, aborted)."""
        return self.engine is None or self.engine.phase in ENDED

    def on_fault(self, e: BaseException, item: Item | None) -> str:
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
            if engine is not None and engine.phase not in ENDED:
                # raised where the engine last was: it needs nothing that may have failed
                engine.use_clock(PinnedClock(engine.now_s))
                try:
                    commands = engine.handle(Hold(FAULT, f"reader failed: {reason}"))
                finally:
                    engine.use_clock(self._match_clock)
                self.carry_out(commands)
            else:
                self._publish_state(MatchState(engine.snapshot()) if engine else None)
        except Exception as e2:
            # the engine cannot even be paused: silence, say so, and wait for a new match
            log.error("channel %s: cannot pause after the failure: %s", self.name, e2)
            self.broken = True
            with contextlib.suppress(Exception):
                self.sink.stop(self.sink.position())
            with contextlib.suppress(Exception):
                self._publish_state(self.state.match)
        return reason

    # ------------------------------------------------------------------ applying items
    def apply(self, item: Item) -> ChannelState | Gate:
        match item:
            case PrepareMatch():
                self._prepare(item)
            case RenderGate():
                return Gate(RenderAhead.gate(self.voice, self.engine))
            case AudioFault(reason=reason):
                self.audio_status = f"fault: {reason}"
                if self.engine is not None and self.engine.phase is not Phase.ABORTED:
                    self._event(Hold(AUDIO_FAULT, f"audio device: {reason}"))
                else:
                    self._publish_state(None)
            case _:
                if self.engine is None:
                    raise IllegalMove(event_name(item), "no match is prepared",
                                      "prepare a match first (POST .../match)")
                self._event(item)
        return self.state

    def _event(self, event: Event) -> None:
        assert self.engine is not None
        # the engine catches up with the clock first (its own journal record), then applies
        self.carry_out(self.engine.handle(event))

    def _prepare(self, p: PrepareMatch) -> None:
        if self.engine is not None and not self.broken and self.engine.phase not in ENDED:
            raise IllegalMove("prepare a new match", f"the match is {self.engine.phase.value}",
                              "abort it first" if self.engine.phase is not Phase.CLOSING
                              else "wait for the closing calls to end")
        plan = plan_match(p, self.config, colors=self.colors, deck_key=self.deck_key,
                          last=self.engine, last_voice=self.voice_config)
        voice = self._voice_for(plan.voice)
        check_voice_covers(voice, plan.deck)
        lead_ms = self.config.audio.schedule_lead_ms
        if self.speakers is not None:  # a page must fetch and decode the first clip
            lead_ms = max(lead_ms, self.config.server.speakers.lead_ms)
        lead = round(lead_ms * self.rate / 1000)
        # the timeline goes on from the last match's (one recovered after a restart runs
        # ahead of this process's clock): it never moves back, so a speaker page's estimate of
        # it stays true from one match to the next
        engine = Engine(match=plan.match, deck=plan.deck, voice=voice, clock=self._match_clock,
                        rate=self.rate, schedule_lead=lead, cards=plan.cards)
        header = journal_header(engine, channel=self.name, voice=plan.voice,
                                preset=self.preset if p.replay else p.preset)
        self.journal.begin(journal_path(self.journal.directory, plan.deck), header)
        self._use_voice(voice, plan.voice)
        self.header = header
        self.engine = engine
        if not p.replay:
            self.preset = p.preset
        self.recovered = None
        self.fault = None
        self.broken = False
        self._render_ahead(engine)
        self._publish_match(engine.snapshot())

    def _render_ahead(self, engine: Engine) -> None:
        """The match's clips pinned in the render cache and rendered ahead; the speaker pages
        told which to fetch first."""
        if self.pin_clips is not None:
            self.pin_clips(self.voice, list(dict.fromkeys(engine.upcoming_clips())))
        self._render.start(self.voice, engine)
        if self.speakers is not None:
            self.speakers.refresh(engine, self.voice)

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
        self.device_voice = Gained(voice, self.volume_db)

    def set_volume(self, volume_db: float) -> None:
        """The channel's volume: the device takes it from the next clip sent."""
        self.volume_db = volume_db
        self.device_voice = Gained(self.voice, volume_db)

    # ------------------------------------------------------------------ crash recovery
    def recover(self) -> RecoveryReport | None:
        """Bring back the channel's latest match from its journal (hall.recovery).

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
        latest = latest_match(self.journal.directory, self.name)
        if latest is None:
            if not self.journal.probe_dir():
                self._publish_state(None)
            return None
        if isinstance(latest, Unreadable | Over):
            self.recovered = latest.report()
            self._publish_state(None)
            return self.recovered
        path, contents, engine = latest.path, latest.contents, latest.engine
        voice_cfg = journal_voice(contents.header, self.config.voice, self.name)
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
        self.journal.adopt(path)  # cuts the torn line off, if it can write
        self.recovered = latest.report()
        try:
            if engine.phase not in ENDED:
                # after a second restart the journal holds this hand already: raising it
                # again changes nothing and publishes nothing, so the state is published
                # below whatever the engine said
                self._event(Hold(RECOVERED, "recovered after a restart"))
                self._render_ahead(engine)
            self._publish_match(engine.snapshot())
        except Exception as e:  # the hall starts whatever one channel's match does
            self.on_fault(e, None)
        log.info("channel %s: recovered %s (%d records, phase %s)", self.name, path,
                 len(contents.records), engine.phase.value)
        return self.recovered

    # ------------------------------------------------------------------ the journal
    def _hold_for_journal(self) -> None:
        """Pause the reading by `@journal`: it never goes on without its record."""
        engine = self.engine
        if engine is None or engine.phase in ENDED or self._raising_journal_hold:
            return
        self._raising_journal_hold = True
        try:
            self.carry_out(engine.handle(Hold(JOURNAL, "journal cannot be written: "
                                               f"{self.journal.why()}")))
        finally:
            self._raising_journal_hold = False

    def journal_records(self) -> list[dict[str, Any]]:
        """Every record of the current match: the file's, then those still waiting to be
        written. Reads the file: call it in a worker thread, not on the event loop."""
        return self.journal.records()

    def _record(self, entry: dict[str, Any]) -> bool:
        self._on_record(entry)
        return self.journal.record(entry)

    # ------------------------------------------------------------------ commands
    def carry_out(self, commands: list[Command]) -> None:
        # a stop reaches the speaker pages right after the hall's own output (playout stops
        # it first), before the journal's fsync and the state's fan-out to every page: a
        # page is silenced as soon as the device is, not after the viewers are told
        last_stop = max((i for i, c in enumerate(commands) if isinstance(c, StopAudio)),
                        default=-1)
        errors: list[Exception] = []
        if last_stop >= 0:
            try:
                playout.stop_first(commands, self.sink, self._frame_offset)
            except Exception as e:
                errors.append(e)
            try:
                if self.speakers is not None:
                    self.speakers.carry_out(commands[: last_stop + 1], self.engine, self.voice)
            except Exception as e:
                errors.append(e)
        try:
            playout.carry_out(commands, self.device_voice, self.sink, self._record,
                              self._publish_match, self._frame_offset, stopped=last_stop >= 0)
        finally:
            try:
                # then what comes after the batch's last stop (the clips, once journalled)
                if self.speakers is not None:
                    self.speakers.carry_out(commands[last_stop + 1:], self.engine, self.voice)
            finally:
                if not self.journal.ok:
                    self._hold_for_journal()
        if errors:
            raise errors[0]

    # ------------------------------------------------------------------ publication
    def _publish_match(self, snap: Snapshot) -> None:
        self._publish_state(self._view.of(snap, self.engine.deck.poems
                                          if self.engine is not None else None))

    def _republish(self) -> None:
        self._publish_state(self.state.match)

    def _publish_state(self, match: MatchState | None) -> None:
        self._seq += 1
        self.state = ChannelState(
            channel=self.name,
            seq=self._seq,
            audio=self.audio_status,
            journal=self.journal.status,
            fault=self.fault,
            no_device=self._no_device,
            recovered=self.recovered,
            render=self._render.progress,
            match=match,
            # the prepared match's voice and preset (the console shows and compares them)
            voice=voice_view(self.voice_config),
            preset=self.preset,
        )
        self._on_publish(self.state)
