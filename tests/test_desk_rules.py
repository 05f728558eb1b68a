"""The desk's pure parts: results and standings by the rules, entries CSV, the block draw, what
does not add up, the steps' order, the JSON document. No database, no server."""

from __future__ import annotations

import csv
import io
import itertools
import json
from dataclasses import replace

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from desk import tournament as ops
from desk.blocks import draw
from desk.checks import complete, flags, round_flags
from desk.entries import Entry, read_entries, write_csv
from desk.errors import Conflict, Forbidden, Invalid
from desk.export import from_document, to_document
from desk.model import Method, Player, Result, Settings, Tournament
from desk.standings import (
    Outcome,
    final_by_lottery,
    final_places,
    lottery,
    outcomes,
    standings,
)
from desk.views import history_view

W, D, L = Outcome.WIN, Outcome.DRAW, Outcome.LOSS


# ---------------------------------------------------------------------- rule 16
@pytest.mark.parametrize(("cards", "want"), [
    ((9, 8), (W, L)), ((8, 9), (L, W)), ((8, 8), (D, D)), ((0, 0), (D, D)),
    ((7, 5, 4), (W, W, L)),  # the top two win
    ((7, 4, 4), (W, D, D)),  # 2nd and 3rd equal: the 1st wins, those two draw
    ((4, 7, 4), (D, W, D)),
    ((6, 6, 3), (W, W, L)),  # two equal at the top are the top two
    ((5, 5, 5), (D, D, D)),  # nobody is beaten
])
def test_outcomes_by_rule_16(cards, want):
    players = tuple(range(1, len(cards) + 1))
    got = outcomes(players, Result(cards))
    assert tuple(got[p] for p in players) == want


def test_a_tied_final_is_won_by_who_took_the_extra_card():
    assert outcomes((3, 8), Result((8, 8), tiebreak=8), final=True) == {3: L, 8: W}
    assert outcomes((3, 8), Result((8, 8)), final=True) == {3: D, 8: D}
    # the extra card counts only in a final, and only for a tie
    assert outcomes((3, 8), Result((9, 8), tiebreak=8), final=True) == {3: W, 8: L}


def test_the_lottery_is_stable_and_does_not_depend_on_who_else_entered():
    ps = [Player(i, f"p{i}") for i in range(1, 30)]
    a = lottery(42, ps)
    b = lottery(42, ps[:10])
    assert sorted(a.values()) == list(range(1, 30))
    order_a = sorted(range(1, 11), key=a.__getitem__)
    assert order_a == sorted(range(1, 11), key=b.__getitem__)
    assert lottery(43, ps) != a


def two_block_tournament(n: int = 6, rounds: int = 2) -> Tournament:
    t = Tournament("t", "大会", settings=Settings(rounds=rounds, cards=17), lottery_seed=5,
                   pairing_seed=9)
    t = ops.apply(t, ops.add_players(t, [Entry(f"選手{i}", club=f"c{i % 3}")
                                         for i in range(1, n + 1)]))
    t = ops.apply(t, ops.draw_blocks(t, 1, Method.RANDOM, 1, ["main"]))
    return t


def read(t: Tournament, block: str, number: int, channel: str = "main") -> Tournament:
    """The round as its channel reads it (results are entered once it is read)."""
    t = ops.apply(t, ops.start_reading(t, block, number, channel, "now"))
    return ops.apply(t, ops.confirm_reading(t, block, number, 1, f"{block}{number}.jsonl"))


def play(t: Tournament, scores) -> Tournament:
    """Pair block A's next round, read it and enter `scores(players)` for every match."""
    t = ops.apply(t, ops.pair_next(t, "A", "now"))
    r = t.rounds_of("A")[-1]
    t = read(t, "A", r.number)
    for m in r.matches:
        cards = dict(zip(m.players, scores(m.players), strict=True))
        t = ops.apply(t, ops.record_result(t, r.number, m.mat, cards, None, "operator", "now"))
    return t


