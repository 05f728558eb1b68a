"""A referee's presses on a bad Wi-Fi: which to apply, which to refuse (issue 47, item 7).

A phone's press may arrive twice (the socket's and the REST fallback's), late (sent into an
outage, delivered when the link returns) or after a newer one. Each press a page sends carries
its referee's **move** (a number that rises with every press of that referee), and **what the
phone saw**: the card and verse it showed, and the press's time on the server's clock as the
page estimates it (`at_s`). The rule, per referee:

- a move is applied once: the same move again is answered as the first time, and applies
  nothing more (`repeated`, or the same refusal);
- never an older move after a newer one (`superseded`: ignored, answered with the state);
- a **hold** older than `max_age_s` is refused (`stale`), and so is one meant for a card or
  verse the reading has left more than `grace_s` before the press arrived (`moved_on`): a
  hand raised on the upper verse, delivered 2 s into the lower one or on the next card, stops
  something its referee did not see. A press that crosses a boundary by a network's latency
  (the phone's picture is as old as the state that drew it) is applied: its referee meant to
  stop the reading now, and stopping `grace_s` into the next verse is the best still possible;
- a **release** is never refused for its age or for where the reading is (it is paused: no
  verse moves on), only ignored when a newer move was applied: a refusal must never leave a
  hand up that its referee lowered;
- a refused move is remembered as refused, so that a fresh press (a higher move) is never
  kept from silencing the reading;
- a press without a move (an older page, a script) is applied as before.

`Presses` is pure: no clock is read and nothing waits; the caller passes the time (the
channel's match clock, on which the states' `started_s` are measured) and the states.
`ChannelPresses` puts it in front of one channel's hands (hall.seam.ChannelPort.hand), with the
clock given. In a cluster's other processes a press is sent on to the channel's owner
(`forward`, cluster.remote), which judges it with its own `Presses`: the socket's press and its
REST fallback's copy may reach two processes, and only the owner sees both.
"""

from __future__ import annotations

import logging
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from enum import StrEnum
from typing import TYPE_CHECKING

from reader.events import Hold, Release

if TYPE_CHECKING:
    from hall.seam import ChannelPort, Latest
    from hall.states import ChannelState

log = logging.getLogger("yomite.hall")

# a verse's rank within its card: a gap ranks with the verse before it; what follows the last
# lower verse (the extra call, the end of the match) ranks after all of them
KAMI, SHIMO, AFTER = 1, 2, 3
VERSES = {"kami": KAMI, "shimo": SHIMO}
# gaps by label: the verse each follows
GAP_AFTER = {"gap_between_verses": KAMI, "gap_repeat": SHIMO, "gap_between_cards": SHIMO}


@dataclass(frozen=True, slots=True)
class Press:
    """What a page says of one press; every field may be absent (an older client)."""

    move: int | None = None
    card: int | None = None
    verse: str | None = None  # "kami" | "shimo"; None: the card only
    at_s: float | None = None  # the server's clock at the press, as the page estimates it


@dataclass(frozen=True, slots=True, order=True)
class Position:
    """Where the reading is: a card (0: the jokā) and a rank within it (KAMI, SHIMO, AFTER;
    0: the card only, which no rank of the same card passes)."""

    card: int
    rank: int = 0

    def past(self, seen: Position) -> bool:
        """Whether the reading here has moved on from what a phone saw at `seen`."""
        if self.card != seen.card:
            return self.card > seen.card
        return seen.rank != 0 and self.rank > seen.rank


def position_of(card: int, seg_card: int | None, seg_verse: str | None,
                seg_label: str | None) -> Position:
    """The position of a state: its match's card and its segment (None: no segment)."""
    if seg_card is None:  # a call (before the jokā, the extra call) or the match's end
        return Position(card, AFTER if card > 0 else 0)
    if seg_verse in VERSES:
        return Position(seg_card, VERSES[seg_verse])
    return Position(seg_card, GAP_AFTER.get(seg_label or "", 0))


class Outcome(StrEnum):
    APPLY = "applied"  # new: apply it
    REPEATED = "repeated"  # this move was applied already: nothing more
    SUPERSEDED = "superseded"  # older than a move already taken: ignored
    STALE = "stale"  # a hold older than max_age_s: refused
    MOVED_ON = "moved_on"  # a hold for a card or verse no longer read: refused


REFUSED = (Outcome.STALE, Outcome.MOVED_ON)


@dataclass(frozen=True, slots=True)
class Verdict:
    outcome: Outcome
    move: int | None  # the press's
    last: int | None  # the referee's latest move taken (a page behind it moves its counter)
    age_s: float | None = None  # how old the press was when it arrived
    late_s: float | None = None  # how long before it arrived the reading had moved on
    now_s: float | None = None  # when it was judged (the match clock)

    def __str__(self) -> str:
        def s(v: float | None) -> str:
            return "-" if v is None else f"{v:.2f} s"
        said = f"refused: {self.outcome.value}" if self.refused else self.outcome.value
        return f"{said} (move {self.move}, age {s(self.age_s)}, moved on {s(self.late_s)} " \
            f"before, at {self.now_s})"

    @property
    def apply(self) -> bool:
        return self.outcome is Outcome.APPLY

    @property
    def refused(self) -> bool:
        return self.outcome in REFUSED


