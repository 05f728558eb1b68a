"""A referee's hand in the channel service, with a recording runtime: a hand going up is never
delayed by the rate limit (a hold always stops the reading at once); a hand going down too
often waits and only its last intent counts; a flood costs a bounded number of changes."""

import asyncio

from hall.auth import Auth
from hall.channel import ChannelService
from hall.hub import Hub
from reader.events import Hold, Release


class RecordingRuntime:
    def __init__(self) -> None:
        self.applied: list[tuple[str, float]] = []
        self.up = False
        # a callback a test queues before a call appends here when the event loop runs it:
        # what is applied while this is still empty was applied without the loop running
        # anything else meanwhile (no sleep, no timer)
        self.canary: list[bool] = []
        self.at_once: list[bool] = []

    async def submit(self, event, deadline=None) -> dict:
        self.post(event)
        return {}

    def post(self, event) -> None:
        kind = "hold" if isinstance(event, Hold) else "release"
        self.up = kind == "hold"
        self.applied.append((kind, asyncio.get_running_loop().time()))
        self.at_once.append(not self.canary)


def service(rate: float = 4.0, burst: int = 3) -> tuple[ChannelService, RecordingRuntime]:
    svc = ChannelService("main", Hub(), "123456", Auth("operator-token-0123456789"),
                         changes_per_s=rate, changes_burst=burst)
    rt = RecordingRuntime()
    svc.runtime = rt  # type: ignore[assignment]
    return svc, rt


async def until(what, timeout_s: float = 30.0) -> None:
    async with asyncio.timeout(timeout_s):
        while not what():
            await asyncio.sleep(0.01)


async def test_a_hand_going_up_is_never_delayed():
    svc, rt = service()
    loop = asyncio.get_running_loop()
    t0 = loop.time()
    for _ in range(30):  # a flood: up, down, up, down...
        n = len(rt.applied)
        rt.canary = []
        loop.call_soon(rt.canary.append, True)
        await svc.hand(Hold("r1", "mat 1"))
        # applied at once (before the loop ran the callback queued first: a hold that waited
        # for the rate, by a sleep or a timer, lets it run), or not at all: the hand was up
        assert all(now for (kind, _), now in zip(rt.applied[n:], rt.at_once[n:], strict=True)
                   if kind == "hold"), rt.applied[n:]
        assert rt.up, "after a hold the hand is up, at once"
        await svc.hand(Release("r1"))
    # the flood's last word was "down": that is where the hand ends, when the rate allows
    await until(lambda: not rt.up)
    assert rt.applied[-1][0] == "release"
    # downs limited by the rate (3 at once, then 4 a second over the time it all took: a busy
    # machine only allows more), ups follow them; unlimited, the flood applies all 60
    took = loop.time() - t0
    # (what changes the hand: a hold while it is up is applied too, and changes nothing; the
    # engine writes no journal line for it)
    changes = [k for i, (k, _) in enumerate(rt.applied) if i == 0 or k != rt.applied[i - 1][0]]
    assert len(changes) <= 2 * (3 + 4 * took) + 2, (took, rt.applied)


async def test_a_hold_cancels_a_release_that_waits():
    svc, rt = service(rate=1.0, burst=1)
    await svc.hand(Hold("r1", "x"))
    await svc.hand(Release("r1"))  # the one allowed at once
    await svc.hand(Hold("r1", "x"))  # up again at once
    await svc.hand(Release("r1"))  # the allowance is spent: this one waits
    assert rt.up
    await svc.hand(Hold("r1", "x"))  # and the hand goes up again before it is applied
    # when the rate allows (a second on), the last intent is applied: the hold, not the
    # release that waited
    await until(lambda: len(rt.applied) == 4)
    assert rt.up, rt.applied
    assert [k for k, _ in rt.applied] == ["hold", "release", "hold", "hold"]
