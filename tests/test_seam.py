"""The channel's port (hall.seam): the in-process channel service forwards commands to its
runtime, gives the latest state with its sequence number, and hands every new state to its
subscribers in order (the clients' fan-out among them)."""

import pytest

from hall.auth import Auth
from hall.channel import ChannelService
from hall.errors import ChannelStopped
from hall.hub import Hub
from hall.seam import ChannelPort, Latest
from hall.states import ChannelState
from reader.events import Start


class EchoRuntime:
    def __init__(self) -> None:
        self.items: list[object] = []

    async def submit(self, item: object, deadline: float | None = None) -> dict:
        self.items.append(item)
        return {"applied": len(self.items)}


def port() -> tuple[ChannelPort, ChannelService]:
    svc = ChannelService("main", Hub(), "123456", Auth("operator-token-0123456789"))
    return svc, svc


async def test_a_command_goes_to_the_runtime_and_its_state_comes_back():
    p, svc = port()
    with pytest.raises(ChannelStopped):
        await p.apply(Start())
    rt = EchoRuntime()
    svc.runtime = rt  # type: ignore[assignment]
    assert await p.apply(Start()) == {"applied": 1}
    assert rt.items == [Start()]


async def test_subscribers_get_every_state_in_order_until_they_leave():
    p, svc = port()
    seen: list[Latest] = []
    leave = p.subscribe(seen.append)
    svc.broadcast()
    svc.on_state(ChannelState("main", 7, "ok", "ok", None, None, None, None, None, {}, None))
    assert [s.seq for s in seen] == [1, 2]
    assert seen[-1].state.seq == 2 and seen[-1].state.state is not None
    assert seen[-1].state.state.audio == "ok"
    assert p.latest().seq == 2 and p.latest().state.pin == "123456"
    leave()
    svc.broadcast()
    assert len(seen) == 2 and p.latest().seq == 3
    assert svc.hub.published[-1][0] == 3  # the fan-out is still subscribed
