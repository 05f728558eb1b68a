"""The mats: each block's, and the mats a round of a block takes."""

from __future__ import annotations

from .model import Tournament

MAX_MAT = 999


def groups(n: int) -> int:
    return n // 2  # pairs, and one 3-player match in place of the last pair when odd


def block_mats(t: Tournament) -> dict[str, tuple[int, ...]]:
    """Each block's mats: its own run from its first mat (a mat per match of its active
    players, stopping short of the next block's first mat), then any mat its rounds used
    beyond that run (an extra mat a late entry needed: `free_mats`)."""
    firsts = sorted(b.first_mat for b in t.blocks)
    out: dict[str, tuple[int, ...]] = {}
    for b in t.blocks:
        size = sum(1 for p in t.players_of(b.name) if p.withdrawn_round is None)
        after = next((f for f in firsts if f > b.first_mat), None)
        end = b.first_mat + max(1, groups(size))
        own = range(b.first_mat, end if after is None else min(end, after))
        used = {m.mat for r in t.rounds_of(b.name) for m in r.matches}
        out[b.name] = tuple(own) + tuple(sorted(used - set(own)))
    return out


def free_mats(t: Tournament, block: str, count: int) -> list[int]:
    """`count` mats for a round of `block`: its own run first; a round that needs more (late
    entries) takes the mats after every other block's last one, never another block's (one
    more table at the end of the hall, not every later block moved along)."""
    b = t.block(block)
    assert b is not None
    others = {x for name, ms in block_mats(t).items() if name != block for x in ms}
    top = max(others, default=0)
    run: list[int] = []
    m = b.first_mat
    while len(run) < count:
        if m in others:
            m = top + 1
            continue
        run.append(m)
        m += 1
    return run


def mat_list(ms: tuple[int, ...]) -> str:
    """`1-5, 21`: a block's mats in words."""
    parts: list[str] = []
    i = 0
    while i < len(ms):
        j = i
        while j + 1 < len(ms) and ms[j + 1] == ms[j] + 1:
            j += 1
        parts.append(str(ms[i]) if i == j else f"{ms[i]}-{ms[j]}")
        i = j + 1
    return ", ".join(parts)
