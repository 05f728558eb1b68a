"""The tournament's settings, its public link and its players: add, edit, withdraw."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import replace

from ..checks import started
from ..entries import Entry
from ..errors import Conflict, Invalid, NotFound
from ..model import (
    PUBLIC_LINK,
    Player,
    Tournament,
)
from .changes import PlayerChanged, PlayersAdded, PublicLinkChanged, SettingsChanged


def change_settings(t: Tournament, *, name: str | None = None, day: str | None = None,
                    rounds: int | None = None, cards: int | None = None,
                    finalists: int | None = None,
                    publish_details: bool | None = None) -> SettingsChanged:
    s = t.settings
    if publish_details is not None:
        s = replace(s, publish_details=publish_details)
    if finalists is not None and finalists != s.finalists:
        if finalists not in (1, 2):
            raise Invalid("finalists: 2 (a final between the top two) or 1 (no final)", "")
        if any(r.final for r in t.rounds):
            raise Conflict("a final is paired: whether there is one cannot change now",
                           "undo the final's pairing first", params={"why": "final_paired_set"})
        s = replace(s, finalists=finalists)
    if rounds is not None and rounds != s.rounds:
        paired = max((r.number for r in t.rounds if not r.final), default=0)
        if rounds < paired or any(r.final for r in t.rounds):
            raise Conflict(f"{paired} rounds are already paired; the preliminaries cannot be "
                           f"{rounds} rounds now", "",
                           params={"why": "rounds_paired", "rounds": paired})
        s = replace(s, rounds=rounds)
    if cards is not None and cards != s.cards:
        if any(started(r) for r in t.rounds):
            raise Conflict("a round has started: the cards read per match cannot change now",
                           "", params={"why": "cards_fixed"})
        s = replace(s, cards=cards)
    return SettingsChanged(s, t.name if name is None else name, t.day if day is None else day)


def public_link(t: Tournament, key: str | None) -> PublicLinkChanged:
    """A new public link (`key`, made by the caller: nothing here draws randomness), in place
    of the old one; None revokes it: whoever holds the old link sees nothing more."""
    if key is not None and not PUBLIC_LINK.fullmatch(key):
        raise Invalid("a public link's key is 16-64 letters, digits, - or _", "")
    return PublicLinkChanged(key)


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
                          joined_round=_first_open_round(t, block) if t.blocks else 1,
                          block_fixed=e.block is not None))
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
                           "withdraw the player and enter them again",
                           params={"why": "player_paired", "name": p.name})
        if t.blocks and e.block is not None and t.block(e.block) is None:
            raise Invalid(f"there is no block {e.block}", "")
        if t.blocks and e.block is None:
            raise Invalid("a player needs a block once blocks are drawn", "")
    joined = _first_open_round(t, e.block) if e.block != p.block and t.blocks else p.joined_round
    return PlayerChanged(replace(p, name=e.name, furigana=e.furigana, club=e.club,
                                 grade=e.grade, block=e.block, joined_round=joined,
                                 # a block set by hand is kept by a draw; one the draw gave
                                 # stays the draw's
                                 block_fixed=p.block_fixed if e.block == p.block
                                 else e.block is not None))


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
                       "enter them again as a late entry",
                       params={"why": "missed_round", "name": p.name})
    return PlayerChanged(replace(p, withdrawn_round=None))
