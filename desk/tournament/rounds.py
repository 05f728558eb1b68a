"""The rounds of a block: pair the next round or the final, unpair, and the reading of a round
(start, confirm, an extra card)."""

from __future__ import annotations

import hashlib
from dataclasses import replace

from ..checks import complete, round_flags, started
from ..errors import Conflict, Invalid, NotFound
from ..mats import MAX_MAT, block_mats, free_mats
from ..model import (
    Match,
    Reading,
    ReadingStatus,
    Round,
    Tournament,
)
from ..pairing import Entrant, pair_round
from ..standings import standings
from .changes import Change, ReadingChanged, RoundPaired, RoundRemoved, apply

MAX_BLOCK_PLAYERS = 200


def mix(*parts: object) -> int:
    """A seed for one decision, from the tournament's seed and what the decision is about."""
    return int.from_bytes(hashlib.sha256(":".join(map(str, parts)).encode()).digest()[:6], "big")


def _check_mats(t: Tournament, r: Round) -> None:
    mats = {m.mat for m in r.matches}
    for other in t.rounds:
        if other.number == r.number and other.block != r.block:
            clash = mats & {m.mat for m in other.matches}
            if clash:
                raise Conflict(f"mat {min(clash)} of round {r.number} is block "
                               f"{other.block}'s", f"set block {r.block}'s first mat elsewhere",
                               params={"why": "mat_in_use", "mat": min(clash),
                                       "round": r.number, "block": r.block,
                                       "other": other.block})
    if max(mats, default=0) > MAX_MAT:
        raise Invalid(f"mat numbers are 1..{MAX_MAT}", "lower the block's first mat")


def pair_next(t: Tournament, block: str, at: str) -> RoundPaired:
    """Pair the block's next preliminary round (its previous round must be complete)."""
    b = t.block(block)
    if b is None:
        raise NotFound(f"there is no block {block}", "draw the blocks first")
    prelims = [r for r in t.rounds_of(block) if not r.final]
    n = len(prelims) + 1
    if n > t.settings.rounds:
        raise Conflict(f"block {block} has played its {t.settings.rounds} preliminary rounds",
                       "pair the final", params={"why": "prelims_done", "block": block,
                                                 "rounds": t.settings.rounds})
    if prelims and not complete(t, prelims[-1]):
        errors = [f for f in round_flags(t, prelims[-1]) if f.level == "error"]
        raise Conflict(f"round {n - 1} of block {block} is not complete: "
                       + "; ".join(f.detail for f in errors[:5]),
                       "enter or correct the results first",
                       params={"why": "round_not_complete", "block": block, "round": n - 1,
                               "missing": sum(f.code == "missing_result" for f in errors),
                               "problems": len(errors)})
    order = {s.no: s.rank for s in standings(t, block)}
    active = sorted((p for p in t.players_of(block) if p.active_in(n)),
                    key=lambda p: (order.get(p.no, 0), p.no))
    if len(active) > MAX_BLOCK_PLAYERS:
        # a block is a room's worth of players; the pairing's search grows with the square
        # of its size (200: 0.4 s, 500: 3 s on one core), and no hall's block comes near
        raise Conflict(f"block {block} has {len(active)} players: at most {MAX_BLOCK_PLAYERS} "
                       "are paired in one block", "draw more blocks",
                       params={"why": "block_too_big", "block": block,
                               "players": len(active), "most": MAX_BLOCK_PLAYERS})
    history = [m.players for r in prelims for m in r.matches]
    triples: dict[int, int] = {}
    for r in prelims:
        for m in r.matches:
            if len(m.players) == 3:
                for p in m.players:
                    triples[p] = triples.get(p, 0) + 1
    pairing = pair_round([Entrant(p.no, p.club, triples.get(p.no, 0)) for p in active],
                         history, t.settings.rounds - n + 1, mix(t.pairing_seed, block, n))
    mats = free_mats(t, block, len(pairing.groups))
    matches = tuple(Match(m, g) for m, g in zip(mats, pairing.groups, strict=True))
    notes = []
    extra = [m for m in mats if m not in block_mats(t)[block]]
    if extra:
        notes.append(f"extra mats: {', '.join(map(str, extra))} (more matches than the "
                     "block's mats)")
    if pairing.rematches:
        notes.append(f"rematches: {pairing.rematches} (no pairing of this round avoids them)")
    if pairing.same_club:
        notes.append(f"same-club meetings: {pairing.same_club}")
    r = Round(block, n, False, b.colour(n), matches, at, None, tuple(notes))
    _check_mats(t, r)
    return RoundPaired(r)


