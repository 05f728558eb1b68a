"""A runtime's tenure (hall.tenure): how long this process may read a channel, checked by the
runtime itself before every item, whatever the event loop was waiting on; and a command's
deadline (a cluster's: its sender has given up by then). In-process, a null sink on wall time,
a tenure moved by hand on the monotonic clock."""

import asyncio
import time
from pathlib import Path

import pytest

from hall.errors import Expired, NotSent
from hall.inbox import PrepareMatch
from reader.events import ClearHolds, Hold, Release, Start
from tests.test_runtime_faults import runtime, until


class HandTenure:
    """A tenure set by the test (time.monotonic instants)."""

    def __init__(self, reads_from: float = float("-inf"),
                 reads_until: float = float("inf")) -> None:
        self.from_ = reads_from
        self.until = reads_until

    def reads_from(self) -> float:
        return self.from_

    def reads_until(self) -> float:
        return self.until

    def why_ended(self) -> str:
        return "the test's lease ended"


def holds(rt) -> list[str]:  # type: ignore[no-untyped-def]
    m = rt.state().match
    return [h.referee for h in m.snapshot.holds] if m is not None else []


async def test_the_reading_stops_by_itself_at_the_tenure_s_end_and_nothing_is_applied_after(
        tmp_path: Path) -> None:
    rt, _voice = runtime(tmp_path, cards=8)
    tenure = HandTenure()
    ended: list[str] = []
    rt.tenure, rt.on_ended = tenure, ended.append
    rt.start()
    try:
        await rt.submit(PrepareMatch(seed=5))
        await rt.submit(Start())
        await until(lambda: (rt.state().match is not None
                             and rt.state().match.snapshot.phase.value == "reading"))
        # the lease can no longer be proven in 0.3 s: nobody tells the runtime
        tenure.until = time.monotonic() + 0.3
        await until(lambda: bool(ended), 10)
        stopped_at = time.monotonic()
        assert stopped_at >= tenure.until
        m = rt.state().match
        assert m is not None and m.snapshot.paused and "@lease" in holds(rt)
        assert ended == ["the test's lease ended"]
        frozen = rt.state()
        # nothing more: a hold, a resume, the passing of time
        with pytest.raises(NotSent):
            await rt.submit(Hold("r1", "mat 1"))
        with pytest.raises(NotSent):
            await rt.submit(ClearHolds())
        await asyncio.sleep(0.5)
        assert rt.state() == frozen
    finally:
        await rt.stop()


async def test_a_loop_that_stalled_past_the_tenure_applies_nothing_queued_meanwhile(
        tmp_path: Path) -> None:
    """The event loop blocked (a frozen process, a busy machine) past the tenure's end, with
    items queued: the tenure's end comes first, the items are refused."""
    rt, _voice = runtime(tmp_path, cards=8)
    tenure = HandTenure()
    rt.tenure = tenure
    rt.start()
    try:
        await rt.submit(PrepareMatch(seed=5))
        await rt.submit(Start())
        await until(lambda: (rt.state().match is not None
                             and rt.state().match.snapshot.phase.value == "reading"))
        before = len(rt.journal_records())
        tenure.until = time.monotonic() + 0.05
        hold = asyncio.ensure_future(rt.submit(Hold("late", "mat 2")))
        time.sleep(0.3)  # the loop blocked: the hold is queued, the tenure over meanwhile
        with pytest.raises(NotSent):
            await hold
        facts = [f.get("referee") for r in rt.journal_records()[before:]
                 for f in r.get("facts", []) if f.get("fact") == "hold"]
        assert facts == ["@lease"]
    finally:
        await rt.stop()


async def test_what_would_sound_waits_for_the_tenure_s_start_and_a_hold_does_not(
        tmp_path: Path) -> None:
    """A process that took the channel another may still have been reading: a start, a resume,
    a hand lowered wait until the last holder's lease is certainly over; a hold goes at once."""
    rt, _voice = runtime(tmp_path, cards=8)
    rt.start()
    try:
        await rt.submit(PrepareMatch(seed=5))
        rt.tenure = HandTenure(reads_from=time.monotonic() + 0.6)
        t0 = time.monotonic()
        await rt.submit(Hold("r1", "mat 1"))
        held_after = time.monotonic() - t0
        await rt.submit(Release("r1"))
        released_after = time.monotonic() - t0
        await rt.submit(Start())
        assert held_after < 0.6 <= released_after
        assert rt.state().match is not None
    finally:
        await rt.stop()


async def test_a_command_past_its_deadline_is_not_applied(tmp_path: Path) -> None:
    rt, _voice = runtime(tmp_path, cards=8)
    rt.start()
    try:
        await rt.submit(PrepareMatch(seed=5))
        with pytest.raises(Expired):
            await rt.submit(Hold("late", "mat 1"), deadline=time.monotonic() - 0.01)
        # one queued in time, its deadline passed while the loop was busy: not applied
        late = asyncio.ensure_future(rt.submit(Hold("queued", "mat 2"),
                                               deadline=time.monotonic() + 0.05))
        await asyncio.sleep(0)  # queued
        time.sleep(0.2)  # the loop blocked past the deadline
        with pytest.raises(Expired):
            await late
        assert "queued" not in holds(rt)
        assert "late" not in holds(rt)
        await rt.submit(Hold("on time", "mat 1"), deadline=time.monotonic() + 5)
        assert "on time" in holds(rt)
    finally:
        await rt.stop()
