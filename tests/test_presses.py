"""The rule of a referee's presses (hall.presses, issue 47 item 7): a move applied once, never
an older one after a newer one, no stale hold, no hold for a verse no longer read; a release
never refused for its age; a refused hold never in the way of a fresh one. Pure: the times are
passed in by hand."""

from __future__ import annotations

from hall.presses import AFTER, KAMI, SHIMO, Outcome, Position, Press, Presses, position_of


def presses() -> Presses:
    return Presses(max_age_s=2.0, grace_s=0.5)


def test_a_move_is_applied_once_and_its_repeat_applies_nothing() -> None:
    p = presses()
    assert p.judge("r1", True, Press(move=7), 10.0).outcome is Outcome.APPLY
    again = p.judge("r1", True, Press(move=7), 10.4)  # the REST fallback of the same press
    assert again.outcome is Outcome.REPEATED and not again.apply


def test_an_older_move_after_a_newer_one_is_ignored() -> None:
    p = presses()
    assert p.judge("r1", True, Press(move=4), 10.0).apply
    assert p.judge("r1", False, Press(move=5), 11.0).apply  # the hand goes down
    late = p.judge("r1", True, Press(move=4), 12.0)  # the hold's late copy
    assert late.outcome is Outcome.SUPERSEDED and late.last == 5
    # another referee's moves are its own
    assert p.judge("r2", True, Press(move=1), 12.0).apply


def test_a_hold_pressed_more_than_max_age_before_it_arrived_is_refused() -> None:
    p = presses()
    v = p.judge("r1", True, Press(move=1, at_s=100.0), 102.5)
    assert v.outcome is Outcome.STALE and v.refused and v.age_s == 2.5
    # the same move again is refused again, not applied on its second coming
    assert p.judge("r1", True, Press(move=1, at_s=100.0), 102.6).outcome is Outcome.STALE
    # a fresh press, a new move: applied (a refusal never stands in a fresh hold's way)
    assert p.judge("r1", True, Press(move=2, at_s=102.5), 102.7).apply
    # within the age: applied
    assert presses().judge("r1", True, Press(move=1, at_s=100.0), 101.9).apply


def test_a_release_is_never_refused_for_its_age_or_the_reading() -> None:
    p = presses()
    p.observe(Position(3, KAMI), 50.0)
    v = p.judge("r1", False, Press(move=9, card=1, verse="kami", at_s=10.0), 60.0)
    assert v.apply


def test_a_hold_for_a_verse_no_longer_read_is_refused_beyond_the_grace() -> None:
    p = presses()
    p.observe(Position(2, KAMI), 10.0)
    p.observe(Position(2, KAMI), 10.0)  # the same position again: no new start
    p.observe(Position(2, SHIMO), 14.0)
    p.observe(Position(2, SHIMO), 17.0)  # gap_repeat, a second lower verse: still SHIMO
    seen_kami = Press(card=2, verse="kami")
    # crossing the boundary by a network's latency: applied
    assert p.judge("r1", True, Press(move=1, card=2, verse="kami", at_s=13.9), 14.4).apply
    # 0.6 s after the lower verse began: refused, said how late
    v = p.judge("r1", True, Press(move=2, card=2, verse="kami", at_s=14.1), 14.6 + 0.01)
    assert v.outcome is Outcome.MOVED_ON and v.late_s is not None and v.late_s > 0.5
    # what the phone saw last is what counts: on the lower verse, a hold is applied
    assert p.judge("r1", True, Press(move=3, card=2, verse="shimo", at_s=18.0), 18.2).apply
    # a press without a verse means the card: the card is still read
    assert p.judge("r2", True, Press(move=1, card=2, at_s=18.0), 18.2).apply
    # no move (an older page): the same rule for what it saw
    assert p.judge("r3", True, seen_kami, 18.2).outcome is Outcome.MOVED_ON


def test_the_next_card_is_past_the_card_before_from_its_first_moment() -> None:
    p = presses()
    p.observe(Position(4, SHIMO), 30.0)
    p.observe(Position(5, KAMI), 40.0)
    p.observe(Position(5, SHIMO), 46.0)
    # moved on when card 5 began (40.0), not when its lower verse did
    v = p.judge("r1", True, Press(move=1, card=4, at_s=46.2), 46.3)
    assert v.outcome is Outcome.MOVED_ON and v.late_s is not None and abs(v.late_s - 6.3) < 1e-9
    # a card read again, or a new match: a new history, nothing past
    p.observe(Position(1, KAMI), 50.0)
    assert p.judge("r1", True, Press(move=2, card=1, verse="kami", at_s=50.1), 50.2).apply
    p.observe(None, 0.0)
    assert p.judge("r1", True, Press(move=3, card=1, verse="shimo", at_s=50.1), 50.2).apply


def test_a_press_without_the_new_fields_is_applied_as_before() -> None:
    p = presses()
    p.observe(Position(9, SHIMO), 1.0)
    for _ in range(3):
        assert p.judge("r1", True, Press(), 100.0).apply
        assert p.judge("r1", False, Press(), 100.0).apply


def test_positions_from_segments() -> None:
    assert position_of(3, 3, "kami", "card_kami") == Position(3, KAMI)
    assert position_of(3, 3, None, "gap_between_verses") == Position(3, KAMI)
    assert position_of(3, 3, "shimo", "card_shimo") == Position(3, SHIMO)
    assert position_of(3, 3, None, "gap_repeat") == Position(3, SHIMO)
    assert position_of(3, 3, None, "gap_between_cards") == Position(3, SHIMO)
    assert position_of(3, None, None, "extra_call") == Position(3, AFTER)
    assert position_of(0, None, None, "memorise_call") == Position(0, 0)
    assert Position(4, KAMI).past(Position(3, SHIMO))
    assert not Position(3, SHIMO).past(Position(3, 0))
    assert not Position(3, KAMI).past(Position(3, SHIMO))


def test_what_it_remembers_is_bounded() -> None:
    p = Presses(remember=8)
    for i in range(100):
        p.judge(f"r{i}", True, Press(move=1), 1.0)
    assert len(p._last) == 8
    for i in range(100):
        p.observe(Position(i, KAMI), float(i))
    assert len(p._reached) == 16
