"""Regional rules and the players' confirmation, as pure steps on the tournament: blocks of
four of one grade from different schools, a tournament with no final (the block's first wins),
a draw made again after the check-in, and the players at the mat confirming their result."""

from __future__ import annotations

import json
from collections import Counter

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from desk import tournament as ops
from desk.blocks import blocks_per_grade, draw_by_grade, grade_groups
from desk.entries import Entry
from desk.errors import Conflict, Forbidden, Invalid
from desk.export import from_document, to_document
from desk.model import Method, Player, Settings, Tournament
from desk.presets import PRESETS
from desk.standings import final_by_lottery, final_places, standings
from desk.views import history_view, next_step, round_view
from tests.test_desk_rules import read

GRADES = ("小3", "小4", "小5", "小6")
SCHOOLS = ("東小", "西小", "南小", "北小", "中央小")


def grade_entries(per_grade: int = 10) -> list[Entry]:
    return [Entry(f"{g}-{i}", club=SCHOOLS[i % len(SCHOOLS)], grade=g)
            for g in GRADES for i in range(per_grade)]


def tournament(settings_: Settings, entries: list[Entry]) -> Tournament:
    t = Tournament("t", "大会", settings=settings_, lottery_seed=5, pairing_seed=9)
    return ops.apply(t, ops.add_players(t, entries))


# ---------------------------------------------------------------------- blocks by grade
@pytest.mark.parametrize("seed", range(25))
def test_blocks_of_four_of_one_grade_from_different_schools(seed):
    t = tournament(Settings(rounds=3, finalists=1), grade_entries(10))
    drawn = ops.draw_blocks(t, None, Method.GRADES_CLUBS, seed, ["main"], size=4)
    t = ops.apply(t, drawn)
    assert len(t.blocks) == 12  # each grade of ten: blocks of 4, 3 and 3
    for b in t.blocks:
        members = t.players_of(b.name)
        assert 3 <= len(members) <= 4, (b.name, len(members))
        assert len({p.grade for p in members}) == 1, b.name  # one grade
        clubs = Counter(p.club for p in members)
        assert max(clubs.values()) == 1, (b.name, clubs)  # every school once at most
    assert t.draw_method is Method.GRADES_CLUBS
    # the seed decides
    assert ops.draw_blocks(t, None, Method.GRADES_CLUBS, seed, ["main"], size=4) == drawn


@settings(max_examples=60, deadline=None)
@given(st.lists(st.tuples(st.sampled_from(["1年", "2年", "3年", "10年", ""]),
                          st.sampled_from(["a", "b", "c", "d", ""])), min_size=2, max_size=80),
       st.integers(2, 8), st.integers(0, 10 ** 6))
def test_every_grade_gets_its_own_blocks_with_clubs_spread(rows, size, seed):
    ps = [Player(i + 1, f"p{i}", club=c, grade=g) for i, (g, c) in enumerate(rows)]
    groups = grade_groups(ps)
    per = blocks_per_grade([len(g) for g in groups], None, size)
    if sum(per) > 26:
        with pytest.raises(Invalid):
            draw_by_grade(ps, None, size, seed)
        return
    names, got = draw_by_grade(ps, None, size, seed)
    assert set(got) == {p.no for p in ps}
    assert all(sum(1 for b in got.values() if b == n) >= 2 for n in names)
    at = 0
    for g, k in zip(groups, per, strict=True):
        mine = names[at:at + k]
        at += k
        assert {got[p.no] for p in g} <= set(mine)  # a grade keeps to its blocks
        sizes = [sum(1 for p in g if got[p.no] == n) for n in mine]
        assert max(sizes) - min(sizes) <= 1
        for club in {p.club for p in g if p.club}:
            spread = [sum(1 for p in g if p.club == club and got[p.no] == n) for n in mine]
            assert max(spread) - min(spread) <= 1, (club, spread)


def test_a_grade_of_one_joins_the_next_and_a_block_given_by_hand_is_refused_by_grade():
    ps = [Player(1, "a", grade="1年"), *(Player(i, f"p{i}", grade="2年") for i in range(2, 6))]
    assert [len(g) for g in grade_groups(ps)] == [5]
    fixed = [*ps[1:], Player(9, "b", grade="1年", block="A", block_fixed=True)]
    with pytest.raises(Invalid, match="was given block A"):
        draw_by_grade(fixed, None, 4, 1)
    with pytest.raises(Invalid, match="cannot share 1 blocks"):
        blocks_per_grade([4, 4], 1, None)
    assert blocks_per_grade([10, 10, 20], 8, None) == [2, 2, 4]


