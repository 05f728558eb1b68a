"""A channel's lease (cluster.lease) against a real nats-server: proven on the holder's own
clock from its last confirmed renewal, whatever the broker does; a taker of an expired key
reads only once the last holder's lease is certainly over, a taker of a key given back at once.
And the bound on another process's clock a command's deadline is given in (cluster.remote)."""

import asyncio
import signal
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from cluster.bus import Bus
from cluster.lease import Lease
from cluster.remote import DRIFT, OwnerClockBound
from tests.natsbroker import Broker

TTL = 2.0


@pytest.fixture
def broker(tmp_path: Path) -> Iterator[Broker]:
    b = Broker(tmp_path)
    b.start()
    try:
        yield b
    finally:
        b.stop()


def test_a_lease_is_proven_from_its_last_confirmed_renewal_and_a_taker_waits_it_out(
        broker: Broker) -> None:
    async def run() -> None:
        bus = await Bus.connect(broker.url, name="t", prefix="lease", lease_ttl_s=TTL)
        try:
            a = Lease(bus.leases, "ch.main", b"a", TTL)
            b = Lease(bus.leases, "ch.main", b"b", TTL)
            t0 = time.monotonic()
            taken = await a.acquire()
            assert taken is not None and not taken.handed
            # the key never existed: whoever held it before, its lease is over TTL + margin on
            assert taken.reads_from >= t0 + TTL + a.margin_s
            assert await b.acquire() is None  # held
            sent = time.monotonic()
            assert await a.renew()
            assert sent <= a.deadline - (TTL - a.margin_s) <= time.monotonic()
            # the broker stops answering (frozen): the lease stays proven until its deadline,
            # never after, and a renewal never waits past it
            assert broker.proc is not None
            broker.proc.send_signal(signal.SIGSTOP)
            try:
                deadline = a.deadline
                for _ in range(100):
                    t = time.monotonic()
                    ok = await a.renew()
                    answered = time.monotonic()
                    assert answered - t < 3.0  # bounded well under the client's 5 s
                    if not ok:
                        break
                    assert answered < deadline  # held only while proven
                assert not ok and answered >= deadline
                assert not a.proven() and not a.held
            finally:
                broker.proc.send_signal(signal.SIGCONT)
            # the key expires by the bucket's TTL; a taker then waits TTL + margin more
            async with asyncio.timeout(30):
                while (taken := await b.acquire()) is None:
                    await asyncio.sleep(0.1)
            assert not taken.handed and taken.reads_from > deadline + TTL
            # given back: the next takes it and may read at once
            await b.release()
            c = Lease(bus.leases, "ch.main", b"c", TTL)
            taken = await c.acquire()
            assert taken is not None and taken.handed
            assert taken.reads_from <= time.monotonic()
        finally:
            await bus.close()

    asyncio.run(run())


def test_a_renewal_whose_answer_was_lost_is_recognised_as_ours(broker: Broker) -> None:
    """A renewal stored by the broker but answered too late here: the next renewal finds the
    key one revision on, still naming this holder: still ours, not lost."""
    async def run() -> None:
        bus = await Bus.connect(broker.url, name="t", prefix="lost", lease_ttl_s=TTL)
        try:
            a = Lease(bus.leases, "ch.main", b"a", TTL)
            assert await a.acquire() is not None
            assert a.revision is not None
            await bus.leases.update("ch.main", b"a", last=a.revision)  # "our" lost renewal
            assert await a.renew() and a.held
            # another holder's write is not ours
            assert a.revision is not None
            await bus.leases.update("ch.main", b"b", last=a.revision)
            assert not await a.renew() and not a.held
        finally:
            await bus.close()

    asyncio.run(run())


def test_a_bound_on_another_clock_is_never_late() -> None:
    now = [100.0]
    bound = OwnerClockBound(clock=lambda: now[0])
    assert bound.owner_at(now[0]) is None
    # the owner's clock is 50 s ahead of ours; its messages take 0.2, 0.01 and 3 s to come
    for delay in (0.2, 0.01, 3.0):
        sent = now[0]
        now[0] += delay
        bound.learn(sent + 50.0)
        at = bound.owner_at(now[0])
        assert at is not None and at <= now[0] + 50.0
    best = bound.owner_at(now[0])
    assert best is not None and now[0] + 50.0 - 0.011 <= best <= now[0] + 50.0
    # an hour later the old proof is aged by the drift allowed: still early
    now[0] += 3600
    later = bound.owner_at(now[0])
    assert later is not None and later <= now[0] + 50.0 - 3600 * DRIFT + 0.011
