"""The timeline of a match, built from its journal: every stretch of speech, silence, hold and
lead-in with its start and end, in order. This is what `yomite render --timeline` writes and
what the match log shows."""

from collections.abc import Iterable
from typing import Any


def build_timeline(records: Iterable[dict[str, Any]], rate: int) -> list[dict[str, Any]]:
    """Entries `{kind, label, card, poem, verse, start_s, end_s, start_frame, end_frame}`.

    kind is one of call, memorise, prelude, verse, gap (the programme) or hold, lead_in (a
    referee's stop). A segment cut by a hold ends at the cut and has `"cut": true`; what is read
    after the resume is a new entry.
    """
    out: list[dict[str, Any]] = []
    open_: dict[str, Any] | None = None

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
        for f in r.get("facts", ()):
            fact = f.get("fact")
            frame = int(f.get("frame", 0))
            if fact == "segment":
                close(frame)
                fields = {k: f[k] for k in ("label", "card", "poem", "verse", "reading", "clip")
                          if k in f}
                if f.get("offset"):
                    fields["from_s"] = f["offset"] / rate
                begin(str(f["kind"]), frame, **fields)
            elif fact == "cut":
                close(frame, cut=True)
                begin("hold", frame)
            elif fact == "lead_in":
                close(frame)
                begin("lead_in", frame)
            elif fact == "lead_in_cut":
                close(frame, cut=True)
                begin("hold", frame)
            elif fact in ("finished", "closed", "bowed", "aborted"):
                close(frame)
    return out

