"""Pairings (desk/pairing.py) as properties, checked against an independent brute force: every
player exactly once a round, one 3-player match in an odd block, no rematch while one can be
avoided, a rematch weighed by how often the pair has met, clubs kept apart where possible,
whole schedules without rematches, and small blocks whose pairs meet as few times as can be
with the 3-player match spread evenly."""

from __future__ import annotations

import functools
import itertools
from collections import Counter
from collections.abc import Iterator

import pytest
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st

from desk.errors import Invalid
from desk.pairing import Entrant, pair_round

FAST = settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])


def groupings(players: list[int]) -> Iterator[list[tuple[int, ...]]]:
    """Every way to seat `players` in pairs and triples."""
    if not players:
        yield []
        return
    first, rest = players[0], players[1:]
    for i, q in enumerate(rest):
        for g in groupings(rest[:i] + rest[i + 1:]):
            yield [(first, q), *g]
    for a, b in itertools.combinations(rest, 2):
        for g in groupings([x for x in rest if x not in (a, b)]):
            yield [(first, a, b), *g]


def cost(groups: list[tuple[int, ...]], met: Counter[frozenset[int]], club: dict[int, str],
         triples: dict[int, int]) -> tuple[int, int, int, int]:
    """(most times met of a pair, times met in all, 3-player cost, same-club meetings)."""
    m = r = c = t = 0
    for g in groups:
        for a, b in itertools.combinations(g, 2):
            m = max(m, met[frozenset((a, b))])
            r += met[frozenset((a, b))]
            c += bool(club[a]) and club[a] == club[b]
        if len(g) == 3:
            t += sum(triples.get(p, 0) ** 2 for p in g)
    return m, r, t, c


def met_of(history: list[tuple[int, ...]]) -> Counter[frozenset[int]]:
    return Counter(frozenset(p) for g in history for p in itertools.combinations(g, 2))


def spread_kept(groups: list[tuple[int, ...]], triples: dict[int, int], players: list[int],
                rounds_left: int) -> bool:
    """Whether the 3-player match of this round leaves every count able to end within one of
    every other's (lo..hi) after `rounds_left` rounds, this one included."""
    n = len(players)
    total = sum(triples.get(p, 0) for p in players) + 3 * rounds_left
    lo, hi = total // n, -(-total // n)
    after = dict(triples)
    for g in groups:
        if len(g) == 3:
            for p in g:
                after[p] = after.get(p, 0) + 1
    later = rounds_left - 1
    short = [lo - after.get(p, 0) for p in players if after.get(p, 0) < lo]
    return (all(after.get(p, 0) <= hi for p in players) and all(x <= later for x in short)
            and sum(short) <= 3 * later)


def valid_groupings(players: list[int]) -> list[list[tuple[int, ...]]]:
    out = [g for g in groupings(players)
           if sum(1 for x in g if len(x) == 3) == len(players) % 2]
    return out


@st.composite
def block_history(draw: st.DrawFn, max_n: int = 9) -> tuple[list[Entrant],
                                                              list[tuple[int, ...]]]:
    n = draw(st.integers(2, max_n))
    clubs = draw(st.lists(st.sampled_from(["", "東", "西", "南"]), min_size=n, max_size=n))
    triples = draw(st.lists(st.integers(0, 2), min_size=n, max_size=n))
    players = list(range(1, n + 1))
    # earlier matches among these players and some who have withdrawn since (100, 101)
    pool = [*players, 100, 101]
    history = draw(st.lists(
        st.lists(st.sampled_from(pool), min_size=2, max_size=3, unique=True).map(tuple),
        max_size=12))
    ents = [Entrant(p, clubs[i], triples[i]) for i, p in enumerate(players)]
    return ents, history


def check_shape(ents: list[Entrant], groups: tuple[tuple[int, ...], ...]) -> None:
    seated = [p for g in groups for p in g]
    assert sorted(seated) == sorted(e.no for e in ents), "every player exactly once"
    assert all(len(g) in (2, 3) for g in groups)
    assert sum(1 for g in groups if len(g) == 3) == len(ents) % 2, "one triple iff odd"


@FAST
@given(block_history(), st.integers(1, 6), st.integers(0, 2 ** 20))
def test_no_rematch_while_one_can_be_avoided(case, rounds_left, seed):
    """Rule 1 in each round: the most times any of its pairs has met before is the least it
    can be (0, no rematch at all, whenever a rematch can be avoided)."""
    ents, history = case
    p = pair_round(ents, history, rounds_left, seed)
    check_shape(ents, p.groups)
    met = met_of(history)
    club = {e.no: e.club for e in ents}
    tri = {e.no: e.triples for e in ents}
    least = min(cost(g, met, club, tri)[0] for g in valid_groupings([e.no for e in ents]))
    got = cost(list(p.groups), met, club, tri)
    assert p.exact
    assert got[0] == least == p.most_met, (p, least)
    if least == 0:
        assert p.rematches == 0
    pairs = [frozenset(x) for g in p.groups for x in itertools.combinations(g, 2)]
    assert p.rematches == sum(1 for x in pairs if met[x])
    assert (got[2], got[3]) == (p.triple_repeats, p.same_club)


