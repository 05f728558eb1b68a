"""The results of a round's matches: recorded by a referee or the desk, then confirmed."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import replace

from ..checks import complete, round_flags
from ..errors import Conflict, Forbidden, Invalid
from ..model import (
    Confirmed,
    Match,
    ReadingStatus,
    RefereeMats,
    Result,
    ResultChange,
    Round,
    Tournament,
)
from .changes import ResultRecorded, RoundConfirmed
from .rounds import check_current, locate, round_at


def _check_read(t: Tournament, r: Round, m: Match, referee: bool) -> None:
    """A result is entered once the round is read: its channel match was started (a start not
    yet confirmed by the channel is not). A block with no reader in this hall is read by a
    person: the desk enters its results when it likes. The desk may always correct a result
    it has."""
    if r.reading is not None and r.reading.status is ReadingStatus.STARTED:
        return
    if not referee:
        b = t.block(r.block)
        if m.result is not None or (r.reading is None and b is not None and b.channel is None):
            return
    raise Conflict(f"round {r.number} of block {r.block} has not been read yet: its results "
                   "are entered once its reading has started",
                   "start the round's reading at the desk first", code="round_not_read")


def _check_mine(t: Tournament, mat: int, referee: str) -> RefereeMats:
    mine = next((x for x in t.referees if x.referee == referee), None)
    if mine is None or mat not in mine.mats:
        raise Forbidden(f"mat {mat} is not one of this referee's mats "
                        f"({', '.join(map(str, mine.mats)) if mine else 'none assigned'})",
                        "ask the desk to assign the mat")
    return mine


def _check_referee(t: Tournament, r: Round, mat: int, referee: str | None) -> None:
    """A referee (`referee` = its id; None: the desk) acts only at its own mats, on the match
    its own channel read, and only until the block's next round is paired or the desk
    confirms the round."""
    if referee is None:
        return
    mine = _check_mine(t, mat, referee)
    number = r.number
    if r.reading is not None and r.reading.channel != mine.channel:
        # the mats moved since the referee was given them: this match is another
        # channel's, and its referees enter it
        raise Forbidden(f"mat {mat} of round {number} is read on channel "
                        f"{r.reading.channel}, but this referee joined channel "
                        f"{mine.channel}", "ask the desk to assign the mat again",
                        code="mat_not_on_channel")
    if r.confirmed is not None:
        raise Conflict(f"round {number} of block {r.block}'s results were confirmed by the "
                       "desk: only the desk can correct them now", "ask the desk",
                       code="result_locked")
    if any(x.number > number for x in t.rounds_of(r.block)):
        raise Conflict(f"round {number + 1} of block {r.block} is paired: this result can "
                       "only be corrected at the desk", "ask the desk", code="result_locked")


def record_result(t: Tournament, number: int, mat: int, cards: Mapping[int, int],
                  tiebreak: int | None, by: str, at: str, *, referee: str | None = None
                  ) -> ResultRecorded | None:
    """Enter (or correct) a match's result: the cards each player took, and for a final's tie
    who took the extra card. The round must have been read. The cards taken add up to at most
    the cards read (cards may stay on the 場 at the end; a 3-player match shares the same
    cards three ways). A referee (`referee` = its id) may only enter results at its mats, for
    the match its own channel read, and only until the block's next round is paired or the
    desk confirms the round; the operator may correct any. The same result again changes
    nothing (None)."""
    r, m = locate(t, number, mat)
    if referee is not None:
        _check_mine(t, mat, referee)
    _check_read(t, r, m, referee is not None)
    check_current(t, r)
    _check_referee(t, r, mat, referee)
    if set(cards) != set(m.players):
        names = ", ".join(f"no. {p}" for p in m.players)
        raise Invalid(f"mat {mat} is played by {names}: give the cards of each of them", "")
    read = t.settings.cards + r.extra_cards
    for p, c in cards.items():
        if not 0 <= c <= read:
            raise Invalid(f"no. {p} took {c} cards, but {read} were read", "count again",
                          code="cards_over_read")
    total = sum(cards.values())
    if total > read:
        raise Invalid(f"the cards taken add up to {total}, but {read} were read",
                      "count again: the players of a match take at most the cards read",
                      code="cards_over_read")
    values = tuple(cards[p] for p in m.players)
    if tiebreak is not None:
        if not r.final or len(set(values)) != 1:
            raise Invalid("who took the extra card is entered only for a tied final", "")
        if tiebreak not in m.players:
            raise Invalid(f"no. {tiebreak} does not play at mat {mat}", "")
    result = Result(values, tiebreak, by, at)
    before = m.result
    if before is not None and (before.cards, before.tiebreak) == (values, tiebreak):
        return None
    return ResultRecorded(r.block, number, mat, result,
                          ResultChange(number, mat, before, result, by, at))


def confirm_by_players(t: Tournament, number: int, mat: int, cards: Mapping[int, int],
                       tiebreak: int | None, by: str, at: str, *, referee: str | None = None
                       ) -> ResultRecorded | None:
    """The match's players confirm its result on the referee's phone (or at the desk): the
    result as they were shown it (`cards`, `tiebreak`), which must be the one entered, else
    it was changed meanwhile and they look again. Kept in the history like an entry; a later
    correction is a new result the players have not confirmed (the history keeps the one they
    did). The same checks as entering a result (the referee's mat, until locked). Confirming
    again changes nothing (None)."""
    r, m = locate(t, number, mat)
    _check_referee(t, r, mat, referee)
    if m.result is None:
        raise Conflict(f"mat {mat} of round {number} has no result to confirm",
                       "enter the result first", code="no_result")
    shown = tuple(cards.get(p, -1) for p in m.players)
    if set(cards) != set(m.players) or (shown, tiebreak) != (m.result.cards, m.result.tiebreak):
        raise Conflict(f"the result at mat {mat} is now {'-'.join(map(str, m.result.cards))}: "
                       "it changed since the players were shown it",
                       "show the players the result again", code="result_changed",
                       params={"why": "result_changed", "mat": mat})
    if m.result.players_at:
        return None
    result = replace(m.result, players_at=at)
    return ResultRecorded(r.block, number, mat, result,
                          ResultChange(number, mat, m.result, result, by, at))


def walkover(t: Tournament, number: int, mat: int, absent: int, cards: int, by: str, at: str
             ) -> ResultRecorded | None:
    """不戦勝: `absent` did not come to a 2-player match: the opponent takes `cards` (at most
    the cards read), the absent player 0. Entered by the desk like any result (the same checks:
    the round read, the pairing current), and corrected like one."""
    r, m = locate(t, number, mat)
    if absent not in m.players:
        raise Invalid(f"no. {absent} does not play at mat {mat}", "",
                      code="not_at_mat")
    if len(m.players) != 2:
        raise Conflict(f"mat {mat} is a 3-player match: the two others play it",
                       "enter their cards and 0 for the absent player",
                       params={"why": "walkover_of_three", "mat": mat})
    read = t.settings.cards + r.extra_cards
    won = min(cards, read)
    return record_result(t, number, mat, {p: 0 if p == absent else won for p in m.players},
                         None, by, at)


def confirm_round(t: Tournament, block: str, number: int, by: str, at: str
                  ) -> RoundConfirmed | None:
    """The desk confirms (確定) a complete round's results, a final's above all (no next round
    locks it): from then on a referee cannot change them, the desk still can (each change
    kept in the history, after the confirmation). Confirming again changes nothing (None)."""
    r = round_at(t, block, number)
    if r.confirmed is not None:
        return None
    if not complete(t, r):
        errors = [f.detail for f in round_flags(t, r) if f.level == "error"]
        raise Conflict(f"round {number} of block {block} is not complete: "
                       + "; ".join(errors[:5]), "enter or correct the results first")
    return RoundConfirmed(block, number, Confirmed(by, at), tuple(
        ResultChange(number, m.mat, m.result, m.result, by, at, confirmed=True)
        for m in r.matches if m.result is not None))
