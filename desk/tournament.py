"""The desk's steps on a tournament, pure: each checks that it may happen (or raises a
DeskError saying why not and what to do) and returns the Change it makes. `apply` makes the
change on the frozen Tournament; the repository makes the same change in the database, in one
transaction. The time of a step is given to it (`at`): nothing here reads a clock.
"""

from __future__ import annotations

import hashlib
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, replace
from typing import assert_never

from . import blocks as blocks_mod
from .checks import complete, round_flags, started
from .entries import Entry
from .errors import Conflict, Forbidden, Invalid, NotFound
from .model import (
    COLOURS,
    Block,
    Confirmed,
    Match,
    Method,
    Player,
    Reading,
    ReadingStatus,
    RefereeMats,
    Result,
    ResultChange,
    Round,
    Settings,
    Tournament,
)
from .pairing import Entrant, pair_round
from .standings import standings

MAX_MAT = 999


# ---------------------------------------------------------------------- the changes
@dataclass(frozen=True, slots=True)
class PlayersAdded:
    players: tuple[Player, ...]


@dataclass(frozen=True, slots=True)
class PlayerChanged:
    player: Player


@dataclass(frozen=True, slots=True)
class BlocksDrawn:
    blocks: tuple[Block, ...]
    assignment: tuple[tuple[int, str], ...]  # entry number -> block
    seed: int
    method: Method


@dataclass(frozen=True, slots=True)
class BlockChanged:
    block: Block


@dataclass(frozen=True, slots=True)
class RoundPaired:
    round: Round


@dataclass(frozen=True, slots=True)
class RoundRemoved:
    block: str
    number: int


@dataclass(frozen=True, slots=True)
class ReadingChanged:
    block: str
    number: int
    reading: Reading | None  # None: the start was undone (the channel refused it)


@dataclass(frozen=True, slots=True)
class ResultRecorded:
    block: str
    number: int
    mat: int
    result: Result
    change: ResultChange


@dataclass(frozen=True, slots=True)
class RoundConfirmed:
    block: str
    number: int
    confirmed: Confirmed
    changes: tuple[ResultChange, ...]  # one per mat: the result confirmed, for the history


@dataclass(frozen=True, slots=True)
class RefereeChanged:
    referee: RefereeMats  # no mats: the assignment is removed


@dataclass(frozen=True, slots=True)
class SettingsChanged:
    settings: Settings
    name: str
    day: str


Change = (PlayersAdded | PlayerChanged | BlocksDrawn | BlockChanged | RoundPaired | RoundRemoved
          | ReadingChanged | ResultRecorded | RoundConfirmed | RefereeChanged | SettingsChanged)


def apply(t: Tournament, change: Change) -> Tournament:
    """The tournament after `change` (its version one higher)."""
    t = replace(t, version=t.version + 1)
    match change:
        case PlayersAdded(players=ps):
            return replace(t, players=t.players + ps)
        case PlayerChanged(player=p):
            return replace(t, players=tuple(p if x.no == p.no else x for x in t.players))
        case BlocksDrawn(blocks=bs, assignment=a, seed=seed, method=method):
            where = dict(a)
            players = tuple(replace(p, block=where.get(p.no, p.block)) for p in t.players)
            return replace(t, blocks=bs, players=players, draw_seed=seed, draw_method=method)
        case BlockChanged(block=b):
            return replace(t, blocks=tuple(b if x.name == b.name else x for x in t.blocks))
        case RoundPaired(round=r):
            return t.with_round(r)
        case RoundRemoved(block=block, number=n):
            return replace(t, rounds=tuple(r for r in t.rounds
                                           if (r.block, r.number) != (block, n)))
        case ReadingChanged(block=block, number=n, reading=reading):
            read = t.round_of(block, n)
            assert read is not None
            return t.with_round(replace(read, reading=reading))
        case ResultRecorded(block=block, number=n, mat=mat, result=result, change=ch):
            rr = t.round_of(block, n)
            assert rr is not None
            matches = tuple(replace(m, result=result) if m.mat == mat else m for m in rr.matches)
            return replace(t.with_round(replace(rr, matches=matches)),
                           history=(*t.history, ch))
        case RoundConfirmed(block=block, number=n, confirmed=c, changes=chs):
            rc = t.round_of(block, n)
            assert rc is not None
            return replace(t.with_round(replace(rc, confirmed=c)), history=(*t.history, *chs))
        case RefereeChanged(referee=ref):
            rest = [x for x in t.referees if x.referee != ref.referee]
            kept = sorted([*rest, ref] if ref.mats else rest, key=lambda x: x.referee)
            return replace(t, referees=tuple(kept))
        case SettingsChanged(settings=s, name=name, day=day):
            return replace(t, settings=s, name=name, day=day)
        case _:
            assert_never(change)


