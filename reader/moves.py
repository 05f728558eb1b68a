"""The moves each phase allows, and the words an illegal move is refused with.

The table (the hall calls of rules 1, 16 and 18 are the operator's steps):

  ready      Bow (the bow call alone, back to ready), Start, Abort
  finished   ExtraCard (its call, then one more card; back to finished), Close (the end and
             move calls, then closed)
  running    Abort (bowing, announcing, memorising, prelude, reading, tiebreak)
  between cards, or finished
             ReadAgain (its call, then the last card again; then on as before)
  memorising, prelude, reading, tiebreak
             Skip (on at once to the next card's upper verse)
  any phase  Hold (not aborted or closed), Release, ClearHolds, Tick
"""

from .errors import IllegalMove
from .events import Abort, Bow, Close, Event, ExtraCard, Hold, ReadAgain, Skip, Start, event_name
from .programme import Phase

MOVE_WORDS = {
    Bow: "signal the bow",
    Start: "start",
    Close: "close the match",
    ExtraCard: "read an extra card",
    ReadAgain: "read the last card again",
    Skip: "skip to the next card",
    Abort: "abort",
    Hold: "raise a hold",
}


def phase_words(phase: Phase, paused: bool) -> str:
    """The phase as the refusal of a move says it ("the match is reading (paused)")."""
    if phase is Phase.READY:
        return "ready"
    if phase in (Phase.FINISHED, Phase.ABORTED, Phase.CLOSED):
        return f"the match is {phase.value}"
    return f"the match is {phase.value}" + (" (paused)" if paused else "")


def require(event: Event, phase: Phase, paused: bool, *phases: Phase) -> None:
    """Raise IllegalMove unless `phase` is one of `phases`."""
    if phase not in phases:
        word = MOVE_WORDS.get(type(event), event_name(event))
        allowed = " or ".join(p.value for p in phases)
        raise IllegalMove(word, phase_words(phase, paused), f"only possible when {allowed}")
