"""The server's garbage collector: full collections wait for a moment when no match is read."""

import asyncio
import gc

from hall.gcpolicy import GcPolicy


class Node:
    def __init__(self) -> None:
        self.me = self  # a cycle: only the collector can free it


async def until(what, timeout_s: float = 60.0) -> None:
    """Wait for `what()`, on a busy machine too: a full collection of a big heap may take a
    second of CPU, and the policy's task may get a fraction of one."""
    async with asyncio.timeout(timeout_s):
        while not what():
            await asyncio.sleep(0.01)


async def test_no_full_collection_while_a_match_is_read_and_one_when_at_rest() -> None:
    reading = True
    looks: list[bool] = []  # each time the policy asked whether the hall is at rest

    def at_rest() -> bool:
        looks.append(not reading)
        return not reading

    policy = GcPolicy(at_rest, period_s=0.05)
    policy.start()
    try:
        full_before = gc.get_stats()[2]["collections"]
        kept = [[Node() for _ in range(1000)] for _ in range(300)]  # 300k survivors
        for _ in range(200):  # garbage cycles: gen 0 and 1 collect, gen 2 would follow
            [Node() for _ in range(1000)]
        # the policy looked four times while the match was read (however long that took)
        seen = len(looks)
        await until(lambda: len(looks) >= seen + 4)
        assert gc.get_stats()[2]["collections"] == full_before, "a full collection ran"
        assert policy.collections == 1  # the one at start-up
        reading = False
        await until(lambda: policy.collections > 1)
        assert gc.get_stats()[2]["collections"] > full_before
        assert policy.report()["frozen"] >= 300_000  # the survivors are never walked again
        del kept
    finally:
        await policy.stop()
        gc.unfreeze()
    assert gc.get_threshold()[2] < 1000  # the usual thresholds are back


async def test_too_much_made_during_a_match_is_collected_without_listing_the_heap(
        monkeypatch) -> None:
    """Past `pending_limit`, a full collection runs even while a match is read; whether it is
    past is asked of the allocator, not by listing generation 2 (19 ms for 600,000 objects,
    every period, on the loop)."""
    def listed(*_a: object) -> list[object]:
        raise AssertionError("generation 2 listed")

    policy = GcPolicy(lambda: False, period_s=0.05, pending_limit=200_000)
    policy.start()
    monkeypatch.setattr(gc, "get_objects", listed)
    try:
        kept = [[Node() for _ in range(1000)] for _ in range(300)]  # 300k survivors
        await until(lambda: policy.forced >= 1)
        assert policy.report()["waiting"] < 200_000  # counted again from the collection
        del kept
    finally:
        await policy.stop()
        gc.unfreeze()