def test_a_draw_made_again_after_the_check_in_evens_the_blocks_and_keeps_given_ones():
    entries = [Entry(f"選手{i}", club=f"c{i % 4}") for i in range(1, 41)]
    entries[0] = Entry("指定", club="c0", block="C")  # the CSV's block column
    t = tournament(Settings(), entries)
    t = ops.apply(t, ops.draw_blocks(t, 4, Method.CLUBS, 3, ["main"]))
    assert t.player(1).block == "C"
    # three absentees of one block at the check-in
    gone = [p.no for p in t.players_of("A")][:3]
    for no in gone:
        t = ops.apply(t, ops.withdraw(t, no))
    sizes = Counter(p.block for p in t.players if p.withdrawn_round is None)
    assert sorted(sizes.values()) == [7, 10, 10, 10]
    t = ops.apply(t, ops.draw_blocks(t, 4, Method.CLUBS, 3, ["main"]))
    sizes = Counter(p.block for p in t.players if p.withdrawn_round is None)
    assert sorted(sizes.values()) == [9, 9, 9, 10], sizes  # drawn again, not kept
    assert t.player(1).block == "C"  # given by the entries: kept


# ---------------------------------------------------------------------- no final
def play_block(t: Tournament, block: str, scores) -> Tournament:
    t = ops.apply(t, ops.pair_next(t, block, "now"))
    r = t.rounds_of(block)[-1]
    t = read(t, block, r.number)
    for m in r.matches:
        cards = dict(zip(m.players, scores(m.players), strict=True))
        t = ops.apply(t, ops.record_result(t, r.number, m.mat, cards, None, "operator", "now"))
    return t


def test_with_no_final_the_first_after_the_preliminaries_wins_the_block():
    t = tournament(Settings(rounds=3, finalists=1), [Entry(f"選手{i}") for i in range(1, 5)])
    t = ops.apply(t, ops.draw_blocks(t, 1, Method.RANDOM, 1, ["main"]))
    for _ in range(3):  # the lower entry number always wins 9-5
        t = play_block(t, "A", lambda ps: [9 if p == min(ps) else 5 for p in ps])
        assert final_places(t, "A") == {} or len(t.rounds_of("A")) == 3
    assert next_step(t, "A") == {"step": "done", "round": None, "final": False}
    with pytest.raises(Conflict, match="no final") as e:
        ops.pair_final(t, "A", "now")
    assert e.value.params["why"] == "no_final"
    places = final_places(t, "A")
    assert places == {1: 1, 2: 2}
    assert [s.no for s in standings(t, "A")][:2] == [1, 2]
    # the setting cannot change once a final is paired; it can before
    two = ops.apply(t, ops.change_settings(t, finalists=2))
    assert next_step(two, "A")["step"] == "final"
    paired = ops.apply(two, ops.pair_final(two, "A", "now"))
    with pytest.raises(Conflict, match="a final is paired"):
        ops.change_settings(paired, finalists=1)


def test_with_no_final_the_lottery_decides_first_place_between_equals_and_says_so():
    t = tournament(Settings(rounds=1, finalists=1), [Entry(f"選手{i}") for i in range(1, 5)])
    t = ops.apply(t, ops.draw_blocks(t, 1, Method.RANDOM, 1, ["main"]))
    t = play_block(t, "A", lambda ps: [9, 5])  # two winners with 9 cards each
    d = final_by_lottery(t, "A")
    assert d is not None and d.wins == 1 and d.cards == 9
    assert len(d.drawn) == 1 and len(d.left) == 1
    assert final_places(t, "A")[d.drawn[0]] == 1


# ---------------------------------------------------------------------- players confirm
def refereed_round() -> tuple[Tournament, object]:
    t = tournament(Settings(rounds=2), [Entry(f"選手{i}") for i in range(1, 5)])
    t = ops.apply(t, ops.draw_blocks(t, 1, Method.RANDOM, 1, ["main"]))
    t = ops.apply(t, ops.pair_next(t, "A", "now"))
    t = read(t, "A", 1)
    m = t.rounds_of("A")[0].matches[0]
    t = ops.apply(t, ops.assign_referee(t, "r1", "審判1", "main", [m.mat]))
    return t, m


