"""A round's start steps as a cluster's processes make them (hall/roundstarts.py, pure): a
confirmation or an undo made for one start does nothing once the round's start is another
(another process confirmed, undid or started it again meanwhile): without the check, a process
reconciling a start at its own start-up overwrote another's confirmation with nothing."""

from desk import tournament as ops
from desk.model import Reading, ReadingStatus, Tournament
from hall.roundstarts import confirm_step, undo_step
from tests.test_desk_rules import two_block_tournament


def started(at: str) -> Tournament:
    t = two_block_tournament()
    t = ops.apply(t, ops.pair_next(t, "A", "now"))
    return ops.apply(t, ops.start_reading(t, "A", 1, "main", at))


def reading(t: Tournament) -> Reading | None:
    return next(r for r in t.rounds if r.block == "A" and r.number == 1).reading


def test_a_step_for_one_start_leaves_another_start_alone() -> None:
    t = started("2026-12-04T10:00:00+00:00")
    # the start it was made for: done
    ch = confirm_step(t, block="A", number=1, seed=7, journal="j.jsonl",
                      asked="2026-12-04T10:00:00+00:00")
    assert ch is not None
    confirmed = ops.apply(t, ch)
    assert reading(confirmed).status is ReadingStatus.STARTED
    # once confirmed (by another process), an undo made for that start does nothing
    assert undo_step(confirmed, block="A", number=1, reading=None,
                     asked="2026-12-04T10:00:00+00:00") is None
    # a start asked for again later: neither step for the first one touches it
    again = ops.apply(t, ops.start_reading(t, "A", 1, "main", "2026-12-04T10:05:00+00:00"))
    assert confirm_step(again, block="A", number=1, seed=7, journal="j.jsonl",
                        asked="2026-12-04T10:00:00+00:00") is None
    assert undo_step(again, block="A", number=1, reading=None,
                     asked="2026-12-04T10:00:00+00:00") is None
    # without `asked` (one process): as before
    ch = undo_step(again, block="A", number=1, reading=None)
    assert ch is not None and reading(ops.apply(again, ch)) is None
