"""What the desk's routes answer: the desk's and the public views of a tournament (built in
desk/views.py), a round, a mat's result, the backup document; typed for the OpenAPI schema at
their top level, extra keys allowed (a newer server may say more)."""

from __future__ import annotations

from typing import Any

from pydantic import Field

from api.models import Open


class Settings(Open):
    rounds: int
    cards: int
    finalists: int = Field(2, description="2: a final between each block's top two; 1: no "
                                          "final, the first after the preliminaries wins")
    publish_details: bool = Field(False, description=(
        "the players' clubs (schools) and grades are shown to anyone but the desk: the "
        "public view, the standings page and the printed pages (default off)"))


class PresetAnswer(Open):
    """Regional rules: the settings a new tournament gets and how its blocks are drawn."""

    id: str
    rounds: int
    finalists: int
    method: str
    block_size: int | None


class PrintPass(Open):
    seconds: int = Field(description="how long this browser may open the desk's printed pages")


class TournamentSummary(Open):
    id: str
    name: str
    day: str
    players: int
    version: int


class DeskView(Open):
    """The desk's whole view of a tournament (the desk page's)."""

    id: str
    name: str
    day: str
    version: int
    created_at: str
    settings: Settings
    public_link: str | None = Field(None, description=(
        "the key of the tournament's public link (/standings/{t}?view=KEY); null: none, only "
        "the desk sees the tournament"))
    draw: dict[str, Any] = Field(description="seed and method of the blocks' draw")
    lottery_seed: int | None
    players: list[dict[str, Any]]
    blocks: list[dict[str, Any]]
    rounds: list[dict[str, Any]] = Field(description="each a round view (GET .../rounds/{n})")
    standings: dict[str, list[dict[str, Any]]] = Field(description="by block")
    referees: list[dict[str, Any]]
    flags: list[dict[str, Any]] = Field(description="what the desk should look at")
    changes: int = Field(description="results entered or corrected so far")


class PublicView(Open):
    """Standings, current pairings and next mats (the standings page's)."""

    id: str
    name: str
    day: str
    version: int
    settings: Settings
    lottery_seed: int | None
    blocks: list[dict[str, Any]] = Field(description="name, colour, standings, round, "
                                         "next_mats, final_lottery of each block")


class RoundView(Open):
    """A block's round; the desk's adds paired_at, notes, started, reading, flags and
    confirmed_by."""

    block: str
    number: int
    final: bool
    colour: str
    matches: list[dict[str, Any]]
    results: int
    complete: bool
    cards_read: int
    confirmed: bool


class AssignedMats(Open):
    tournament: str
    name: str
    version: int
    mats: list[int]
    matches: list[dict[str, Any]] = Field(description="the current match at each mat")


class Deleted(Open):
    deleted: str


class ResultChange(Open):
    round: int
    mat: int
    before: dict[str, Any] | None
    after: dict[str, Any] | None
    by: str
    at: str
    confirmed: bool


class EntriesAdded(Open):
    added: list[int] = Field(description="the new players' numbers")
    warnings: list[str] | None = Field(None, description="a name entered twice (CSV only)")
    notices: list[dict[str, Any]] | None = Field(
        None, description="the warnings as code, detail and params (CSV only; the pages "
        "show w_<code> in their language): csv_duplicate (name, club, times, lines), "
        "csv_unknown_column (column)")
    tournament: DeskView


class RefereesView(Open):
    assigned: list[dict[str, Any]]
    channels: dict[str, list[dict[str, Any]]] = Field(description="the referees of each "
                                                      "block's channel")


class RoundStarted(Open):
    started: list[dict[str, Any]]
    tournament: DeskView


class RoundClosed(Open):
    closed: list[str]
    tournament: DeskView


class RoundMemorising(Open):
    memorising: list[str] = Field(description="the channels told to read 札を覚えてください")
    tournament: DeskView


class MatResult(Open):
    """A mat's match after a result: the match as in the round's view, with its round."""

    mat: int
    players: list[dict[str, Any]]
    result: dict[str, Any] | None
    outcome: list[str] | None
    referee: dict[str, Any] | None = Field(None, description="the mat's referee, if assigned")
    round: int
    block: str
    final: bool
    version: int
    cards_read: int
    extra_card: str | None = Field(description='"reading" when a tied final reads one more '
                                   "card")
    flags: list[dict[str, Any]]


class TournamentDocument(Open):
    """The whole tournament as one JSON document (POST /import takes it back)."""

    format: str
    version: int
    tournament: dict[str, Any]
    players: list[dict[str, Any]]
    blocks: list[dict[str, Any]]
    rounds: list[dict[str, Any]]
    referees: list[dict[str, Any]]
    history: list[dict[str, Any]]
