"""The facts of a match journal: what the engine records happened with each event (a segment
begun, a cut, a hand raised, a clip's length...), as frozen dataclasses in one closed union.

On disk a fact is one JSON object in a record's `facts` list, named by its `"fact"` key; the
engine writes them (as plain objects, reader/schedule.py and reader/holds.py), `fact_from_record`
reads one back (a JournalError names an unknown kind or a
missing field) and `to_record` gives the same object again, key for key and in the same order,
so a journal read and written back is byte for byte the one on disk.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import Any, ClassVar

from .clip import Verse
from .config import ResumePolicy
from .errors import JournalError
from .programme import SegmentKind


@dataclass(frozen=True, slots=True)
class BowCalled:
    """The bow call began (rule 1)."""

    KIND: ClassVar[str] = "bow"
    frame: int

    def to_record(self) -> dict[str, Any]:
        return {"fact": self.KIND, "frame": self.frame}


@dataclass(frozen=True, slots=True)
class Bowed:
    """The bow call ended: ready for the memorisation call."""

    KIND: ClassVar[str] = "bowed"
    frame: int

    def to_record(self) -> dict[str, Any]:
        return {"fact": self.KIND, "frame": self.frame}


@dataclass(frozen=True, slots=True)
class Aborted:
    KIND: ClassVar[str] = "aborted"
    frame: int
    reason: str

    def to_record(self) -> dict[str, Any]:
        return {"fact": self.KIND, "frame": self.frame, "reason": self.reason}


@dataclass(frozen=True, slots=True)
class HandRaised:
    """A referee's hand went up; `holds`: the hands up after it."""

    KIND: ClassVar[str] = "hold"
    referee: str
    name: str
    frame: int
    holds: int

    def to_record(self) -> dict[str, Any]:
        return {"fact": self.KIND, "referee": self.referee, "name": self.name,
                "frame": self.frame, "holds": self.holds}


@dataclass(frozen=True, slots=True)
class HandLowered:
    KIND: ClassVar[str] = "release"
    referee: str
    frame: int
    holds: int

    def to_record(self) -> dict[str, Any]:
        return {"fact": self.KIND, "referee": self.referee, "frame": self.frame,
                "holds": self.holds}


@dataclass(frozen=True, slots=True)
class HandsCleared:
    """Every hand lowered at once (the operator resumes); `referees`: those that were up."""

    KIND: ClassVar[str] = "clear_holds"
    referees: tuple[str, ...]
    frame: int
    holds: int

    def to_record(self) -> dict[str, Any]:
        return {"fact": self.KIND, "referees": list(self.referees), "frame": self.frame,
                "holds": self.holds}


@dataclass(frozen=True, slots=True)
class LeadIn:
    """The last hand went down: the lead-in before `resume_frame`."""

    KIND: ClassVar[str] = "lead_in"
    frame: int
    resume_frame: int

    def to_record(self) -> dict[str, Any]:
        return {"fact": self.KIND, "frame": self.frame, "resume_frame": self.resume_frame}


@dataclass(frozen=True, slots=True)
class LeadInCut:
    """A hand went up again during the lead-in."""

    KIND: ClassVar[str] = "lead_in_cut"
    frame: int

    def to_record(self) -> dict[str, Any]:
        return {"fact": self.KIND, "frame": self.frame}


@dataclass(frozen=True, slots=True)
class ExtraCardAdded:
    """One more card (a tie, rule 16): its number."""

    KIND: ClassVar[str] = "extra_card"
    card: int
    frame: int

    def to_record(self) -> dict[str, Any]:
        return {"fact": self.KIND, "card": self.card, "frame": self.frame}


@dataclass(frozen=True, slots=True)
class ReadAgain:
    """The operator asked for the last card again: card `card` (poem `poem`) is read again."""

    KIND: ClassVar[str] = "read_again"
    card: int
    poem: int
    frame: int

    def to_record(self) -> dict[str, Any]:
        return {"fact": self.KIND, "card": self.card, "poem": self.poem, "frame": self.frame}


