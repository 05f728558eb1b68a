"""A referee's hand in the channel service, with a recording runtime: a hand going up is never
delayed by the rate limit (a hold always stops the reading at once); a hand going down too
often waits and only its last intent counts; a flood costs a bounded number of changes."""

import asyncio

from api.auth import Auth
from api.hall import ChannelService
from api.hub import Hub
from reader.events import Hold, Release


class RecordingRuntime:
    def __init__(self) -> None:
        self.applied: list[tuple[str, float]] = []
        self.up = False

    async def submit(self, event) -> dict:
        self.post(event)
        return {}

    def post(self, event) -> None:
        kind = "hold" if isinstance(event, Hold) else "release"
        self.up = kind == "hold"
        self.applied.append((kind, asyncio.get_running_loop().time()))


def service(rate: float = 4.0, burst: int = 3) -> tuple[ChannelService, RecordingRuntime]:
    svc = ChannelService("main", Hub(), "123456", Auth("operator-token-0123456789"),
                         changes_per_s=rate, changes_burst=burst)
    rt = RecordingRuntime()
    svc.runtime = rt  # type: ignore[assignment]
    return svc, rt


async def test_a_hand_going_up_is_never_delayed():
    svc, rt = service()
    loop = asyncio.get_running_loop()
    for _ in range(30):  # a flood: up, down, up, down...
        t = loop.time()
        await svc.hand(Hold("r1", "mat 1"))
        if rt.applied and rt.applied[-1][0] == "hold":
            assert rt.applied[-1][1] - t < 0.005  # applied at once, or the hand was up
        assert rt.up, "after a hold the hand is up, at once"
        await svc.hand(Release("r1"))
    await asyncio.sleep(0.6)
    # the flood's last word was "down": that is where the hand ends, when the rate allows
    assert rt.applied[-1][0] == "release" and not rt.up
    assert len(rt.applied) <= 2 * (3 + 4 * 0.7) + 2, rt.applied  # downs limited, ups follow


async def test_a_hold_cancels_a_release_that_waits():
    svc, rt = service(rate=1.0, burst=1)
    await svc.hand(Hold("r1", "x"))
    await svc.hand(Release("r1"))  # the one allowed at once
    await svc.hand(Hold("r1", "x"))  # up again at once
    await svc.hand(Release("r1"))  # the allowance is spent: this one waits
    assert rt.up
    await svc.hand(Hold("r1", "x"))  # and the hand goes up again before it is applied
    await asyncio.sleep(1.2)
    assert rt.up, rt.applied
    assert [k for k, _ in rt.applied] == ["hold", "release", "hold", "hold"]
