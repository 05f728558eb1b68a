"""The other process's estimate of the owner's timeline (cluster.speakers.RemoteSpeakers),
pure: a fake clock and a fake owner answering the probes (the real broker and pages:
tests/test_cluster_speakers.py)."""

import asyncio
import json
from typing import Any

from cluster.speakers import SYNC_FRESH_S, RemoteSpeakers


class Owner:
    """Answers a probe with its timeline `s` at the middle of a round trip of `rtt`."""

    def __init__(self, clock: list[float]) -> None:
        self.clock = clock
        self.offset = 100.0  # owner's timeline = our monotonic + this
        self.epoch = 0
        self.rtt = 0.010
        self.error = 0.0  # how far off the middle the owner's answer is taken (asymmetry)

    async def ask(self, body: dict[str, Any], timeout_s: float = 3.0) -> bytes:
        assert body == {"op": "sync"}
        s = self.clock[0] + self.rtt / 2 + self.error + self.offset
        self.clock[0] += self.rtt
        return json.dumps({"s": s, "epoch": self.epoch}).encode()


def remote() -> tuple[RemoteSpeakers, Owner, list[float]]:
    clock = [1000.0]
    rs = RemoteSpeakers(None, "main", None, lambda _m: None, lambda: True,  # type: ignore[arg-type]
                        mono=lambda: clock[0])
    owner = Owner(clock)
    rs._ask = owner.ask  # type: ignore[method-assign]
    return rs, owner, clock


def test_no_time_is_said_before_the_first_probe_then_the_fastest_fresh_probe_counts() -> None:
    rs, owner, clock = remote()
    assert "s" not in rs.sync({"type": "sync", "id": 1, "c": 5.0})
    owner.rtt, owner.error = 0.040, 0.015  # a slow probe, answered off its middle
    asyncio.run(rs._probe())
    owner.rtt, owner.error = 0.002, 0.0005  # a fast one
    asyncio.run(rs._probe())
    owner.rtt, owner.error = 0.030, -0.010
    asyncio.run(rs._probe())
    answer = rs.sync({"type": "sync", "id": 2, "c": 5.0})
    assert answer["id"] == 2 and answer["c"] == 5.0
    assert abs(answer["s"] - (clock[0] + owner.offset)) < 0.001  # the fast probe's error
    # the fast probe grows stale: the fastest of the fresh ones counts
    clock[0] += SYNC_FRESH_S - 0.5
    owner.rtt, owner.error = 0.020, 0.004
    asyncio.run(rs._probe())
    clock[0] += 1.0
    assert abs(rs.now() - (clock[0] + owner.offset) - 0.004) < 0.0005


def test_a_new_owner_or_a_jump_of_its_timeline_starts_a_new_epoch() -> None:
    rs, owner, clock = remote()
    asyncio.run(rs._probe())
    asyncio.run(rs._probe())
    assert rs.sync({})["epoch"] == 0
    owner.offset += 0.1  # within JUMP_S: the same timeline
    asyncio.run(rs._probe())
    assert rs.sync({})["epoch"] == 0
    owner.offset += 5.0  # the timeline jumped
    asyncio.run(rs._probe())
    assert rs.sync({})["epoch"] == 1
    assert abs(rs.now() - (clock[0] + owner.offset)) < 0.001  # the old probes are forgotten
    owner.epoch = 3  # the owner's own epoch changed (its timeline, or another owner)
    asyncio.run(rs._probe())
    assert rs.message()["epoch"] == 2


def test_a_clip_of_another_process_is_fetched_once_and_never_passed_on_as_ours() -> None:
    from hall.speaker import ClipStore
    from reader.clip import Verse
    from reader.programme import verse_clip
    from tests.fakes import FakeVoice

    fetched: list[str] = []

    async def fetch(cid: str) -> bytes:
        fetched.append(cid)
        await asyncio.sleep(0.01)
        return b"OggS-from-the-owner"

    async def run() -> None:
        store = ClipStore(b"k" * 32, lambda v, c: b"OggS-ours")
        cid = "ab" * 16
        store.add_foreign(cid, "main", fetch)
        assert store.known(cid) and store.channel_of(cid) == "main"
        assert not store.rendered_here(cid)  # the owner side answers only its own clips
        got = await asyncio.gather(store.data(cid), store.data(cid))
        assert got == [b"OggS-from-the-owner"] * 2 and fetched == [cid]
        assert await store.data(cid) == b"OggS-from-the-owner" and fetched == [cid]
        # a clip of ours stays ours when a schedule names it again
        own = store.add(FakeVoice(), verse_clip(1, Verse.KAMI), "main", "m1")
        store.add_foreign(own, "main", fetch)
        assert store.rendered_here(own) and await store.data(own) == b"OggS-ours"
        assert fetched == [cid]

    asyncio.run(run())
