"""Regional rules as presets: what a new tournament is made with (its preliminary rounds and
who goes on to a final) and how its blocks are drawn. A preset only fills the settings; each
stays the tournament's own to change."""

from __future__ import annotations

from dataclasses import dataclass

from .model import Method


@dataclass(frozen=True, slots=True)
class Preset:
    id: str
    rounds: int  # preliminary rounds
    finalists: int  # 2: a final between the top two; 1: no final, the first wins the block
    method: Method  # how the blocks are drawn
    block_size: int | None = None  # blocks of this many players (None: the organiser's count)


PRESETS: tuple[Preset, ...] = (
    # the association's rules: six preliminary matches, the top two of a block in the final
    Preset("standard", rounds=6, finalists=2, method=Method.CLUBS),
    # eight preliminary matches, then the final of the top two
    Preset("eight_rounds", rounds=8, finalists=2, method=Method.CLUBS),
    # blocks of four of one grade from different schools: each meets each (3 matches), and
    # the block's first goes on (no final)
    Preset("grade_fours", rounds=3, finalists=1, method=Method.GRADES_CLUBS, block_size=4),
    # the preliminaries alone decide: the first of each block wins it
    Preset("no_final", rounds=6, finalists=1, method=Method.CLUBS),
)


def preset(pid: str) -> Preset | None:
    return next((p for p in PRESETS if p.id == pid), None)
