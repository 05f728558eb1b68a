"""The match as a channel publishes it: the engine's snapshot with the kimariji of the cards read
and of those still on the mats (recomputed only when a card has been read)."""

from __future__ import annotations

from dataclasses import asdict
from typing import Any

from reader.kimariji import teaching
from reader.snapshot import Snapshot


class MatchView:
    def __init__(self) -> None:
        self._teaching: tuple[Any, dict[str, Any]] | None = None

    def of(self, snap: Snapshot, deck: tuple[int, ...] | None) -> dict[str, Any]:
        """The snapshot as published; `deck`: the match's poems (None: no kimariji)."""
        out = snap.to_dict()
        if deck is not None:
            read = tuple(c.poem for c in sorted(snap.cards, key=lambda c: c.n)
                         if c.finished_s is not None)
            key = (deck, read)
            if self._teaching is None or self._teaching[0] != key:
                t = teaching(deck, read)
                self._teaching = (key, {"read": [asdict(c) for c in t.read],
                                        "left": [asdict(c) for c in t.left]})
            out["kimariji"] = self._teaching[1]
        return out