def mix(*parts: object) -> int:
    """A seed for one decision, from the tournament's seed and what the decision is about."""
    return int.from_bytes(hashlib.sha256(":".join(map(str, parts)).encode()).digest()[:6], "big")


# ---------------------------------------------------------------------- settings and players
def change_settings(t: Tournament, *, name: str | None = None, day: str | None = None,
                    rounds: int | None = None, cards: int | None = None) -> SettingsChanged:
    s = t.settings
    if rounds is not None and rounds != s.rounds:
        paired = max((r.number for r in t.rounds if not r.final), default=0)
        if rounds < paired or any(r.final for r in t.rounds):
            raise Conflict(f"{paired} rounds are already paired; the preliminaries cannot be "
                           f"{rounds} rounds now", "")
        s = replace(s, rounds=rounds)
    if cards is not None and cards != s.cards:
        if any(started(r) for r in t.rounds):
            raise Conflict("a round has started: the cards read per match cannot change now",
                           "")
        s = replace(s, cards=cards)
    return SettingsChanged(s, t.name if name is None else name, t.day if day is None else day)


def _first_open_round(t: Tournament, block: str | None) -> int:
    """The first round of the block that has not started (no reading, no result)."""
    if block is None:
        return 1
    for r in t.rounds_of(block):
        if not r.final and not started(r):
            return r.number
    return 1 + max((r.number for r in t.rounds_of(block) if not r.final), default=0)


def add_players(t: Tournament, entries: Sequence[Entry], *, late: bool = False
                ) -> PlayersAdded:
    """New players, numbered after the last. Once blocks are drawn a new player needs a block
    (given, or the smallest), and plays from the block's first round not yet started."""
    names = {b.name for b in t.blocks}
    sizes = {b.name: sum(1 for p in t.players_of(b.name) if p.withdrawn_round is None)
             for b in t.blocks}
    no = max((p.no for p in t.players), default=0)
    out: list[Player] = []
    for e in entries:
        block = e.block
        if t.blocks:
            if block is None:
                block = min(sorted(names), key=lambda n: sizes[n])
            elif block not in names:
                raise Invalid(f"{e.name}: there is no block {block}",
                              f"blocks: {', '.join(sorted(names))}")
            sizes[block] += 1
        elif late:
            raise Conflict("there are no blocks yet: add players as entries, then draw", "")
        no += 1
        out.append(Player(no, e.name, e.furigana, e.club, e.grade, block,
                          joined_round=_first_open_round(t, block) if t.blocks else 1))
    if len(t.players) + len(out) > 5000:
        raise Invalid("at most 5000 players in a tournament", "")
    return PlayersAdded(tuple(out))


def _player(t: Tournament, no: int) -> Player:
    p = t.player(no)
    if p is None:
        raise NotFound(f"there is no player no. {no}", "GET the tournament to see its players")
    return p


def edit_player(t: Tournament, no: int, e: Entry) -> PlayerChanged:
    p = _player(t, no)
    if e.block != p.block:
        if any(no in m.players for r in t.rounds for m in r.matches):
            raise Conflict(f"{p.name} has been paired: the block cannot change now",
                           "withdraw the player and enter them again")
        if t.blocks and e.block is not None and t.block(e.block) is None:
            raise Invalid(f"there is no block {e.block}", "")
        if t.blocks and e.block is None:
            raise Invalid("a player needs a block once blocks are drawn", "")
    joined = _first_open_round(t, e.block) if e.block != p.block and t.blocks else p.joined_round
    return PlayerChanged(replace(p, name=e.name, furigana=e.furigana, club=e.club,
                                 grade=e.grade, block=e.block, joined_round=joined))


def withdraw(t: Tournament, no: int, withdrawn: bool = True) -> PlayerChanged:
    """Withdraw a player from the block's first round not yet started; or take them back
    while no round has been paired since."""
    p = _player(t, no)
    if withdrawn:
        if p.withdrawn_round is not None:
            return PlayerChanged(p)
        return PlayerChanged(replace(p, withdrawn_round=_first_open_round(t, p.block)))
    if p.withdrawn_round is None:
        return PlayerChanged(p)
    if p.block is not None and any(r.number >= p.withdrawn_round and started(r)
                                   for r in t.rounds_of(p.block)):
        raise Conflict(f"{p.name} has missed a round since withdrawing",
                       "enter them again as a late entry")
    return PlayerChanged(replace(p, withdrawn_round=None))


