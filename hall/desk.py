"""The desk in the hall service: the tournaments (hall.deskstore), their live views, and the tie
to the readers.

The live pages' views (the desk's, and the public standings the projectors poll without a
login) are built once per version of the tournament (hall/deskviews.py), in a worker thread
when the tournament is large, and kept as JSON: fifty projectors waking at a result share one
build, and the event loop (which applies the referees' holds) only sends bytes. What changes
without the version (each round's reading, live from its channel) is filled in per request.

Starting a round prepares and starts the block's channel match through the channel's port
(hall.seam), like the REST routes do; the round remembers the match's journal, so the desk can
show whether that match is being read, paused or finished. A round whose start was interrupted
by a crash is matched with its channel's journal at the next start.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Callable, Sequence
from functools import partial
from typing import Any

from desk import tournament as ops
from desk.errors import Conflict, NotFound
from desk.model import ReadingStatus, Round, Tournament
from hall.channel import ChannelService
from hall.config import Config
from hall.deskstore import DeskStore, Op, now_iso
from hall.deskviews import PUBLIC_READING, Builds, Built, Kind, build_view, json_bytes
from hall.hall import Hall
from hall.inbox import PrepareMatch
from hall.roundstarts import (
    START_GRACE_S,
    confirm_step,
    match_of,
    reconcile,
    start_step,
    undo_step,
)
from hall.states import RefereeView
from reader.errors import ReaderError
from reader.events import Bow, Close, ExtraCard, Start
from reader.programme import Phase

log = logging.getLogger("yomite.desk")

class Desk:
    def __init__(self, config: Config, hall: Hall | None) -> None:
        self.config = config
        self.hall = hall
        self.tournament_store = DeskStore(config, self._forget)
        self._later: asyncio.Task[None] | None = None  # starts reconciled after the grace
        # the live pages' views and the public files: built once per version, shared
        self.views = Builds(self.get)
        self._filled: dict[tuple[str, Kind], tuple[Built, bytes, bytes]] = {}

    # ------------------------------------------------------------------ life
    async def start(self) -> None:
        if not await self.tournament_store.open():
            return
        later = 0
        for t in list(self.tournament_store.cache.values()):
            later += await reconcile(t, self.change, self._channel, self.config)
        if later:  # a cluster's: those another process may have been starting, once it is past
            self._later = asyncio.get_running_loop().create_task(self._reconcile_later())
        log.info("desk: %d tournament(s) loaded", len(self.tournament_store.cache))

    async def _reconcile_later(self) -> None:
        while True:
            await asyncio.sleep(START_GRACE_S)
            later = 0
            for t in self.tournaments():
                later += await reconcile(t, self.change, self._channel, self.config)
            if not later:
                return

    async def stop(self) -> None:
        if self._later is not None:
            self._later.cancel()
            with contextlib.suppress(asyncio.CancelledError, Exception):
                await self._later
        await self.tournament_store.close()
        self.views.close()

    # ------------------------------------------------------------------ tournaments
    def get(self, tid: str) -> Tournament:
        return self.tournament_store.get(tid)

    def tournaments(self) -> list[Tournament]:
        return self.tournament_store.tournaments()

    async def create(self, tid: str | None, name: str, day: str, rounds: int | None,
                     cards: int | None, finalists: int = 2) -> Tournament:
        return await self.tournament_store.create(tid, name, day, rounds, cards, finalists)

    async def store(self, t: Tournament, replace_existing: bool = False) -> Tournament:
        """A whole tournament (new or imported) into the database and memory."""
        return await self.tournament_store.store(t, replace_existing)

    async def delete(self, tid: str) -> None:
        await self.tournament_store.delete(tid)

    async def change(self, tid: str, op: Op) -> Tournament:
        """Apply one desk step (hall.deskstore.DeskStore.change)."""
        return await self.tournament_store.change(tid, op)

    async def changes(self, tid: str, make: Callable[[Tournament], Sequence[ops.Change]]
                      ) -> Tournament:
        return await self.tournament_store.changes(tid, make)

    async def wait(self, tid: str, after: int, timeout_s: float) -> Tournament:
        """The tournament once its version is past `after` (or as it is after `timeout_s`)."""
        return await self.tournament_store.wait(tid, after, timeout_s)

    # ------------------------------------------------------------------ the live views
    def _forget(self, tid: str) -> None:
        """A tournament stored whole or deleted: what was built from it is gone."""
        self.views.forget(tid)
        for kind in ("desk", "public"):
            self._filled.pop((tid, kind), None)

    async def view_json(self, tid: str, kind: Kind, after: int | None = None) -> bytes:
        """The desk's (`desk`) or the public (`public`) view of the tournament as JSON; with
        `after`, once the version is past it (or as it is after desk.long_poll_s). Built once
        per version (in a worker thread for a large tournament); each round's live reading
        filled in as it is now."""
        t = self.get(tid)
        if after is not None and t.version <= after:
            t = await self.wait(tid, after, self.config.desk.long_poll_s)
        b: Built = await self.views.made(tid, kind, partial(build_view, kind), t.version)
        values: list[object] = []
        for r in b.rounds:
            live = self.reading_state(r) if r is not None else None
            if kind == "public" and live is not None:
                live = {k: live.get(k) for k in PUBLIC_READING}
            values.append(live)
        filled = json_bytes(values)
        kept = self._filled.get((tid, kind))
        if kept is not None and kept[0] is b and kept[1] == filled:
            return kept[2]
        body = b.fill(values)
        self._filled[(tid, kind)] = (b, filled, body)
        return body

    # ------------------------------------------------------------------ the readers
    def _channel(self, name: str | None) -> ChannelService | None:
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
        svc = self._channel(r.reading.channel)
        if svc is None:
            return {"state": "no_channel", "channel": r.reading.channel}
        rt = svc.runtime
        assert rt is not None  # _channel gives running channels only
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
        t = self.get(tid)
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
            if self._channel(b.channel) is None:
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
        return self.get(tid), results

    async def _start_channel(self, tid: str, number: int, ch: str, rounds: list[Round],
                             again: bool) -> dict[str, Any]:
        svc = self._channel(ch)
        assert svc is not None
        previous = {r.block: r.reading for r in rounds}
        at = now_iso()
        for r in rounds:  # the intent first: a crash after this is matched up at start-up
            await self.change(tid, partial(start_step, block=r.block, number=number, channel=ch,
                                           at=at, again=again))
        t = self.get(tid)
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
        except ReaderError as e:
            for r in rounds:
                await self.change(tid, partial(undo_step, block=r.block, number=number,
                                               reading=previous[r.block], asked=at))
            raise Conflict(f"channel {ch} cannot read round {number}: {e}",
                           "finish or abort the channel's match at the console, then start "
                           "again", params={"why": "channel_busy", "channel": ch,
                                            "round": number}) from None
        seed, journal = await match_of(svc)
        for r in rounds:
            await self.change(tid, partial(confirm_step, block=r.block, number=number, seed=seed,
                                           journal=journal, asked=at))
        log.info("desk %s: round %d of %s read on channel %s (seed %d, %s)", tid, number,
                 ", ".join(r.block for r in rounds), ch, seed, journal)
        return {"channel": ch, "blocks": [r.block for r in rounds], "seed": seed,
                "journal": journal, "waits_after_bow": waits}

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
        t = self.get(tid)
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
            svc = self._channel(r.reading.channel)
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
        t = self.get(tid)
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
        svc = self._channel(r.reading.channel)
        assert svc is not None
        try:
            await svc.apply(ExtraCard())
        except ReaderError as e:
            raise Conflict(f"channel {r.reading.channel}: {e}",
                           "the extra card is read once the planned cards are over",
                           params={"why": "cards_not_over", "channel": r.reading.channel}
                           ) from None
        return await self.change(tid, lambda t: ops.extra_card(t, block, number))

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
        svc = self._channel(channel)
        return () if svc is None else svc.referees()

