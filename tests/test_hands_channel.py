"""Referees flooding together, in the channel service (issue 25, item 7), with a runtime whose
inbox the test empties by hand: what waits in the inbox ahead of an honest hold is seen, not
timed.

- Hands going down are budgeted per channel as well as per referee, and go to the inbox one at
  a time: twenty referees releasing at once put one release ahead of a hold, not twenty.
- A hand going up goes to the inbox at once, whatever the budgets.
- A referee's budgets belong to the referee, not to its socket: connecting again keeps them.
- The operator's own moves are never budgeted."""

from __future__ import annotations

import asyncio
from typing import Any

from hall.auth import Auth
from hall.channel import ChannelService
from hall.hub import Hub
from reader.events import Hold, Release

Item = Hold | Release


class Inbox:
    """A runtime whose inbox the test sees: a submitted item waits until the test applies it."""

    def __init__(self) -> None:
        self.queue: list[tuple[Item, asyncio.Future[Any] | None]] = []
        self.applied: list[Item] = []

    async def submit(self, item: Item, deadline: float | None = None) -> dict[str, Any]:
        fut: asyncio.Future[Any] = asyncio.get_running_loop().create_future()
        self.queue.append((item, fut))
        return await fut  # type: ignore[no-any-return]

    def post(self, item: Item) -> None:
        self.queue.append((item, None))

    async def settle(self) -> None:
        """Let every coroutine that can run, run (no time passes)."""
        for _ in range(20):
            await asyncio.sleep(0)

    async def apply_all(self) -> None:
        await self.settle()
        while self.queue:
            item, fut = self.queue.pop(0)
            self.applied.append(item)
            if fut is not None:
                fut.set_result({})
            await self.settle()


def service(channel_burst: int = 3) -> tuple[ChannelService, Inbox]:
    # the channel's budget refills so slowly that no time a test can take adds to it
    svc = ChannelService("main", Hub(), "123456", Auth("operator-token-0123456789"),
                         changes_per_s=2.0, changes_burst=8,
                         channel_changes_per_s=1e-6, channel_changes_burst=channel_burst)
    inbox = Inbox()
    svc.runtime = inbox  # type: ignore[assignment]
    return svc, inbox


async def test_twenty_releases_at_once_put_one_ahead_of_a_hold():
    svc, inbox = service()
    crowd = [f"r{i}" for i in range(20)]
    tasks = [asyncio.create_task(svc.hand(Hold(r, r))) for r in crowd]
    await inbox.apply_all()
    await asyncio.gather(*tasks)
    inbox.applied.clear()
    # every referee of the crowd lowers its hand at the same moment (each within its own
    # budget), and an honest referee raises its hand
    tasks = [asyncio.create_task(svc.hand(Release(r))) for r in crowd]
    await inbox.settle()
    honest = asyncio.create_task(svc.hand(Hold("honest", "mat 1")))
    await inbox.settle()
    ahead = next(i for i, (item, _) in enumerate(inbox.queue)
                 if isinstance(item, Hold) and item.referee == "honest")
    assert ahead <= 1, [item for item, _ in inbox.queue]
    await inbox.apply_all()
    await honest
    # the channel let its burst through, one at a time; the others wait for its budget
    assert sum(isinstance(i, Release) for i in inbox.applied) == 3, inbox.applied
    assert all(t.done() for t in tasks)  # nobody's request waits for the budget


async def test_a_hold_goes_to_the_inbox_at_once_with_every_budget_spent():
    svc, inbox = service(channel_burst=1)
    for r in ("a", "b"):
        await asyncio.gather(svc.hand(Hold(r, r)), inbox.apply_all())
    await asyncio.gather(svc.hand(Release("a")), inbox.apply_all())  # the channel's one
    await svc.hand(Release("b"))  # waits for the channel's budget
    assert not inbox.queue
    task = asyncio.create_task(svc.hand(Hold("c", "c")))
    await inbox.settle()
    assert [i for i, _ in inbox.queue] == [Hold("c", "c")]
    await inbox.apply_all()
    await task
    # b's hand goes up again while its release waits: the release is forgotten
    await asyncio.gather(svc.hand(Hold("b", "b")), inbox.apply_all())
    assert Release("b") not in inbox.applied


async def test_the_operator_lowers_a_hand_at_once_whatever_the_budgets():
    svc, inbox = service(channel_burst=1)
    for r in ("a", "b"):
        await asyncio.gather(svc.hand(Hold(r, r)), inbox.apply_all())
    await asyncio.gather(svc.hand(Release("a")), inbox.apply_all())
    await svc.hand(Release("b"))  # waits
    task = asyncio.create_task(svc.hand(Release("b"), trusted=True))
    await inbox.settle()
    assert [i for i, _ in inbox.queue] == [Release("b")]
    await inbox.apply_all()
    await task


async def test_a_referee_that_connects_again_keeps_its_socket_budget():
    svc, _ = service()
    first = svc.read_budget("r1", rate=10.0, burst=4)
    t = 100.0
    verdicts = [first.take(t) for _ in range(12)]  # a flood: the socket is closed
    assert None in verdicts
    again = svc.read_budget("r1", rate=10.0, burst=4)  # the referee's next socket
    assert again.take(t + 0.01) is None  # still flooding: closed at its first message
    assert svc.read_budget("r2", rate=10.0, burst=4).take(t) == 0.0  # others are not
