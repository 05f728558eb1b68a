"""The desk's tie to the readers: each round's match on its channel, reached through the
channel's port (hall.seam) like the REST routes reach it.

Starting a round prepares and starts the block's channel match; the round remembers the match's
journal, so the desk can show whether that match is being read, paused or finished
(`reading_state`). The start is written in three steps (hall.roundstarts): the intent first,
then the channel asked, then the match confirmed. A start interrupted by a crash is matched with
its channel's journal at the next start (`Desk`); one whose confirmation the database did not
take (it stopped answering meanwhile) is confirmed once it answers. The mats' calls (rule 4's
memorising, rule 18's closing) and a final's extra card go to the channels reading the round.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable, Coroutine, Iterable, Sequence
from typing import Any

from desk import tournament as ops
from desk.errors import Conflict, DeskError, NotFound, StorageError
from desk.model import Reading, ReadingStatus, Round, Tournament
from hall.channel import ChannelService
from hall.config import Config
from hall.deskstore import DeskStore, now_iso
from hall.errors import NotSent
from hall.hall import Hall
from hall.inbox import PrepareMatch
from hall.roundstarts import confirm_step, match_of, start_step, undo_step
from hall.states import RefereeView
from reader.errors import ReaderError
from reader.events import Bow, Close, ExtraCard, Start
from reader.programme import Phase

log = logging.getLogger("yomite.desk")

# a round's confirmation the database did not take: tried again every CONFIRM_S, at most
# CONFIRM_TRIES times (then the next start of a process matches it with the journal)
CONFIRM_S, CONFIRM_TRIES = 2.0, 300


class DeskReaders:
    """The hall's channels as the desk's rounds use them (`hall`: None, a desk without
    readers). `spawn` runs a task the desk cancels when it stops (a confirmation written
    later)."""

    def __init__(self, config: Config, hall: Hall | None, store: DeskStore,
                 spawn: Callable[[Coroutine[Any, Any, None]], None]) -> None:
        self.config = config
        self.hall = hall
        self.store = store
        self._spawn = spawn

    def channel(self, name: str | None) -> ChannelService | None:
        """The hall's running channel of that name (None: no such channel, or not running)."""
        if self.hall is None or name is None:
            return None
        svc = self.hall.channels.get(name)
        return svc if svc is not None and svc.runtime is not None else None

    def reading_state(self, r: Round) -> dict[str, Any] | None:
        """Where the round's channel match is: `live` with its phase (being read, paused,
        finished), `over` when the channel has gone on to another match, `unconfirmed` when
        a start was interrupted."""
        if r.reading is None:
            return None
        svc = self.channel(r.reading.channel)
        if svc is None:
            return {"state": "no_channel", "channel": r.reading.channel}
        rt = svc.runtime
        assert rt is not None  # `channel` gives running channels only
        current = rt.journal_path.name if rt.journal_path is not None else None
        if r.reading.status is ReadingStatus.STARTING:
            return {"state": "unconfirmed", "channel": r.reading.channel}
        if r.reading.journal is None:  # (a cluster's start that did not see the journal)
            h = rt.header
            same = h is not None and h.get("deck", {}).get("seed") == r.reading.seed
        else:
            same = current == r.reading.journal
        if current is None or not same:
            return {"state": "over", "channel": r.reading.channel}
        mv = svc.operator_view().match
        m = mv.snapshot if mv is not None else None
        return {"state": "live", "channel": r.reading.channel,
                "phase": m.phase if m is not None else None,
                "paused": m is not None and m.paused, "card": m.card if m else None,
                "cards_total": m.cards_total if m else None,
                "holds": [h.name for h in m.holds] if m else [],
                "bowed": bool(m and m.bowed),
                "recovered": bool(rt.recovered)}

    async def start_round(self, tid: str, number: int, blocks: Sequence[str] | None,
                          again: bool = False) -> tuple[Tournament, list[dict[str, Any]]]:
        """Start round `number` of the given blocks (default: every block paired for it and
        not started): one channel match per channel, in the round's colour."""
        t = self.store.get(tid)
        chosen = [r for r in t.rounds if r.number == number
                  and (blocks is None or r.block in blocks)]
        if blocks is not None:
            missing = sorted(set(blocks) - {r.block for r in chosen})
            if missing:
                raise NotFound(f"round {number} is not paired for block(s) {', '.join(missing)}",
                               "pair it first")
        elif not again:
            chosen = [r for r in chosen if r.reading is None
                      or r.reading.status is ReadingStatus.STARTING]
        if not chosen:
            raise Conflict(f"no block has round {number} paired and waiting to be read",
                           "pair the round first",
                           params={"why": "nothing_to_read", "round": number})
        by_channel: dict[str, list[Round]] = {}
        for r in chosen:
            b = t.block(r.block)
            if b is None or b.channel is None:
                raise Conflict(f"block {r.block} has no reader (channel)",
                               "assign the block a channel",
                               params={"why": "block_no_channel", "block": r.block})
            if self.channel(b.channel) is None:
                raise Conflict(f"block {r.block}'s channel {b.channel!r} is not one of this "
                               "hall's", "assign a channel of server.channels",
                               params={"why": "channel_unknown", "block": r.block,
                                       "channel": b.channel})
            by_channel.setdefault(b.channel, []).append(r)
        for ch, rounds in by_channel.items():
            colours = {r.colour for r in rounds}
            if len(colours) > 1:
                raise Conflict(f"blocks {', '.join(r.block for r in rounds)} share channel {ch} "
                               f"but read different colours ({', '.join(sorted(colours))})",
                               "give them one colour for this round, or separate channels",
                               params={"why": "channel_colours", "channel": ch})
            for r in rounds:
                ops.start_reading(t, r.block, number, ch, "", again=again)  # check first
        results = []
        for ch, rounds in by_channel.items():
            results.append(await self._start_channel(tid, number, ch, rounds, again))
        return self.store.get(tid), results

    async def _start_channel(self, tid: str, number: int, ch: str, rounds: list[Round],
                             again: bool) -> dict[str, Any]:
        svc = self.channel(ch)
        assert svc is not None
        previous = {r.block: r.reading for r in rounds}
        at = now_iso()
        # the intent first, every block's in one transaction: a crash after this is matched up
        # at start-up; a database that does not take it leaves the channel unasked
        await self.store.changes(tid, lambda t: [start_step(t, block=r.block, number=number,
                                                      channel=ch, at=at, again=again)
                                           for r in rounds])
        t = self.store.get(tid)
        colour = rounds[0].colour
        waits = self.waits_after_bow(rounds[0])
        try:
            if not self._bowed_for(svc, colour, t.settings.cards):
                await svc.apply(PrepareMatch(colors=(colour,), seed=None,
                                             overrides={"cards": t.settings.cards}))
                mv = svc.operator_view().match
                if waits and mv is not None and mv.snapshot.calls.get("bow_call"):
                    await svc.apply(Bow())  # 礼 alone: the players shuffle and choose
            if not waits:
                await svc.apply(Start())
        except NotSent:  # (a cluster's channel out of reach: nothing was asked of it)
            await self._undo(tid, number, rounds, previous, at)
            raise
        except ReaderError as e:
            await self._undo(tid, number, rounds, previous, at)
            raise Conflict(f"channel {ch} cannot read round {number}: {e}",
                           "finish or abort the channel's match at the console, then start "
                           "again", params={"why": "channel_busy", "channel": ch,
                                            "round": number}) from None
        seed, journal = await match_of(svc)
        blocks = [r.block for r in rounds]
        try:
            await self._confirm(tid, number, blocks, seed, journal, at)
        except StorageError as e:
            # the channel reads the round: its confirmation is written once the database
            # answers (until then the desk shows the start as unconfirmed)
            self._spawn(self._confirm_later(tid, number, blocks, seed, journal, at))
            raise StorageError(f"channel {ch} is reading round {number}, but the desk's "
                               f"database did not take its confirmation ({e.detail}): it is "
                               "written once the database answers",
                               "reload the desk in a few seconds: the round shows as read "
                               "once it is written", code="storage_unsure") from None
        log.info("desk %s: round %d of %s read on channel %s (seed %d, %s)", tid, number,
                 ", ".join(r.block for r in rounds), ch, seed, journal)
        return {"channel": ch, "blocks": [r.block for r in rounds], "seed": seed,
                "journal": journal, "waits_after_bow": waits}

    async def _undo(self, tid: str, number: int, rounds: list[Round],
                    previous: dict[str, Reading | None], asked: str) -> None:
        await self.store.changes(tid, lambda t: _steps(
            undo_step(t, block=r.block, number=number, reading=previous[r.block], asked=asked)
            for r in rounds))

    async def _confirm(self, tid: str, number: int, blocks: list[str], seed: int,
                       journal: str | None, asked: str) -> None:
        await self.store.changes(tid, lambda t: _steps(
            confirm_step(t, block=b, number=number, seed=seed, journal=journal, asked=asked)
            for b in blocks))

    async def _confirm_later(self, tid: str, number: int, blocks: list[str], seed: int,
                             journal: str | None, asked: str) -> None:
        for _ in range(CONFIRM_TRIES):
            await asyncio.sleep(CONFIRM_S)
            try:
                await self._confirm(tid, number, blocks, seed, journal, asked)
            except StorageError:
                continue
            except DeskError as e:  # (deleted, or started again meanwhile)
                log.warning("desk %s: round %d's start was not confirmed (%s)", tid, number, e)
                return
            log.info("desk %s: round %d of %s confirmed once the database answered", tid,
                     number, ", ".join(blocks))
            return

    def waits_after_bow(self, r: Round) -> bool:
        """Whether starting round `r` reads 「礼」 alone and waits for the mats (rule 2)."""
        when = self.config.desk.ready_after_bow
        return when == "every_round" or (when == "first_and_final" and (r.number == 1
                                                                         or r.final))

    @staticmethod
    def _bowed_for(svc: ChannelService, colour: str, cards: int) -> bool:
        """A match the console prepared in the round's colour and length and bowed on (「礼」
        said from the console, the players waiting): the round is read on it, not on a new
        match that would say 礼 again."""
        mv = svc.operator_view().match
        m = mv.snapshot if mv is not None else None
        return (m is not None and m.phase is Phase.READY and m.bowed
                and m.colors == (colour,) and m.cards_planned == cards)

    def _channels_in(self, tid: str, number: int, blocks: Sequence[str] | None,
                     phase: Phase) -> list[tuple[str, ChannelService]]:
        """The channels reading round `number` of the named blocks (default: every block's),
        live and in `phase`, each once."""
        t = self.store.get(tid)
        rounds = [r for r in t.rounds if r.number == number
                  and (blocks is None or r.block in blocks)]
        if not rounds:
            raise NotFound(f"round {number} is not paired", "")
        out: list[tuple[str, ChannelService]] = []
        for r in rounds:
            state = self.reading_state(r)
            if (not state or state["state"] != "live" or r.reading is None
                    or state.get("phase") is not phase):
                continue
            svc = self.channel(r.reading.channel)
            if svc is not None and r.reading.channel not in (ch for ch, _ in out):
                out.append((r.reading.channel, svc))
        return out

    async def memorise(self, tid: str, number: int, blocks: Sequence[str] | None) -> list[str]:
        """Rule 4: the mats are ready: each channel of the round whose match waits after the
        bow reads 「札を覚えてください」 and goes on. Returns the channels told."""
        told: list[str] = []
        for ch, svc in self._channels_in(tid, number, blocks, Phase.READY):
            try:
                await svc.apply(Start())
            except ReaderError as e:
                raise Conflict(f"channel {ch}: {e}", "",
                               params={"why": "not_waiting", "channel": ch, "round": number}
                               ) from None
            told.append(ch)
        if not told:
            raise Conflict(f"no channel of round {number} is waiting after the bow",
                           "start the round first",
                           params={"why": "nothing_waiting", "round": number})
        return told

    async def extra_card(self, tid: str, number: int, block: str) -> Tournament:
        """Read one more card on the round's channel (a final's tie)."""
        t = self.store.get(tid)
        r = t.round_of(block, number)
        if r is None or r.reading is None:
            raise Conflict(f"round {number} of block {block} is not being read",
                           "start the round first",
                           params={"why": "not_started", "block": block, "round": number})
        state = self.reading_state(r)
        if not state or state["state"] != "live":
            raise Conflict(f"channel {r.reading.channel} is no longer reading round {number} "
                           f"of block {block}", "read the extra card from the console",
                           params={"why": "not_reading", "block": block, "round": number,
                                   "channel": r.reading.channel})
        svc = self.channel(r.reading.channel)
        assert svc is not None
        try:
            await svc.apply(ExtraCard())
        except ReaderError as e:
            raise Conflict(f"channel {r.reading.channel}: {e}",
                           "the extra card is read once the planned cards are over",
                           params={"why": "cards_not_over", "channel": r.reading.channel}
                           ) from None
        return await self.store.change(tid, lambda t: ops.extra_card(t, block, number))

    async def close_round(self, tid: str, number: int, blocks: Sequence[str] | None
                          ) -> list[str]:
        """Rule 18 once the mats are ready for the next match: each channel reading this round
        (and done with its cards) reads 「ありがとうございました」 and the move call. Returns the
        channels closed."""
        done: list[str] = []
        for ch, svc in self._channels_in(tid, number, blocks, Phase.FINISHED):
            try:
                await svc.apply(Close())
            except ReaderError as e:
                raise Conflict(f"channel {ch}: {e}", "wait until its cards are read",
                               params={"why": "cards_not_over", "channel": ch}) from None
            done.append(ch)
        if not done:
            raise Conflict(f"no channel has finished reading round {number}",
                           "close a round once its cards are read",
                           params={"why": "nothing_to_close", "round": number})
        return done

    def block_of_channel_referee(self, channel: str) -> tuple[RefereeView, ...]:
        svc = self.channel(channel)
        return () if svc is None else svc.referees()


def _steps(changes: Iterable[ops.Change | None]) -> list[ops.Change]:
    return [c for c in changes if c is not None]