# ---------------------------------------------------------------------- blocks
def _groups(n: int) -> int:
    return n // 2  # pairs, and one 3-player match in place of the last pair when odd


def draw_blocks(t: Tournament, count: int, method: Method, seed: int,
                channels: Sequence[str], channel_colours: Mapping[str, str] | None = None
                ) -> BlocksDrawn:
    """Blocks A, B, ... with their players, each with a reader (the hall's channels in turn),
    a colour (the channel's, else one per block) and a range of mats (one after another)."""
    if t.rounds:
        raise Conflict("a round is paired: the blocks cannot be drawn again", "")
    active = [p for p in t.players if p.withdrawn_round is None]
    if len(active) < 2 * count:
        raise Invalid(f"{len(active)} players cannot make {count} blocks of two or more",
                      "draw fewer blocks")
    names = blocks_mod.block_names(count)
    assignment = blocks_mod.draw(active, names, method, seed)
    out: list[Block] = []
    mat = 1
    for i, name in enumerate(names):
        channel = channels[i % len(channels)] if channels else None
        colour = (channel_colours or {}).get(channel or "") or COLOURS[i % len(COLOURS)]
        out.append(Block(name, channel, (colour,), mat))
        mat += max(1, _groups(sum(1 for b in assignment.values() if b == name)))
    return BlocksDrawn(tuple(out), tuple(sorted(assignment.items())), seed, method)


def change_block(t: Tournament, name: str, *, channel: str | bool | None = False,
                 colours: Sequence[str] | None = None, first_mat: int | None = None
                 ) -> BlockChanged:
    """`channel=False` leaves the channel as it is; None unassigns it."""
    b = t.block(name)
    if b is None:
        raise NotFound(f"there is no block {name}",
                       f"blocks: {', '.join(x.name for x in t.blocks) or 'none drawn yet'}")
    new = b
    if channel is not False:
        new = replace(new, channel=channel if isinstance(channel, str) else None)
    if colours is not None:
        if not colours or any(c not in COLOURS for c in colours):
            raise Invalid(f"colours must be some of {', '.join(COLOURS)}", "")
        new = replace(new, colours=tuple(colours))
    if first_mat is not None:
        if not 1 <= first_mat <= MAX_MAT:
            raise Invalid(f"mat numbers are 1..{MAX_MAT}", "")
        new = replace(new, first_mat=first_mat)  # a pairing made before keeps its mats
    return BlockChanged(new)


# ---------------------------------------------------------------------- rounds
def _check_mats(t: Tournament, r: Round) -> None:
    mats = {m.mat for m in r.matches}
    for other in t.rounds:
        if other.number == r.number and other.block != r.block:
            clash = mats & {m.mat for m in other.matches}
            if clash:
                raise Conflict(f"mat {min(clash)} of round {r.number} is block "
                               f"{other.block}'s", f"set block {r.block}'s first mat elsewhere")
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
                       "pair the final")
    if prelims and not complete(t, prelims[-1]):
        errors = [f.detail for f in round_flags(t, prelims[-1]) if f.level == "error"]
        raise Conflict(f"round {n - 1} of block {block} is not complete: "
                       + "; ".join(errors[:5]), "enter or correct the results first")
    order = {s.no: s.rank for s in standings(t, block)}
    active = sorted((p for p in t.players_of(block) if p.active_in(n)),
                    key=lambda p: (order.get(p.no, 0), p.no))
    history = [m.players for r in prelims for m in r.matches]
    triples: dict[int, int] = {}
    for r in prelims:
        for m in r.matches:
            if len(m.players) == 3:
                for p in m.players:
                    triples[p] = triples.get(p, 0) + 1
    pairing = pair_round([Entrant(p.no, p.club, triples.get(p.no, 0)) for p in active],
                         history, t.settings.rounds - n + 1, mix(t.pairing_seed, block, n))
    matches = tuple(Match(b.first_mat + i, g) for i, g in enumerate(pairing.groups))
    notes = []
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
                       "complete", "pair and finish the preliminaries first")
    if t.round_of(block, t.final_round) is not None:
        raise Conflict(f"block {block}'s final is already paired", "")
    top = [s.no for s in standings(t, block) if not s.withdrawn][:2]
    if len(top) < 2:
        raise Conflict(f"block {block} has fewer than two players for a final", "")
    r = Round(block, t.final_round, True, b.colour(t.final_round),
              (Match(b.first_mat, (top[0], top[1])),), at)
    _check_mats(t, r)
    return RoundPaired(r)