@settings(max_examples=40, deadline=None)
@given(st.integers(4, 9), st.data())
def test_standings_order_wins_then_cards_then_lottery(n, data):
    t = two_block_tournament(n, rounds=3)
    for _ in range(3):
        t = play(t, lambda ps: [data.draw(st.integers(0, 17 // len(ps))) for _ in ps])
    rows = standings(t, "A")
    keys = [(-s.wins, -s.cards, s.lottery) for s in rows]
    assert keys == sorted(keys)
    assert [s.rank for s in rows] == list(range(1, n + 1))
    # an independent tally of wins and cards from the matches themselves
    for s in rows:
        wins = cards = 0
        for r in t.rounds:
            for m in r.matches:
                if s.no in m.players:
                    i = m.players.index(s.no)
                    cards += m.result.cards[i]
                    mine, others = m.result.cards[i], [c for j, c in enumerate(m.result.cards)
                                                       if j != i]
                    if len(m.players) == 2:
                        wins += mine > others[0]
                    else:
                        ordered = sorted(m.result.cards, reverse=True)
                        everyone_equal = ordered[0] == ordered[1] == ordered[2]
                        wins += (mine == ordered[0] and not everyone_equal) or (
                            mine == ordered[1] and ordered[1] > ordered[2])
        assert (s.wins, s.cards) == (wins, cards), s
        assert s.played == 3
    for a, b in itertools.pairwise(rows):
        if (a.wins, a.cards) == (b.wins, b.cards):
            assert a.by_lottery and b.by_lottery and a.lottery < b.lottery


def test_the_lottery_decides_nothing_until_the_preliminaries_are_complete():
    """Before: equals share a place and no place is drawn; after: the lottery orders them, and
    where it chose who goes to the final that is said (drawn and left out)."""
    t = two_block_tournament(6, rounds=2)
    t = play(t, lambda ps: [5, 3])  # three winners equal in wins and cards, three losers
    rows = standings(t, "A")
    assert [s.place for s in rows] == [1, 1, 1, 4, 4, 4]
    assert not any(s.by_lottery for s in rows) and final_by_lottery(t, "A") is None
    t = play(t, lambda ps: [4, 4])  # all drawn: still equal, now the preliminaries are over
    rows = standings(t, "A")
    assert [s.place for s in rows] == [s.rank for s in rows] == list(range(1, 7))
    assert all(s.by_lottery for s in rows)
    lots = lottery(t.lottery_seed, t.players)
    winners = sorted((s.no for s in rows if s.wins == 1), key=lots.__getitem__)
    d = final_by_lottery(t, "A")
    assert d is not None and (d.wins, d.cards) == (1, 9)
    assert d.drawn == tuple(winners[:2]) and d.left == (winners[2],)


# ---------------------------------------------------------------------- steps in order
def test_rounds_wait_for_results_and_the_final_for_the_preliminaries():
    t = two_block_tournament(6, rounds=2)
    t = ops.apply(t, ops.pair_next(t, "A", "now"))
    with pytest.raises(Conflict, match="round 1 of block A is not complete: mat 1 has no "
                                       "result yet"):
        ops.pair_next(t, "A", "now")
    with pytest.raises(Conflict, match="preliminary rounds are not all complete"):
        ops.pair_final(t, "A", "now")
    t = read(t, "A", 1)
    r = t.rounds_of("A")[0]
    for m in r.matches:
        t = ops.apply(t, ops.record_result(t, 1, m.mat, {m.players[0]: 9, m.players[1]: 8},
                                           None, "operator", "now"))
    t = play(t, lambda ps: [10, 7])
    with pytest.raises(Conflict, match="played its 2 preliminary rounds"):
        ops.pair_next(t, "A", "now")
    t = ops.apply(t, ops.pair_final(t, "A", "now"))
    final = t.rounds_of("A")[-1]
    top = [s.no for s in standings(t, "A")][:2]
    assert final.final and final.number == 3 and final.matches[0].players == tuple(top)


def test_what_does_not_add_up_is_flagged_and_keeps_the_round_open():
    t = two_block_tournament(6)
    t = read(ops.apply(t, ops.pair_next(t, "A", "now")), "A", 1)
    m = t.rounds_of("A")[0].matches[0]
    t = ops.apply(t, ops.record_result(t, 1, m.mat, {m.players[0]: 9, m.players[1]: 8}, None,
                                       "operator", "now"))
    # a result that does not add up is refused now (below); one imported from an older
    # document is still flagged
    rr = t.rounds_of("A")[0]
    bad = replace(rr, matches=tuple(replace(x, result=Result((10, 9))) if x.mat == m.mat
                                    else x for x in rr.matches))
    codes = {(f.code, f.mat) for f in round_flags(t, bad)}
    assert ("too_many_cards", m.mat) in codes
    assert ("missing_result", m.mat + 1) in codes
    assert ("no_referee", m.mat) in codes
    assert not complete(t, t.rounds_of("A")[0])
    with pytest.raises(Invalid, match="took 18 cards, but 17 were read"):
        ops.record_result(t, 1, m.mat, {m.players[0]: 18, m.players[1]: 0}, None, "op", "now")
    with pytest.raises(Invalid, match="give the cards of each of them"):
        ops.record_result(t, 1, m.mat, {m.players[0]: 1, 999: 0}, None, "op", "now")
    with pytest.raises(Invalid, match="only for a tied final"):
        ops.record_result(t, 1, m.mat, {m.players[0]: 8, m.players[1]: 8}, m.players[0], "op",
                          "now")
    # the same result again is no change
    assert ops.record_result(t, 1, m.mat, {m.players[0]: 9, m.players[1]: 8}, None, "x",
                             "later") is None


def test_a_referee_enters_results_only_at_its_mats_and_only_while_the_round_is_open():
    t = two_block_tournament(6)
    t = ops.apply(t, ops.assign_referee(t, "r1", "審判1", "main", [1, 2]))
    t = read(ops.apply(t, ops.pair_next(t, "A", "now")), "A", 1)
    r = t.rounds_of("A")[0]
    for m in r.matches:
        cards = {m.players[0]: 5, m.players[1]: 4}
        if m.mat in (1, 2):
            t = ops.apply(t, ops.record_result(t, 1, m.mat, cards, None, "r", "now",
                                               referee="r1"))
        else:
            with pytest.raises(Forbidden, match=f"mat {m.mat} is not one of this referee's"):
                ops.record_result(t, 1, m.mat, cards, None, "r", "now", referee="r1")
            t = ops.apply(t, ops.record_result(t, 1, m.mat, cards, None, "operator", "now"))
    t = ops.apply(t, ops.pair_next(t, "A", "now"))
    m = r.matches[0]
    with pytest.raises(Conflict, match="can only be corrected at the desk") as locked:
        ops.record_result(t, 1, m.mat, {m.players[0]: 1, m.players[1]: 4}, None, "r", "now",
                          referee="r1")
    assert locked.value.code == "result_locked"
    t = ops.apply(t, ops.record_result(t, 1, m.mat, {m.players[0]: 1, m.players[1]: 4}, None,
                                       "operator", "later"))
    changes = [c for c in t.history if c.mat == m.mat and c.round == 1]
    assert [c.by for c in changes] == ["r", "operator"]
    assert changes[1].before == changes[0].after and changes[1].after.cards == (1, 4)
    with pytest.raises(Invalid, match="mat 40 is no block's"):
        ops.assign_referee(t, "r2", "x", "main", [40])
    with pytest.raises(Conflict, match="mat 1 is already 審判1's"):
        ops.assign_referee(t, "r2", "x", "main", [1])


def test_withdrawal_and_late_entry_take_effect_from_the_first_round_not_started():
    t = two_block_tournament(6)
    t = ops.apply(t, ops.pair_next(t, "A", "now"))
    t = ops.apply(t, ops.withdraw(t, 1))
    assert t.player(1).withdrawn_round == 1  # round 1 is paired but has not started
    assert {f.code for f in round_flags(t, t.rounds_of("A")[0])} >= {"withdrawn_paired"}
    t = ops.apply(t, ops.unpair(t, "A", 1))
    t = ops.apply(t, ops.add_players(t, [Entry("遅刻", club="c9")], late=True))
    late = t.players[-1]
    assert late.block == "A" and late.joined_round == 1
    t = ops.apply(t, ops.pair_next(t, "A", "now"))
    seated = {p for m in t.rounds_of("A")[0].matches for p in m.players}
    assert 1 not in seated and late.no in seated and len(seated) == 6


def test_a_round_paired_before_a_withdrawal_or_late_entry_starts_only_once_paired_again():
    """Issue 22 item 1: the round cannot be read, nor take a result, while it seats a withdrawn
    player or leaves out a late one (its flags vanish once it starts, and the mistake with
    them); pairing it again seats the players active now."""
    t = two_block_tournament(6)
    t = ops.apply(t, ops.pair_next(t, "A", "now"))
    t = ops.apply(t, ops.withdraw(t, 1))
    t = ops.apply(t, ops.add_players(t, [Entry("遅刻", club="c9")], late=True))
    late = t.players[-1].no
    with pytest.raises(Conflict, match="paired before a withdrawal") as no:
        ops.start_reading(t, "A", 1, "main", "now")
    assert no.value.params["why"] == "pairing_stale"
    assert no.value.params["names"] == "選手1, 遅刻"
    # a block read by a person: the desk's result is refused the same way
    m = t.rounds_of("A")[0].matches[0]
    by_hand = ops.apply(t, ops.change_block(t, "A", channel=None))
    with pytest.raises(Conflict, match="pair it again first"):
        ops.record_result(by_hand, 1, m.mat, dict.fromkeys(m.players, 1), None, "operator",
                          "now")
    changes = ops.pair_again(t, "A", 1, "now")
    assert [type(c).__name__ for c in changes] == ["RoundRemoved", "RoundPaired"]
    for c in changes:
        t = ops.apply(t, c)
    seated = [p for m in t.rounds_of("A")[0].matches for p in m.players]
    assert 1 not in seated and late in seated and len(seated) == len(set(seated)) == 6
    assert not {f.code for f in round_flags(t, t.rounds_of("A")[0])} & set(ops.STALE)
    t = read(t, "A", 1)  # now it starts
    # once started, a withdrawal takes effect from the next round: the match goes on
    t = ops.apply(t, ops.withdraw(t, late))
    assert t.player(late).withdrawn_round == 2
    # a started round is never paired again
    with pytest.raises(Conflict, match="has started"):
        ops.pair_again(t, "A", 1, "now")


def test_a_finalist_who_withdraws_before_the_final_starts_gives_way_to_the_next():
    t = two_block_tournament(6, rounds=1)
    t = play(t, lambda ps: [9 - i for i in range(len(ps))])
    t = ops.apply(t, ops.pair_final(t, "A", "now"))
    first, second = t.rounds_of("A")[-1].matches[0].players
    t = ops.apply(t, ops.withdraw(t, first))
    with pytest.raises(Conflict, match="pair it again first"):
        ops.start_reading(t, "A", t.final_round, "main", "now")
    for c in ops.pair_again(t, "A", t.final_round, "now"):
        t = ops.apply(t, c)
    now = t.rounds_of("A")[-1]
    assert now.final and first not in now.matches[0].players
    assert second in now.matches[0].players
    read(t, "A", t.final_round)


def test_a_late_entry_that_needs_one_more_mat_gets_one_after_every_block():
    """Issue 22 item 3: block A's two late entries make six matches where A has five mats
    (B's begin at 6): the sixth takes mat 21, after D's last; no block's mats move, so B's
    referee keeps mat 6 and the mat of the new match is A's to assign."""
    t = Tournament("t", "大会", settings=Settings(rounds=2, cards=17), lottery_seed=5,
                   pairing_seed=9)
    t = ops.apply(t, ops.add_players(t, [Entry(f"選手{i}", club=f"c{i % 5}")
                                         for i in range(1, 41)]))
    t = ops.apply(t, ops.draw_blocks(t, 4, Method.RANDOM, 1, ["a", "b", "c", "d"]))
    assert [b.first_mat for b in t.blocks] == [1, 6, 11, 16]
    t = ops.apply(t, ops.assign_referee(t, "rb", "審判B", "b", [6, 7]))
    t = ops.apply(t, ops.add_players(t, [Entry("遅刻1", block="A"), Entry("遅刻2", block="A")],
                                     late=True))
    for b in "ABCD":
        t = ops.apply(t, ops.pair_next(t, b, "now"))
    mats = {b: [m.mat for m in t.rounds_of(b)[0].matches] for b in "ABCD"}
    assert mats == {"A": [1, 2, 3, 4, 5, 21], "B": [6, 7, 8, 9, 10],
                    "C": [11, 12, 13, 14, 15], "D": [16, 17, 18, 19, 20]}
    assert any("extra mats: 21" in n for n in t.rounds_of("A")[0].notes)
    assert ops.mats_of(t)["B"] == (6, 10)
    assert next(r for r in t.referees if r.referee == "rb").mats == (6, 7)
    t = ops.apply(t, ops.assign_referee(t, "ra", "審判A", "a", [5, 21]))
    with pytest.raises(Invalid, match="mat 21 is block A's"):
        ops.assign_referee(t, "rb", "審判B", "b", [6, 21])
    # block B given to reader c: its referee, who joined channel b, holds mats of another
    # reader's block (its results there would be refused): the desk is told, mat by mat
    assert not [x for x in flags(t) if x.code == "referee_other_channel"]
    moved = ops.apply(t, ops.change_block(t, "B", channel="c"))
    f = [x for x in flags(moved) if x.code == "referee_other_channel"]
    assert [(x.mat, x.block, x.params["referee"], x.params["other"]) for x in f] == [
        (6, "B", "審判B", "c"), (7, "B", "審判B", "c")]
    # a second late round of more matches than mats reuses A's mat 21, then 22
    t = ops.apply(t, ops.add_players(t, [Entry("遅刻3", block="B"), Entry("遅刻4", block="B")],
                                     late=True))
    assert ops.free_mats(t, "B", 6) == [6, 7, 8, 9, 10, 22]
    assert ops.free_mats(t, "A", 6) == [1, 2, 3, 4, 5, 21]


def test_an_absent_player_loses_by_default_nine_to_nothing():
    """不戦勝 (a regional rule): the opponent takes the configured cards (at most the cards
    read), the absent player 0; a 3-player match is played by the two others."""
    t = two_block_tournament(7)
    t = read(ops.apply(t, ops.pair_next(t, "A", "now")), "A", 1)
    pair = next(m for m in t.rounds_of("A")[0].matches if len(m.players) == 2)
    three = next(m for m in t.rounds_of("A")[0].matches if len(m.players) == 3)
    a, b = pair.players
    t2 = ops.apply(t, ops.walkover(t, 1, pair.mat, a, 9, "operator", "now"))
    got = next(m for m in t2.rounds_of("A")[0].matches if m.mat == pair.mat).result
    assert got is not None and got.cards == (0, 9)
    assert outcomes(pair.players, got) == {a: L, b: W}
    t3 = ops.apply(t, ops.walkover(t, 1, pair.mat, b, 30, "operator", "now"))
    assert next(m for m in t3.rounds_of("A")[0].matches if m.mat == pair.mat).result.cards == (
        17, 0)  # never more than the cards read
    with pytest.raises(Conflict, match="3-player match"):
        ops.walkover(t, 1, three.mat, three.players[0], 9, "operator", "now")
    with pytest.raises(Invalid, match="does not play at mat"):
        ops.walkover(t, 1, pair.mat, three.players[0], 9, "operator", "now")


def test_a_block_too_big_to_pair_is_refused_naming_the_limit():
    """Every input has a limit: a block of 201 (the pairing's search grows with the square of
    a block's size) is refused, saying to draw more blocks; 200 are paired."""
    t = Tournament("t", "大会", settings=Settings(rounds=2, cards=17), lottery_seed=5,
                   pairing_seed=9)
    t = ops.apply(t, ops.add_players(t, [Entry(f"選手{i}") for i in range(1, 202)]))
    t = ops.apply(t, ops.draw_blocks(t, 1, Method.RANDOM, 1, ["a"]))
    with pytest.raises(Conflict, match="at most 200 are paired") as big:
        ops.pair_next(t, "A", "now")
    assert big.value.params == {"why": "block_too_big", "block": "A", "players": 201,
                                "most": 200}
    t = ops.apply(t, ops.withdraw(t, 1))
    assert len(ops.pair_next(t, "A", "now").round.matches) == 100


# ---------------------------------------------------------------------- entries CSV
def test_entries_csv_in_japanese_excel_shift_jis_with_every_bad_line_named():
    text = "氏名,ふりがな,所属,学年,ブロック\n山田　太郎 ,ﾔﾏﾀﾞ,東小,５,a\n鈴木花子,すずき,西小,6,\n"
    es, warnings = read_entries(text.encode("cp932"))
    assert es[0] == Entry("山田 太郎", "ヤマダ", "東小", "5", "A")
    assert es[1].block is None and warnings == []
    es, _ = read_entries(("\ufeffname,club\nA,x\n").encode())
    assert es == [Entry("A", club="x")]
    with pytest.raises(Invalid, match=r"2 bad line\(s\), nobody added: line 3: name is empty; "
                                      r"line 4: block 'AB!' is not a block name") as bad:
        read_entries("name,block\nok,\n,A\nx,AB!\n")
    # the first bad line's number, column and reason, for the pages' own words
    assert (bad.value.code, bad.value.params) == (
        "csv_bad_line", {"line": 3, "column": "name", "reason": "empty", "count": 2})
    with pytest.raises(Invalid, match="no name column"):
        read_entries("who,club\na,b\n")
    with pytest.raises(Invalid, match="name is 41 characters") as bad:
        read_entries("name\n" + "あ" * 41 + "\n")
    assert bad.value.params == {"line": 2, "column": "name", "reason": "too_long",
                                "length": 41, "limit": 40, "count": 1}
    with pytest.raises(Invalid) as bad:
        read_entries(b"name\n\x81 A\n")
    assert bad.value.code == "csv_encoding"
    _, warnings = read_entries("name,club,memo\nA,x,1\nA,x,2\n")
    assert [w.detail for w in warnings] == ["unknown column ignored: memo",
                                            "A entered 2 times (x) on lines 2, 3"]
    assert [(w.code, w.params) for w in warnings] == [
        ("csv_unknown_column", {"column": "memo"}),
        ("csv_duplicate", {"name": "A", "club": "x", "times": 2, "lines": "2, 3"})]


# ---------------------------------------------------------------------- blocks
@settings(max_examples=80, deadline=None)
@given(st.integers(2, 60), st.integers(1, 6),
       st.sampled_from([m for m in Method if m is not Method.GRADES_CLUBS]),
       st.integers(0, 10 ** 6), st.data())
def test_blocks_are_balanced_and_keep_pre_assigned_players(n, count, method, seed, data):
    names = [chr(65 + i) for i in range(count)]
    clubs = data.draw(st.lists(st.sampled_from(["a", "b", "c", ""]), min_size=n, max_size=n))
    pre = data.draw(st.lists(st.sampled_from([None, None, None, *names]), min_size=n,
                             max_size=n))
    ps = [Player(i + 1, f"p{i}", club=clubs[i], grade=str(i % 3), block=pre[i],
                 block_fixed=pre[i] is not None) for i in range(n)]
    got = draw(ps, names, method, seed)
    assert set(got) == {p.no for p in ps}
    assert all(got[p.no] == p.block for p in ps if p.block)
    sizes = [sum(1 for b in got.values() if b == name) for name in names]
    pre_sizes = [sum(1 for p in ps if p.block == name) for name in names]
    if max(pre_sizes) <= n // count:  # the pre-assigned do not overfill a block
        assert max(sizes) - min(sizes) <= 1, sizes
    else:  # only the pre-assigned make a block bigger than the others
        assert all(s == p for s, p in zip(sizes, pre_sizes, strict=True) if s > min(sizes) + 1)
    assert draw(ps, names, method, seed) == got  # the seed decides


def test_clubs_are_spread_over_the_blocks():
    ps = [Player(i, f"p{i}", club="東小" if i <= 8 else f"c{i}") for i in range(1, 41)]
    got = draw(ps, ["A", "B", "C", "D"], Method.CLUBS, 3)
    per_block = [sum(1 for p in ps if p.club == "東小" and got[p.no] == b) for b in "ABCD"]
    assert per_block == [2, 2, 2, 2]


# ---------------------------------------------------------------------- the JSON document
def test_the_document_round_trips_and_a_bad_one_is_refused_naming_the_field():
    t = two_block_tournament(7)
    t = play(t, lambda ps: [6, 5, 4][:len(ps)])
    t = ops.apply(t, ops.assign_referee(t, "r1", "審判", "main", [1]))
    doc = json.loads(json.dumps(to_document(t)))
    back = from_document(doc)
    assert to_document(back) == to_document(t)
    assert standings(back, "A") == standings(t, "A")
    doc["rounds"][0]["matches"][0]["players"] = [1, 9999]
    with pytest.raises(Invalid, match=r"document.rounds\[0\].matches\[0\].players: must be two "
                                      "or three different entered players"):
        from_document(doc)
    with pytest.raises(Invalid, match="is not a yomite tournament"):
        from_document({"format": "other"})


# ---------------------------------------------------------------------- results that add up
def paired_round(n: int, cards: int = 17) -> Tournament:
    """Block A of `n` players (read on channel main), round 1 paired."""
    t = Tournament("t", "大会", settings=Settings(rounds=2, cards=cards), lottery_seed=5,
                   pairing_seed=9)
    t = ops.apply(t, ops.add_players(t, [Entry(f"選手{i}") for i in range(1, n + 1)]))
    t = ops.apply(t, ops.draw_blocks(t, 1, Method.RANDOM, 1, ["main"]))
    return ops.apply(t, ops.pair_next(t, "A", "now"))


def read_round(n: int, cards: int = 17) -> Tournament:
    return read(paired_round(n, cards), "A", 1)


def enter(t: Tournament, m, cards, **kw):
    return ops.record_result(t, 1, m.mat, dict(zip(m.players, cards, strict=True)),
                             kw.pop("tiebreak", None), kw.pop("by", "operator"), "now", **kw)


@pytest.mark.parametrize(("players", "read_n", "cards", "ok"), [
    (2, 20, (12, 12), False),  # 24 taken of 20 read
    (2, 20, (11, 9), True),
    (2, 20, (20, 0), True),
    (2, 17, (8, 7), True),  # two cards left on the 場 at the end (お手つき): fewer is fine
    (3, 17, (7, 7, 7), False),  # a 3-player match shares the same 17 cards three ways
    (3, 17, (6, 6, 6), False),
    (3, 17, (7, 6, 4), True),
    (3, 17, (5, 5, 5), True),
])
def test_the_cards_taken_add_up_to_at_most_the_cards_read(players, read_n, cards, ok):
    t = read_round(3 if players == 3 else 4, cards=read_n)
    m = next(x for x in t.rounds_of("A")[0].matches if len(x.players) == players)
    if ok:
        assert enter(t, m, cards) is not None
        return
    with pytest.raises(Invalid, match=f"add up to {sum(cards)}, but {read_n} were read") as e:
        enter(t, m, cards)
    assert e.value.code == "cards_over_read" and e.value.status == 422


def test_an_extra_card_counts_among_the_cards_read():
    t = read_round(4, cards=17)
    t = ops.apply(t, ops.extra_card(t, "A", 1))  # (a final's tie; a round's the same here)
    m = t.rounds_of("A")[0].matches[0]
    assert enter(t, m, (9, 9)) is not None  # 18 of 17 + 1 read
    with pytest.raises(Invalid) as e:
        enter(t, m, (10, 9))
    assert e.value.code == "cards_over_read"


def test_a_result_waits_until_the_round_is_read():
    unread = paired_round(4)
    unread = ops.apply(unread, ops.assign_referee(unread, "r1", "審判1", "main", [1, 2]))
    m = unread.rounds_of("A")[0].matches[0]
    for who in ({}, {"referee": "r1", "by": "r"}):
        with pytest.raises(Conflict, match="round 1 of block A has not been read yet") as e:
            enter(unread, m, (9, 8), **dict(who))
        assert e.value.code == "round_not_read" and e.value.status == 409
    # asked to start, not yet confirmed by the channel: not read either
    starting = ops.apply(unread, ops.start_reading(unread, "A", 1, "main", "now"))
    with pytest.raises(Conflict) as e:
        enter(starting, m, (9, 8))
    assert e.value.code == "round_not_read"
    assert enter(read(unread, "A", 1), m, (9, 8)) is not None
    # a block with no reader in this hall (a person reads it): the desk enters its results
    # at once; a referee is bound to a channel's reading, so still not
    human = ops.apply(unread, ops.change_block(unread, "A", channel=None))
    assert enter(human, m, (9, 8)) is not None
    with pytest.raises(Conflict) as e:
        enter(human, m, (9, 8), referee="r1", by="r")
    assert e.value.code == "round_not_read"


def test_a_referees_result_is_bound_to_the_mats_its_channel_reads():
    """Block A is read on channel a at mats 1-2, block B on channel b at mats 3-4; the referee
    of channel a watches mats 1 and 2. Then the desk moves the mats: B to 1, A to 11. The
    referee's assignment still says 1 and 2, but those mats are now read on channel b."""
    t = Tournament("t", "大会", settings=Settings(rounds=3, cards=17), lottery_seed=5,
                   pairing_seed=9)
    t = ops.apply(t, ops.add_players(t, [Entry(f"選手{i}") for i in range(1, 9)]))
    t = ops.apply(t, ops.draw_blocks(t, 2, Method.RANDOM, 1, ["a", "b"]))
    t = ops.apply(t, ops.assign_referee(t, "ra", "審判a", "a", [1, 2]))
    t = ops.apply(t, ops.change_block(t, "A", first_mat=11))
    t = ops.apply(t, ops.change_block(t, "B", first_mat=1))
    for b, ch in (("A", "a"), ("B", "b")):
        t = read(ops.apply(t, ops.pair_next(t, b, "now")), b, 1, ch)
    r, m = ops.locate(t, 1, 1)
    assert r.block == "B"
    with pytest.raises(Forbidden, match="mat 1 of round 1 is read on channel b") as e:
        enter(t, m, (9, 8), referee="ra", by="r")
    assert e.value.code == "mat_not_on_channel" and e.value.status == 403
    assert enter(t, m, (9, 8)) is not None  # the desk may


# ---------------------------------------------------------------------- a final's result
def final_of(n: int = 4) -> Tournament:
    """One preliminary round played, the final paired and read; referee r1 watches its mat."""
    t = Tournament("t", "大会", settings=Settings(rounds=1, cards=17), lottery_seed=5,
                   pairing_seed=9)
    t = ops.apply(t, ops.add_players(t, [Entry(f"選手{i}") for i in range(1, n + 1)]))
    t = ops.apply(t, ops.draw_blocks(t, 1, Method.RANDOM, 1, ["main"]))
    t = ops.apply(t, ops.assign_referee(t, "r1", "審判1", "main", [1, 2]))
    t = play(t, lambda ps: [9, 8])
    t = ops.apply(t, ops.pair_final(t, "A", "now"))
    return read(t, "A", t.final_round)


def test_a_final_is_locked_once_the_desk_confirms_it():
    t = final_of()
    n = t.final_round
    m = t.rounds_of("A")[-1].matches[0]
    a, b = m.players

    def by_referee(cards, tiebreak=None):
        return ops.record_result(t, n, m.mat, dict(zip(m.players, cards, strict=True)),
                                 tiebreak, "referee r1", "r-at", referee="r1")

    # a tie is not a result the desk can confirm: the extra card decides it first
    t = ops.apply(t, by_referee((8, 8)))
    with pytest.raises(Conflict, match="is not complete") as e:
        ops.confirm_round(t, "A", n, "operator", "c-at")
    assert e.value.code == "out_of_order"
    # until the desk confirms it, the referee may correct it (no next round locks a final)
    t = ops.apply(t, by_referee((9, 8)))
    t = ops.apply(t, by_referee((8, 9)))
    assert final_places(t, "A") == {a: 2, b: 1}
    t = ops.apply(t, ops.confirm_round(t, "A", n, "operator", "c-at"))
    final = t.rounds_of("A")[-1]
    assert final.confirmed is not None and final.confirmed.at == "c-at"
    assert ops.confirm_round(t, "A", n, "operator", "again") is None  # once is enough
    with pytest.raises(Conflict, match="confirmed by the desk") as e:
        by_referee((9, 8))
    assert e.value.code == "result_locked" and e.value.status == 409
    assert final_places(t, "A") == {a: 2, b: 1}
    # the desk still may, and its change is kept with the others
    t = ops.apply(t, ops.record_result(t, n, m.mat, {a: 9, b: 8}, None, "operator", "o-at"))
    assert final_places(t, "A") == {a: 1, b: 2}
    hist = history_view(t)
    finals = [(h["by"], h.get("confirmed", False)) for h in hist if h["round"] == n]
    assert finals == [("referee r1", False), ("referee r1", False), ("referee r1", False),
                      ("operator", True), ("operator", False)]
    # the confirmation survives the JSON document
    back = from_document(json.loads(json.dumps(to_document(t))))
    assert back.rounds_of("A")[-1].confirmed == final.confirmed


# ---------------------------------------------------------------------- CSV cells
def test_csv_cells_a_spreadsheet_would_run_are_written_as_text():
    hostile = ["=HYPERLINK(\"http://x\",\"y\")", "+81 90", "-1+2", "@SUM(A1)", "\t=1",
               "\r=1", "＝1+1", "＋1", "－1", "＠A"]
    text = write_csv(["name", "n"], [[h, -3] for h in hostile] + [["a=b", 1], ["山田", None]])
    rows = list(csv.reader(io.StringIO(text.removeprefix("\ufeff"), newline="")))[1:]
    assert [r[0] for r in rows[:len(hostile)]] == ["'" + h for h in hostile]
    assert [r[1] for r in rows] == ["-3"] * len(hostile) + ["1", ""]  # numbers stay numbers
    assert [r[0] for r in rows[len(hostile):]] == ["a=b", "山田"]
    # the players' CSV is an entries file again: the quote goes on the way back in
    names = [["=1+1", "@東小"], ["'quoted", "x"], ["'=1", "''+2"]]
    back, _ = read_entries(write_csv(["name", "club"], names))
    assert [[e.name, e.club] for e in back] == names
