"""The whole tournament as one JSON document (a backup, or a move to another machine) and back.

`{"format": "yomite-tournament", "version": 1, "tournament": {...}, "players": [...],
"blocks": [...], "rounds": [...], "referees": [...], "history": [...]}`. Importing checks the
document as strictly as the desk checks its own steps: a document that does not add up
(a match with a player who is not entered, two results at one mat) is refused whole.
"""

from __future__ import annotations

import re
from typing import Any

from .entries import entry
from .errors import Invalid
from .model import (
    COLOURS,
    PUBLIC_LINK,
    Block,
    Confirmed,
    Match,
    Method,
    Player,
    Reading,
    ReadingStatus,
    RefereeMats,
    Result,
    ResultChange,
    Round,
    Settings,
    Tournament,
)

FORMAT = "yomite-tournament"
VERSION = 1
TOURNAMENT_ID = re.compile(r"^[a-z0-9][a-z0-9-]{0,39}$")
RESERVED_IDS = {"assigned", "import", "presets", "print-pass"}


def _result(r: Result | None) -> dict[str, Any] | None:
    return None if r is None else r.as_dict()


def to_document(t: Tournament) -> dict[str, Any]:
    return {
        "format": FORMAT,
        "version": VERSION,
        "tournament": {
            "id": t.id, "name": t.name, "day": t.day, "created_at": t.created_at,
            "rounds": t.settings.rounds, "cards": t.settings.cards,
            "finalists": t.settings.finalists,
            "publish_details": t.settings.publish_details, "public_link": t.public_link,
            "draw_seed": t.draw_seed,
            "draw_method": t.draw_method.value if t.draw_method else None,
            "lottery_seed": t.lottery_seed, "pairing_seed": t.pairing_seed,
        },
        "players": [{"no": p.no, "name": p.name, "furigana": p.furigana, "club": p.club,
                     "grade": p.grade, "block": p.block, "joined_round": p.joined_round,
                     "withdrawn_round": p.withdrawn_round, "block_fixed": p.block_fixed}
                    for p in t.players],
        "blocks": [{"name": b.name, "channel": b.channel, "colours": list(b.colours),
                    "first_mat": b.first_mat} for b in t.blocks],
        "rounds": [{
            "block": r.block, "number": r.number, "final": r.final, "colour": r.colour,
            "paired_at": r.paired_at, "notes": list(r.notes),
            "reading": None if r.reading is None else {
                "channel": r.reading.channel, "status": r.reading.status.value,
                "requested_at": r.reading.requested_at, "seed": r.reading.seed,
                "journal": r.reading.journal, "extra_cards": r.reading.extra_cards},
            "matches": [{"mat": m.mat, "players": list(m.players), "result": _result(m.result)}
                        for m in r.matches],
            "confirmed": None if r.confirmed is None else {"by": r.confirmed.by,
                                                           "at": r.confirmed.at},
        } for r in t.rounds],
        "referees": [{"referee": x.referee, "name": x.name, "channel": x.channel,
                      "mats": list(x.mats)} for x in t.referees],
        "history": [{"round": c.round, "mat": c.mat, "before": _result(c.before),
                     "after": _result(c.after), "by": c.by, "at": c.at,
                     "confirmed": c.confirmed} for c in t.history],
    }


class _Reader:
    """Typed access to an untrusted document: every wrong field is named by its path."""

    def __init__(self, data: Any, path: str) -> None:
        self.data = data
        self.path = path

    def fail(self, what: str) -> Invalid:
        return Invalid(f"{self.path}: {what}", "export the tournament again, or correct the file")

    def obj(self) -> dict[str, Any]:
        if not isinstance(self.data, dict):
            raise self.fail("must be an object")
        return self.data

    def get(self, key: str) -> _Reader:
        return _Reader(self.obj().get(key), f"{self.path}.{key}")

    def items(self, limit: int) -> list[_Reader]:
        if not isinstance(self.data, list):
            raise self.fail("must be a list")
        if len(self.data) > limit:
            raise self.fail(f"at most {limit} items")
        return [_Reader(x, f"{self.path}[{i}]") for i, x in enumerate(self.data)]

    def integer(self, lo: int = 0, hi: int = 1 << 62, optional: bool = False) -> Any:
        v = self.data
        if v is None and optional:
            return None
        if not isinstance(v, int) or isinstance(v, bool) or not lo <= v <= hi:
            raise self.fail(f"must be a whole number {lo}..{hi}")
        return v

    def text(self, limit: int = 200, optional: bool = False) -> Any:
        v = self.data
        if v is None and optional:
            return None
        if not isinstance(v, str) or len(v) > limit:
            raise self.fail(f"must be a text of at most {limit} characters")
        return v

    def boolean(self, default: bool | None = None) -> bool:
        if self.data is None and default is not None:
            return default
        if not isinstance(self.data, bool):
            raise self.fail("must be true or false")
        return self.data


def _read_result(r: _Reader, seats: int | None) -> Result | None:
    if r.data is None:
        return None
    cards = tuple(x.integer(0, 100) for x in r.get("cards").items(3))
    if seats is not None and len(cards) != seats:
        raise r.fail(f"has {len(cards)} card counts for {seats} players")
    return Result(cards, r.get("tiebreak").integer(1, 100000, optional=True),
                  r.get("by").text(120), r.get("at").text(40),
                  r.get("players_at").text(40, optional=True) or "")


