"""Pairings within a block: every active player plays exactly once a round, 1 against 1, with
one 3-player match when the count is odd (never a bye), and

1. no rematch while one can be avoided: the search is exact (branch and bound) within its
   budget, and it looks ahead: among the pairings of this round that meet no earlier opponent,
   it takes one after which the remaining preliminary rounds can still be paired without a
   rematch, when such a schedule can be found;
2. the 3-player match goes to the players who have played the fewest (after 1): two of its
   three players win, so it must go round;
3. players of the same club kept apart where possible (after 2).

Pure: the order of equal choices comes from a seeded generator, so the same history and seed
give the same pairing.
"""

from __future__ import annotations

import random
from collections.abc import Iterator, Sequence
from dataclasses import dataclass

from .errors import Invalid

# Search nodes one pairing may visit: the exact search, then each look-ahead pass. A block of
# 10 players takes a few hundred; the budget only matters when no rematch-free schedule exists
# and the search would otherwise try to prove it.
NODE_BUDGET = 20_000


@dataclass(frozen=True, slots=True)
class Entrant:
    """A player to pair: entry number, club ("" for none), 3-player matches played so far."""

    no: int
    club: str = ""
    triples: int = 0


@dataclass(frozen=True, slots=True)
class Pairing:
    """One round of a block. `groups` hold entry numbers: pairs, and at most one triple.

    `exact`: the search proved the least cost a pairing of this round can have (rematches,
    then 3-player matches its triple has played before, then same-club meetings) within its
    budget. `schedule`:
    "clear" when the rest of the preliminaries can still be paired without a rematch after
    this round, "none" when no such schedule was found (`clear_after` later rounds can still
    be), "last" for the last round.
    """

    groups: tuple[tuple[int, ...], ...]
    rematches: int
    same_club: int
    triple_repeats: int
    exact: bool
    schedule: str
    clear_after: int = 0


Cost = tuple[int, int, int]
_ZERO: Cost = (0, 0, 0)
_INF: Cost = (1 << 30, 0, 0)


class _OutOfBudget(Exception):
    pass


def _bits(mask: int) -> Iterator[int]:
    while mask:
        low = mask & -mask
        yield low.bit_length() - 1
        mask ^= low


def _add(a: Cost, b: Cost) -> Cost:
    return (a[0] + b[0], a[1] + b[1], a[2] + b[2])


class _Search:
    def __init__(self, met: list[int], club: list[int], tri: list[int], rng: random.Random,
                 budget: int) -> None:
        self.met = met
        self.club = club
        self.tri = tri
        self.rng = rng
        self.left = budget

    def tick(self) -> None:
        self.left -= 1
        if self.left < 0:
            raise _OutOfBudget

    # ------------------------------------------------------------ the options of one player
    def _pick(self, rem: int, met: list[int]) -> int:
        """The most constrained player: the fewest partners left that it has not met."""
        best, best_n = -1, 1 << 30
        for p in _bits(rem):
            n = (rem & ~met[p] & ~(1 << p)).bit_count()
            if n < best_n:
                best, best_n = p, n
        return best

    def _options(self, rem: int, met: list[int]) -> list[tuple[Cost, tuple[int, ...]]]:
        p = self._pick(rem, met)
        others = rem & ~(1 << p)
        count = rem.bit_count()
        opts: list[tuple[Cost, float, tuple[int, ...]]] = []
        if count % 2 == 0 or count >= 5:
            for q in _bits(others):
                cost = ((met[p] >> q) & 1, 0, (self.club[p] >> q) & 1)
                opts.append((cost, self.rng.random(), (p, q)))
        if count % 2 == 1:
            qs = list(_bits(others))
            for i, q in enumerate(qs):
                for s in qs[i + 1:]:
                    cost = (((met[p] >> q) & 1) + ((met[p] >> s) & 1) + ((met[q] >> s) & 1),
                            self.tri[p] + self.tri[q] + self.tri[s],
                            ((self.club[p] >> q) & 1) + ((self.club[p] >> s) & 1)
                            + ((self.club[q] >> s) & 1))
                    opts.append((cost, self.rng.random(), (p, q, s)))
        opts.sort()
        return [(c, g) for c, _r, g in opts]

    def _rematch_bound(self, rem: int, met: list[int]) -> int:
        """Players left who have met everyone left: each needs a rematch, two share one."""
        stuck = sum(1 for p in _bits(rem) if not (rem & ~met[p] & ~(1 << p)))
        return (stuck + 1) // 2

    # ------------------------------------------------------------ the least cost of a round
    def best(self, everyone: int) -> tuple[list[tuple[int, ...]], Cost, bool]:
        self.best_cost: Cost = _INF
        self.best_groups: list[tuple[int, ...]] = []
        exact = True
        try:
            self._best(everyone, _ZERO, [])
        except _OutOfBudget:
            exact = False
        return self.best_groups, self.best_cost, exact

    def _best(self, rem: int, acc: Cost, groups: list[tuple[int, ...]]) -> None:
        if rem == 0:
            if acc < self.best_cost:
                self.best_cost, self.best_groups = acc, list(groups)
            return
        self.tick()
        if (acc[0] + self._rematch_bound(rem, self.met), acc[1], acc[2]) >= self.best_cost:
            return
        for cost, g in self._options(rem, self.met):
            total = _add(acc, cost)
            if total >= self.best_cost:
                break  # the options are sorted: the rest cost no less
            mask = 0
            for x in g:
                mask |= 1 << x
            groups.append(g)
            self._best(rem & ~mask, total, groups)
            groups.pop()
            if self.best_cost == acc:
                return  # nothing can beat what has been found

    # ------------------------------------------------------------ rematch-free schedules
    def clean_rounds(self, rem: int, met: list[int], limit: Cost | None
                     ) -> Iterator[list[tuple[int, ...]]]:
        """Every grouping of `rem` that meets no earlier opponent (within `limit`'s club and
        3-player costs, when given), lazily."""
        yield from self._clean(rem, met, _ZERO, limit, [])

    def _clean(self, rem: int, met: list[int], acc: Cost, limit: Cost | None,
               groups: list[tuple[int, ...]]) -> Iterator[list[tuple[int, ...]]]:
        if rem == 0:
            yield list(groups)
            return
        self.tick()
        if self._rematch_bound(rem, met):
            return
        for cost, g in self._options(rem, met):
            if cost[0]:
                continue
            total = _add(acc, cost)
            if limit is not None and (total[1] > limit[1]
                                      or (total[1] == limit[1] and total[2] > limit[2])):
                continue
            mask = 0
            for x in g:
                mask |= 1 << x
            groups.append(g)
            yield from self._clean(rem & ~mask, met, total, limit, groups)
            groups.pop()

    def extends(self, everyone: int, met: list[int], rounds: int) -> bool:
        if rounds == 0:
            return True
        for groups in self.clean_rounds(everyone, met, None):
            if self.extends(everyone, _with(met, groups), rounds - 1):
                return True
        return False