def pair_final(t: Tournament, block: str, at: str) -> RoundPaired:
    """The final: the top two of the block's preliminaries (withdrawn players skipped)."""
    b = t.block(block)
    if b is None:
        raise NotFound(f"there is no block {block}", "draw the blocks first")
    prelims = [r for r in t.rounds_of(block) if not r.final]
    if len(prelims) < t.settings.rounds or not all(complete(t, r) for r in prelims):
        raise Conflict(f"block {block}'s {t.settings.rounds} preliminary rounds are not all "
                       "complete", "pair and finish the preliminaries first",
                       params={"why": "prelims_not_done", "block": block,
                               "rounds": t.settings.rounds})
    if t.round_of(block, t.final_round) is not None:
        raise Conflict(f"block {block}'s final is already paired", "",
                       params={"why": "final_paired", "block": block})
    if t.settings.finalists == 1:
        raise Conflict("this tournament has no final: the first after the preliminaries wins "
                       "the block", "", params={"why": "no_final", "block": block})
    top = [s.no for s in standings(t, block) if not s.withdrawn][:2]
    if len(top) < 2:
        raise Conflict(f"block {block} has fewer than two players for a final", "",
                       params={"why": "final_too_few", "block": block})
    r = Round(block, t.final_round, True, b.colour(t.final_round),
              (Match(b.first_mat, (top[0], top[1])),), at)
    _check_mats(t, r)
    return RoundPaired(r)


STALE = ("not_paired", "withdrawn_paired")


def check_current(t: Tournament, r: Round) -> None:
    """A round paired before a withdrawal or a late entry cannot be read or given results
    until it is paired again: else the withdrawn player stays seated and the late one misses
    the round without a word (the flags vanish once a round has started)."""
    stale = [f for f in round_flags(t, r) if f.code in STALE]
    if stale:
        names = ", ".join(str(f.params.get("name", "")) for f in stale)
        raise Conflict(f"round {r.number} of block {r.block} was paired before a withdrawal "
                       f"or a late entry ({names}): pair it again first",
                       "pair the round again (pair-again), then start it",
                       params={"why": "pairing_stale", "block": r.block, "round": r.number,
                               "names": names})


def pair_again(t: Tournament, block: str, number: int, at: str) -> list[Change]:
    """Undo the round's pairing and pair it anew with the players active now: the round must
    be the block's latest and not started."""
    r = round_at(t, block, number)
    gone = unpair(t, block, number)
    t = apply(t, gone)
    return [gone, (pair_final if r.final else pair_next)(t, block, at)]


def unpair(t: Tournament, block: str, number: int) -> RoundRemoved:
    r = t.round_of(block, number)
    if r is None:
        raise NotFound(f"block {block} has no round {number}", "")
    if started(r):
        raise Conflict(f"round {number} of block {block} has started: its pairing stays",
                       "correct the results instead",
                       params={"why": "round_started", "block": block, "round": number})
    if any(x.number > number for x in t.rounds_of(block)):
        raise Conflict(f"round {number} of block {block} is not the latest", "",
                       params={"why": "not_latest", "block": block, "round": number})
    return RoundRemoved(block, number)


def start_reading(t: Tournament, block: str, number: int, channel: str, at: str,
                  again: bool = False) -> ReadingChanged:
    r = round_at(t, block, number)
    if r.reading is not None and r.reading.status is ReadingStatus.STARTED and not again:
        raise Conflict(f"round {number} of block {block} is already being read on channel "
                       f"{r.reading.channel}", "start it again only to read it anew (again)",
                       params={"why": "being_read", "block": block, "round": number,
                               "channel": r.reading.channel})
    check_current(t, r)
    return ReadingChanged(block, number, Reading(channel, ReadingStatus.STARTING, at))


def confirm_reading(t: Tournament, block: str, number: int, seed: int, journal: str | None
                    ) -> ReadingChanged:
    r = round_at(t, block, number)
    if r.reading is None:
        raise Conflict(f"round {number} of block {block} was not started", "",
                       params={"why": "not_started", "block": block, "round": number})
    return ReadingChanged(block, number, replace(r.reading, status=ReadingStatus.STARTED,
                                                 seed=seed, journal=journal))


def extra_card(t: Tournament, block: str, number: int) -> ReadingChanged:
    r = round_at(t, block, number)
    if r.reading is None:
        raise Conflict(f"round {number} of block {block} is not being read", "start it first",
                       params={"why": "not_started", "block": block, "round": number})
    return ReadingChanged(block, number, replace(r.reading, extra_cards=r.reading.extra_cards + 1))


def round_at(t: Tournament, block: str, number: int) -> Round:
    r = t.round_of(block, number)
    if r is None:
        raise NotFound(f"block {block} has no round {number}", "pair it first")
    return r


def locate(t: Tournament, number: int, mat: int) -> tuple[Round, Match]:
    """The match at `mat` in round `number` (mats are the hall's: one block's each)."""
    for r in t.rounds:
        if r.number == number:
            m = r.match_at(mat)
            if m is not None:
                return r, m
    raise NotFound(f"round {number} has no match at mat {mat}",
                   "GET the round to see its mats")
