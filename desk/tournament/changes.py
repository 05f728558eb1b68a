"""The changes a step makes to a tournament (one closed union) and `apply`, which makes one on
the frozen Tournament; the repository makes the same change in the database."""

from __future__ import annotations

from dataclasses import dataclass, replace
from typing import assert_never

from ..model import (
    Block,
    Confirmed,
    Method,
    Player,
    Reading,
    RefereeMats,
    Result,
    ResultChange,
    Round,
    Settings,
    Tournament,
)


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


@dataclass(frozen=True, slots=True)
class PublicLinkChanged:
    link: str | None  # None: revoked


Change = (PlayersAdded | PlayerChanged | BlocksDrawn | BlockChanged | RoundPaired | RoundRemoved
          | ReadingChanged | ResultRecorded | RoundConfirmed | RefereeChanged | SettingsChanged
          | PublicLinkChanged)


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
        case PublicLinkChanged(link=link):
            return replace(t, public_link=link)
        case _:
            assert_never(change)
