"""What a voice is asked to say, and the narrow voice interface the engine plans with."""

from dataclasses import dataclass
from enum import StrEnum
from typing import Protocol


class Verse(StrEnum):
    KAMI = "kami"  # upper verse 上の句
    SHIMO = "shimo"  # lower verse 下の句


class ClipKind(StrEnum):
    CALL = "call"  # a spoken announcement: the bow, memorisation, prelude, extra, end, move calls
    PRELUDE = "prelude"  # the jokā waka (poem 0)
    VERSE = "verse"  # one verse of one of the hundred


@dataclass(frozen=True, slots=True)
class Clip:
    """One stretch of speech. `yomi` is what the voice says (pronunciation kana for verses:
    never the kanji text); `text` is what a screen shows."""

    kind: ClipKind
    yomi: str
    text: str
    name: str = ""  # calls: "bow_call", "memorise_call", "prelude_intro", "extra_call", ...
    poem: int | None = None  # Ogura number; 0 is the jokā prelude
    verse: Verse | None = None

    @property
    def key(self) -> str:
        """A stable, human-readable id (used in journals, timelines and the render cache)."""
        if self.kind is ClipKind.CALL:
            return f"call:{self.name}:{self.yomi}"
        return f"{self.kind.value}:{self.poem:03d}:{self.verse}"


class ClipDurations(Protocol):
    """What the engine needs from a voice: how long a clip lasts, in output frames.

    Real voices render (or look up their cache) to answer; tests pass fakes of known length.
    """

    def frames(self, clip: Clip) -> int: ...


class EstimatedDurations:
    """Durations from a mora count, for dry runs and tests without a voice: each kana is one
    mora (small ゃゅょぁぃぅぇぉ join the one before), a space is a phrase pause."""

    SMALL = frozenset("ゃゅょぁぃぅぇぉゎャュョァィゥェォヮ")

    def __init__(self, rate: int, mora_s: float = 0.2, phrase_pause_s: float = 0.3) -> None:
        self.rate = rate
        self.mora_s = mora_s
        self.phrase_pause_s = phrase_pause_s

    def frames(self, clip: Clip) -> int:
        phrases = clip.yomi.split()
        morae = sum(1 for ch in clip.yomi if not ch.isspace() and ch not in self.SMALL)
        seconds = morae * self.mora_s + max(0, len(phrases) - 1) * self.phrase_pause_s
        return max(1, round(seconds * self.rate))
