"""What does not add up: a mat without a result, more cards than were read, a final's tie
without its extra card, a player left out of a round or a withdrawn one still in it, a mat no
referee watches. Errors keep a round from being complete (the next round waits); warnings are
shown and change nothing."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from .mats import block_mats
from .model import Round, Tournament


@dataclass(frozen=True, slots=True)
class Flag:
    level: str  # "error" | "warning"
    code: str
    block: str
    round: int
    mat: int | None
    detail: str  # in English; the pages say it from code and params (fd_<code>)
    params: dict[str, Any] = field(default_factory=dict)


def cards_read(t: Tournament, r: Round) -> int:
    return t.settings.cards + r.extra_cards


def started(r: Round) -> bool:
    return r.reading is not None or any(m.result is not None for m in r.matches)


def round_flags(t: Tournament, r: Round) -> list[Flag]:
    out: list[Flag] = []
    read = cards_read(t, r)
    assigned = {m for ref in t.referees for m in ref.mats}

    def flag(level: str, code: str, mat: int | None, detail: str, **params: Any) -> None:
        out.append(Flag(level, code, r.block, r.number, mat, detail, params))

    for m in r.matches:
        if m.mat not in assigned:
            flag("warning", "no_referee", m.mat, f"no referee is assigned mat {m.mat}")
        if m.result is None:
            flag("error", "missing_result", m.mat, f"mat {m.mat} has no result yet")
            continue
        total = sum(m.result.cards)
        if total > read:
            flag("error", "too_many_cards", m.mat,
                 f"mat {m.mat}: {total} cards taken but {read} were read", total=total, read=read)
        if r.final and len(set(m.result.cards)) == 1 and m.result.tiebreak is None:
            flag("error", "tie_needs_extra_card", m.mat,
                 f"mat {m.mat}: the final is tied at {m.result.cards[0]}: read the extra card "
                 "and enter who took it", cards=m.result.cards[0])
    if not started(r):
        seated = {p for m in r.matches for p in m.players}
        for p in t.players_of(r.block):
            if p.active_in(r.number) and p.no not in seated and not r.final:
                flag("error", "not_paired", None,
                     f"{p.name} (no. {p.no}) plays from round {r.number} but is not paired: "
                     "pair the round again", player=p.no, name=p.name)
            if p.no in seated and not p.active_in(r.number):
                flag("error", "withdrawn_paired", None,
                     f"{p.name} (no. {p.no}) has withdrawn but is paired: pair the round again",
                     player=p.no, name=p.name)
    return out


def flags(t: Tournament) -> list[Flag]:
    out: list[Flag] = []
    for b in t.blocks:
        if b.channel is None:
            out.append(Flag("warning", "no_channel", b.name, 0, None,
                            f"block {b.name} has no reader (channel)"))
    # a referee holding a mat that is now a block of another reader's (a block's first mat
    # moved, or its channel changed): its results there are refused; the desk says so
    mats = block_mats(t)
    owner = {m: b for b in t.blocks for m in mats[b.name]}
    for ref in t.referees:
        for mat in ref.mats:
            held = owner.get(mat)
            if held is not None and held.channel not in (None, ref.channel):
                out.append(Flag("warning", "referee_other_channel", held.name, 0, mat,
                                f"{ref.name} (channel {ref.channel}) holds mat {mat}, now "
                                f"block {held.name}'s, read on channel {held.channel}: assign the "
                                "mat again", {"referee": ref.name, "channel": ref.channel,
                                              "other": held.channel}))
    for r in t.rounds:
        out += round_flags(t, r)
    return out


def complete(t: Tournament, r: Round) -> bool:
    return not any(f.level == "error" for f in round_flags(t, r))
