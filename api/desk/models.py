"""The desk's request bodies (strict: an unknown field is a 422 naming it), with the limits of
every text and list."""

from __future__ import annotations

from typing import Annotated, Literal

from pydantic import BaseModel, ConfigDict, Field

Name = Annotated[str, Field(min_length=1, max_length=40)]
Text60 = Annotated[str, Field(max_length=60)]
BlockName = Annotated[str, Field(pattern=r"^[A-Z0-9]{1,4}$")]
Colour = Literal["blue", "pink", "yellow", "green", "orange"]
Channel = Annotated[str, Field(pattern=r"^[a-z0-9][a-z0-9_-]{0,31}$")]


class Strict(BaseModel):
    model_config = ConfigDict(extra="forbid")


class NewTournament(Strict):
    id: str | None = Field(default=None, pattern=r"^[a-z0-9][a-z0-9-]{0,39}$",
                           description="lower-case letters, digits and dashes; generated if "
                                       "not given")
    name: str = Field(min_length=1, max_length=100)
    day: str = Field(default="", max_length=40)
    rounds: int | None = Field(default=None, ge=1, le=20,
                               description="preliminary rounds (default desk.rounds)")
    cards: int | None = Field(default=None, ge=1, le=100,
                              description="cards read a match (default match.cards)")
    preset: Literal["standard", "eight_rounds", "grade_fours", "no_final"] | None = Field(
        default=None, description="regional rules (GET /api/tournaments/presets): fill rounds "
                                  "and finalists where not given")
    finalists: Literal[1, 2] | None = Field(
        default=None, description="2: the final between each block's top two (default); "
                                  "1: no final, the block's first after the preliminaries wins")


class TournamentPatch(Strict):
    name: str | None = Field(default=None, min_length=1, max_length=100)
    day: str | None = Field(default=None, max_length=40)
    rounds: int | None = Field(default=None, ge=1, le=20)
    cards: int | None = Field(default=None, ge=1, le=100)
    finalists: Literal[1, 2] | None = None
    publish_details: bool | None = Field(
        default=None, description="show the players' clubs (schools) and grades to anyone but "
                                  "the desk: the public view and pages, the printed pages")


class EntryIn(Strict):
    name: Name
    furigana: Text60 = ""
    club: Text60 = ""
    grade: Annotated[str, Field(max_length=20)] = ""
    block: BlockName | None = None


class Entries(Strict):
    players: list[EntryIn] = Field(min_length=1, max_length=2000)
    late: bool = Field(default=False, description="a late entry, after the blocks are drawn")


class PlayerPatch(Strict):
    name: Name | None = None
    furigana: Text60 | None = None
    club: Text60 | None = None
    grade: Annotated[str, Field(max_length=20)] | None = None
    block: BlockName | None = None
    withdrawn: bool | None = None


class Draw(Strict):
    blocks: int | None = Field(default=None, ge=1, le=26,
                               description="how many blocks (or give block_size)")
    block_size: int | None = Field(default=None, ge=2, le=200,
                                   description="blocks of about this many players (by grade: "
                                               "each grade's own blocks)")
    method: Literal["random", "clubs", "grades", "grades_clubs"] = "random"
    seed: int | None = Field(default=None, ge=0, le=999_999_999)
    channels: list[Channel] | None = Field(default=None, max_length=26,
                                           description="default: the hall's channels in turn")


class BlockPatch(Strict):
    channel: Channel | None = Field(default=None, description="the reader of this block")
    unassign_channel: bool = False
    colours: list[Colour] | None = Field(default=None, min_length=1, max_length=21,
                                         description="per round; the last goes on")
    first_mat: int | None = Field(default=None, ge=1, le=999)


class Blocks(Strict):
    blocks: list[BlockName] | None = Field(default=None, max_length=26,
                                           description="default: every block ready for it")


class StartRound(Strict):
    blocks: list[BlockName] | None = Field(default=None, max_length=26)
    again: bool = Field(default=False, description="read a started round anew")


class ExtraCardRequest(Strict):
    block: BlockName


class ResultIn(Strict):
    # the cards are whole numbers as JSON writes them: `true` or 7.0 is no count of cards
    # (the entry numbers are the object's keys, so text)
    cards: dict[Annotated[int, Field(ge=1, le=100000)],
                Annotated[int, Field(ge=0, le=100, strict=True)]] = \
        Field(min_length=2, max_length=3, description="entry number -> cards taken")
    tiebreak: int | None = Field(default=None, ge=1, le=100000, strict=True,
                                 description="a tied final: who took the extra card")


class PlayersConfirm(Strict):
    """The result as the players were shown it: confirmed only if it is still the one entered."""

    cards: dict[Annotated[int, Field(ge=1, le=100000)],
                Annotated[int, Field(ge=0, le=100, strict=True)]] = \
        Field(min_length=2, max_length=3, description="entry number -> cards taken")
    tiebreak: int | None = Field(default=None, ge=1, le=100000, strict=True)


class AbsentIn(Strict):
    player: int = Field(ge=1, le=100000, strict=True,
                        description="the entry number of the player who did not come")


class RefereeAssign(Strict):
    mats: list[Annotated[int, Field(ge=1, le=999)]] = Field(max_length=20)


class ImportRequest(Strict):
    document: dict[str, object]
    replace: bool = False