def unpair(t: Tournament, block: str, number: int) -> RoundRemoved:
    r = t.round_of(block, number)
    if r is None:
        raise NotFound(f"block {block} has no round {number}", "")
    if started(r):
        raise Conflict(f"round {number} of block {block} has started: its pairing stays",
                       "correct the results instead")
    if any(x.number > number for x in t.rounds_of(block)):
        raise Conflict(f"round {number} of block {block} is not the latest", "")
    return RoundRemoved(block, number)


def start_reading(t: Tournament, block: str, number: int, channel: str, at: str,
                  again: bool = False) -> ReadingChanged:
    r = _round(t, block, number)
    if r.reading is not None and r.reading.status is ReadingStatus.STARTED and not again:
        raise Conflict(f"round {number} of block {block} is already being read on channel "
                       f"{r.reading.channel}", "start it again only to read it anew (again)")
    return ReadingChanged(block, number, Reading(channel, ReadingStatus.STARTING, at))


def confirm_reading(t: Tournament, block: str, number: int, seed: int, journal: str | None
                    ) -> ReadingChanged:
    r = _round(t, block, number)
    if r.reading is None:
        raise Conflict(f"round {number} of block {block} was not started", "")
    return ReadingChanged(block, number, replace(r.reading, status=ReadingStatus.STARTED,
                                                 seed=seed, journal=journal))


def extra_card(t: Tournament, block: str, number: int) -> ReadingChanged:
    r = _round(t, block, number)
    if r.reading is None:
        raise Conflict(f"round {number} of block {block} is not being read", "start it first")
    return ReadingChanged(block, number, replace(r.reading, extra_cards=r.reading.extra_cards + 1))


def _round(t: Tournament, block: str, number: int) -> Round:
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


# ---------------------------------------------------------------------- results
def _check_read(t: Tournament, r: Round, m: Match, referee: bool) -> None:
    """A result is entered once the round is read: its channel match was started (a start not
    yet confirmed by the channel is not). A block with no reader in this hall is read by a
    person: the desk enters its results when it likes. The desk may always correct a result
    it has."""
    if r.reading is not None and r.reading.status is ReadingStatus.STARTED:
        return
    if not referee:
        b = t.block(r.block)
        if m.result is not None or (r.reading is None and b is not None and b.channel is None):
            return
    raise Conflict(f"round {r.number} of block {r.block} has not been read yet: its results "
                   "are entered once its reading has started",
                   "start the round's reading at the desk first", code="round_not_read")


def record_result(t: Tournament, number: int, mat: int, cards: Mapping[int, int],
                  tiebreak: int | None, by: str, at: str, *, referee: str | None = None
                  ) -> ResultRecorded | None:
    """Enter (or correct) a match's result: the cards each player took, and for a final's tie
    who took the extra card. The round must have been read. The cards taken add up to at most
    the cards read (cards may stay on the 場 at the end; a 3-player match shares the same
    cards three ways). A referee (`referee` = its id) may only enter results at its mats, for
    the match its own channel read, and only until the block's next round is paired or the
    desk confirms the round; the operator may correct any. The same result again changes
    nothing (None)."""
    r, m = locate(t, number, mat)
    mine = None
    if referee is not None:
        mine = next((x for x in t.referees if x.referee == referee), None)
        if mine is None or mat not in mine.mats:
            raise Forbidden(f"mat {mat} is not one of this referee's mats "
                            f"({', '.join(map(str, mine.mats)) if mine else 'none assigned'})",
                            "ask the desk to assign the mat")
    _check_read(t, r, m, referee is not None)
    if mine is not None:
        assert r.reading is not None
        if r.reading.channel != mine.channel:
            # the mats moved since the referee was given them: this match is another
            # channel's, and its referees enter it
            raise Forbidden(f"mat {mat} of round {number} is read on channel "
                            f"{r.reading.channel}, but this referee joined channel "
                            f"{mine.channel}", "ask the desk to assign the mat again",
                            code="mat_not_on_channel")
        if r.confirmed is not None:
            raise Conflict(f"round {number} of block {r.block}'s results were confirmed by the "
                           "desk: only the desk can correct them now", "ask the desk",
                           code="result_locked")
        if any(x.number > number for x in t.rounds_of(r.block)):
            raise Conflict(f"round {number + 1} of block {r.block} is paired: this result can "
                           "only be corrected at the desk", "ask the desk", code="result_locked")
    if set(cards) != set(m.players):
        names = ", ".join(f"no. {p}" for p in m.players)
        raise Invalid(f"mat {mat} is played by {names}: give the cards of each of them", "")
    read = t.settings.cards + r.extra_cards
    for p, c in cards.items():
        if not 0 <= c <= read:
            raise Invalid(f"no. {p} took {c} cards, but {read} were read", "count again",
                          code="cards_over_read")
    total = sum(cards.values())
    if total > read:
        raise Invalid(f"the cards taken add up to {total}, but {read} were read",
                      "count again: the players of a match take at most the cards read",
                      code="cards_over_read")
    values = tuple(cards[p] for p in m.players)
    if tiebreak is not None:
        if not r.final or len(set(values)) != 1:
            raise Invalid("who took the extra card is entered only for a tied final", "")
        if tiebreak not in m.players:
            raise Invalid(f"no. {tiebreak} does not play at mat {mat}", "")
    result = Result(values, tiebreak, by, at)
    before = m.result
    if before is not None and (before.cards, before.tiebreak) == (values, tiebreak):
        return None
    return ResultRecorded(r.block, number, mat, result,
                          ResultChange(number, mat, before, result, by, at))


