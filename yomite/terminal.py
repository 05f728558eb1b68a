"""A live terminal view of a channel: a line for every segment and hold as the journal records
it, and an in-place countdown while the players memorise."""

import sys
from typing import Any, TextIO, assert_never

from hall.states import ChannelState
from reader.clip import Verse
from reader.facts import (
    Aborted,
    BowCalled,
    Bowed,
    CardRead,
    ClipLength,
    Closed,
    Closing,
    Cut,
    ExtraCardAdded,
    Fact,
    Finished,
    HandLowered,
    HandRaised,
    HandsCleared,
    LeadIn,
    LeadInCut,
    ReadAgain,
    Resumed,
    SegmentBegun,
    Skipped,
    facts_of,
)
from reader.poems import poem
from reader.programme import SegmentKind

KIND_WORDS = {
    "bow_call": "bow",
    "memorise_call": "call",
    "prelude_intro": "prelude",
    "prelude_kami": "jokā kami",
    "prelude_shimo": "jokā shimo",
    "extra_call": "extra",
    "again_call": "again",
    "end_call": "end call",
    "move_call": "move",
}


class TerminalView:
    def __init__(self, texts: dict[str, str], rate: int, out: TextIO = sys.stdout) -> None:
        self._texts = texts  # call/prelude label -> text shown
        self._rate = rate
        self._out = out
        self._cards = 0
        self._counting = False
        self.closed = False  # the output went away (`yomite dry-run | head`): nothing to show

    def on_record(self, entry: dict[str, Any]) -> None:
        for f in facts_of(entry):
            line = self._describe(f)
            if line:
                self._line(line)

    def on_state(self, state: ChannelState) -> None:
        if state.match is None:
            return
        m = state.match.snapshot
        self._cards = m.cards_total
        if m.countdown_s is not None and not m.paused:
            self._write(f"\r{'':10}memorise  {m.countdown_s:4.0f} s left ")
            self._counting = True

    def _describe(self, f: Fact) -> str | None:
        frame = 0 if isinstance(f, ClipLength) else f.frame
        t = f"[{frame / self._rate:8.2f}] "
        match f:
            case SegmentBegun() if f.kind is not SegmentKind.GAP:
                label = f.label
                if label.startswith("card_") and f.poem is not None and f.verse is not None:
                    p = poem(f.poem)
                    text = p.kami if f.verse is Verse.KAMI else p.shimo
                    return (f"{t}{f.card:>2}/{self._cards or '?'} {f.verse.value:<5} {text}"
                            f"  (#{p.no} {p.author})")
                if label == "memorise":
                    return f"{t}memorise"
                return f"{t}{KIND_WORDS.get(label, label):<10} {self._texts.get(label, '')}"
            case HandRaised():
                return f"{t}HOLD by {f.name or f.referee} ({f.holds} up)"
            case HandLowered():
                return f"{t}released by {f.referee} ({f.holds} up)"
            case HandsCleared():
                return f"{t}all holds cleared"
            case Cut():
                return f"{t}  cut: {f.label} at +{f.offset_s:.2f} s"
            case Resumed():
                return f"{t}resume ({f.policy.value})"
            case Bowed():
                return f"{t}bowed: ready for the memorisation call"
            case Finished():
                return f"{t}finished: the players count their cards"
            case Closed():
                return f"{t}closed"
            case Aborted():
                return f"{t}aborted {f.reason}"
            case ExtraCardAdded():
                return f"{t}one more card: {f.card}"
            case ReadAgain():
                return f"{t}card {f.card} read again (#{f.poem})"
            case Skipped():
                return f"{t}skipped: {f.label}" + (f" (card {f.card})" if f.card else "")
            case SegmentBegun() | BowCalled() | LeadIn() | LeadInCut() | Closing() \
                    | ClipLength() | CardRead():
                return None
            case _:
                assert_never(f)

    def _line(self, text: str) -> None:
        if self._counting:
            self._write("\n")
            self._counting = False
        self._write(text + "\n")

    def _write(self, text: str) -> None:
        if self.closed:
            return
        try:
            self._out.write(text)
            self._out.flush()
        except BrokenPipeError:
            self.closed = True
