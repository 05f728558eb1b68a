"""The search behind desk/pairing.py: a block's state after some rounds (times each pair met,
3-player matches each played), the exact branch and bound for one round's least cost, and the
lazy enumeration of rounds under a bound that the look-ahead walks. Pure, seeded by the caller's
generator; every search counts its nodes against a budget (`OutOfBudget`)."""

from __future__ import annotations

import random
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass

# (most times met of a pair, sum of times met, 3-player matches played before, same club)
Cost = tuple[int, int, int, int]
ZERO: Cost = (0, 0, 0, 0)
INF: Cost = (1 << 30, 0, 0, 0)
# a round's cost after rule 1: (sum of times met, 3-player matches played before, same club)
Part = tuple[int, int, int]


class OutOfBudget(Exception):
    pass


def bits(mask: int) -> Iterator[int]:
    while mask:
        low = mask & -mask
        yield low.bit_length() - 1
        mask ^= low


def add(a: Cost, b: Cost) -> Cost:
    return (max(a[0], b[0]), a[1] + b[1], a[2] + b[2], a[3] + b[3])


@dataclass(slots=True)
class State:
    """The block after some rounds: times each pair met, 3-player matches each played."""

    met: list[list[int]]
    tri: list[int]

    def after(self, groups: Sequence[tuple[int, ...]]) -> State:
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
        return State(met, tri)

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
class Fair:
    """3-player matches spread evenly by the end: each player's final count in lo..hi."""

    lo: int
    hi: int

    def possible(self, tri: list[int], rounds: int) -> bool:
        if any(t > self.hi for t in tri):
            return False
        short = [self.lo - t for t in tri if t < self.lo]
        return all(s <= rounds for s in short) and sum(short) <= 3 * rounds

    def seats(self, tri: list[int], rounds: int, cap: int) -> Seats:
        """Who may and who must sit in the 3-player match of the next of `rounds` rounds for
        the counts to end within lo..hi, no pair meeting more than `cap` times."""
        full = short = must = 0
        total = 0
        for p, t in enumerate(tri):
            if t >= self.hi:
                full |= 1 << p
            if t < self.lo:
                short |= 1 << p
                total += self.lo - t
                if self.lo - t >= rounds:
                    must |= 1 << p
        need = max(0, total - 3 * (rounds - 1))
        return Seats(full, short, must, need, cap if rounds == 2 else 0)


@dataclass(frozen=True, slots=True)
class Seats:
    """This round's 3-player match: none of `full` (at their share), all of `must` (short by
    as many rounds as are left), at least `need` of `short` (below their share). With `cap`
    (one round left after this one), those still short after it sit together in the last
    round's: they may not have met `cap` times by then (0: no such check). Each a count any
    schedule within the bounds keeps, so none is lost."""

    full: int
    short: int
    must: int
    need: int
    cap: int

    def pair(self, met: list[list[int]], p: int, q: int) -> bool:
        return not (self.cap and (self.short >> p) & (self.short >> q) & 1
                    and met[p][q] + 1 >= self.cap)

    def trios(self, rem: int, met: list[list[int]], blocked: list[int]
              ) -> Iterator[tuple[int, int, int]]:
        """The 3-player matches of `rem` these seats allow."""
        if self.must.bit_count() > 3:
            return
        free = list(bits(rem & ~self.full))
        for i, p in enumerate(free):
            for j, q in enumerate(free[i + 1:], i + 1):
                if (blocked[p] >> q) & 1:
                    continue
                for s in free[j + 1:]:
                    trio = (1 << p) | (1 << q) | (1 << s)
                    if ((blocked[s] >> p) & 1 or (blocked[s] >> q) & 1 or self.must & ~trio
                            or (self.short & trio).bit_count() < self.need):
                        continue
                    if self.cap:  # those still short after it meet in the last round's
                        left = list(bits(self.short & ~trio | self.must))
                        if any(met[a][b] + ((trio >> a) & (trio >> b) & 1) >= self.cap
                               for k, a in enumerate(left) for b in left[k + 1:]):
                            continue
                    yield (p, q, s)


