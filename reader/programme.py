"""The match programme: the ordered segments of speech and silence that make up a match."""

from collections.abc import Sequence
from dataclasses import dataclass
from enum import StrEnum

from .clip import Clip, ClipKind, Verse
from .config import MatchConfig, Spoken
from .poems import poem as get_poem


class Phase(StrEnum):
    READY = "ready"
    ANNOUNCING = "announcing"  # 「札を覚えてください」
    MEMORISING = "memorising"  # the silent memorisation period
    PRELUDE = "prelude"  # the jokā
    READING = "reading"  # the cards
    CLOSING = "closing"  # the end call
    FINISHED = "finished"
    TIEBREAK = "tiebreak"  # an extra card after the end
    ABORTED = "aborted"


class SegmentKind(StrEnum):
    CALL = "call"
    MEMORISE = "memorise"
    PRELUDE = "prelude"
    VERSE = "verse"
    GAP = "gap"


@dataclass(frozen=True, slots=True)
class Segment:
    """One stretch of the programme: a clip (speech) or a silence of fixed length.

    `card` is the card's number in the match (1-based; 0 is the prelude). `card_start` is the
    index of the segment that starts that card (its upper verse), and `in_card` is true from the
    upper verse to the end of the last lower verse: what `restart_card` reads again.
    """

    kind: SegmentKind
    label: str
    phase: Phase
    clip: Clip | None = None
    silence_s: float = 0.0
    card: int | None = None
    poem: int | None = None
    verse: Verse | None = None
    reading: int = 1
    card_start: int | None = None
    in_card: bool = False


def call_clip(name: str, spoken: Spoken) -> Clip:
    return Clip(kind=ClipKind.CALL, yomi=spoken.yomi, text=spoken.text, name=name)


def verse_clip(poem_no: int, verse: Verse) -> Clip:
    p = get_poem(poem_no)
    if verse is Verse.KAMI:
        return Clip(ClipKind.VERSE, p.kami_yomi, p.kami, poem=poem_no, verse=verse)
    return Clip(ClipKind.VERSE, p.shimo_yomi, p.shimo, poem=poem_no, verse=verse)


def prelude_clip(cfg: MatchConfig, verse: Verse) -> Clip:
    s = cfg.prelude.kami if verse is Verse.KAMI else cfg.prelude.shimo
    return Clip(ClipKind.PRELUDE, s.yomi, s.text, poem=0, verse=verse)


def _card(
    cfg: MatchConfig, start: int, card: int, poem: int | None, phase: Phase
) -> list[Segment]:
    """kami, gap, shimo (, gap, shimo ...), gap: the segments of one card (or of the prelude)."""
    kind = SegmentKind.PRELUDE if poem is None else SegmentKind.VERSE
    tag = "prelude" if poem is None else "card"

    def clip(v: Verse) -> Clip:
        return prelude_clip(cfg, v) if poem is None else verse_clip(poem, v)

    def seg(label: str, *, verse: Verse | None = None, silence_s: float = 0.0,
            reading: int = 1, in_card: bool = True) -> Segment:
        return Segment(
            kind if verse else SegmentKind.GAP, label, phase,
            clip=clip(verse) if verse else None, silence_s=silence_s, card=card,
            poem=0 if poem is None else poem, verse=verse, reading=reading,
            card_start=start, in_card=in_card,
        )

    g = cfg.gaps
    segs = [seg(f"{tag}_kami", verse=Verse.KAMI),
            seg("gap_between_verses", silence_s=g.between_verses_s)]
    for r in range(1, cfg.lower_verse_times + 1):
        if r > 1:
            segs.append(seg("gap_repeat", silence_s=g.repeat_s))
        segs.append(seg(f"{tag}_shimo", verse=Verse.SHIMO, reading=r))
    segs.append(seg("gap_between_cards", silence_s=g.between_cards_s, in_card=False))
    return segs


def build_programme(cfg: MatchConfig, order: Sequence[int], cards: int) -> list[Segment]:
    """The main programme: call, memorisation, prelude, `cards` cards, end call."""
    segs: list[Segment] = [
        Segment(SegmentKind.CALL, "memorise_call", Phase.ANNOUNCING,
                clip=call_clip("memorise_call", cfg.memorise_call)),
    ]
    if cfg.memorise_s > 0:
        segs.append(Segment(SegmentKind.MEMORISE, "memorise", Phase.MEMORISING,
                            silence_s=cfg.memorise_s))
    if cfg.prelude.enabled:
        segs.append(Segment(SegmentKind.CALL, "prelude_intro", Phase.PRELUDE,
                            clip=call_clip("prelude_intro", cfg.prelude.intro)))
        segs.append(Segment(SegmentKind.GAP, "gap_after_call", Phase.PRELUDE,
                            silence_s=cfg.gaps.after_call_s))
        segs += _card(cfg, len(segs), 0, None, Phase.PRELUDE)
    for n in range(1, cards + 1):
        segs += _card(cfg, len(segs), n, order[n - 1], Phase.READING)
    segs.append(Segment(SegmentKind.CALL, "end_call", Phase.CLOSING,
                        clip=call_clip("end_call", cfg.end_call)))
    return segs


def extra_card(cfg: MatchConfig, start: int, card: int, poem: int) -> list[Segment]:
    return _card(cfg, start, card, poem, Phase.TIEBREAK)