@FAST
@given(block_history(), st.integers(0, 2 ** 20))
# found by a fresh clone's loaded run on main (then reverted): cost (1, 3, 0, 0) where
# (1, 2, 0, 0) is possible
@example(case=([Entrant(1), Entrant(2), Entrant(3, triples=1), Entrant(4), Entrant(5)],
               [(1, 2), (1, 2), (1, 4), (2, 4, 5)]), seed=0)
def test_the_last_round_spreads_triples_and_keeps_clubs_apart_where_possible(case, seed):
    """The last round: the most times met the least (rule 1); then the 3-player match to
    those who keep the counts within one of each other, where one does; then the fewest
    times met in all, the fairest triple, the fewest same-club meetings."""
    ents, history = case
    p = pair_round(ents, history, 1, seed)
    met = met_of(history)
    club = {e.no: e.club for e in ents}
    tri = {e.no: e.triples for e in ents}
    players = [e.no for e in ents]
    options = valid_groupings(players)
    least = min(cost(g, met, club, tri)[0] for g in options)
    options = [g for g in options if cost(g, met, club, tri)[0] == least]
    fair = [g for g in options if spread_kept(g, tri, players, 1)]
    best = min(cost(g, met, club, tri) for g in (fair or options))
    assert cost(list(p.groups), met, club, tri) == best
    assert p.schedule == "last"


@FAST
@given(st.integers(1, 4).map(lambda k: 2 * k), st.integers(1, 5), st.integers(0, 2 ** 20),
       st.data())
def test_a_first_round_keeps_clubs_apart_where_possible(n, rounds, seed, data):
    clubs = data.draw(st.lists(st.sampled_from(["", "A", "B", "C"]), min_size=n, max_size=n))
    ents = [Entrant(i + 1, c) for i, c in enumerate(clubs)]
    p = pair_round(ents, [], min(rounds, n - 1), seed)
    club = {e.no: e.club for e in ents}
    least = min(cost(g, Counter(), club, {})[3] for g in valid_groupings(list(club)))
    # every pairing of a fresh even block extends to a whole round robin: no trade-off
    assert p.same_club == least


def play_schedule(n: int, rounds: int, seed: int, clubs: list[str]) -> list[tuple[int, ...]]:
    ents = [Entrant(i + 1, clubs[i]) for i in range(n)]
    history: list[tuple[int, ...]] = []
    triples: dict[int, int] = {}
    for r in range(rounds):
        now = [Entrant(e.no, e.club, triples.get(e.no, 0)) for e in ents]
        p = pair_round(now, history, rounds - r, seed + r)
        check_shape(now, p.groups)
        for g in p.groups:
            history.append(g)
            if len(g) == 3:
                for x in g:
                    triples[x] = triples.get(x, 0) + 1
    return history


def check_no_rematch(history: list[tuple[int, ...]]) -> None:
    pairs = [frozenset(p) for g in history for p in itertools.combinations(g, 2)]
    assert len(pairs) == len(set(pairs)), "a rematch"


@settings(max_examples=25, deadline=None)
@given(st.sampled_from([4, 6, 8, 10, 12, 14, 16]), st.integers(1, 6), st.integers(0, 2 ** 20),
       st.data())
def test_whole_preliminaries_of_an_even_block_have_no_rematch(n, rounds, seed, data):
    rounds = min(rounds, n - 1)  # K_n has n-1 disjoint rounds: more must rematch
    clubs = data.draw(st.lists(st.sampled_from(["", "A", "B"]), min_size=n, max_size=n))
    history = play_schedule(n, rounds, seed, clubs)
    check_no_rematch(history)
    games = {p: sum(p in g for g in history) for p in range(1, n + 1)}
    assert set(games.values()) == {rounds}, "every player exactly `rounds` matches"


