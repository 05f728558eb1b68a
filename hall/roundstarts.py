"""A round's start on its channel as the desk records it: the steps (asked for, confirmed with
the match's seed and journal, undone), the match a start made, and the starts a crash cut
short, matched with the channel's journal at the next start (hall.desk)."""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Callable
from datetime import UTC, datetime
from functools import partial
from typing import Any

from desk import tournament as ops
from desk.errors import DeskError
from desk.model import Reading, ReadingStatus, Tournament
from hall.channel import ChannelService
from hall.config import Config

log = logging.getLogger("yomite.desk")

# a cluster's process starting leaves alone a round's start asked for this recently: another
# process may be starting it (its desk starts it again if it was cut short)
START_GRACE_S = 120.0
# how long a round's start waits for a channel read by another process of a cluster to show
# its new match's journal here
JOURNAL_WAIT_S = 5.0


def journal_time(name: str) -> datetime | None:
    """The UTC time in a journal's file name (`20250101T093000.123456-seed42.jsonl`)."""
    try:
        return datetime.strptime(name.split("-seed")[0], "%Y%m%dT%H%M%S.%f").replace(tzinfo=UTC)
    except ValueError:
        return None


def start_step(t: Tournament, *, block: str, number: int, channel: str, at: str, again: bool
               ) -> ops.Change:
    return ops.start_reading(t, block, number, channel, at, again=again)


def _still_asked(t: Tournament, block: str, number: int, asked: str | None) -> bool:
    """The round's reading is still the start asked for at `asked` (None: any)."""
    if asked is None:
        return True
    r = next((x for x in t.rounds if x.block == block and x.number == number), None)
    return (r is not None and r.reading is not None
            and r.reading.status is ReadingStatus.STARTING and r.reading.requested_at == asked)


def confirm_step(t: Tournament, *, block: str, number: int, seed: int, journal: str | None,
                 asked: str | None = None) -> ops.Change | None:
    """Nothing when `asked` is given and the round's start is no longer that one (another
    process of a cluster confirmed, undid or started it again meanwhile)."""
    if not _still_asked(t, block, number, asked):
        return None
    return ops.confirm_reading(t, block, number, seed, journal)


def undo_step(t: Tournament, *, block: str, number: int, reading: Reading | None,
              asked: str | None = None) -> ops.Change | None:
    if not _still_asked(t, block, number, asked):
        return None
    return ops.ReadingChanged(block, number, reading)


async def match_of(svc: ChannelService) -> tuple[int, str | None]:
    """The seed and the journal file of the match just prepared on the channel: its engine's,
    here; for a cluster's channel owned by another process, the seed its state says and the
    journal once this process's copy of the broker's journal has the match's header (stored
    before the owner answered: a moment; JOURNAL_WAIT_S at most)."""
    rt = svc.runtime
    assert rt is not None  # the desk starts rounds on running channels only
    if rt.engine is not None:
        return rt.engine.deck.seed, rt.journal_path.name if rt.journal_path else None
    mv = svc.operator_view().match
    seed = mv.snapshot.seed if mv is not None else 0
    loop = asyncio.get_running_loop()
    deadline = loop.time() + JOURNAL_WAIT_S
    while True:
        h, path = rt.header, rt.journal_path
        if h is not None and path is not None and h.get("deck", {}).get("seed") == seed:
            return seed, path.name
        if loop.time() > deadline:
            log.warning("desk: channel %s's journal of seed %d not seen in %.0f s: the round "
                        "is matched with it by its seed", svc.name, seed, JOURNAL_WAIT_S)
            return seed, None
        await asyncio.sleep(0.02)


async def reconcile(t: Tournament, change: Callable[[str, Any], Awaitable[Tournament]],
                    channel: Callable[[str], ChannelService | None], config: Config) -> int:
    """A start cut short by a crash: the round said `starting`. If its channel's latest
    journal began after the request, that match is the round's; otherwise the start never
    reached the channel and the round waits to be started again. In a cluster, a start asked
    for in the last START_GRACE_S is left for later (a live process may be carrying it out),
    and each step is made only if the round's start is still the one seen (another process
    may reconcile it at the same time). The number left for later."""
    later = 0
    for r in t.rounds:
        if r.reading is None or r.reading.status is not ReadingStatus.STARTING:
            continue
        svc = channel(r.reading.channel)
        rt = svc.runtime if svc is not None else None
        path = rt.journal_path if rt is not None else None
        began = journal_time(path.name) if path is not None else None
        try:
            asked = datetime.fromisoformat(r.reading.requested_at)
        except ValueError:
            asked = None
        if (config.cluster.bus is not None and asked is not None
                and (datetime.now(UTC) - asked).total_seconds() < START_GRACE_S):
            later += 1  # another process of the cluster may be starting it right now
            continue
        at = r.reading.requested_at
        try:
            if began is not None and asked is not None and began >= asked and rt is not None:
                engine = rt.engine
                seed = (engine.deck.seed if engine is not None
                        else int((rt.header or {}).get("deck", {}).get("seed", 0)))
                assert path is not None
                await change(t.id, partial(confirm_step, block=r.block, number=r.number,
                                           seed=seed, journal=path.name, asked=at))
                log.warning("desk %s: round %d of block %s: the start was interrupted; its "
                            "channel match %s is the round's", t.id, r.number, r.block,
                            path.name)
            else:
                await change(t.id, partial(undo_step, block=r.block, number=r.number,
                                           reading=None, asked=at))
                log.warning("desk %s: round %d of block %s: the start was interrupted before "
                            "its channel read it; start it again", t.id, r.number, r.block)
        except DeskError as e:  # (deleted meanwhile): the others are still reconciled
            log.warning("desk %s: round %d of block %s: its interrupted start was left as it "
                        "is (%s)", t.id, r.number, r.block, e)
    return later
