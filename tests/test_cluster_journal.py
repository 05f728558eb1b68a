"""The cluster's journal in the broker's stream (cluster.journalstream), against a real
nats-server: lines stored in order and acknowledged before `flushed` returns; a broker that is
away holds the answer, not the lines; and a process that lost a channel without knowing it can
never add a line after the new owner's (the fence)."""

import asyncio
import json
from pathlib import Path

import pytest

from cluster.bus import Bus
from cluster.journalstream import JournalStream
from hall.errors import JournalUnavailable
from tests.natsbroker import Broker


async def lines(bus: Bus, ch: str) -> list[tuple[str, dict[str, object]]]:
    sub = await bus.js.pull_subscribe(bus.subjects.journal(ch), stream=bus.subjects.stream)
    out = []
    while True:
        try:
            msgs = await sub.fetch(100, timeout=0.5)
        except Exception:  # nats' TimeoutError: none left
            return out
        for m in msgs:
            body = json.loads(m.data)
            out.append((m.headers["Yomite-Origin"], body["line"]))
            await m.ack()


@pytest.fixture
def broker(tmp_path: Path) -> Broker:
    b = Broker(tmp_path)
    b.start()
    yield b
    b.stop()


def test_a_process_that_lost_the_channel_cannot_write_after_the_new_owner(
        broker: Broker) -> None:
    async def run() -> None:
        bus = await Bus.connect(broker.url, name="t", prefix="fence")
        fenced: list[str] = []
        old = JournalStream(bus, "main", "old", on_fenced=lambda: fenced.append("old"))
        old.start()
        old.tap("m.jsonl", {"type": "header"})
        old.tap("m.jsonl", {"type": "event", "seq": 1})
        await old.flushed()
        # another process takes the channel: it starts from the stream's last line
        last = await bus.js.get_last_msg(bus.subjects.stream, bus.subjects.journal("main"))
        new = JournalStream(bus, "main", "new", last_seq=last.seq)
        new.start()
        new.tap("m.jsonl", {"type": "event", "seq": 2, "by": "new"})
        await new.flushed()
        # the old one, woken, writes on: refused, told, and its answer says so
        old.tap("m.jsonl", {"type": "event", "seq": 2, "by": "old"})
        with pytest.raises(JournalUnavailable, match="no longer owns"):
            await old.flushed()
        assert fenced == ["old"]
        got = await lines(bus, "main")
        assert [(o, ln.get("seq")) for o, ln in got] == [("old", None), ("old", 1), ("new", 2)]
        await old.stop()
        await new.stop()
        await bus.close()

    asyncio.run(run())


def test_a_broker_away_holds_the_answer_and_the_lines_are_stored_when_it_is_back(
        broker: Broker) -> None:
    async def run() -> None:
        bus = await Bus.connect(broker.url, name="t", prefix="away")
        js = JournalStream(bus, "main", "p1", timeout_s=1.0)
        js.start()
        js.tap("m.jsonl", {"type": "header"})
        await js.flushed()
        broker.kill()
        js.tap("m.jsonl", {"type": "event", "seq": 1})
        js.tap("m.jsonl", {"type": "event", "seq": 2})
        with pytest.raises(JournalUnavailable, match="not yet in the cluster's journal"):
            await js.flushed()
        assert js.pending == 2
        broker.start()
        js.timeout_s = 30.0
        await js.flushed()
        assert js.pending == 0
        got = await lines(bus, "main")
        assert [ln.get("seq") for _o, ln in got] == [None, 1, 2]  # once each, in order
        await js.stop()
        await bus.close()

    asyncio.run(run())


def test_two_channels_of_one_process_each_keep_every_line(broker: Broker) -> None:
    """A line's id is its channel's and its owner's take: the stream deduplicates across every
    channel, and ids of one process's channels must never collide (the second channel's
    header was dropped as the first's duplicate, and the process fenced out of it)."""
    async def run() -> None:
        bus = await Bus.connect(broker.url, name="t", prefix="twoch")
        fenced: list[str] = []
        streams = [JournalStream(bus, ch, "p1", on_fenced=lambda ch=ch: fenced.append(ch))
                   for ch in ("main", "pink")]
        for js in streams:
            js.start()
            js.tap("m.jsonl", {"type": "header"})
            js.tap("m.jsonl", {"type": "event", "seq": 1})
        for js in streams:
            await js.flushed()
        assert not fenced
        for ch in ("main", "pink"):
            assert [ln.get("seq") for _o, ln in await lines(bus, ch)] == [None, 1]
        for js in streams:
            await js.stop()
        await bus.close()

    asyncio.run(run())
