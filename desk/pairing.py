"""Pairings within a block: every active player plays exactly once a round, 1 against 1, with
one 3-player match when the count is odd (never a bye), and

1. rematches weighed by how often the pair has met: in each round, the most times any of its
   pairs has met before is the least it can be (so no rematch at all while one can be
   avoided); over the preliminaries, no pair meets more than `K` times, for the least `K` the
   look-ahead finds; then, in this round, the fewest times met in all (a third meeting of one
   pair weighs as much as a second meeting of two);
2. the 3-player match goes round: by the end of the preliminaries every player's count is
   within one of every other's where the schedule of 1 allows it, and each round's goes to
   the players who have played the fewest (after 1): two of its three players win;
3. players of the same club kept apart where possible (after 2).

The search for a round is exact (branch and bound) within its budget. It looks ahead over the
remaining preliminary rounds: among the pairings of this round as good as the best in the
most times met, it takes one after which the remaining rounds can still be paired, each as
good as the best in the most times met in its turn, with no pair meeting more than `K` times,
`K` the least found (`K` = 1: no rematch at all); at that `K`, one after which the 3-player
counts can end within one of each other where there is one, then any; of those, the least in
times met, then 3-player, then club cost (a branch and bound too, not a cost measured against
the round's best without the look-ahead: the best may be one the look-ahead refuses). The
last round looks ahead over no round, for its own 3-player match.

Pure: the order of equal choices comes from a seeded generator, so the same history and seed
give the same pairing.
"""

from __future__ import annotations

import random
from collections.abc import Sequence
from dataclasses import dataclass

from .errors import Invalid
from .pairsearch import Cost, Fair, Search, State, fair_bounds, part

# Search nodes one pairing may visit: the exact search, then each level of the look-ahead (a
# value of `K`, with or without the even spread of the 3-player matches). A block of 10
# players takes a few hundred; the budget only matters when the search would otherwise try
# to prove that no schedule of a level exists.
NODE_BUDGET = 20_000
# The look-ahead stops, with what it has, after this many levels' worth of budget.
LOOK_LEVELS = 8


@dataclass(frozen=True, slots=True)
class Entrant:
    """A player to pair: entry number, club ("" for none), 3-player matches played so far."""

    no: int
    club: str = ""
    triples: int = 0


@dataclass(frozen=True, slots=True)
class Pairing:
    """One round of a block. `groups` hold entry numbers: pairs, and at most one triple.

    `rematches`: pairs of this round that have met before; `most_met`: the most times one of
    them had met before (0: no rematch). `exact`: the search proved the least cost a pairing
    of this round can have (most met, times met, then 3-player matches its triple has played
    before, then same-club meetings) within its budget. `schedule`: "clear" when the rest of
    the preliminaries can still be paired without a rematch after this round, "none" when no
    such schedule was found, "last" for the last round. `planned_most`: the `K` of the
    look-ahead (no pair meets more often over the preliminaries in the schedule it found,
    unless it already had); 0 when it found none or for the last round.
    """

    groups: tuple[tuple[int, ...], ...]
    rematches: int
    same_club: int
    triple_repeats: int
    exact: bool
    schedule: str
    most_met: int = 0
    planned_most: int = 0


def _cost(groups: Sequence[tuple[int, ...]], st: State, club: list[int]) -> Cost:
    most = max((st.met[x][y] for g in groups for x in g for y in g if x != y), default=0)
    return (most, *part(groups, st, club))


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
    met = [[0] * n for _ in range(n)]
    for past in history:
        present = [index[p] for p in past if p in index]
        for x in present:
            for y in present:
                if x != y:
                    met[x][y] += 1
    club = [0] * n
    for i, a in enumerate(entrants):
        for j, b in enumerate(entrants):
            if i != j and a.club and a.club == b.club:
                club[i] |= 1 << j
    st = State(met, [e.triples for e in entrants])
    everyone = (1 << n) - 1

    # squared (in the cost): a third 3-player match for one costs more than a second for two
    search = Search(club, random.Random(seed), [budget])
    groups, cost, exact = search.best(everyone, st)
    schedule = "last" if rounds_left <= 1 else "none"
    planned = 0
    # the last round looks ahead too: over no later round, for its own 3-player match
    found = _look_ahead(st, club, everyone, cost, max(rounds_left, 1) - 1, seed, budget)
    if found is not None:
        groups, planned = found
        if rounds_left > 1 and planned == 1:
            schedule = "clear"
    final_cost = _cost(groups, st, club)
    ordered = sorted((tuple(sorted(g)) for g in groups), key=lambda g: (len(g) == 3, g[0]))
    return Pairing(
        groups=tuple(tuple(nos[i] for i in g) for g in ordered),
        rematches=sum(1 for g in groups for i, x in enumerate(g) for y in g[i + 1:]
                      if st.met[x][y]),
        most_met=final_cost[0], triple_repeats=final_cost[2], same_club=final_cost[3],
        exact=exact, schedule=schedule, planned_most=planned,
    )


def _look_ahead(st: State, club: list[int], everyone: int, best: Cost, later: int,
                seed: int, budget: int) -> tuple[list[tuple[int, ...]], int] | None:
    """A round as good as `best` for rule 1 (the most times met) after which the `later`
    rounds can be paired with no pair meeting more than `K` times, for the least `K`; at that
    `K`, one after which the 3-player counts can end within one of each other where there is
    one; of those, the least in times met, then 3-player, then club cost."""
    left = budget * LOOK_LEVELS
    most_now = max((max(row) for row in st.met), default=0)
    fair_now = fair_bounds(st.tri, later + 1)

    def least(cap: int, fair: Fair | None) -> list[tuple[int, ...]] | None:
        nonlocal left
        share = min(budget, left)
        look = Search(club, random.Random(seed + cap), [share])
        seats = fair.seats(st.tri, later + 1, cap) if fair is not None else None
        found = look.least_within(
            everyone, st, best[0] + 1, seats, best[1:],
            lambda groups: look.extends(everyone, st.after(groups), later, cap, fair))
        left -= share - max(look.budget[0], 0)
        return found

    for cap in range(best[0] + 1, max(best[0], most_now) + later + 2):
        if left <= 0:
            return None
        anyone = least(cap, None)
        if anyone is None:
            continue  # no schedule at this K (or none found within the budget)
        if fair_now is not None and left > 0:
            fair = least(cap, fair_now)
            if fair is not None:
                return fair, cap
        return anyone, cap
    return None
