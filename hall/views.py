"""What each audience of a channel sees: the operator sees the whole state (hall.states'
OperatorView); viewers, referees and speakers see its public view, of the types here. Each
public type names its fields: a field added to the operator's state is not public until it is
added here too."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from hall.recovery import RecoveryReport
from hall.rendering import RenderProgress
from hall.states import (
    ChannelState,
    MatchState,
    OperatorView,
    ProjectorView,
    RefereeView,
    SpeakersView,
)
from hall.wire import FLATTEN, OMIT_NONE
from reader.kimariji import LeftCard, ReadCard
from reader.programme import Phase
from reader.snapshot import HoldView, Snapshot

# phases after which a match's seed may be shown to everyone (感想戦: its order is all read)
OVER = (Phase.FINISHED, Phase.CLOSED, Phase.ABORTED)


@dataclass(frozen=True, slots=True)
class PublicSegment:
    index: int
    kind: str
    label: str
    card: int | None
    poem: None  # never: which poem is read
    verse: str | None
    reading: int
    started_s: float
    ends_s: float | None  # None for a verse: its length would name the poem


@dataclass(frozen=True, slots=True)
class PublicCut:
    segment: int
    label: str
    card: int | None
    poem: None
    verse: str | None
    offset_s: float
    at_s: float


@dataclass(frozen=True, slots=True)
class PublicCard:
    n: int
    poem: int | None  # once its lower verse has been read
    started_s: float
    finished_s: float | None


@dataclass(frozen=True, slots=True)
class PublicKimariji:
    read: tuple[ReadCard, ...]
    # which cards are left, and how, is the operator's, unless the operator shows them on the
    # projector (ProjectorView.left): they lie on the mats, in no order
    left: tuple[LeftCard, ...] | None = field(default=None, metadata=OMIT_NONE)


@dataclass(frozen=True, slots=True)
class PublicMatch:
    seq: int
    at_s: float
    phase: Phase
    paused: bool
    resumes_at_s: float | None
    holds: tuple[HoldView, ...]
    card: int
    cards_total: int
    cards_planned: int
    unread_left: int
    segment: PublicSegment | None
    countdown_s: float | None
    cut: PublicCut | None
    cards: tuple[PublicCard, ...]
    seed: int | None  # once the match is over
    colors: tuple[str, ...]
    policy: str
    lead_in_s: float
    timings: dict[str, Any]
    reason: str
    bowed: bool
    calls: dict[str, str | None]
    kimariji: PublicKimariji | None = field(default=None, metadata=OMIT_NONE)


@dataclass(frozen=True, slots=True)
class PublicRuntime:
    """The runtime's state as everyone sees it (all of it but the match's secrets)."""

    channel: str
    seq: int
    audio: str
    journal: str
    fault: str | None
    no_device: str | None
    recovered: RecoveryReport | None
    render: RenderProgress | None
    match: PublicMatch | None
    voice: dict[str, Any]
    preset: str | None


@dataclass(frozen=True, slots=True)
class PublicView:
    """The channel as viewers, referees and speakers see it: no PIN, no output counters, and
    of the referees only those whose hand is up."""

    state: PublicRuntime = field(metadata=FLATTEN)
    channel: str
    seq: int
    output: str
    speakers: SpeakersView
    volume_db: float
    referees: tuple[RefereeView, ...]
    projector: ProjectorView
    broker: bool | None = None  # hall.states.OperatorView.broker


def public_match(m: MatchState, left: bool = False) -> PublicMatch:
    """Nothing of a card before its lower verse has been read: not which poem is read, not the
    seed while the match is under way, not how long a verse of a card will be (the 20 upper
    verses of a colour all differ in length: its end would name the poem at its first
    sample)."""
    s: Snapshot = m.snapshot
    seg = s.segment
    cut = s.cut
    return PublicMatch(
        seq=s.seq, at_s=s.at_s, phase=s.phase, paused=s.paused, resumes_at_s=s.resumes_at_s,
        holds=s.holds, card=s.card, cards_total=s.cards_total, cards_planned=s.cards_planned,
        unread_left=s.unread_left,
        segment=None if seg is None else PublicSegment(
            seg.index, seg.kind, seg.label, seg.card, None, seg.verse, seg.reading,
            seg.started_s, None if seg.kind == "verse" else seg.ends_s),
        countdown_s=s.countdown_s,
        cut=None if cut is None else PublicCut(cut.segment, cut.label, cut.card, None,
                                               cut.verse, cut.offset_s, cut.at_s),
        cards=tuple(PublicCard(c.n, c.poem if c.finished_s is not None else None, c.started_s,
                               c.finished_s) for c in s.cards),
        seed=s.seed if s.phase in OVER else None,
        colors=s.colors, policy=s.policy, lead_in_s=s.lead_in_s, timings=s.timings,
        reason=s.reason, bowed=s.bowed, calls=s.calls,
        kimariji=None if m.kimariji is None else PublicKimariji(
            m.kimariji.read, m.kimariji.left if left else None))


def public_runtime(st: ChannelState, left: bool = False) -> PublicRuntime:
    return PublicRuntime(
        channel=st.channel, seq=st.seq, audio=st.audio, journal=st.journal, fault=st.fault,
        no_device=st.no_device, recovered=st.recovered, render=st.render,
        match=None if st.match is None else public_match(st.match, left), voice=st.voice,
        preset=st.preset)


def public_view(op: OperatorView) -> PublicView:
    """What viewers, referees and speakers see (README "Who sees what, and when")."""
    return PublicView(
        state=public_runtime(op.state, op.projector.left),
        channel=op.channel, seq=op.seq, output=op.output, speakers=op.speakers,
        volume_db=op.volume_db,
        # a projector shows whose hand is up, never who has joined: only those names go out
        referees=tuple(r for r in op.referees if r.holding),
        projector=op.projector, broker=op.broker)
