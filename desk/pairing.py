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
`K` the least found (`K` = 1: no rematch at all); at that `K`, with the 3-player counts
ending within one of each other first, then without; this round as good as the best in
times met, 3-player and club costs first, then in times met and 3-player costs, then in times
met, then any. The last round looks ahead over no round, for its own 3-player match.

Pure: the order of equal choices comes from a seeded generator, so the same history and seed
give the same pairing.
"""

from __future__ import annotations

import random
from collections.abc import Iterator, Sequence
from dataclasses import dataclass

from .errors import Invalid

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


# (most times met of a pair, sum of times met, 3-player matches played before, same club)
Cost = tuple[int, int, int, int]
_ZERO: Cost = (0, 0, 0, 0)
_INF: Cost = (1 << 30, 0, 0, 0)


class _OutOfBudget(Exception):
    pass


def _bits(mask: int) -> Iterator[int]:
    while mask:
        low = mask & -mask
        yield low.bit_length() - 1
        mask ^= low


def _add(a: Cost, b: Cost) -> Cost:
    return (max(a[0], b[0]), a[1] + b[1], a[2] + b[2], a[3] + b[3])


@dataclass(slots=True)
class _State:
    """The block after some rounds: times each pair met, 3-player matches each played."""

    met: list[list[int]]
    tri: list[int]

    def after(self, groups: Sequence[tuple[int, ...]]) -> _State:
        met = [list(row) for row in self.met]
        tri = list(self.tri)
        for g in groups:
            for x in g:
                for y in g:
                    if x != y:
                        met[x][y] += 1
            if len(g) == 3:
                for x in g:
                    tri[x] += 1
        return _State(met, tri)

    def at_least(self, k: int) -> list[int]:
        """Per player, the mask of those it has met `k` times or more."""
        out = []
        for row in self.met:
            mask = 0
            for q, c in enumerate(row):
                if c >= k:
                    mask |= 1 << q
            out.append(mask)
        return out


@dataclass(frozen=True, slots=True)
class _Fair:
    """3-player matches spread evenly by the end: each player's final count in lo..hi."""

    lo: int
    hi: int

    def possible(self, tri: list[int], rounds: int) -> bool:
        if any(t > self.hi for t in tri):
            return False
        short = [self.lo - t for t in tri if t < self.lo]
        return all(s <= rounds for s in short) and sum(short) <= 3 * rounds


