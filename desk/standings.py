"""Results and standings by the rules (試合要領, rule 16).

- 1 against 1: more cards wins; equal is a draw.
- 3 players: the top two win; if the 2nd and 3rd took the same number, the 1st wins and those
  two draw. (Two equal at the top both win; all three equal is a draw for all: the rules do
  not say, and nobody is beaten.)
- A final's tie is decided by the extra card: whoever took it wins.
- Order in a block: wins, then cards taken, then the lottery (抽選), drawn once with the
  tournament's recorded seed. A draw is not a win.
- The lottery decides nothing until the block's preliminaries are complete: before that, players
  equal in wins and cards share a place (`place`), and no place is marked as drawn by lottery.
"""

from __future__ import annotations

import hashlib
from collections.abc import Iterable
from dataclasses import dataclass
from enum import StrEnum

from .checks import complete
from .model import Match, Player, Result, Round, Tournament


class Outcome(StrEnum):
    WIN = "win"
    DRAW = "draw"
    LOSS = "loss"


def outcomes(players: tuple[int, ...], result: Result, final: bool = False
             ) -> dict[int, Outcome]:
    cards = dict(zip(players, result.cards, strict=True))
    if len(players) == 2:
        a, b = players
        if cards[a] == cards[b]:
            if final and result.tiebreak in (a, b):
                w = result.tiebreak
                return {p: Outcome.WIN if p == w else Outcome.LOSS for p in players}
            return {a: Outcome.DRAW, b: Outcome.DRAW}
        w = a if cards[a] > cards[b] else b
        return {p: Outcome.WIN if p == w else Outcome.LOSS for p in players}
    if len(players) != 3:
        raise ValueError(f"a match has two or three players, not {len(players)}")
    first, second, third = sorted(players, key=lambda p: -cards[p])
    c1, c2, c3 = cards[first], cards[second], cards[third]
    if c1 == c2 == c3:
        return dict.fromkeys(players, Outcome.DRAW)
    if c2 == c3:
        return {first: Outcome.WIN, second: Outcome.DRAW, third: Outcome.DRAW}
    return {first: Outcome.WIN, second: Outcome.WIN, third: Outcome.LOSS}


def lottery(seed: int, players: Iterable[Player]) -> dict[int, int]:
    """Each player's lottery number (1 = drawn first), from the tournament's seed: the order of
    two players never depends on who else entered."""

    def key(p: Player) -> bytes:
        return hashlib.sha256(f"yomite-lottery:{seed}:{p.no}".encode()).digest()

    return {p.no: i for i, p in enumerate(sorted(players, key=key), 1)}


@dataclass(frozen=True, slots=True)
class Standing:
    rank: int
    no: int
    played: int
    wins: int
    draws: int
    losses: int
    cards: int
    lottery: int
    by_lottery: bool  # the lottery decided this place against a neighbour (prelims complete)
    withdrawn: bool
    place: int  # rank once the preliminaries are complete; before, shared by equal wins and cards


def prelim_rounds(t: Tournament, block: str) -> list[Round]:
    return [r for r in t.rounds_of(block) if not r.final]


def prelims_complete(t: Tournament, block: str) -> bool:
    """Every preliminary round of the block paired and complete: from then on the order is
    final and the lottery decides between equals."""
    prelims = prelim_rounds(t, block)
    return len(prelims) >= t.settings.rounds and all(complete(t, r) for r in prelims)


def played(rounds: Iterable[Round]) -> Iterable[tuple[Round, Match, Result]]:
    for r in rounds:
        for m in r.matches:
            if m.result is not None:
                yield r, m, m.result


def standings(t: Tournament, block: str) -> list[Standing]:
    """The block's preliminary standings, from every result entered so far."""
    members = t.players_of(block)
    tally = {p.no: [0, 0, 0, 0, 0] for p in members}  # played, wins, draws, losses, cards
    for _r, m, res in played(prelim_rounds(t, block)):
        for p, outcome in outcomes(m.players, res).items():
            row = tally.setdefault(p, [0, 0, 0, 0, 0])
            row[0] += 1
            row[1 + [Outcome.WIN, Outcome.DRAW, Outcome.LOSS].index(outcome)] += 1
        for p, c in zip(m.players, res.cards, strict=True):
            tally[p][4] += c
    lots = lottery(t.lottery_seed, t.players)
    order = sorted(tally, key=lambda no: (-tally[no][1], -tally[no][4], lots[no]))
    final = prelims_complete(t, block)
    out: list[Standing] = []
    shared = 1
    for i, no in enumerate(order):
        pl, w, d, los, c = tally[no]
        neighbours = [order[j] for j in (i - 1, i + 1) if 0 <= j < len(order)]
        tied = any(tally[x][1] == w and tally[x][4] == c for x in neighbours)
        if i and not (tally[order[i - 1]][1] == w and tally[order[i - 1]][4] == c):
            shared = i + 1
        player = t.player(no)
        out.append(Standing(rank=i + 1, no=no, played=pl, wins=w, draws=d, losses=los, cards=c,
                            lottery=lots[no], by_lottery=tied and final,
                            withdrawn=player is not None and player.withdrawn_round is not None,
                            place=i + 1 if final else shared))
    return out


@dataclass(frozen=True, slots=True)
class FinalDraw:
    """The lottery chose who of players equal in wins and cards goes to the final."""

    wins: int
    cards: int
    drawn: tuple[int, ...]  # through to the final by the lottery, in order
    left: tuple[int, ...]  # equal with them, left out by the lottery


def final_by_lottery(t: Tournament, block: str) -> FinalDraw | None:
    """Where the lottery decides a place going on (the top two of the players still in, for
    the final; or with no final the first, who wins the block; rule: wins, cards, lottery):
    only once the preliminaries are complete."""
    if not prelims_complete(t, block):
        return None
    k = t.settings.finalists
    rows = [s for s in standings(t, block) if not s.withdrawn]
    if len(rows) <= k or (rows[k - 1].wins, rows[k - 1].cards) != (rows[k].wins, rows[k].cards):
        return None
    key = (rows[k - 1].wins, rows[k - 1].cards)
    tied = [s.no for s in rows if (s.wins, s.cards) == key]
    top = {s.no for s in rows[:k]}
    return FinalDraw(key[0], key[1], tuple(n for n in tied if n in top),
                     tuple(n for n in tied if n not in top))


def final_places(t: Tournament, block: str) -> dict[int, int]:
    """1 and 2 for the final's winner and runner-up, once its result decides it; with no final
    (`finalists` 1), the first two of the complete preliminaries (players still in)."""
    if t.settings.finalists == 1:
        if not prelims_complete(t, block):
            return {}
        rows = [s for s in standings(t, block) if not s.withdrawn]
        return {s.no: i + 1 for i, s in enumerate(rows[:2])}
    final = next((r for r in t.rounds_of(block) if r.final), None)
    if final is None:
        return {}
    places: dict[int, int] = {}
    for m in final.matches:
        if m.result is None:
            continue
        res = outcomes(m.players, m.result, final=True)
        if len(m.players) == 2 and Outcome.WIN in res.values():
            for p, o in res.items():
                places[p] = 1 if o is Outcome.WIN else 2
    return places