def _with(met: list[int], groups: Sequence[tuple[int, ...]]) -> list[int]:
    out = list(met)
    for g in groups:
        for x in g:
            for y in g:
                if x != y:
                    out[x] |= 1 << y
    return out


def _cost(groups: Sequence[tuple[int, ...]], met: list[int], club: list[int], tri: list[int]
          ) -> Cost:
    r = c = t = 0
    for g in groups:
        for i, x in enumerate(g):
            for y in g[i + 1:]:
                r += (met[x] >> y) & 1
                c += (club[x] >> y) & 1
        if len(g) == 3:
            t += sum(tri[x] for x in g)
    return (r, t, c)


def pair_round(entrants: Sequence[Entrant], history: Sequence[Sequence[int]],
               rounds_left: int, seed: int, budget: int = NODE_BUDGET) -> Pairing:
    """Pair one round of a block.

    `entrants`: the active players in the order their matches should take the mats (e.g. the
    standings); `history`: every earlier match of the block (entry numbers, including players
    no longer active); `rounds_left`: preliminary rounds still to pair, this one included.
    """
    n = len(entrants)
    if n < 2:
        raise Invalid("a block needs at least two active players to pair a round",
                      "move players into this block or withdraw it")
    nos = [e.no for e in entrants]
    if len(set(nos)) != n:
        raise Invalid("a player is listed twice in the block", "")
    index = {no: i for i, no in enumerate(nos)}
    met = [0] * n
    for past in history:
        present = [index[p] for p in past if p in index]
        for x in present:
            for y in present:
                if x != y:
                    met[x] |= 1 << y
    club = [0] * n
    for i, a in enumerate(entrants):
        for j, b in enumerate(entrants):
            if i != j and a.club and a.club == b.club:
                club[i] |= 1 << j
    # squared: a third 3-player match for one costs more than a second for two
    tri = [e.triples * e.triples for e in entrants]
    rng = random.Random(seed)
    everyone = (1 << n) - 1

    search = _Search(met, club, tri, rng, budget)
    groups, cost, exact = search.best(everyone)
    schedule = "last" if rounds_left <= 1 else "none"
    clear_after = 0
    if cost[0] == 0 and rounds_left > 1:
        # Look ahead: a round as good as the best that leaves the rest rematch-free, else one
        # with as fair a 3-player match that does (a same-club meeting now rather than a
        # rematch later), else any rematch-free round that does; when no such schedule is
        # found, one that keeps as many later rounds free as can be.
        found = _look_ahead(met, club, tri, everyone, cost, rounds_left - 1, seed, budget)
        if found is not None:
            groups, clear_after = found
            schedule = "clear" if clear_after == rounds_left - 1 else "none"
    final_cost = _cost(groups, met, club, tri)
    ordered = sorted((tuple(sorted(g)) for g in groups), key=lambda g: (len(g) == 3, g[0]))
    return Pairing(
        groups=tuple(tuple(nos[i] for i in g) for g in ordered),
        rematches=final_cost[0], triple_repeats=final_cost[1], same_club=final_cost[2],
        exact=exact, schedule=schedule, clear_after=clear_after,
    )


def _look_ahead(met: list[int], club: list[int], tri: list[int], everyone: int, best: Cost,
                later: int, seed: int, budget: int) -> tuple[list[tuple[int, ...]], int] | None:
    for rounds in range(later, 0, -1):
        # the fairer passes first, on a quarter of the budget each: they are a preference
        for limit, share in ((best, budget // 4), ((0, best[1], 1 << 30), budget // 4),
                             (None, budget)):
            look = _Search(met, club, tri, random.Random(seed + rounds), share)
            try:
                for candidate in look.clean_rounds(everyone, met, limit):
                    if look.extends(everyone, _with(met, candidate), rounds):
                        return candidate, rounds
            except _OutOfBudget:
                pass
    return None
