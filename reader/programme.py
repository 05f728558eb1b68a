"""The match programme: the ordered segments of speech and silence that make up a match."""

from collections.abc import Sequence
from dataclasses import dataclass
from enum import StrEnum

from .clip import Clip, ClipKind, Verse
from .config import Call, MatchConfig, Spoken
from .poems import poem as get_poem

# a verse's held last sound takes at most this share of the gap after it away
MIN_GAP_SHARE = 0.5


class Phase(StrEnum):
    READY = "ready"
    BOWING = "bowing"  # rule 1: the reader's signal to bow 「礼」
    ANNOUNCING = "announcing"  # rule 4: 「札を覚えてください」
    MEMORISING = "memorising"  # rule 5: the silent memorisation period
    PRELUDE = "prelude"  # rule 6: the jokā
    READING = "reading"  # rule 7: the cards
    FINISHED = "finished"  # rule 16: the planned cards are read; players count their cards
    TIEBREAK = "tiebreak"  # rule 16: one more card (a final's tie), with its call
    CLOSING = "closing"  # rule 18: 「ありがとうございました」 and the move call
    CLOSED = "closed"  # the hall may move; the next match can be prepared
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
    kami, shimo = cfg.held_s

    def after(gap: float, held: float) -> float:  # a held last sound sounds into the gap
        return max(gap * MIN_GAP_SHARE, gap - held)

    segs = [seg(f"{tag}_kami", verse=Verse.KAMI),
            seg("gap_between_verses", silence_s=after(g.between_verses_s, kami))]
    for r in range(1, cfg.lower_verse_times + 1):
        if r > 1:
            segs.append(seg("gap_repeat", silence_s=after(g.repeat_s, shimo)))
        segs.append(seg(f"{tag}_shimo", verse=Verse.SHIMO, reading=r))
    segs.append(seg("gap_between_cards", silence_s=after(g.between_cards_s, shimo),
                    in_card=False))
    return segs


def build_programme(cfg: MatchConfig, order: Sequence[int], cards: int) -> list[Segment]:
    """The main programme: the bow call (rule 1, if enabled) and the silence of the bow, the
    memorisation call, memorisation, prelude, `cards` cards. The end and move calls are not in
    it: the operator closes the match when the mats are ready for the next (rule 18)."""
    segs: list[Segment] = []
    if cfg.bow_call.enabled:
        segs.append(Segment(SegmentKind.CALL, "bow_call", Phase.BOWING,
                            clip=call_clip("bow_call", cfg.bow_call)))
        segs.append(Segment(SegmentKind.GAP, "gap_after_bow", Phase.BOWING,
                            silence_s=cfg.gaps.after_bow_s))
    segs.append(Segment(SegmentKind.CALL, "memorise_call", Phase.ANNOUNCING,
                        clip=call_clip("memorise_call", cfg.memorise_call)))
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
    return segs


def extra_card(cfg: MatchConfig, start: int, card: int, poem: int) -> list[Segment]:
    """One more card after the planned ones (rule 16: a final's tie), announced by the extra
    call (if enabled) and read like any other."""
    segs: list[Segment] = []
    if cfg.extra_call.enabled:
        segs.append(Segment(SegmentKind.CALL, "extra_call", Phase.TIEBREAK,
                            clip=call_clip("extra_call", cfg.extra_call)))
        segs.append(Segment(SegmentKind.GAP, "gap_after_call", Phase.TIEBREAK,
                            silence_s=cfg.gaps.after_call_s))
    return segs + _card(cfg, start + len(segs), card, poem, Phase.TIEBREAK)


def read_again(cfg: MatchConfig, start: int, card: int, poem: int, phase: Phase) -> list[Segment]:
    """The last card read again on request: the again call (if enabled), then the card."""
    segs: list[Segment] = []
    if cfg.again_call.enabled:
        segs.append(Segment(SegmentKind.CALL, "again_call", phase,
                            clip=call_clip("again_call", cfg.again_call)))
        segs.append(Segment(SegmentKind.GAP, "gap_after_call", phase,
                            silence_s=cfg.gaps.after_call_s))
    return segs + _card(cfg, start + len(segs), card, poem, phase)


def closing(cfg: MatchConfig) -> list[Segment]:
    """Rule 18: 「ありがとうございました」, the players' bow, then the move call (each one
    if enabled)."""
    segs: list[Segment] = []
    if cfg.end_call.enabled:
        segs.append(Segment(SegmentKind.CALL, "end_call", Phase.CLOSING,
                            clip=call_clip("end_call", cfg.end_call)))
    if cfg.move_call.enabled:
        if segs:
            segs.append(Segment(SegmentKind.GAP, "gap_before_move", Phase.CLOSING,
                                silence_s=cfg.gaps.before_move_s))
        segs.append(Segment(SegmentKind.CALL, "move_call", Phase.CLOSING,
                            clip=call_clip("move_call", cfg.move_call)))
    return segs


def call_clips(cfg: MatchConfig) -> list[Clip]:
    """Every call a match of these settings may read, enabled ones only (to render ahead)."""
    calls: list[tuple[str, Spoken]] = [("memorise_call", cfg.memorise_call)]
    if cfg.prelude.enabled:
        calls.append(("prelude_intro", cfg.prelude.intro))
    optional: list[tuple[str, Call]] = [("bow_call", cfg.bow_call), ("extra_call", cfg.extra_call),
                                        ("again_call", cfg.again_call),
                                        ("end_call", cfg.end_call), ("move_call", cfg.move_call)]
    calls += [(n, c) for n, c in optional if c.enabled]
    return [call_clip(n, c) for n, c in calls]