def fair_bounds(tri: list[int], rounds: int) -> Fair | None:
    n = len(tri)
    if n % 2 == 0 or n < 3:
        return None
    total = sum(tri) + 3 * rounds
    return Fair(total // n, -(-total // n))


class Search:
    def __init__(self, club: list[int], rng: random.Random, budget: list[int]) -> None:
        self.club = club
        self.rng = rng
        self.budget = budget  # [nodes left]

    def tick(self) -> None:
        self.budget[0] -= 1
        if self.budget[0] < 0:
            raise OutOfBudget

    # ------------------------------------------------------------ the options of one player
    def _pick(self, rem: int, blocked: list[int]) -> int:
        """The most constrained player: the fewest partners left it may still meet."""
        best, best_n = -1, 1 << 30
        for p in bits(rem):
            n = (rem & ~blocked[p] & ~(1 << p)).bit_count()
            if n < best_n:
                best, best_n = p, n
        return best

    def _options(self, rem: int, st: State, blocked: list[int], seats: Seats | None
                 ) -> list[tuple[Cost, float, tuple[int, ...]]]:
        """The groups of the most constrained player, with their costs (a random tie-break);
        with `seats`, the 3-player match first, as they say."""
        count = rem.bit_count()
        if seats is not None and count % 2 == 1:
            return [self._costed(st, g) for g in seats.trios(rem, st.met, blocked)]
        p = self._pick(rem, blocked)
        opts = [self._costed(st, (p, q)) for q in bits(rem & ~(1 << p))
                if seats is None or seats.pair(st.met, p, q)] if count != 3 else []
        if count % 2 == 1:
            qs = list(bits(rem & ~(1 << p)))
            opts += [self._costed(st, (p, q, s)) for i, q in enumerate(qs) for s in qs[i + 1:]]
        return opts

    def _costed(self, st: State, g: tuple[int, ...]) -> tuple[Cost, float, tuple[int, ...]]:
        met, club = st.met, self.club
        if len(g) == 2:
            p, q = g
            m = met[p][q]
            return ((m, m, 0, (club[p] >> q) & 1), self.rng.random(), g)
        p, q, s = g
        a, b, c = met[p][q], met[p][s], met[q][s]
        t = st.tri[p] ** 2 + st.tri[q] ** 2 + st.tri[s] ** 2
        cost = (max(a, b, c), a + b + c, t,
                ((club[p] >> q) & 1) + ((club[p] >> s) & 1) + ((club[q] >> s) & 1))
        return (cost, self.rng.random(), g)

    @staticmethod
    def _bound(rem: int, st: State) -> tuple[int, int]:
        """A least (most met, times met) for the players left: a player who has met everyone
        left `k` times or more needs a pair met that often; two can share one."""
        most = total = 0
        k = 1
        while True:
            stuck = 0
            for p in bits(rem):
                row = st.met[p]
                if all(row[q] >= k for q in bits(rem & ~(1 << p))):
                    stuck += 1
            if not stuck:
                return most, total
            most = k
            total += (stuck + 1) // 2
            k += 1

    # ------------------------------------------------------------ the least cost of a round
    def best(self, everyone: int, st: State) -> tuple[list[tuple[int, ...]], Cost, bool]:
        self.best_cost: Cost = INF
        self.best_groups: list[tuple[int, ...]] = []
        self.state = st
        self.blocked = st.at_least(1)
        exact = True
        try:
            self._best(everyone, ZERO, [])
        except OutOfBudget:
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
        opts = [(add(acc, c), r, g)
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
    def rounds_within(self, everyone: int, st: State, most: int, seats: Seats | None,
                      cut: list[Part] | None = None) -> Iterator[list[tuple[int, ...]]]:
        """Every grouping of the block that meets no pair met `most` times or more (its
        3-player match as `seats` say, when given; when `cut` is given, only those whose
        times met, 3-player and club costs are below `cut[0]`, read at each step: the caller
        may lower it as it goes), lazily."""
        blocked = st.at_least(most)
        yield from self._within(everyone, st, blocked, ZERO, seats, cut, [])

    def _within(self, rem: int, st: State, blocked: list[int], acc: Cost, seats: Seats | None,
                cut: list[Part] | None, groups: list[tuple[int, ...]]
                ) -> Iterator[list[tuple[int, ...]]]:
        if rem == 0:
            yield list(groups)
            return
        self.tick()
        for p in bits(rem):
            if not rem & ~blocked[p] & ~(1 << p):
                return  # someone left can meet no one left
        opts = self._options(rem, st, blocked, seats)
        opts.sort()
        for cost, _r, g in opts:
            if any((blocked[x] >> y) & 1 for x in g for y in g):
                continue
            total = add(acc, cost)
            if cut is not None and total[1:] >= cut[0]:
                continue  # each part only grows: past the cut for good
            mask = 0
            for x in g:
                mask |= 1 << x
            groups.append(g)
            yield from self._within(rem & ~mask, st, blocked, total, seats, cut, groups)
            groups.pop()

    def least_within(self, everyone: int, st: State, most: int, seats: Seats | None,
                     floor: Part, take: Callable[[list[tuple[int, ...]]], bool]
                     ) -> list[tuple[int, ...]] | None:
        """Of the groupings `rounds_within` gives that `take` accepts, one of the least times
        met, then 3-player, then club cost (branch and bound: each one taken lowers the cut);
        it stops at `floor`, a cost none can be below. Out of budget: the least found."""
        cut: list[Part] = [(1 << 30, 0, 0)]
        found: list[tuple[int, ...]] | None = None
        try:
            for groups in self.rounds_within(everyone, st, most, seats, cut):
                if take(groups):
                    found, cut[0] = groups, part(groups, st, self.club)
                    if cut[0] <= floor:
                        break
        except OutOfBudget:
            pass
        return found

    def least_most(self, everyone: int, st: State, cap: int) -> int:
        """The least `most met` a round can have now (rule 1 in its turn), or `cap` when it
        is `cap` or more."""
        for most in range(cap):
            for _groups in self.rounds_within(everyone, st, most + 1, None):
                return most
        return cap

    def extends(self, everyone: int, st: State, rounds: int, cap: int,
                fair: Fair | None) -> bool:
        """Whether `rounds` more rounds can be paired, each as good as the best for rule 1 in
        its turn (the most times met of its pairs the least), with no pair meeting more than
        `cap` times (and the triples within `fair`)."""
        if fair is not None and not fair.possible(st.tri, rounds):
            return False
        if rounds == 0:
            return True
        if not room(st, rounds, cap, fair):
            return False
        most = self.least_most(everyone, st, cap)
        if most >= cap:
            return False
        seats = fair.seats(st.tri, rounds, cap) if fair is not None else None
        for groups in self.rounds_within(everyone, st, most + 1, seats):
            if self.extends(everyone, st.after(groups), rounds - 1, cap, fair):
                return True
        return False


def part(groups: Sequence[tuple[int, ...]], st: State, club: list[int]) -> Part:
    r = t = c = 0
    for g in groups:
        for i, x in enumerate(g):
            for y in g[i + 1:]:
                r += st.met[x][y]
                c += (club[x] >> y) & 1
        if len(g) == 3:
            t += sum(st.tri[x] ** 2 for x in g)
    return (r, t, c)


def room(st: State, rounds: int, cap: int, fair: Fair | None) -> bool:
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