def confirm_round(t: Tournament, block: str, number: int, by: str, at: str
                  ) -> RoundConfirmed | None:
    """The desk confirms (確定) a complete round's results, a final's above all (no next round
    locks it): from then on a referee cannot change them, the desk still can (each change
    kept in the history, after the confirmation). Confirming again changes nothing (None)."""
    r = _round(t, block, number)
    if r.confirmed is not None:
        return None
    if not complete(t, r):
        errors = [f.detail for f in round_flags(t, r) if f.level == "error"]
        raise Conflict(f"round {number} of block {block} is not complete: "
                       + "; ".join(errors[:5]), "enter or correct the results first")
    return RoundConfirmed(block, number, Confirmed(by, at), tuple(
        ResultChange(number, m.mat, m.result, m.result, by, at, confirmed=True)
        for m in r.matches if m.result is not None))


# ---------------------------------------------------------------------- referees
def assign_referee(t: Tournament, referee: str, name: str, channel: str,
                   mats: Sequence[int]) -> RefereeChanged:
    """The mats a referee watches (one referee usually watches two). A mat belongs to the
    block whose channel the referee joined."""
    mine = sorted(set(mats))
    ranges = _mat_ranges(t)
    for mat in mine:
        owner = ranges.get(mat)
        if owner is None:
            raise Invalid(f"mat {mat} is no block's",
                          "mats: " + ", ".join(f"{b} {lo}-{hi}" for b, (lo, hi)
                                               in _block_ranges(t).items()))
        b = t.block(owner)
        if b is not None and b.channel is not None and b.channel != channel:
            raise Invalid(f"mat {mat} is block {owner}'s, read on channel {b.channel}, but "
                          f"this referee joined channel {channel}",
                          f"the referee joins channel {b.channel} with its PIN")
    taken = {m: x.name for x in t.referees if x.referee != referee for m in x.mats}
    clash = [m for m in mine if m in taken]
    if clash:
        raise Conflict(f"mat {clash[0]} is already {taken[clash[0]]}'s",
                       "take it from that referee first")
    return RefereeChanged(RefereeMats(referee, name, channel, tuple(mine)))


def _block_ranges(t: Tournament) -> dict[str, tuple[int, int]]:
    out: dict[str, tuple[int, int]] = {}
    for b in t.blocks:
        size = sum(1 for p in t.players_of(b.name) if p.withdrawn_round is None)
        used = [m.mat for r in t.rounds_of(b.name) for m in r.matches]
        hi = max([b.first_mat + max(1, _groups(size)) - 1, *used])
        out[b.name] = (b.first_mat, hi)
    return out


def _mat_ranges(t: Tournament) -> dict[int, str]:
    return {m: name for name, (lo, hi) in _block_ranges(t).items() for m in range(lo, hi + 1)}


def mats_of(t: Tournament) -> dict[str, tuple[int, int]]:
    """Each block's mats (first, last)."""
    return _block_ranges(t)
