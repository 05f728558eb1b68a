"""The timeline of a match, built from its journal: every stretch of speech, silence, hold and
lead-in with its start and end, in order. This is what `yomite render --timeline` writes and
what the match log shows."""

from collections.abc import Iterable
from typing import Any, assert_never

from .facts import (
    Aborted,
    BowCalled,
    Bowed,
    CardRead,
    ClipLength,
    Closed,
    Closing,
    Cut,
    ExtraCardAdded,
    Finished,
    HandLowered,
    HandRaised,
    HandsCleared,
    LeadIn,
    LeadInCut,
    ReadAgain,
    Resumed,
    SegmentBegun,
    Skipped,
    facts_of,
)


def build_timeline(records: Iterable[dict[str, Any]], rate: int) -> list[dict[str, Any]]:
    """Entries `{kind, label, card, poem, verse, start_s, end_s, start_frame, end_frame}`.

    kind is one of call, memorise, prelude, verse, gap (the programme) or hold, lead_in (a
    referee's stop). A segment cut by a hold ends at the cut and has `"cut": true`; what is read
    after the resume is a new entry. A hold entry has `held_by`: the names (or ids) of every
    hand raised while it lasted, in order. A stretch left by the operator's skip has
    `"skipped": true`.
    """
    out: list[dict[str, Any]] = []
    open_: dict[str, Any] | None = None
    up: dict[str, str] = {}  # hands up: referee -> name

    def close(frame: int, **extra: Any) -> None:
        nonlocal open_
        if open_ is not None:
            open_["end_frame"] = frame
            open_["end_s"] = frame / rate
            open_.update(extra)
            if open_["end_frame"] > open_["start_frame"] or open_["kind"] != "gap":
                out.append(open_)
            open_ = None

    def begin(kind: str, frame: int, **fields: Any) -> None:
        nonlocal open_
        open_ = {"kind": kind, "start_frame": frame, "start_s": frame / rate, **fields}

    for r in records:
        for f in facts_of(r):
            match f:
                case SegmentBegun():
                    close(f.frame)
                    fields: dict[str, Any] = {"label": f.label}
                    if f.card is not None:
                        fields.update(card=f.card, poem=f.poem)
                    if f.verse is not None:
                        fields.update(verse=f.verse.value, reading=f.reading)
                    if f.clip is not None:
                        fields["clip"] = f.clip
                    if f.offset:
                        fields["from_s"] = f.offset / rate
                    begin(f.kind.value, f.frame, **fields)
                case HandRaised():
                    up[f.referee] = f.name or f.referee
                    if open_ is not None and open_["kind"] == "hold":
                        open_["held_by"] = list(dict.fromkeys([*open_["held_by"],
                                                                *up.values()]))
                case HandLowered():
                    up.pop(f.referee, None)
                case HandsCleared():
                    up.clear()
                case Cut() | LeadInCut():
                    close(f.frame, cut=True)
                    begin("hold", f.frame, held_by=list(up.values()))
                case LeadIn():
                    close(f.frame)
                    begin("lead_in", f.frame)
                case Skipped() | ReadAgain():
                    # the operator moved the reading: what was read (or waited) stops here,
                    # a skipped card's verse marked so; a hold or lead-in goes on as it was
                    if open_ is not None and open_["kind"] not in ("hold", "lead_in"):
                        close(f.frame, **({"skipped": True} if isinstance(f, Skipped) else {}))
                case Finished() | Closed() | Bowed() | Aborted():
                    close(f.frame)
                case BowCalled() | ExtraCardAdded() | Closing() | ClipLength() | CardRead() \
                        | Resumed():
                    pass  # no stretch begins or ends here
                case _:
                    assert_never(f)
    return out