def _fair(tri: list[int], rounds: int) -> _Fair | None:
    n = len(tri)
    if n % 2 == 0 or n < 3:
        return None
    total = sum(tri) + 3 * rounds
    return _Fair(total // n, -(-total // n))


class _Search:
    def __init__(self, club: list[int], rng: random.Random, budget: list[int]) -> None:
        self.club = club
        self.rng = rng
        self.budget = budget  # [nodes left]

    def tick(self) -> None:
        self.budget[0] -= 1
        if self.budget[0] < 0:
            raise _OutOfBudget

    # ------------------------------------------------------------ the options of one player
    def _pick(self, rem: int, blocked: list[int]) -> int:
        """The most constrained player: the fewest partners left it may still meet."""
        best, best_n = -1, 1 << 30
        for p in _bits(rem):
            n = (rem & ~blocked[p] & ~(1 << p)).bit_count()
            if n < best_n:
                best, best_n = p, n
        return best

    def _options(self, rem: int, st: _State, blocked: list[int], fair: _Fair | None
                 ) -> list[tuple[Cost, float, tuple[int, ...]]]:
        """The groups of the most constrained player, with their costs (a random tie-break);
        with `fair`, no triple takes a player past its share."""
        met, club = st.met, self.club
        p = self._pick(rem, blocked)
        others = rem & ~(1 << p)
        count = rem.bit_count()
        opts: list[tuple[Cost, float, tuple[int, ...]]] = []
        if count % 2 == 0 or count >= 5:
            for q in _bits(others):
                m = met[p][q]
                opts.append(((m, m, 0, (club[p] >> q) & 1), self.rng.random(), (p, q)))
        if count % 2 == 1:
            qs = list(_bits(others))
            if fair is not None:
                if st.tri[p] >= fair.hi:
                    qs = []
                qs = [q for q in qs if st.tri[q] < fair.hi]
            for i, q in enumerate(qs):
                for s in qs[i + 1:]:
                    a, b, c = met[p][q], met[p][s], met[q][s]
                    t = st.tri[p] ** 2 + st.tri[q] ** 2 + st.tri[s] ** 2
                    cost = (max(a, b, c), a + b + c, t,
                            ((club[p] >> q) & 1) + ((club[p] >> s) & 1) + ((club[q] >> s) & 1))
                    opts.append((cost, self.rng.random(), (p, q, s)))
        return opts

    @staticmethod
    def _bound(rem: int, st: _State) -> tuple[int, int]:
        """A least (most met, times met) for the players left: a player who has met everyone
        left `k` times or more needs a pair met that often; two can share one."""
        most = total = 0
        k = 1
        while True:
            stuck = 0
            for p in _bits(rem):
                row = st.met[p]
                if all(row[q] >= k for q in _bits(rem & ~(1 << p))):
                    stuck += 1
            if not stuck:
                return most, total
            most = k
            total += (stuck + 1) // 2
            k += 1

    # ------------------------------------------------------------ the least cost of a round
    def best(self, everyone: int, st: _State) -> tuple[list[tuple[int, ...]], Cost, bool]:
        self.best_cost: Cost = _INF
        self.best_groups: list[tuple[int, ...]] = []
        self.state = st
        self.blocked = st.at_least(1)
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
        most, total = self._bound(rem, self.state)
        if (max(acc[0], most), acc[1] + total, acc[2], acc[3]) >= self.best_cost:
            return
        opts = [(_add(acc, c), r, g)
                for c, r, g in self._options(rem, self.state, self.blocked, None)]
        opts.sort()
        for total_cost, _r, g in opts:
            if total_cost >= self.best_cost:
                break  # sorted by the total: the rest cost no less
            mask = 0
            for x in g:
                mask |= 1 << x
            groups.append(g)
            self._best(rem & ~mask, total_cost, groups)
            groups.pop()
            if self.best_cost == acc:
                return  # nothing can beat what has been found

    # ------------------------------------------------------------ schedules under a bound
    def rounds_within(self, everyone: int, st: _State, most: int,
                      limit: tuple[int, int, int] | None, fair: _Fair | None
                      ) -> Iterator[list[tuple[int, ...]]]:
        """Every grouping of the block that meets no pair met `most` times or more (within
        `limit`'s times met, 3-player and club costs, in that order, when given; no triple
        past `fair`'s share, when given), lazily."""
        blocked = st.at_least(most)
        yield from self._within(everyone, st, blocked, _ZERO, limit, fair, [])

    def _within(self, rem: int, st: _State, blocked: list[int], acc: Cost,
                limit: tuple[int, int, int] | None, fair: _Fair | None,
                groups: list[tuple[int, ...]]) -> Iterator[list[tuple[int, ...]]]:
        if rem == 0:
            yield list(groups)
            return
        self.tick()
        for p in _bits(rem):
            if not rem & ~blocked[p] & ~(1 << p):
                return  # someone left can meet no one left
        opts = self._options(rem, st, blocked, fair)
        opts.sort()
        for cost, _r, g in opts:
            if any((blocked[x] >> y) & 1 for x in g for y in g):
                continue
            total = _add(acc, cost)
            if limit is not None and total[1:] > limit:
                continue  # each part only grows: past the limit for good
            mask = 0
            for x in g:
                mask |= 1 << x
            groups.append(g)
            yield from self._within(rem & ~mask, st, blocked, total, limit, fair, groups)
            groups.pop()

    def least_most(self, everyone: int, st: _State, cap: int) -> int:
        """The least `most met` a round can have now (rule 1 in its turn), or `cap` when it
        is `cap` or more."""
        for most in range(cap):
            for _groups in self.rounds_within(everyone, st, most + 1, None, None):
                return most
        return cap

    def extends(self, everyone: int, st: _State, rounds: int, cap: int,
                fair: _Fair | None) -> bool:
        """Whether `rounds` more rounds can be paired, each as good as the best for rule 1 in
        its turn (the most times met of its pairs the least), with no pair meeting more than
        `cap` times (and the triples within `fair`)."""
        if fair is not None and not fair.possible(st.tri, rounds):
            return False
        if rounds == 0:
            return True
        if not _room(st, rounds, cap, fair):
            return False
        most = self.least_most(everyone, st, cap)
        if most >= cap:
            return False
        for groups in self.rounds_within(everyone, st, most + 1, None, fair):
            if self.extends(everyone, st.after(groups), rounds - 1, cap, fair):
                return True
        return False


def _room(st: _State, rounds: int, cap: int, fair: _Fair | None) -> bool:
    """A count that `rounds` more rounds need: meetings left under `cap`, in all and per
    player (one a round, two in a 3-player match)."""
    n = len(st.tri)
    per_round = n // 2 if n % 2 == 0 else (n - 3) // 2 + 3
    total = 0
    for p, row in enumerate(st.met):
        own = sum(cap - c for q, c in enumerate(row) if q != p and c < cap)
        need = rounds
        if fair is not None and st.tri[p] < fair.lo:
            need += fair.lo - st.tri[p]
        if own < need:
            return False
        total += own
    return total // 2 >= rounds * per_round


def _cost(groups: Sequence[tuple[int, ...]], st: _State, club: list[int]) -> Cost:
    m = r = c = t = 0
    for g in groups:
        for i, x in enumerate(g):
            for y in g[i + 1:]:
                m = max(m, st.met[x][y])
                r += st.met[x][y]
                c += (club[x] >> y) & 1
        if len(g) == 3:
            t += sum(st.tri[x] ** 2 for x in g)
    return (m, r, t, c)


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
    st = _State(met, [e.triples for e in entrants])
    everyone = (1 << n) - 1

    # squared (in the cost): a third 3-player match for one costs more than a second for two
    search = _Search(club, random.Random(seed), [budget])
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


def _look_ahead(st: _State, club: list[int], everyone: int, best: Cost, later: int,
                seed: int, budget: int) -> tuple[list[tuple[int, ...]], int] | None:
    """A round as good as `best` for rule 1 (the most times met) after which the `later`
    rounds can be paired with no pair meeting more than `K` times, for the least `K`; at that
    `K`, with evenly spread 3-player matches first, then without; this round as good as `best`
    in times met, 3-player and club costs first, then in times met and 3-player costs, then in
    times met, then any."""
    left = budget * LOOK_LEVELS
    most_now = max((max(row) for row in st.met), default=0)
    fair_now = _fair(st.tri, later + 1)

    def find(cap: int, limit: tuple[int, int, int] | None, fair: _Fair | None, share: int
             ) -> list[tuple[int, ...]] | None:
        nonlocal left
        look = _Search(club, random.Random(seed + cap), [min(share, left)])
        try:
            for candidate in look.rounds_within(everyone, st, best[0] + 1, limit, fair):
                if look.extends(everyone, st.after(candidate), later, cap, fair):
                    return candidate
        except _OutOfBudget:
            pass
        finally:
            left -= min(share, left) - max(look.budget[0], 0)
        return None

    for cap in range(best[0] + 1, max(best[0], most_now) + later + 2):
        if left <= 0:
            return None
        # is there a schedule at this K at all? Then the preferred ones at this K
        anyone = find(cap, None, None, budget)
        if anyone is None:
            continue
        for fair in ((fair_now, None) if fair_now is not None else (None,)):
            for limit in ((best[1], best[2], best[3]), (best[1], best[2], 1 << 30),
                          (best[1], 1 << 30, 1 << 30), None):
                if fair is None and limit is None:
                    return anyone, cap
                found = find(cap, limit, fair, budget // 4)
                if found is not None:
                    return found, cap
        return anyone, cap
    return None
