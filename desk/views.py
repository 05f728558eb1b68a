"""What the pages show, as plain JSON-ready data: the desk's full view and the public one (the
projector's standings and the next mats: names and numbers; clubs and grades only where the
organiser publishes them, `Settings.publish_details`)."""

from __future__ import annotations

from typing import Any

from .checks import Flag, cards_read, complete, flags, round_flags, started
from .model import Match, Player, Result, Round, Tournament
from .standings import final_by_lottery, final_places, lottery, outcomes, standings
from .tournament import block_mats, mats_of


def _result(r: Result | None) -> dict[str, Any] | None:
    return None if r is None else r.as_dict()


def _flag(f: Flag) -> dict[str, Any]:
    return {"level": f.level, "code": f.code, "block": f.block, "round": f.round, "mat": f.mat,
            "detail": f.detail, "params": f.params}


def details_shown(t: Tournament, public: bool) -> bool:
    """Whether the players' clubs (schools) and grades go into a view: the desk's always, a
    public one (and a printed page) only where the organiser publishes them."""
    return not public or t.settings.publish_details


def _who(p: Player | None, details: bool) -> dict[str, Any]:
    if p is None:
        return {"no": None, "name": "?"}
    out: dict[str, Any] = {"no": p.no, "name": p.name, "furigana": p.furigana}
    if details:
        out["club"] = p.club
        out["grade"] = p.grade
    return out


def match_view(t: Tournament, r: Round, m: Match, public: bool = False) -> dict[str, Any]:
    ref = next((x for x in t.referees if m.mat in x.mats), None)
    out: dict[str, Any] = {
        "mat": m.mat,
        "players": [_who(t.player(p), details_shown(t, public)) for p in m.players],
        "result": None,
        "outcome": None,
    }
    if m.result is not None:
        out["result"] = _result(m.result) if not public else {
            "cards": list(m.result.cards), "tiebreak": m.result.tiebreak}
        # the players at the mat confirmed this result (on the referee's phone)
        out["players_confirmed"] = bool(m.result.players_at)
        out["outcome"] = [o.value for o in
                          (outcomes(m.players, m.result, final=r.final)[p] for p in m.players)]
    if not public:
        out["referee"] = None if ref is None else {"referee": ref.referee, "name": ref.name}
    return out


def round_view(t: Tournament, r: Round, public: bool = False) -> dict[str, Any]:
    out: dict[str, Any] = {
        "block": r.block, "number": r.number, "final": r.final, "colour": r.colour,
        "matches": [match_view(t, r, m, public) for m in r.matches],
        "results": sum(1 for m in r.matches if m.result is not None),
        "players_confirmed": sum(1 for m in r.matches
                                 if m.result is not None and m.result.players_at),
        "complete": complete(t, r),
        "cards_read": cards_read(t, r),
        "confirmed": r.confirmed is not None,
    }
    if not public:
        out["paired_at"] = r.paired_at
        out["notes"] = list(r.notes)
        out["started"] = started(r)
        out["reading"] = None if r.reading is None else {
            "channel": r.reading.channel, "status": r.reading.status.value,
            "requested_at": r.reading.requested_at, "seed": r.reading.seed,
            "journal": r.reading.journal, "extra_cards": r.reading.extra_cards}
        out["flags"] = [_flag(f) for f in round_flags(t, r)]
        out["confirmed_by"] = None if r.confirmed is None else {
            "by": r.confirmed.by, "at": r.confirmed.at}
    return out


def standings_view(t: Tournament, block: str, public: bool = False) -> list[dict[str, Any]]:
    """In preliminary order (`rank`); `place` is the place to show: shared by equals until the
    preliminaries are complete, and the final's for its two players once it is decided."""
    places = final_places(t, block)
    out = []
    for s in standings(t, block):
        p = t.player(s.no)
        out.append({**_who(p, details_shown(t, public)), "rank": s.rank,
                    "place": places.get(s.no, s.place),
                    "played": s.played, "wins": s.wins,
                    "draws": s.draws, "losses": s.losses, "cards": s.cards,
                    "lottery": s.lottery, "by_lottery": s.by_lottery, "withdrawn": s.withdrawn,
                    "final_place": places.get(s.no)})
    return out


def final_lottery_view(t: Tournament, block: str) -> dict[str, Any] | None:
    """Who the lottery sent to the final and who it left out (equal wins and cards), once the
    preliminaries are complete; None where the lottery decided no place in the final."""
    d = final_by_lottery(t, block)
    if d is None:
        return None

    def named(nos: tuple[int, ...]) -> list[dict[str, Any]]:
        return [{"no": no, "name": p.name if (p := t.player(no)) else "?"} for no in nos]

    return {"wins": d.wins, "cards": d.cards, "drawn": named(d.drawn), "left": named(d.left)}