@dataclass(frozen=True, slots=True)
class Skipped:
    """The operator skipped on to the next card from segment `label` (inside card `card`, poem
    `poem`, when a card was being read)."""

    KIND: ClassVar[str] = "skip"
    label: str
    frame: int
    card: int | None = None
    poem: int | None = None

    def to_record(self) -> dict[str, Any]:
        out: dict[str, Any] = {"fact": self.KIND, "label": self.label, "frame": self.frame}
        if self.card is not None:
            out.update(card=self.card, poem=self.poem)
        return out


@dataclass(frozen=True, slots=True)
class Closing:
    """The closing calls began (rule 18)."""

    KIND: ClassVar[str] = "close"
    frame: int

    def to_record(self) -> dict[str, Any]:
        return {"fact": self.KIND, "frame": self.frame}


@dataclass(frozen=True, slots=True)
class Closed:
    KIND: ClassVar[str] = "closed"
    frame: int

    def to_record(self) -> dict[str, Any]:
        return {"fact": self.KIND, "frame": self.frame}


@dataclass(frozen=True, slots=True)
class Finished:
    """The planned cards are read: the players count their cards (rule 16)."""

    KIND: ClassVar[str] = "finished"
    frame: int

    def to_record(self) -> dict[str, Any]:
        return {"fact": self.KIND, "frame": self.frame}


@dataclass(frozen=True, slots=True)
class ClipLength:
    """A clip's length in frames, as the voice rendered it: replay needs no voice."""

    KIND: ClassVar[str] = "clip"
    key: str
    frames: int

    def to_record(self) -> dict[str, Any]:
        return {"fact": self.KIND, "key": self.key, "frames": self.frames}


@dataclass(frozen=True, slots=True)
class CardRead:
    """A card's lower verse has been read to its end."""

    KIND: ClassVar[str] = "card_read"
    card: int
    poem: int
    frame: int

    def to_record(self) -> dict[str, Any]:
        return {"fact": self.KIND, "card": self.card, "poem": self.poem, "frame": self.frame}


@dataclass(frozen=True, slots=True)
class SegmentBegun:
    """A segment of the programme began sounding (from sample `offset` of its clip, after a
    resume); a card's segment names its card and poem, a verse its verse and reading."""

    KIND: ClassVar[str] = "segment"
    index: int
    label: str
    kind: SegmentKind
    frame: int
    offset: int = 0
    card: int | None = None
    poem: int | None = None
    verse: Verse | None = None
    reading: int | None = None
    clip: str | None = None

    def to_record(self) -> dict[str, Any]:
        out: dict[str, Any] = {"fact": self.KIND, "index": self.index, "label": self.label,
                               "kind": self.kind.value, "frame": self.frame}
        if self.offset:
            out["offset"] = self.offset
        if self.card is not None:
            out.update(card=self.card, poem=self.poem)
        if self.verse is not None:
            out.update(verse=self.verse.value, reading=self.reading)
        if self.clip is not None:
            out["clip"] = self.clip
        return out


@dataclass(frozen=True, slots=True)
class Cut:
    """A hold cut segment `segment` at sample `offset` of its clip."""

    KIND: ClassVar[str] = "cut"
    segment: int
    label: str
    offset: int
    offset_s: float
    frame: int
    card: int | None = None
    poem: int | None = None
    verse: Verse | None = None  # the verse cut, when the segment was one

    def to_record(self) -> dict[str, Any]:
        out: dict[str, Any] = {"fact": self.KIND, "segment": self.segment, "label": self.label,
                               "offset": self.offset, "offset_s": self.offset_s,
                               "frame": self.frame}
        if self.card is not None:
            out.update(card=self.card, poem=self.poem)
        if self.verse is not None:
            out.update(verse=self.verse.value)
        return out


@dataclass(frozen=True, slots=True)
class Resumed:
    """The reading goes on from sample `offset` of segment `segment`, by `policy`."""

    KIND: ClassVar[str] = "resume"
    segment: int
    offset: int
    frame: int
    policy: ResumePolicy

    def to_record(self) -> dict[str, Any]:
        return {"fact": self.KIND, "segment": self.segment, "offset": self.offset,
                "frame": self.frame, "policy": self.policy.value}