def from_document(data: Any) -> Tournament:
    doc = _Reader(data, "document")
    if doc.get("format").data != FORMAT:
        raise doc.fail(f'is not a yomite tournament (format must be "{FORMAT}")')
    if doc.get("version").data != VERSION:
        raise doc.fail(f"version {doc.get('version').data!r}: this yomite reads version "
                       f"{VERSION}")
    head = doc.get("tournament")
    tid = head.get("id").text(40)
    if not TOURNAMENT_ID.match(tid) or tid in RESERVED_IDS:
        raise head.get("id").fail("must be lower-case letters, digits and dashes")
    method = head.get("draw_method").text(16, optional=True)
    if method is not None and method not in {m.value for m in Method}:
        raise head.get("draw_method").fail(f"must be one of {', '.join(m.value for m in Method)}")
    players = []
    for r in doc.get("players").items(5000):
        try:
            e = entry(r.get("name").text(200), r.get("furigana").text(200),
                      r.get("club").text(200), r.get("grade").text(200),
                      r.get("block").text(8, optional=True))
        except ValueError as err:
            raise r.fail(str(err)) from None
        players.append(Player(r.get("no").integer(1, 100000), e.name, e.furigana, e.club, e.grade,
                              e.block, r.get("joined_round").integer(1, 100),
                              r.get("withdrawn_round").integer(1, 100, optional=True),
                              # (documents from before: a block before any draw was given)
                              r.get("block_fixed").boolean(
                                  default=e.block is not None
                                  and head.get("draw_seed").data is None)))
    nos = {p.no for p in players}
    if len(nos) != len(players):
        raise doc.get("players").fail("two players have the same number")
    blocks = []
    for r in doc.get("blocks").items(26):
        colours = tuple(c.text(16) for c in r.get("colours").items(100))
        if not colours or any(c not in COLOURS for c in colours):
            raise r.get("colours").fail(f"must be some of {', '.join(COLOURS)}")
        blocks.append(Block(r.get("name").text(4), r.get("channel").text(32, optional=True),
                            colours, r.get("first_mat").integer(1, 999)))
    names = {b.name for b in blocks}
    if any(p.block is not None and blocks and p.block not in names for p in players):
        raise doc.get("players").fail("a player's block is not one of the blocks")
    rounds = []
    seen: set[tuple[str, int]] = set()
    for r in doc.get("rounds").items(2000):
        block = r.get("block").text(4)
        if block not in names:
            raise r.get("block").fail("is not one of the blocks")
        number = r.get("number").integer(1, 100)
        if (block, number) in seen:
            raise r.fail(f"block {block} has round {number} twice")
        seen.add((block, number))
        matches = []
        mats: set[int] = set()
        for m in r.get("matches").items(500):
            ps = tuple(x.integer(1, 100000) for x in m.get("players").items(3))
            if len(ps) not in (2, 3) or len(set(ps)) != len(ps) or not set(ps) <= nos:
                raise m.get("players").fail("must be two or three different entered players")
            mat = m.get("mat").integer(1, 999)
            if mat in mats:
                raise m.get("mat").fail(f"mat {mat} twice in one round")
            mats.add(mat)
            matches.append(Match(mat, ps, _read_result(m.get("result"), len(ps))))
        rd = r.get("reading")
        reading = None
        if rd.data is not None:
            status = rd.get("status").text(16)
            if status not in {s.value for s in ReadingStatus}:
                raise rd.get("status").fail("is not a reading status")
            reading = Reading(rd.get("channel").text(32), ReadingStatus(status),
                              rd.get("requested_at").text(40),
                              rd.get("seed").integer(optional=True),
                              rd.get("journal").text(200, optional=True),
                              rd.get("extra_cards").integer(0, 100))
        colour = r.get("colour").text(16)
        if colour not in COLOURS:
            raise r.get("colour").fail(f"must be one of {', '.join(COLOURS)}")
        # (documents written before the desk confirmed results have no "confirmed")
        cf = r.get("confirmed")
        confirmed = None if cf.data is None else Confirmed(cf.get("by").text(120),
                                                           cf.get("at").text(40))
        rounds.append(Round(block, number, r.get("final").boolean(), colour, tuple(matches),
                            r.get("paired_at").text(40), reading,
                            tuple(n.text(300) for n in r.get("notes").items(20)), confirmed))
    referees = [RefereeMats(r.get("referee").text(40), r.get("name").text(40),
                            r.get("channel").text(32),
                            tuple(m.integer(1, 999) for m in r.get("mats").items(100)))
                for r in doc.get("referees").items(1000)]
    history = []
    for r in doc.get("history").items(100000):
        after = _read_result(r.get("after"), None)
        if after is None:
            raise r.get("after").fail("must be a result")
        history.append(ResultChange(r.get("round").integer(1, 100), r.get("mat").integer(1, 999),
                                    _read_result(r.get("before"), None), after,
                                    r.get("by").text(120), r.get("at").text(40),
                                    r.get("confirmed").boolean(default=False)))
    finalists = head.get("finalists")
    settings = Settings(rounds=head.get("rounds").integer(1, 20),
                        cards=head.get("cards").integer(1, 100),
                        finalists=2 if finalists.data is None else finalists.integer(1, 2),
                        publish_details=head.get("publish_details").boolean(default=False))
    link = head.get("public_link").text(64, optional=True)
    if link is not None and not PUBLIC_LINK.fullmatch(link):
        raise head.get("public_link").fail("must be 16-64 letters, digits, - or _")
    return Tournament(
        id=tid, name=head.get("name").text(100), day=head.get("day").text(40),
        settings=settings, created_at=head.get("created_at").text(40),
        draw_seed=head.get("draw_seed").integer(optional=True),
        draw_method=Method(method) if method else None,
        lottery_seed=head.get("lottery_seed").integer(),
        pairing_seed=head.get("pairing_seed").integer(),
        players=tuple(players), blocks=tuple(blocks),
        rounds=tuple(sorted(rounds, key=lambda x: (x.number, x.block))),
        referees=tuple(referees), history=tuple(history), public_link=link,
    )