def next_step(t: Tournament, block: str) -> dict[str, Any]:
    """What the block does next: pair round n, wait for round n's results, pair the final,
    or nothing (done)."""
    rounds = t.rounds_of(block)
    prelims = [r for r in rounds if not r.final]
    last = rounds[-1] if rounds else None
    if last is not None and not complete(t, last):
        return {"step": "results", "round": last.number, "final": last.final}
    if any(r.final for r in rounds):
        return {"step": "done", "round": None, "final": True}
    if len(prelims) < t.settings.rounds:
        return {"step": "pair", "round": len(prelims) + 1, "final": False}
    if t.settings.finalists == 1:  # no final: the preliminaries decided the block
        return {"step": "done", "round": None, "final": False}
    return {"step": "final", "round": t.final_round, "final": True}


def next_mats(t: Tournament, block: str) -> dict[str, Any] | None:
    """Rule 18's move: where each player of the block plays the latest paired round."""
    rounds = t.rounds_of(block)
    if not rounds:
        return None
    r = rounds[-1]
    seats = []
    for m in r.matches:
        for no in m.players:
            p = t.player(no)
            seats.append({"no": no, "name": p.name if p else "?",
                          "furigana": p.furigana if p else "", "mat": m.mat})
    seats.sort(key=lambda s: (s["furigana"] or s["name"], s["no"]))
    return {"round": r.number, "final": r.final, "colour": r.colour, "seats": seats}


def desk_view(t: Tournament) -> dict[str, Any]:
    lots = lottery(t.lottery_seed, t.players)
    mats = mats_of(t)
    every = block_mats(t)
    return {
        "id": t.id, "name": t.name, "day": t.day, "version": t.version,
        "created_at": t.created_at,
        "settings": {"rounds": t.settings.rounds, "cards": t.settings.cards,
                     "finalists": t.settings.finalists,
                     "publish_details": t.settings.publish_details},
        "public_link": t.public_link,
        "draw": {"seed": t.draw_seed, "method": t.draw_method.value if t.draw_method else None},
        "lottery_seed": t.lottery_seed,
        "players": [{"no": p.no, "name": p.name, "furigana": p.furigana, "club": p.club,
                     "grade": p.grade, "block": p.block, "joined_round": p.joined_round,
                     "withdrawn_round": p.withdrawn_round, "lottery": lots[p.no]}
                    for p in t.players],
        "blocks": [{"name": b.name, "channel": b.channel, "colours": list(b.colours),
                    "first_mat": b.first_mat, "mats": list(mats[b.name]),
                    "all_mats": list(every[b.name]),
                    "players": sum(1 for p in t.players_of(b.name)
                                   if p.withdrawn_round is None),
                    "next": next_step(t, b.name),
                    "final_lottery": final_lottery_view(t, b.name)} for b in t.blocks],
        "rounds": [round_view(t, r) for r in t.rounds],
        "standings": {b.name: standings_view(t, b.name) for b in t.blocks},
        "referees": [{"referee": x.referee, "name": x.name, "channel": x.channel,
                      "mats": list(x.mats)} for x in t.referees],
        "flags": [_flag(f) for f in flags(t)],
        "changes": len(t.history),
    }


def public_view(t: Tournament) -> dict[str, Any]:
    blocks = []
    for b in t.blocks:
        rounds = t.rounds_of(b.name)
        blocks.append({
            "name": b.name, "colour": b.colour(max(1, len(rounds))),
            "standings": standings_view(t, b.name, public=True),
            "round": round_view(t, rounds[-1], public=True) if rounds else None,
            "next_mats": next_mats(t, b.name),
            "final_lottery": final_lottery_view(t, b.name),
        })
    return {"id": t.id, "name": t.name, "day": t.day, "version": t.version,
            "settings": {"rounds": t.settings.rounds, "cards": t.settings.cards,
                         "finalists": t.settings.finalists,
                         "publish_details": t.settings.publish_details},
            "lottery_seed": t.lottery_seed, "blocks": blocks}


def history_view(t: Tournament) -> list[dict[str, Any]]:
    """Every entry and correction of a result, and each confirmation by the desk (the result
    confirmed, `confirmed: true`), in the order they happened."""
    return [{"round": c.round, "mat": c.mat, "before": _result(c.before),
             "after": _result(c.after), "by": c.by, "at": c.at, "confirmed": c.confirmed}
            for c in t.history]