Fact = (BowCalled | Bowed | Aborted | HandRaised | HandLowered | HandsCleared | LeadIn
        | LeadInCut | ExtraCardAdded | ReadAgain | Skipped | Closing | Closed | Finished
        | ClipLength | CardRead | SegmentBegun | Cut | Resumed)


def _opt_int(d: dict[str, Any], key: str) -> int | None:
    v = d.get(key)
    return None if v is None else int(v)


_PARSERS: dict[str, Callable[[dict[str, Any]], Fact]] = {
    "bow": lambda d: BowCalled(int(d["frame"])),
    "bowed": lambda d: Bowed(int(d["frame"])),
    "aborted": lambda d: Aborted(int(d["frame"]), str(d["reason"])),
    "hold": lambda d: HandRaised(str(d["referee"]), str(d["name"]), int(d["frame"]),
                                 int(d["holds"])),
    "release": lambda d: HandLowered(str(d["referee"]), int(d["frame"]), int(d["holds"])),
    "clear_holds": lambda d: HandsCleared(tuple(str(r) for r in d["referees"]),
                                          int(d["frame"]), int(d["holds"])),
    "lead_in": lambda d: LeadIn(int(d["frame"]), int(d["resume_frame"])),
    "lead_in_cut": lambda d: LeadInCut(int(d["frame"])),
    "extra_card": lambda d: ExtraCardAdded(int(d["card"]), int(d["frame"])),
    "read_again": lambda d: ReadAgain(int(d["card"]), int(d["poem"]), int(d["frame"])),
    "skip": lambda d: Skipped(str(d["label"]), int(d["frame"]), _opt_int(d, "card"),
                              _opt_int(d, "poem")),
    "close": lambda d: Closing(int(d["frame"])),
    "closed": lambda d: Closed(int(d["frame"])),
    "finished": lambda d: Finished(int(d["frame"])),
    "clip": lambda d: ClipLength(str(d["key"]), int(d["frames"])),
    "card_read": lambda d: CardRead(int(d["card"]), int(d["poem"]), int(d["frame"])),
    "segment": lambda d: SegmentBegun(
        int(d["index"]), str(d["label"]), SegmentKind(d["kind"]), int(d["frame"]),
        int(d.get("offset", 0)), _opt_int(d, "card"), _opt_int(d, "poem"),
        None if d.get("verse") is None else Verse(d["verse"]), _opt_int(d, "reading"),
        None if d.get("clip") is None else str(d["clip"])),
    "cut": lambda d: Cut(int(d["segment"]), str(d["label"]), int(d["offset"]),
                         float(d["offset_s"]), int(d["frame"]), _opt_int(d, "card"),
                         _opt_int(d, "poem"), Verse(d["verse"]) if "verse" in d else None),
    "resume": lambda d: Resumed(int(d["segment"]), int(d["offset"]), int(d["frame"]),
                                ResumePolicy(d["policy"])),
}


def fact_from_record(d: dict[str, Any]) -> Fact:
    """The fact a journal object holds; JournalError for an unknown kind or a missing or
    malformed field."""
    kind = d.get("fact")
    parse = _PARSERS.get(kind) if isinstance(kind, str) else None
    if parse is None:
        raise JournalError(f"unknown kind of fact {kind!r} in the journal (known: "
                           f"{', '.join(_PARSERS)})")
    try:
        return parse(d)
    except (KeyError, TypeError, ValueError) as e:
        raise JournalError(f"a {kind!r} fact in the journal is malformed ({type(e).__name__}: "
                           f"{e}): {d!r}"[:500]) from None


def facts_of(record: dict[str, Any]) -> Iterator[Fact]:
    """The facts of one journal record (an event line), in order. A kind this version does not
    know is passed over, as the readers did before the facts were typed (a later version's
    journal still recovers, logs and lists); a known one that is malformed is a JournalError."""
    for d in record.get("facts", ()):
        kind = d.get("fact") if isinstance(d, dict) else None
        if isinstance(kind, str) and kind not in _PARSERS:
            continue
        yield fact_from_record(d)
