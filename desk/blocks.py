"""Drawing the blocks: random with a recorded seed, or keeping clubs apart, or grades together.
Players pre-assigned a block (the CSV's block column) stay where they are; the others fill the
blocks so that sizes differ by one at most, where the pre-assigned ones allow it."""

from __future__ import annotations

import random
import string
from collections.abc import Sequence

from .errors import Invalid
from .model import Method, Player

MAX_BLOCKS = 26


def block_names(count: int) -> list[str]:
    if not 1 <= count <= MAX_BLOCKS:
        raise Invalid(f"{count} blocks: between 1 and {MAX_BLOCKS}", "")
    return list(string.ascii_uppercase[:count])


def _targets(sizes: dict[str, int], free: int, names: Sequence[str]) -> dict[str, int]:
    """How many players each block ends with: the free players poured into the smallest
    blocks one at a time (so sizes differ by one at most above the pre-assigned)."""
    out = dict(sizes)
    for _ in range(free):
        out[min(names, key=lambda n: (out[n], names.index(n)))] += 1
    return out


def draw(players: Sequence[Player], names: Sequence[str], method: Method, seed: int
         ) -> dict[int, str]:
    """The block of every player (entry number -> block name)."""
    rng = random.Random(seed)
    assigned = {p.no: p.block for p in players if p.block in names}
    sizes = {b: 0 for b in names}
    for b in assigned.values():
        if b is not None:
            sizes[b] += 1
    free = [p for p in players if p.no not in assigned]
    rng.shuffle(free)
    if method is Method.CLUBS:
        # the largest clubs first, each dealt to the blocks with the fewest of that club
        by_club: dict[str, list[Player]] = {}
        for p in free:
            by_club.setdefault(p.club or f"\0{p.no}", []).append(p)
        have: dict[tuple[str, str], int] = {}
        for p in players:
            if p.no in assigned and p.club:
                key = (p.club, assigned[p.no] or "")
                have[key] = have.get(key, 0) + 1
        target = _targets(sizes, len(free), names)  # sizes first, then clubs apart
        for club, members in sorted(by_club.items(), key=lambda kv: (-len(kv[1]), kv[0])):
            for p in members:
                open_ = [n for n in names if sizes[n] < target[n]]
                b = min(open_, key=lambda n: (have.get((club, n), 0), sizes[n], rng.random()))
                assigned[p.no] = b
                sizes[b] += 1
                have[(club, b)] = have.get((club, b), 0) + 1
        return {no: b for no, b in assigned.items() if b is not None}
    if method is Method.GRADES:
        free.sort(key=lambda p: (p.grade, p.club))  # stable: shuffled within a grade
        # fill blocks in order, each up to its share, so that a grade stays together
        target = _targets(sizes, len(free), names)
        it = iter(free)
        for b in names:
            while sizes[b] < target[b]:
                nxt = next(it)
                assigned[nxt.no] = b
                sizes[b] += 1
        return {no: b for no, b in assigned.items() if b is not None}
    for p in free:
        b = min(names, key=lambda n: (sizes[n], rng.random()))
        assigned[p.no] = b
        sizes[b] += 1
    return {no: b for no, b in assigned.items() if b is not None}