class Presses:
    """The referees' last moves on one channel, and when the reading reached each position
    lately (`observe` every state)."""

    def __init__(self, max_age_s: float = 2.0, grace_s: float = 0.5,
                 remember: int = 4096) -> None:
        self.max_age_s = max_age_s
        self.grace_s = grace_s
        self.remember = remember
        self._last: dict[str, tuple[int, Outcome]] = {}  # referee: (move, its first answer)
        self._reached: list[tuple[Position, float]] = []  # the latest positions, in order
        self.counts: dict[Outcome, int] = dict.fromkeys(Outcome, 0)

    def observe(self, where: Position | None, started_s: float) -> None:
        """A state: the reading is at `where` (None: no match), since `started_s` at the
        latest (the segment's start)."""
        if where is None:
            self._reached.clear()
            return
        if self._reached and self._reached[-1][0] == where:
            return
        if self._reached and where < self._reached[-1][0]:
            self._reached.clear()  # a new match, or a card read again: a new history
        self._reached.append((where, started_s))
        del self._reached[:-16]

    def see(self, state: ChannelState) -> None:
        """`observe` a channel's state."""
        m = state.match
        if m is None:
            self.observe(None, 0.0)
            return
        s = m.snapshot
        seg = s.segment
        if seg is None:
            self.observe(position_of(s.card, None, None, None), s.at_s)
        else:
            self.observe(position_of(s.card, seg.card, seg.verse, seg.label), seg.started_s)

    def moved_on_at(self, seen: Position) -> float | None:
        """When the reading first left what a phone saw (None: it has not)."""
        if not self._reached or not self._reached[-1][0].past(seen):
            return None
        for where, at in self._reached:
            if where.past(seen):
                return at
        return None  # pragma: no cover (the last one is past)

    def judge(self, referee: str, hold: bool, press: Press, now_s: float) -> Verdict:
        """Whether to apply `press` of `referee` (a hold, or a release) arriving at `now_s`,
        and remember its move."""
        last = self._last.get(referee)
        move = press.move
        if move is not None and last is not None and move <= last[0]:
            outcome = Outcome.SUPERSEDED if move < last[0] else (
                last[1] if last[1] in REFUSED else Outcome.REPEATED)
            return self._said(Verdict(outcome, move, last[0], now_s=now_s))
        age = None if press.at_s is None else max(0.0, now_s - press.at_s)
        outcome, late = Outcome.APPLY, None
        if hold and age is not None and age > self.max_age_s:
            outcome = Outcome.STALE
        elif hold and press.card is not None:
            at = self.moved_on_at(Position(press.card, VERSES.get(press.verse or "", 0)))
            if at is not None and now_s - at > self.grace_s:
                outcome, late = Outcome.MOVED_ON, now_s - at
        if move is not None:
            self._remember(referee, move, outcome)
        return self._said(Verdict(outcome, move, move if move is not None else (
            last[0] if last else None), age, late, now_s))

    def _said(self, v: Verdict) -> Verdict:
        self.counts[v.outcome] += 1
        return v

    def _remember(self, referee: str, move: int, outcome: Outcome) -> None:
        self._last.pop(referee, None)
        self._last[referee] = (move, outcome)
        while len(self._last) > self.remember:  # the longest still first
            del self._last[next(iter(self._last))]

    def forget(self, referee: str) -> None:
        self._last.pop(referee, None)


class ChannelPresses:
    """One channel's presses: the rule in front of its hands. `clock` is the channel's match
    clock (the states' `at_s`; the pongs' `s`, which a referee page times its presses on);
    `see` is to be subscribed to the channel's states."""

    def __init__(self, rule: Presses, port: ChannelPort, clock: Callable[[], float]) -> None:
        self.rule = rule
        self.port = port
        self.clock = clock
        # set while another process reads the channel: the press judged and applied there
        # (None back: an owner that does not judge presses, so judged here as before)
        self.forward: Callable[[Hold | Release, Press, bool],
                               Awaitable[Verdict | None]] | None = None

    def see(self, latest: Latest) -> None:
        self.rule.see(latest.state.state)

    async def press(self, event: Hold | Release, press: Press, *, trusted: bool = False,
                    deadline: float | None = None) -> Verdict:
        """A referee page's press: the hand moved (ChannelPort.hand) if the rule applies it;
        the verdict says what was done. `deadline`: see ChannelPort.hand."""
        if self.forward is not None:
            judged = await self.forward(event, press, trusted)
            if judged is not None:
                return judged
        v = self.rule.judge(event.referee, isinstance(event, Hold), press, self.clock())
        if v.apply:
            await self.port.hand(event, trusted=trusted, deadline=deadline)
        if v.refused or press.move is not None:  # a page's press: one line (a person's pace)
            log.info("channel %s: %s's %s %s", self.port.name, event.referee,
                     "hold" if isinstance(event, Hold) else "release", v)
        return v
