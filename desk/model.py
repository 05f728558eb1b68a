"""The tournament as plain frozen data: players, blocks, rounds with their matches and results,
the referees' mats and every change of a result. `desk.tournament` changes it; the repository
stores it; nothing here does I/O."""

from __future__ import annotations

import re
from dataclasses import dataclass, field, replace
from enum import StrEnum
from typing import Any

COLOURS = ("blue", "pink", "yellow", "green", "orange")
PUBLIC_LINK = re.compile(r"[A-Za-z0-9_-]{16,64}")  # a public link's key


class Method(StrEnum):
    """How blocks are drawn."""

    RANDOM = "random"  # shuffled with the recorded seed, dealt in turn
    CLUBS = "clubs"  # each club's players spread over the blocks as evenly as they can be
    GRADES = "grades"  # players of one grade kept together, blocks filled grade by grade
    # each grade its own blocks, and within a grade each club's players spread over them (a
    # regional rule: "blocks of four of one grade from different schools")
    GRADES_CLUBS = "grades_clubs"


@dataclass(frozen=True, slots=True)
class Settings:
    rounds: int = 6  # preliminary matches for everyone (試合要領; rule 19 lets it change)
    cards: int = 17  # cards read in a match (rule 16)
    # who goes on from a block's preliminaries: 2, the final between the top two (the rules);
    # 1, no final: the first after the preliminaries wins the block (a regional rule)
    finalists: int = 2
    # the players' clubs (schools) and grades shown to anyone but the desk: the public view,
    # the standings page and every printed page. Off unless the organiser publishes them
    # (children's schools and grades are theirs to give)
    publish_details: bool = False


@dataclass(frozen=True, slots=True)
class Player:
    no: int  # entry number, 1.. in the tournament
    name: str
    furigana: str = ""
    club: str = ""
    grade: str = ""
    block: str | None = None
    joined_round: int = 1  # a late entry is paired from this round on
    withdrawn_round: int | None = None  # not paired from this round on
    # the block was given (the entries' block column, or set by hand): a draw keeps it there;
    # a block the draw gave is drawn anew by the next draw
    block_fixed: bool = False

    def active_in(self, round_no: int) -> bool:
        return self.joined_round <= round_no and (
            self.withdrawn_round is None or round_no < self.withdrawn_round)


@dataclass(frozen=True, slots=True)
class Block:
    name: str  # "A", "B", ...
    channel: str | None = None  # the reader (hall channel) that reads this block's matches
    colours: tuple[str, ...] = ("blue",)  # per round; the last one goes on for later rounds
    first_mat: int = 1

    def colour(self, round_no: int) -> str:
        return self.colours[min(round_no, len(self.colours)) - 1]


@dataclass(frozen=True, slots=True)
class Result:
    cards: tuple[int, ...]  # cards taken, seat by seat (the match's `players` order)
    tiebreak: int | None = None  # a final's tie: the entry number of who took the extra card
    by: str = ""  # who entered it: "operator" or "referee <id> <name>"
    at: str = ""  # when (UTC, ISO 8601)
    # when the match's players confirmed this result on the referee's phone ("" = not)
    players_at: str = ""

    def as_dict(self) -> dict[str, Any]:
        """As the views, the export and the history's rows write it."""
        return {"cards": list(self.cards), "tiebreak": self.tiebreak, "by": self.by,
                "at": self.at, "players_at": self.players_at}


@dataclass(frozen=True, slots=True)
class Match:
    mat: int
    players: tuple[int, ...]  # entry numbers: two, or three for a 3-player match
    result: Result | None = None


class ReadingStatus(StrEnum):
    STARTING = "starting"  # asked the channel to start (not yet confirmed)
    STARTED = "started"  # the channel's match was prepared and started


@dataclass(frozen=True, slots=True)
class Reading:
    """The channel match that reads a round of a block."""

    channel: str
    status: ReadingStatus
    requested_at: str
    seed: int | None = None
    journal: str | None = None  # the channel's journal file name (which match it is)
    extra_cards: int = 0  # extra cards asked for (a final's tie)


@dataclass(frozen=True, slots=True)
class Confirmed:
    """The desk's confirmation (確定) of a round's results: from then on only the desk changes
    them. A final has no next round to lock it otherwise."""

    by: str
    at: str


@dataclass(frozen=True, slots=True)
class Round:
    block: str
    number: int  # 1..settings.rounds, then settings.rounds + 1 for the final
    final: bool
    colour: str
    matches: tuple[Match, ...]
    paired_at: str = ""
    reading: Reading | None = None
    notes: tuple[str, ...] = ()  # what the pairing could not avoid (a rematch, a same-club pair)
    confirmed: Confirmed | None = None

    def match_at(self, mat: int) -> Match | None:
        return next((m for m in self.matches if m.mat == mat), None)

    @property
    def extra_cards(self) -> int:
        return 0 if self.reading is None else self.reading.extra_cards


@dataclass(frozen=True, slots=True)
class RefereeMats:
    referee: str  # the hall's referee id (joined a channel with its PIN)
    name: str
    channel: str
    mats: tuple[int, ...]


@dataclass(frozen=True, slots=True)
class ResultChange:
    """One entry or correction of a result, kept for good; or (`confirmed`) the desk's
    confirmation of the result as it stands (`before` and `after` are then the same)."""

    round: int
    mat: int
    before: Result | None
    after: Result
    by: str
    at: str
    confirmed: bool = False


@dataclass(frozen=True, slots=True)
class Tournament:
    id: str
    name: str
    day: str = ""  # the date, as the organisers write it
    settings: Settings = field(default_factory=Settings)
    created_at: str = ""
    draw_seed: int | None = None  # the block draw's seed (None until drawn)
    draw_method: Method | None = None
    lottery_seed: int = 0  # the third tie-break (抽選), drawn once at creation
    pairing_seed: int = 0
    players: tuple[Player, ...] = ()
    blocks: tuple[Block, ...] = ()
    rounds: tuple[Round, ...] = ()
    referees: tuple[RefereeMats, ...] = ()
    history: tuple[ResultChange, ...] = ()
    version: int = 0  # rises with every change (live pages wait on it)
    # the key of the tournament's public link (the standings page for players and parents,
    # its JSON, the printed pairings and standings), made and revoked by the desk; None: only
    # the desk sees the tournament
    public_link: str | None = None

    # ------------------------------------------------------------ look-ups
    def player(self, no: int) -> Player | None:
        # players are numbered 1.. in entry order: found at once (a view of 400 players asks
        # thousands of times), else looked for
        if 0 < no <= len(self.players) and self.players[no - 1].no == no:
            return self.players[no - 1]
        return next((p for p in self.players if p.no == no), None)

    def block(self, name: str) -> Block | None:
        return next((b for b in self.blocks if b.name == name), None)

    def rounds_of(self, block: str) -> list[Round]:
        return sorted((r for r in self.rounds if r.block == block), key=lambda r: r.number)

    def round_of(self, block: str, number: int) -> Round | None:
        return next((r for r in self.rounds if r.block == block and r.number == number), None)

    def players_of(self, block: str) -> list[Player]:
        return [p for p in self.players if p.block == block]

    def with_round(self, r: Round) -> Tournament:
        rest = tuple(x for x in self.rounds if (x.block, x.number) != (r.block, r.number))
        return replace(self, rounds=tuple(sorted((*rest, r), key=lambda x: (x.number, x.block))))

    @property
    def final_round(self) -> int:
        return self.settings.rounds + 1
