"""The hub's direct path (api/hub.py): frames written straight to transports, one frame per
audience, and a phone that stops reading dropped by the number of states it left unsent."""

import asyncio

from websockets.frames import Frame, Opcode
from websockets.streams import StreamReader

from hall.hub import FLOW_HIGH_WATER, Hub, text_frame
from hall.states import ChannelState, OperatorView, SpeakersView
from hall.views import PublicView, public_view


def views(seq: int, pad: str) -> tuple[OperatorView, PublicView]:
    """An operator's state of `seq` that carries `pad` (as its fault), and its public view."""
    st = ChannelState("main", seq, "ok", "ok", pad, None, None, None, None, {}, None)
    op = OperatorView(st, "main", seq, "null", SpeakersView("device", 0), 0.0, None, (), "1234")
    return op, public_view(op)


class FakeTransport:
    """A transport whose peer reads nothing after `reads` bytes: the rest stays buffered."""

    def __init__(self, reads: int | None = None) -> None:
        self.data = bytearray()
        self.reads = reads
        self.closing = False
        self.aborted = False

    def write(self, b: bytes) -> None:
        self.data += b

    def is_closing(self) -> bool:
        return self.closing

    def get_write_buffer_size(self) -> int:
        return 0 if self.reads is None else max(0, len(self.data) - self.reads)

    def abort(self) -> None:
        self.aborted = self.closing = True


def frames(data: bytes) -> list[str]:
    reader = StreamReader()
    reader.feed_data(bytes(data))
    reader.feed_eof()
    out = []
    while reader.buffer:
        gen = Frame.parse(reader.read_exact, mask=False)
        try:
            while True:
                next(gen)
        except StopIteration as stop:
            f = stop.value
        assert f.opcode is Opcode.TEXT and f.fin
        out.append(f.data.decode())
    return out


def test_text_frames_parse_at_every_length_class():
    for n in (0, 125, 126, 65535, 65536, 200_000):
        text = "読" * (n // 3) + "x" * (n % 3)
        assert frames(text_frame(text)) == [text]


async def test_every_client_gets_the_same_bytes_and_a_stopped_reader_is_dropped():
    hub = Hub(queue_size=4)
    closed: list[int] = []

    async def send(_t: str) -> None:
        raise AssertionError("the direct path never sends through ASGI")

    async def close(code: int, _r: str) -> None:
        closed.append(code)

    reading, stalled, op = FakeTransport(), FakeTransport(reads=0), FakeTransport()
    a = hub.add(send, close, operator=False, transport=reading)  # type: ignore[arg-type]
    b = hub.add(send, close, operator=False, transport=stalled)  # type: ignore[arg-type]
    hub.add(send, close, operator=True, transport=op)  # type: ignore[arg-type]
    pad = "p" * (FLOW_HIGH_WATER // 4)  # 4 states fill the flow-control allowance
    for seq in range(12):
        op_view, pub = views(seq, pad)
        hub.publish(op_view, lambda pub=pub: pub)  # type: ignore[misc]
    await asyncio.sleep(0)
    got = frames(reading.data)
    assert len(got) == 12 and all('"pin"' not in m for m in got)
    assert all('"pin":"1234"' in m for m in frames(op.data))
    assert stalled.data == reading.data[: len(stalled.data)]  # the very same frames
    # the stalled phone had more than 4 states unsent beyond the allowance: dropped and cut
    assert b not in hub.clients and a in hub.clients and hub.dropped == 1
    assert len(frames(stalled.data)) < 12
    async with asyncio.timeout(30):  # the close runs in a task of its own
        while not stalled.aborted:
            await asyncio.sleep(0.01)
    assert closed == [1013] and stalled.aborted


def test_an_audience_with_no_client_here_costs_nothing():
    """A cluster's process gets every room's states: one with no viewer here makes no public
    view and no JSON (the fan-out's CPU grew with the processes)."""
    hub = Hub()
    made: list[int] = []

    def public() -> PublicView:
        made.append(1)
        return views(1, "")[1]

    op_view = views(1, "")[0]
    hub.publish(op_view, public)
    assert made == [] and hub.published[-1][0] == 1
    operator = FakeTransport()
    hub.add(_never, _never, operator=True, transport=operator)  # type: ignore[arg-type]
    hub.publish(op_view, public)
    assert made == [] and len(frames(operator.data)) == 1
    viewers = [FakeTransport() for _ in range(3)]
    for v in viewers:
        hub.add(_never, _never, operator=False, transport=v)  # type: ignore[arg-type]
    hub.publish(op_view, public)
    assert made == [1]  # once for every viewer
    assert all(frames(v.data) == frames(viewers[0].data) for v in viewers)


async def _never(*_a: object) -> None:
    raise AssertionError("the direct path never sends through ASGI")
