"""A channel's state as typed values, from the engine's snapshot to what its operator sees
(hall.views gives what everyone else sees; hall.wire makes the JSON of either)."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from hall.recovery import RecoveryReport
from hall.rendering import RenderProgress
from hall.wire import FLATTEN, OMIT_NONE
from reader.kimariji import LeftCard, ReadCard
from reader.snapshot import Snapshot


@dataclass(frozen=True, slots=True)
class Kimariji:
    """The kimariji of the cards read (in order) and of those still on the mats."""

    read: tuple[ReadCard, ...]
    left: tuple[LeftCard, ...]


@dataclass(frozen=True, slots=True)
class MatchState:
    """The match as a channel publishes it: the engine's snapshot (its fields on the wire) and,
    where the match's deck is known, the kimariji."""

    snapshot: Snapshot = field(metadata=FLATTEN)
    kimariji: Kimariji | None = field(default=None, metadata=OMIT_NONE)


@dataclass(frozen=True, slots=True)
class ChannelState:
    """What a channel's runtime publishes."""

    channel: str
    seq: int
    audio: str
    journal: str
    fault: str | None
    no_device: str | None
    recovered: RecoveryReport | None
    render: RenderProgress | None
    match: MatchState | None
    voice: dict[str, Any]  # the prepared match's voice settings (audio.config.voice_view)
    preset: str | None

    @staticmethod
    def before_start(channel: str) -> ChannelState:
        """A channel's state until its runtime has published one (no match, no output yet)."""
        return ChannelState(channel=channel, seq=0, audio="", journal="ok", fault=None,
                            no_device=None, recovered=None, render=None, match=None, voice={},
                            preset=None)


@dataclass(frozen=True, slots=True)
class RefereeView:
    id: str
    name: str
    connected: bool
    holding: bool


@dataclass(frozen=True, slots=True)
class SpeakersView:
    mode: str  # server.channels[].output
    pages: int  # speaker pages connected


@dataclass(frozen=True, slots=True)
class SpeakerHealth:
    """What a speaker page says of itself every few seconds (counters since it loaded): the
    operator's console shows each page, and any trouble, at once."""

    number: int  # 1.. in the order the pages joined
    placed: int  # clips started
    late: int  # clips started late (from the sample due, faded in)
    missed: int  # clips due while it could play that it never sounded
    resyncs: int  # clips moved back in step while sounding
    epochs: int  # times the server's timeline jumped and the page started its clock again
    steps: int  # times its own output's delay stepped (an underrun of the device)
    rtt_ms: float | None  # its clock probes' round trip
    latency_ms: float | None  # its output's delay
    where: str | None = None  # a cluster's other process it is connected to (None: this one)


@dataclass(frozen=True, slots=True)
class ProjectorView:
    """What the operator asks the projector to show (a class's teacher): `torifuda` "panel"
    (beside the poem) or "full" (the whole screen, from a card's end to the next card), and
    `left`: the cards still on the mats, by colour (then public: they lie on the mats)."""

    torifuda: str = "panel"
    left: bool = False


@dataclass(frozen=True, slots=True)
class OperatorView:
    """The channel as its operator sees it: the runtime's state (None before it started) and
    the service's own: its sequence number, output, speakers, volume, referees and PIN."""

    state: ChannelState = field(metadata=FLATTEN)
    channel: str
    seq: int
    output: str
    speakers: SpeakersView
    volume_db: float
    output_stats: dict[str, int] | None
    referees: tuple[RefereeView, ...]
    pin: str
    output_info: dict[str, Any] = field(default_factory=dict)  # hall.sinks.output_info
    speaker_health: tuple[SpeakerHealth, ...] = ()  # each speaker page that reported
    projector: ProjectorView = ProjectorView()
    # a cluster's process: whether it reaches the broker (False: what the page shows may be
    # old, and commands through it are refused); None on one machine
    broker: bool | None = None

    @property
    def match(self) -> MatchState | None:
        return self.state.match
