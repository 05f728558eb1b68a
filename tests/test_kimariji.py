"""Deck-relative kimariji against a brute-force search, for every colour at every step."""

import pytest

from reader.deck import Deck
from reader.kimariji import kimariji, kimariji_lengths, sound_key, teaching, written
from reader.poems import Color, all_poems


def brute(no: int, mats: set[int]) -> str:
    """Try every length: the first start of the heard verse no other card on the mats has."""
    key = sound_key(no)
    for n in range(1, len(key) + 1):
        if not any(sound_key(o).startswith(key[:n]) for o in mats if o != no):
            return written(no)[:n]
    raise AssertionError(f"poem {no} is never decided")


def test_the_hundred_give_the_data_sets_kimariji():
    lengths = kimariji_lengths(range(1, 101))
    got = {p.no: written(p.no)[: lengths[p.no]] for p in all_poems()}
    assert got == {p.no: p.kimariji for p in all_poems()}
    assert got[26] == "をぐ" and got[44] == "あふこ"  # を = お, a long o = おお
    assert sorted(n for n, k in got.items() if len(k) == 1) == [18, 22, 57, 70, 77, 81, 87]


@pytest.mark.parametrize("color", list(Color))
def test_every_step_of_a_match_agrees_with_brute_force(color):
    deck = Deck.build(colors=[color.value], seed=1234)
    mats = set(deck.poems)
    for k in range(len(deck.order) + 1):
        t = teaching(deck.poems, deck.order[:k])
        left = set(deck.poems) - set(deck.order[:k])
        assert {c.poem for c in t.left} == left
        for c in t.left:
            assert c.kimariji == brute(c.poem, left)
            before = left | ({deck.order[k - 1]} if k else set())
            assert c.before == brute(c.poem, before)
            assert len(c.kimariji) <= len(c.before)  # taking a card never lengthens one
        assert [c.poem for c in t.read] == list(deck.order[:k])
        for i, c in enumerate(t.read):
            on_mats = set(deck.poems) - set(deck.order[:i])
            assert c.kimariji == brute(c.poem, on_mats) == kimariji(c.poem, on_mats)
            assert c.hundred == brute(c.poem, set(range(1, 101)))
    assert mats == set(deck.poems)


def test_a_colour_deck_shortens_the_kimariji():
    blue = Deck.build(colors=["blue"], seed=1)
    lengths = kimariji_lengths(blue.poems)
    hundred = kimariji_lengths(range(1, 101))
    assert all(lengths[n] <= hundred[n] for n in blue.poems)
    assert sum(lengths.values()) < sum(hundred[n] for n in blue.poems)
    assert kimariji(31, [31, 64]) == "あさぼらけあ"
    assert kimariji(31, [31, 1]) == "あさ"


def test_a_card_not_on_the_mats_is_refused():
    with pytest.raises(ValueError, match="poem 5 is not among"):
        kimariji(5, [1, 2])


def test_a_hundred_card_match_agrees_with_brute_force_as_cards_leave():
    """The mats kept sorted as cards leave them give what sorting them again would (the
    hundred, read in a shuffled order, and a card read twice)."""
    deck = Deck.build(colors=[c.value for c in Color], seed=99)
    assert len(deck.poems) == 100
    order = list(deck.order)
    for k in (1, 2, 37, 38, 99, 100):
        read = [*order[:k], order[0]]  # read again: already off the mats
        t = teaching(deck.poems, read)
        left = set(deck.poems) - set(read)
        assert [c.kimariji for c in t.left] == [brute(n, left) for n in sorted(left)]
        assert [c.before for c in t.left] == [brute(n, left) for n in sorted(left)]
        t = teaching(deck.poems, order[:k])
        assert [c.before for c in t.left] == [brute(n, left | {order[k - 1]})
                                              for n in sorted(left)]
        for i, c in enumerate(t.read):
            assert c.kimariji == brute(c.poem, set(deck.poems) - set(order[:i]))