def test_the_players_confirm_the_result_they_were_shown_and_a_correction_is_kept():
    t, m = refereed_round()
    a, b = m.players
    t = ops.apply(t, ops.record_result(t, 1, m.mat, {a: 9, b: 6}, None, "referee r1", "t1",
                                       referee="r1"))
    # shown 9-5 (the phone's stale copy): not confirmed, and says what to do
    with pytest.raises(Conflict, match="changed since the players were shown it") as e:
        ops.confirm_by_players(t, 1, m.mat, {a: 9, b: 5}, None, "players", "t2", referee="r1")
    assert e.value.code == "result_changed"
    # another mat's referee cannot confirm for these players
    other = next(x.mat for x in t.rounds_of("A")[0].matches if x.mat != m.mat)
    t = ops.apply(t, ops.assign_referee(t, "r2", "審判2", "main", [other]))
    with pytest.raises(Forbidden):
        ops.confirm_by_players(t, 1, m.mat, {a: 9, b: 6}, None, "players", "t2", referee="r2")
    t = ops.apply(t, ops.confirm_by_players(t, 1, m.mat, {a: 9, b: 6}, None, "players", "t2",
                                            referee="r1"))
    r = t.rounds_of("A")[0]
    assert r.match_at(m.mat).result.players_at == "t2"
    assert round_view(t, r)["players_confirmed"] == 1
    assert ops.confirm_by_players(t, 1, m.mat, {a: 9, b: 6}, None, "p", "t3",
                                  referee="r1") is None  # again: nothing changes
    # the desk corrects it from a slip: a new result the players have not confirmed; the
    # history keeps the one they did
    t = ops.apply(t, ops.record_result(t, 1, m.mat, {a: 9, b: 7}, None, "operator", "t4"))
    assert t.rounds_of("A")[0].match_at(m.mat).result.players_at == ""
    h = history_view(t)
    assert [(x["before"] or {}).get("players_at") for x in h] == [None, "", "t2"]
    assert h[-1]["before"]["cards"] == [9, 6] and h[-1]["after"]["cards"] == [9, 7]
    # once the desk confirms the round, the referee's phone cannot
    t = ops.apply(t, ops.record_result(t, 1, r.matches[1].mat, dict.fromkeys(
        r.matches[1].players, 8), None, "operator", "t5"))
    t = ops.apply(t, ops.confirm_round(t, "A", 1, "operator", "t6"))
    with pytest.raises(Conflict, match="confirmed by the desk"):
        ops.confirm_by_players(t, 1, m.mat, {a: 9, b: 7}, None, "p", "t7", referee="r1")


def test_a_match_without_a_result_has_nothing_to_confirm():
    t, m = refereed_round()
    with pytest.raises(Conflict, match="no result to confirm"):
        ops.confirm_by_players(t, 1, m.mat, dict.fromkeys(m.players, 0), None, "p", "t",
                               referee="r1")


def test_the_new_settings_and_confirmations_survive_the_document():
    t, m = refereed_round()
    t = ops.apply(t, ops.change_settings(t, finalists=1))
    a, b = m.players
    t = ops.apply(t, ops.record_result(t, 1, m.mat, {a: 9, b: 6}, None, "operator", "t1"))
    t = ops.apply(t, ops.confirm_by_players(t, 1, m.mat, {a: 9, b: 6}, None, "p", "t2"))
    doc = json.loads(json.dumps(to_document(t)))
    back = from_document(doc)
    assert to_document(back) == to_document(t)
    assert back.settings.finalists == 1
    # a document from before these fields: a final between two, nothing confirmed
    del doc["tournament"]["finalists"]
    for r in doc["rounds"]:
        for x in r["matches"]:
            if x["result"]:
                del x["result"]["players_at"]
    old = from_document(doc)
    assert old.settings.finalists == 2
    assert not any(x.result and x.result.players_at for r in old.rounds for x in r.matches)


def test_every_preset_makes_a_tournament_its_draw_can_fill():
    for p in PRESETS:
        t = tournament(Settings(rounds=p.rounds, finalists=p.finalists), grade_entries(10))
        count = None if p.block_size else 4
        t = ops.apply(t, ops.draw_blocks(t, count, p.method, 1, ["main"], size=p.block_size))
        assert t.blocks and all(len(t.players_of(b.name)) >= 2 for b in t.blocks), p.id
