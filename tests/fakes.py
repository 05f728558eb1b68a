"""Fakes for the pure engine's tests: a voice of known durations, a tape that records what a
schedule-keeping sink would sound, and a driver that moves a manual clock like the runtime."""

import zlib
from collections.abc import Iterable
from dataclasses import dataclass, field

from reader.clip import Clip
from reader.clock import ManualClock
from reader.commands import Command, PlayClip, Publish, Record, StopAudio
from reader.config import MatchConfig
from reader.deck import Deck
from reader.engine import Engine
from reader.events import Event, Tick

RATE = 48000


class FakeVoice:
    """Every clip has a distinct, known length (2.000..3.999 s, from a hash of its key)."""

    def __init__(self, rate: int = RATE) -> None:
        self.rate = rate
        self.asked: list[str] = []

    def frames(self, clip: Clip) -> int:
        self.asked.append(clip.key)
        return self.rate * 2 + zlib.crc32(clip.key.encode()) % (self.rate * 2)


@dataclass
class Piece:
    segment: int
    key: str
    start: int  # output frame of the first sample heard
    offset: int  # clip frame of the first sample heard
    end_offset: int  # clip frame after the last sample heard

    @property
    def end(self) -> int:
        return self.start + self.end_offset - self.offset


@dataclass
class Tape:
    """What a sample-exact sink would play, given the engine's audio commands."""

    voice: FakeVoice
    pieces: list[Piece] = field(default_factory=list)

    def apply(self, cmds: Iterable[Command]) -> None:
        for c in cmds:
            match c:
                case PlayClip(clip=clip, at_frame=at, offset=off, segment=seg):
                    n = self.voice.frames(clip)
                    self.pieces.append(Piece(seg, clip.key, at, off, n))
                case StopAudio(at_frame=t):
                    kept = []
                    for p in self.pieces:
                        if p.start >= t:
                            continue  # scheduled, never started
                        if p.end > t:
                            p.end_offset = p.offset + (t - p.start)
                        kept.append(p)
                    self.pieces = kept
                case Publish() | Record():
                    pass


@dataclass
class Run:
    engine: Engine
    clock: ManualClock
    voice: FakeVoice
    tape: Tape
    records: list[dict] = field(default_factory=list)
    snapshots: list = field(default_factory=list)
    commands: list[Command] = field(default_factory=list)

    def frame(self) -> int:
        return round(self.clock.now() * RATE)

    def send(self, event: Event) -> list[Command]:
        cmds = self.engine.handle(event)
        self._take(cmds)
        return cmds

    def _take(self, cmds: list[Command]) -> None:
        self.commands += cmds
        self.tape.apply(cmds)
        for c in cmds:
            if isinstance(c, Record):
                self.records.append(c.entry)
            elif isinstance(c, Publish):
                self.snapshots.append(c.snapshot)

    def run_until(self, frame: int | None = None) -> None:
        """Tick at every deadline up to `frame` (or until nothing is scheduled), then set the
        clock to `frame`."""
        while True:
            d = self.engine.next_deadline()
            if d is None:
                break
            df = round(d * RATE)
            if frame is not None and df > frame:
                break
            self.clock.set(max(self.clock.now(), d))
            self.send(Tick())
        if frame is not None and frame / RATE > self.clock.now():
            self.clock.set(frame / RATE)

    def at(self, frame: int, event: Event) -> list[Command]:
        self.run_until(frame)
        return self.send(event)


def make_run(match: MatchConfig | None = None, *, seed: int = 7, colors=("blue",),
             cards: int | None = None) -> Run:
    voice = FakeVoice()
    clock = ManualClock()
    engine = Engine(
        match=match or MatchConfig(),
        deck=Deck.build(colors=colors, seed=seed),
        voice=voice,
        clock=clock,
        rate=RATE,
        cards=cards,
    )
    return Run(engine, clock, voice, Tape(voice))


def short_match(**over) -> MatchConfig:
    """A small, fast programme for property tests (without the bow call unless asked: most
    tests start with the memorisation call)."""
    base = {"cards": 3, "memorise_s": 2.0, "bow_call": {"enabled": False},
            "gaps": {"after_bow_s": 0.8, "after_call_s": 0.5, "between_verses_s": 0.7,
                     "between_cards_s": 0.9, "repeat_s": 0.4, "before_move_s": 0.6},
            "resume": {"lead_in_s": 0.6}}
    base.update(over)
    return MatchConfig.model_validate(base)
