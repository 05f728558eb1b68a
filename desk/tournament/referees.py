"""The referees and the mats each watches; each block's mats."""

from __future__ import annotations

from collections.abc import Sequence

from ..errors import Conflict, Invalid
from ..mats import block_mats, mat_list
from ..model import (
    RefereeMats,
    Tournament,
)
from .changes import RefereeChanged


def assign_referee(t: Tournament, referee: str, name: str, channel: str,
                   mats: Sequence[int]) -> RefereeChanged:
    """The mats a referee watches (one referee usually watches two). A mat belongs to the
    block whose channel the referee joined."""
    mine = sorted(set(mats))
    ranges = _mat_ranges(t)
    for mat in mine:
        owner = ranges.get(mat)
        if owner is None:
            known = "; ".join(f"{b} {mat_list(ms)}" for b, ms in block_mats(t).items())
            raise Invalid(f"mat {mat} is no block's", "mats: " + known, code="mat_no_block",
                          params={"mat": mat, "mats": known})
        b = t.block(owner)
        if b is not None and b.channel is not None and b.channel != channel:
            raise Invalid(f"mat {mat} is block {owner}'s, read on channel {b.channel}, but "
                          f"this referee joined channel {channel}",
                          f"the referee joins channel {b.channel} with its PIN",
                          code="mat_other_channel",
                          params={"mat": mat, "block": owner, "channel": b.channel,
                                  "joined": channel})
    taken = {m: x.name for x in t.referees if x.referee != referee for m in x.mats}
    clash = [m for m in mine if m in taken]
    if clash:
        raise Conflict(f"mat {clash[0]} is already {taken[clash[0]]}'s",
                       "take it from that referee first", code="mat_taken",
                       params={"mat": clash[0], "referee": taken[clash[0]]})
    return RefereeChanged(RefereeMats(referee, name, channel, tuple(mine)))


def _mat_ranges(t: Tournament) -> dict[int, str]:
    return {m: name for name, ms in reversed(block_mats(t).items()) for m in ms}


def mats_of(t: Tournament) -> dict[str, tuple[int, int]]:
    """Each block's mats (first, last) of its own run."""
    return {name: (ms[0], _run_end(ms)) for name, ms in block_mats(t).items()}


def _run_end(ms: tuple[int, ...]) -> int:
    end = ms[0]
    for m in ms[1:]:
        if m != end + 1:
            break
        end = m
    return end
