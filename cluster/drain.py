"""Draining a process for an upgrade: each match it reads is handed over at a card's end.

A process that stops on its own (SIGTERM or Ctrl-C: `yomite serve --bus` exiting) while other
processes are alive first waits, for each channel it owns that is being read, for the silence
between two cards (`gap_between_cards`, at its middle: the last sound has died away) and raises
`@handover` there, so the match stops where nothing is cut; a channel paused or at rest is
handed over at once. It then notes the handover in the broker's `<prefix>_handover` bucket
(`handover.<channel>`), whose keys the broker itself removes `HANDOVER_FRESH_S` after they were
written (the bucket's TTL: the note's age is the broker's, no two processes' clocks are
compared), and gives its leases back. The process that takes such a channel while the note is
there lowers `@handover` and `@recovered` itself: the reading goes on after the lead-in, the
players hear one longer silence between two cards. A channel taken later (no process took
it, the service was stopped whole) is recovered paused as after a crash: nobody may be there
any more.

`cluster.drain_s` bounds the wait for a card's end (a card is read in 15-25 s; memorising
lasts its configured time): past it, the channel is handed over where it is (`@handover` cuts
the verse, read again by the next process as after any hold).
"""

from __future__ import annotations

import asyncio
import contextlib
import logging

from nats.js.api import KeyValueConfig, StorageType
from nats.js.errors import KeyNotFoundError
from nats.js.kv import KeyValue

from cluster.bus import Bus, _bucket
from hall.channel import ChannelService
from hall.reading import ENDED
from hall.states import MatchState
from reader.events import HANDOVER, RECOVERED, Hold, Release

log = logging.getLogger("yomite.cluster")

HANDOVER_FRESH_S = 60.0  # a note older than this is a service stopped whole, not a handover
CARD_END = "gap_between_cards"


def _key(channel: str) -> str:
    return f"handover.{channel}"


async def notes(bus: Bus) -> KeyValue:
    """The bucket of handover notes (made by the first process that needs it)."""
    return await _bucket(bus.js, KeyValueConfig(
        bucket=f"{bus.subjects.prefix}_handover", history=1, ttl=HANDOVER_FRESH_S,
        storage=StorageType.FILE, replicas=int(getattr(bus, "replicas", 1))))


def _match(svc: ChannelService) -> MatchState | None:
    """The match `svc` reads now (its runtime's state: not a whole operator view)."""
    rt = svc.runtime
    return None if rt is None else rt.state().match


async def pause_at_card_end(svc: ChannelService, timeout_s: float) -> bool:
    """Wait until `svc`'s match is between two cards (or paused, or not being read), then raise
    `@handover` in it unless it is at rest. True if the hand was raised."""
    changed = asyncio.Event()
    unsubscribe = svc.subscribe(lambda _latest: changed.set())
    loop = asyncio.get_running_loop()
    deadline = loop.time() + timeout_s
    try:
        while True:
            rt = svc.runtime
            m = _match(svc)
            if rt is None or m is None or m.snapshot.phase in ENDED:
                return False
            s = m.snapshot
            seg = s.segment
            if s.paused or loop.time() >= deadline:
                break
            if seg is not None and seg.label == CARD_END and seg.ends_s is not None:
                middle = seg.started_s + (seg.ends_s - seg.started_s) / 2
                wait = middle - rt.match_clock.now()
                if wait > 0:
                    await asyncio.sleep(min(wait, max(0.0, deadline - loop.time())))
                    now = _match(svc)
                    if now is None or now.snapshot.segment != seg or now.snapshot.paused:
                        continue  # it moved on meanwhile (a hand, a skip): look again
                break
            changed.clear()
            with contextlib.suppress(TimeoutError):
                async with asyncio.timeout(max(0.0, deadline - loop.time())):
                    await changed.wait()
        await svc.apply(Hold(HANDOVER, "handed over to another process"))
        return True
    finally:
        unsubscribe()


async def note_handover(bucket: KeyValue, channel: str) -> None:
    """Tell the process that takes `channel` next that this was a handover (before the lease
    is given back)."""
    await bucket.put(_key(channel), b"1")


async def resume_handed_over(bucket: KeyValue, svc: ChannelService) -> bool:
    """Just taken: if the channel was handed over moments ago (its note is there: the broker
    forgets it `HANDOVER_FRESH_S` after), lower `@handover` and `@recovered` (the reading goes
    on); the note is removed either way. True if resumed."""
    try:
        await bucket.get(_key(svc.name))
    except KeyNotFoundError:
        return False
    with contextlib.suppress(Exception):
        await bucket.delete(_key(svc.name))
    m = _match(svc)
    if m is None or HANDOVER not in {h.referee for h in m.snapshot.holds}:
        return False
    await svc.apply(Release(HANDOVER))
    await svc.apply(Release(RECOVERED))
    log.info("channel %s: handed over by a draining process: reading on", svc.name)
    return True
