"""The blocks: drawing the players into them, and a block's channel and mats."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import replace

from .. import blocks as blocks_mod
from ..errors import Conflict, Invalid, NotFound
from ..mats import MAX_MAT, groups
from ..model import (
    COLOURS,
    Block,
    Method,
    Tournament,
)
from .changes import BlockChanged, BlocksDrawn


def draw_blocks(t: Tournament, count: int | None, method: Method, seed: int,
                channels: Sequence[str], channel_colours: Mapping[str, str] | None = None,
                *, size: int | None = None) -> BlocksDrawn:
    """Blocks A, B, ... with their players, each with a reader (the hall's channels in turn),
    a colour (the channel's, else one per block) and a range of mats (one after another).
    `count` blocks, or blocks of about `size` players (by grade: each grade's own)."""
    if t.rounds:
        raise Conflict("a round is paired: the blocks cannot be drawn again", "",
                       params={"why": "draw_after_pairing"})
    if (count is None) == (size is None):
        raise Invalid("give the number of blocks or their size, one of the two", "")
    active = [p for p in t.players if p.withdrawn_round is None]
    if size is not None and not 2 <= size <= len(active):
        raise Invalid(f"blocks of {size} players: between 2 and the {len(active)} players",
                      "give another size")
    if method is Method.GRADES_CLUBS:
        names, assignment = blocks_mod.draw_by_grade(active, count, size, seed)
    else:
        if count is None:
            assert size is not None
            count = max(1, round(len(active) / size))
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
        mat += max(1, groups(sum(1 for b in assignment.values() if b == name)))
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
