"""The published state of a match: what every page shows, with a rising sequence number."""

from dataclasses import asdict, dataclass
from enum import Enum
from typing import Any

from .programme import Phase


@dataclass(frozen=True, slots=True)
class HoldView:
    referee: str
    name: str
    since_s: float


@dataclass(frozen=True, slots=True)
class CardView:
    """A card that has started. `finished_s` is set once its (last) lower verse has been read:
    only then may a projector show which poem it was."""

    n: int
    poem: int
    started_s: float
    finished_s: float | None


@dataclass(frozen=True, slots=True)
class SegmentView:
    index: int
    kind: str
    label: str
    card: int | None
    poem: int | None
    verse: str | None
    reading: int
    started_s: float  # when offset 0 of this segment sounded (or would have)
    ends_s: float | None  # None while paused


@dataclass(frozen=True, slots=True)
class CutView:
    """Where a hold cut the programme."""

    segment: int
    label: str
    card: int | None
    poem: int | None
    verse: str | None
    offset_s: float
    at_s: float


@dataclass(frozen=True, slots=True)
class Snapshot:
    seq: int
    at_s: float
    phase: Phase
    paused: bool
    resumes_at_s: float | None  # set during the lead-in after the last hold was lowered
    holds: tuple[HoldView, ...]
    card: int  # the card being read, or the last one read; 0 before the first
    cards_total: int  # planned cards + extra cards asked for
    cards_planned: int
    unread_left: int  # poems of the deck not read yet (extra cards possible)
    segment: SegmentView | None
    countdown_s: float | None  # memorisation left (frozen while paused)
    cut: CutView | None
    cards: tuple[CardView, ...]
    seed: int
    colors: tuple[str, ...]
    policy: str
    lead_in_s: float
    timings: dict[str, Any]
    reason: str  # why the match was aborted, if it was
    bowed: bool  # the bow call has been read alone (Start then begins with the memorisation call)
    # each call's text (bow_call, ..., move_call) and the jokā's (prelude_kami, prelude_shimo),
    # by their segments' labels; None: disabled
    calls: dict[str, str | None]

    def to_dict(self) -> dict[str, Any]:
        def conv(v: Any) -> Any:
            if isinstance(v, Enum):
                return v.value
            if isinstance(v, dict):
                return {k: conv(x) for k, x in v.items()}
            if isinstance(v, list | tuple):
                return [conv(x) for x in v]
            return v

        out: dict[str, Any] = conv(asdict(self))
        return out
