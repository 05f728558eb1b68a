"""The server's garbage collector: full collections wait for a moment when no match is read."""

import asyncio
import gc

from api.gcpolicy import GcPolicy


class Node:
    def __init__(self) -> None:
        self.me = self  # a cycle: only the collector can free it


async def test_no_full_collection_while_a_match_is_read_and_one_when_at_rest() -> None:
    reading = True
    policy = GcPolicy(lambda: not reading, period_s=0.05)
    policy.start()
    try:
        full_before = gc.get_stats()[2]["collections"]
        kept = [[Node() for _ in range(1000)] for _ in range(300)]  # 300k survivors
        for _ in range(200):  # garbage cycles: gen 0 and 1 collect, gen 2 would follow
            [Node() for _ in range(1000)]
        await asyncio.sleep(0.2)
        assert gc.get_stats()[2]["collections"] == full_before, "a full collection ran"
        assert policy.collections == 1  # the one at start-up
        reading = False
        for _ in range(100):
            await asyncio.sleep(0.02)
            if policy.collections > 1:
                break
        assert policy.collections > 1 and gc.get_stats()[2]["collections"] > full_before
        assert policy.report()["frozen"] >= 300_000  # the survivors are never walked again
        del kept
    finally:
        await policy.stop()
        gc.unfreeze()
    assert gc.get_threshold()[2] < 1000  # the usual thresholds are back
