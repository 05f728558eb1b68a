"""What each audience of a channel sees: the operator sees the whole state; viewers, referees and
speakers see the public view of it."""

from __future__ import annotations

import copy
from typing import Any

from reader.programme import Phase

# phases after which a match's seed may be shown to everyone (感想戦: its order is all read)
OVER = (Phase.FINISHED, Phase.CLOSED, Phase.ABORTED)


def public_view(state: dict[str, Any]) -> dict[str, Any]:
    """What viewers, referees and speakers see (README "Who sees what, and when"): nothing of a
    card before its lower verse has been read: not which poem is read, not the seed while the
    match is under way, not how long a verse of a card will be (the 20 upper verses of a
    colour all differ in length: its end would name the poem at its first sample)."""
    out = copy.deepcopy(state)
    out.pop("pin", None)
    out.pop("output_stats", None)
    # a projector shows whose hand is up, never who has joined: only those names go out
    if "referees" in out:
        out["referees"] = [r for r in out["referees"] if r.get("holding")]
    m = out.get("match")
    if m:
        if m.get("phase") not in OVER:
            m["seed"] = None
        seg = m.get("segment")
        if seg:
            seg["poem"] = None
            if seg.get("kind") == "verse":
                seg["ends_s"] = None
        if m.get("cut"):
            m["cut"]["poem"] = None
        for c in m.get("cards", []):
            if c["finished_s"] is None:
                c["poem"] = None
        k = m.get("kimariji")
        if k:
            # the cards read only; which cards are left, and how, is the operator's
            m["kimariji"] = {"read": k["read"]}
    return out
