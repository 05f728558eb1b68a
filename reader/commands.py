"""What the engine asks the outside world to do, as a closed union of frozen dataclasses."""

from dataclasses import dataclass
from typing import Any

from .clip import Clip
from .snapshot import Snapshot


@dataclass(frozen=True, slots=True)
class PlayClip:
    """Play `clip` from its frame `offset` so that that frame sounds at output frame `at_frame`.

    Sent ahead of time (at least one segment before the clip is due), so that a sink that keeps a
    schedule plays it with sample accuracy.
    """

    clip: Clip
    at_frame: int
    offset: int
    segment: int


@dataclass(frozen=True, slots=True)
class StopAudio:
    """Silence from output frame `at_frame` (or as soon as possible after) and forget every
    scheduled clip."""

    at_frame: int


@dataclass(frozen=True, slots=True)
class Publish:
    """Tell every client the new state."""

    snapshot: Snapshot


@dataclass(frozen=True, slots=True)
class Record:
    """Append one line to the match journal (flushed and fsynced before anything else)."""

    entry: dict[str, Any]


Command = PlayClip | StopAudio | Publish | Record
