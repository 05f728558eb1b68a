"""The match as a channel publishes it: the engine's snapshot with the kimariji of the cards read
and of those still on the mats (recomputed only when a card has been read)."""

from __future__ import annotations

from hall.states import Kimariji, MatchState
from reader.kimariji import teaching
from reader.snapshot import Snapshot


class MatchView:
    def __init__(self) -> None:
        self._teaching: tuple[tuple[tuple[int, ...], tuple[int, ...]], Kimariji] | None = None

    def of(self, snap: Snapshot, deck: tuple[int, ...] | None) -> MatchState:
        """The snapshot as published; `deck`: the match's poems (None: no kimariji)."""
        if deck is None:
            return MatchState(snap)
        read = tuple(c.poem for c in sorted(snap.cards, key=lambda c: c.n)
                     if c.finished_s is not None)
        key = (deck, read)
        if self._teaching is None or self._teaching[0] != key:
            t = teaching(deck, read)
            self._teaching = (key, Kimariji(t.read, t.left))
        return MatchState(snap, self._teaching[1])