@settings(max_examples=8, deadline=None)
@given(st.sampled_from([11, 13, 15]), st.integers(0, 2 ** 20))
# the fair look-ahead ran out of its budget here and ended with a spread of 2
@example(n=15, seed=621575)
def test_six_rounds_of_an_odd_block_have_no_rematch_and_one_triple_each(n, seed):
    history = play_schedule(n, 6, seed, [f"c{i % 4}" for i in range(n)])
    check_no_rematch(history)
    per_round = (n - 1) // 2
    rounds = [history[i:i + per_round] for i in range(0, len(history), per_round)]
    assert len(rounds) == 6
    assert all(sum(1 for g in r if len(g) == 3) == 1 for r in rounds)
    games = {p: sum(p in g for g in history) for p in range(1, n + 1)}
    assert set(games.values()) == {6}
    # the 3-player match goes round: the look-ahead keeps every count within one of every
    # other's by the end where a rematch-free schedule allows it (it does for these sizes)
    seats = [p for g in history if len(g) == 3 for p in g]
    counts = [seats.count(p) for p in range(1, n + 1)]
    assert max(counts) - min(counts) <= 1, counts


def test_nine_players_six_rounds_uses_every_pair_exactly_once():
    """9 players, 6 rounds: 3 pairs and a triple a round are 6 meetings, 36 in all: every
    pair of the block exactly once (the tightest case of the day's odd block)."""
    history = play_schedule(9, 6, 7, [""] * 9)
    check_no_rematch(history)
    pairs = {frozenset(p) for g in history for p in itertools.combinations(g, 2)}
    assert len(pairs) == 36


def test_rematches_come_only_when_they_cannot_be_avoided():
    history = play_schedule(4, 5, 1, ["", "", "", ""])
    pairs = [frozenset(p) for g in history for p in itertools.combinations(g, 2)]
    assert len(set(pairs[:6])) == 6, "the first three rounds meet everyone once"


def test_the_same_history_and_seed_give_the_same_pairing():
    ents = [Entrant(i, "x" if i % 2 else "") for i in range(1, 11)]
    a = pair_round(ents, [(1, 2), (3, 4)], 5, 99)
    b = pair_round(ents, [(1, 2), (3, 4)], 5, 99)
    assert a == b


def test_a_block_of_one_cannot_be_paired():
    with pytest.raises(Invalid, match="at least two"):
        pair_round([Entrant(1)], [], 6, 0)


# ------------------------------------------------------------ small blocks, whole preliminaries
@functools.cache
def least_most_met(n: int, rounds: int, spread: int | None) -> int:
    """By brute force: the least `K` such that some schedule of `rounds` rounds of `n`
    players has no pair meet more than `K` times (and, with `spread`, the 3-player counts
    end within `spread` of each other)."""
    options = valid_groupings(list(range(1, n + 1)))
    pairs_of = [[frozenset(x) for g in o for x in itertools.combinations(g, 2)]
                for o in options]
    triple_of = [next((g for g in o if len(g) == 3), ()) for o in options]

    def fits(k: int) -> bool:
        met: Counter[frozenset[int]] = Counter()
        tri: Counter[int] = Counter()

        def go(r: int) -> bool:
            if r == rounds:
                counts = [tri[p] for p in range(1, n + 1)]
                return spread is None or max(counts) - min(counts) <= spread
            for i in (range(len(options)) if r else range(1)):  # round 1: by symmetry
                if any(met[x] >= k for x in pairs_of[i]):
                    continue
                met.update(pairs_of[i])
                tri.update(triple_of[i])
                ok = go(r + 1)
                met.subtract(pairs_of[i])
                tri.subtract(triple_of[i])
                if ok:
                    return True
            return False

        return go(0)

    k = 1
    while not fits(k):
        k += 1
    return k


def most_met_and_spread(history: list[tuple[int, ...]], n: int) -> tuple[int, int]:
    met = met_of(history)
    seats = Counter(p for g in history if len(g) == 3 for p in g)
    counts = [seats[p] for p in range(1, n + 1)]
    return max(met.values()), max(counts) - min(counts)


# 4 players: 3 rounds are a round robin, so over 6 every pair meets exactly twice; 5 players
# (a pair and a triple a round, 24 meetings of 10 pairs): brute force finds 3, with the
# 3-player counts 3 or 4 (spread 1); 6: 2; 7: 2 with spread 1; 8: 1 (7 rounds are a round
# robin).
@pytest.mark.parametrize("n", [4, 5, 6, 7, 8])
@pytest.mark.parametrize("seed", [0, 1, 2, 3, 17, 1000, 4242])
def test_small_blocks_meet_as_few_times_as_can_be(n, seed):
    history = play_schedule(n, 6, seed, [""] * n)
    most, spread = most_met_and_spread(history, n)
    assert most == least_most_met(n, 6, None), history
    if n % 2:
        # a schedule with the least `most` and the counts within one exists for 5 and 7
        assert least_most_met(n, 6, 1) == most
        assert spread <= 1, history
    if n == 4:
        assert set(met_of(history).values()) == {2}

