"""Drawing the blocks: random with a recorded seed, or keeping clubs apart, or grades together,
or each grade in blocks of its own with clubs apart. Players given a block (the CSV's block
column, or set by hand) stay where they are; the others fill the blocks so that sizes differ by
one at most, where the given ones allow it. A block the last draw gave is drawn anew."""

from __future__ import annotations

import random
import re
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


def _deal(free: Sequence[Player], names: Sequence[str], target: dict[str, int],
          rng: random.Random) -> dict[int, str]:
    """Clubs apart with no block given: the players, club by club (the largest first), dealt
    like cards round the blocks (the fuller ones first in each turn). A club's players take
    turns in a row, so a club of k players is in k blocks, and a bigger one spread evenly."""
    by_club: dict[str, list[Player]] = {}
    for p in free:  # (already shuffled)
        by_club.setdefault(p.club or f"\0{p.no}", []).append(p)
    order = sorted(by_club.values(), key=lambda ps: (-len(ps), rng.random()))
    turn = sorted(names, key=lambda n: (-target[n], rng.random()))
    slots = [n for i in range(max(target.values(), default=0)) for n in turn if i < target[n]]
    return {p.no: b for p, b in zip((p for ps in order for p in ps), slots, strict=True)}


def draw(players: Sequence[Player], names: Sequence[str], method: Method, seed: int
         ) -> dict[int, str]:
    """The block of every player (entry number -> block name)."""
    rng = random.Random(seed)
    assigned = {p.no: p.block for p in players if p.block_fixed and p.block in names}
    sizes = {b: 0 for b in names}
    for b in assigned.values():
        if b is not None:
            sizes[b] += 1
    free = [p for p in players if p.no not in assigned]
    rng.shuffle(free)
    if method is Method.CLUBS and not assigned:
        return _deal(free, names, _targets(sizes, len(free), names), rng)
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


def _grade_key(grade: str) -> tuple[object, ...]:
    """Grades in their natural order: 小2 before 小10, 1年 before 2年."""
    return tuple(int(x) if x.isdigit() else x for x in re.split(r"(\d+)", grade))


def grade_groups(players: Sequence[Player]) -> list[list[Player]]:
    """The players by grade in natural order; a grade of one player joins the grade next to it
    (a block needs two)."""
    by: dict[str, list[Player]] = {}
    for p in players:
        by.setdefault(p.grade, []).append(p)
    groups = [by[g] for g in sorted(by, key=_grade_key)]
    out: list[list[Player]] = []
    for g in groups:
        if out and len(out[-1]) < 2:
            out[-1] = out[-1] + g
        else:
            out.append(list(g))
    if len(out) > 1 and len(out[-1]) < 2:
        last = out.pop()
        out[-1] = out[-1] + last
    return out


def blocks_per_grade(sizes: Sequence[int], count: int | None, size: int | None) -> list[int]:
    """How many blocks each grade gets: `size` players a block (rounded), or `count` blocks in
    all shared by the grades' sizes (largest remainder); every grade at least one block, no
    block under two players."""
    if size is not None:
        # half up: 10 players in blocks of four are 4, 3 and 3, not two blocks of five
        return [max(1, min(n // 2, int(n / size + 0.5))) for n in sizes]
    assert count is not None
    if count < len(sizes):
        raise Invalid(f"{len(sizes)} grades cannot share {count} blocks: each grade needs "
                      "a block of its own", f"draw at least {len(sizes)} blocks")
    total = sum(sizes)
    share = [count * n / total for n in sizes]
    out = [max(1, min(n // 2, int(x))) for n, x in zip(sizes, share, strict=True)]
    order = sorted(range(len(sizes)), key=lambda i: -(share[i] - int(share[i])))
    while sum(out) < count:
        grown = False
        for i in order:
            if sum(out) < count and out[i] < sizes[i] // 2:
                out[i] += 1
                grown = True
        if not grown:
            raise Invalid(f"{total} players in {len(sizes)} grades cannot make {count} blocks "
                          "of two or more within a grade", "draw fewer blocks")
    while sum(out) > count:
        i = max((i for i in range(len(out)) if out[i] > 1), key=lambda i: out[i] - share[i])
        out[i] -= 1
    return out


def draw_by_grade(players: Sequence[Player], count: int | None, size: int | None, seed: int
                  ) -> tuple[list[str], dict[int, str]]:
    """Each grade its own blocks (`size` players a block, or `count` blocks in all), each
    club's players spread over its grade's blocks: the block names and every player's block."""
    fixed = [p for p in players if p.block_fixed and p.block]
    if fixed:
        raise Invalid(f"{fixed[0].name} was given block {fixed[0].block}: blocks by grade are "
                      "drawn for every player", "clear the block column, or draw another way")
    groups = grade_groups(players)
    per = blocks_per_grade([len(g) for g in groups], count, size)
    names = block_names(sum(per))
    out: dict[int, str] = {}
    at = 0
    for g, k in zip(groups, per, strict=True):
        out.update(draw(g, names[at:at + k], Method.CLUBS, seed))
        at += k
    return names, out
