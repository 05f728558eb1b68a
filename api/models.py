"""Request bodies and WebSocket messages: strict (an unknown field is a 422 naming it, and no
value is coerced: `true` is not a number, `"3"` is not a card count) and every text checked
where it enters (NFKC, no control or format characters: see reader.text)."""

from __future__ import annotations

from typing import Annotated, Any, Literal

from pydantic import AfterValidator, BaseModel, ConfigDict, Field

from hall.presses import Press
from reader.deck import SEED_MAX
from reader.programme import Phase
from reader.text import clean_text


class Strict(BaseModel):
    model_config = ConfigDict(extra="forbid", strict=True)


def _name(v: str) -> str:
    out = clean_text(v, "the name")
    if not out:
        raise ValueError("the name is empty")
    return out


def _line(v: str) -> str:
    return clean_text(v, "the text")


# what a referee calls itself ("mat 3", 三番): shown on every page and written to the logs
Name = Annotated[str, Field(min_length=1, max_length=40), AfterValidator(_name)]
Line = Annotated[str, Field(max_length=200), AfterValidator(_line)]
# a hand's id: a referee's ("r" and 8 hex digits), yomite's own ("@operator"...), or one the
# operator names; who may move which is api.routes.holds.hold_target's rule, for REST and
# WebSocket alike
REFEREE_ID = r"^@?[A-Za-z0-9_-]{1,40}$"
RefereeId = Annotated[str, Field(pattern=REFEREE_ID)]


class MatchRequest(Strict):
    colors: list[Annotated[str, Field(max_length=16)]] = Field(default=[], max_length=5)
    poems: list[Annotated[int, Field(ge=1, le=100)]] = Field(default=[], max_length=100)
    seed: int | None = Field(default=None, ge=0, le=SEED_MAX)
    preset: str | None = Field(default=None, max_length=32,
                               description="a preset's id (GET /api/presets); the overrides "
                                           "below go on top of it")
    overrides: dict[str, Any] = Field(default={}, description="keys of config.yaml's `match`")
    voice: dict[str, Any] = Field(default={}, max_length=4,
                                  description="the voice's speed, pitch and phrase_pause_s; "
                                              "recorded: true reads from the recording page's "
                                              "pack")


class VolumeRequest(Strict):
    volume_db: float = Field(ge=-60, le=0, description="0 is the clips' own loudness")


class ProjectorRequest(Strict):
    torifuda: Literal["panel", "full"] = Field(
        "panel", description='the card just read: "panel" beside its poem, or "full": its '
        "torifuda over the whole screen until the next card's upper verse begins")
    left: bool = Field(False, description="the cards still on the mats, by colour, with their "
                       "kimariji (the public state then carries `kimariji.left`)")


class JoinRequest(Strict):
    pin: str = Field(pattern=r"^[0-9]{6,12}$")
    name: Name


class PressFields(Strict):
    """What a referee's page says of a press (hall.presses), each optional: its move, the
    card and verse the phone showed, and the press's time on the server's clock."""

    move: Annotated[int, Field(ge=0, le=2**53, description=(
        "the referee's move number: rises with every press of this referee (a page uses "
        "milliseconds since 1970 or more); a move is applied once, never after a newer one"))
    ] | None = None
    card: Annotated[int, Field(ge=0, le=1000, description=(
        "the card the phone showed (the match's `card`; 0: the jokā)"))] | None = None
    verse: Literal["kami", "shimo"] | None = Field(None, description=(
        "the verse the phone showed last on that card (none: the card only)"))
    at_s: Annotated[float, Field(ge=-1e12, le=1e12, allow_inf_nan=False, description=(
        "when the press was made, on the server's match clock as the page estimates it "
        "(a pong's `s`): a hold older than server.referees.press_max_age_s is refused"))
    ] | None = None

    def press(self) -> Press:
        return Press(self.move, self.card, self.verse, self.at_s)


class HoldRequest(PressFields):
    name: Annotated[str, Field(max_length=40), AfterValidator(_line)] = ""


class ReleaseRequest(PressFields):
    pass


class AbortRequest(Strict):
    reason: Line = ""


# ---------------------------------------------------------------------------- responses
# What the API answers, typed for the OpenAPI schema (and a generated client). They allow
# extra keys: a newer server may say more, and an older client is not broken by it.
class Open(BaseModel):
    model_config = ConfigDict(extra="allow")


class ErrorBody(Open):
    """Every error: what went wrong and what to do (`error` is a stable code)."""

    error: str = Field(description="a stable code, e.g. wrong_pin, illegal_move")
    detail: str = Field(description="what was wrong (English)")
    hint: str = Field("", description="what to do")
    params: dict[str, int | str] | None = Field(
        None, description="the figures of the error, for a page's own words "
                          "(too_many_cards: cards, poems; csv_bad_line: line, column, reason)")


class HoldState(Open):
    referee: str = Field(description="the referee's id; @audio, @recovered, @journal, @fault, "
                         "@operator are yomite's own")
    name: str
    since_s: float


class CardState(Open):
    n: int
    poem: int | None = Field(description="null for non-operators until the lower verse is read")
    started_s: float
    finished_s: float | None


class SegmentState(Open):
    index: int
    kind: str = Field(description="call, memorise, prelude, verse or gap")
    label: str = Field(description="e.g. bow_call, memorise_call, card_kami, end_call, move_call")
    card: int | None
    poem: int | None
    verse: str | None
    reading: int
    started_s: float
    ends_s: float | None = Field(description="null to all but the operator during a card's "
                                 "verse (its length would name the poem)")


class CutState(Open):
    segment: int
    label: str
    card: int | None
    poem: int | None
    verse: str | None
    offset_s: float
    at_s: float


class MatchState(Open):
    """The match: phase, where the programme is, the hands up, the cards read."""

    seq: int
    at_s: float = Field(description="the match clock (the audio device's), seconds")
    phase: Phase = Field(description="where the match is in the rules' order")
    paused: bool
    resumes_at_s: float | None
    holds: list[HoldState]
    card: int
    cards_total: int
    cards_planned: int
    unread_left: int
    segment: SegmentState | None
    countdown_s: float | None
    cut: CutState | None
    cards: list[CardState]
    seed: int | None = Field(description="the operator's always; everyone else's once the "
                             "match is over (finished, closed or aborted)")
    colors: list[str]
    policy: str
    lead_in_s: float
    timings: dict[str, Any]
    reason: str
    bowed: bool
    calls: dict[str, str | None] = Field(
        description="each call's text, and the jokā's verses' (prelude_kami, prelude_shimo), "
        "by their segments' labels; null: disabled")


class RefereeState(Open):
    id: str
    name: str
    connected: bool
    holding: bool


class ChannelState(Open):
    """A channel as the asker may see it: operators also get `pin`; others never see a poem
    before its lower verse has been read."""

    channel: str
    seq: int
    audio: str = Field(description='"ok", "no_device" or "fault: ..."')
    journal: str = Field("ok", description='"ok" or "fault: ..." (the reading is paused by '
                         "@journal until the journal can be written)")
    fault: str | None = Field(None, description="the last unforeseen failure (paused by "
                              "@fault), null after a new match")
    no_device: str | None = None
    recovered: dict[str, Any] | None = None
    match: MatchState | None
    output: str | None = None
    output_info: dict[str, Any] | None = Field(
        None, description='operators: the output as a code and its figures ("device", '
        '"browser", "null", "no_device" with `why`), which the console words in its language')
    referees: list[RefereeState] = []
    pin: str | None = None
    projector: dict[str, Any] | None = Field(
        None, description="what the projector shows (PUT …/projector): torifuda, left")
    broker: bool | None = Field(
        None, description="a cluster's process: whether it reaches the cluster's broker now "
        "(false: what it shows may be old, and commands through it are refused with "
        "`not_sent`); null on one machine")


class PressAnswer(Open):
    move: int | None
    outcome: str = Field(description='"applied", "repeated" (this move was applied before: '
                         'nothing more) or "superseded" (a newer move was taken: ignored)')
    last: int | None = Field(description="the referee's latest move the server took")


class HandState(ChannelState):
    """The channel's state after a hand's press, and what was done with a press that carried
    a `move` (hall.presses)."""

    press: PressAnswer | None = None


class MatchLog(Open):
    """A match's journal (header and records) and its timeline."""

    header: dict[str, Any]
    records: list[dict[str, Any]]
    timeline: list[dict[str, Any]]
    journal: str | None


class HistoryEntry(Open):
    id: str
    current: bool
    version: int | None = None
    prepared_at: str | None = None
    started_at: str | None = None
    seed: int | None = None
    colors: list[str] = []
    cards: int | None = None
    cards_read: int = 0
    phase: str | None = None
    records: int = 0
    error: str | None = None


class JoinAnswer(Open):
    referee: str
    name: str
    channel: str
    token: str = Field(description="the referee's bearer token (keep it: it is the identity)")


class JoinBase(Open):
    base: str
    source: str
    loopback: bool
    join_url: str


class PinAnswer(Open):
    pin: str
    join_url: str
    bases: list[JoinBase]
    projector_key: str | None = Field(None, description="the key of the channel's projector "
                                      "link (`/display/{ch}#key=…`): a room's projector needs "
                                      "it, and is then counted apart from the room's viewers")


class SpeakerBase(Open):
    base: str
    url: str


class SpeakerLinkAnswer(Open):
    channel: str
    url: str = Field(description="the speaker link at the first address: its fragment holds "
                     "the channel's speaker key (keep it like a token)")
    bases: list[SpeakerBase]
    mode: str = Field(description="the channel's output: device, browser or both")
    connected: int = Field(description="speaker pages connected now")


ERRORS: dict[int | str, dict[str, Any]] = {
    code: {"model": ErrorBody, "description": what}
    for code, what in ((401, "no token, or an unknown one"), (403, "a role that may not"),
                       (404, "an unknown channel, poem or match"),
                       (409, "an illegal move (the detail names the phase)"),
                       (413, "a body over server.limits.body_bytes"),
                       (421, "a Host that is not this server's"),
                       (422, "a bad body, deck or setting"), (429, "PIN guessing"),
                       (431, "headers over server.limits"),
                       (503, "the audio output is still down, the journal cannot be written, "
                        "or the channel paused on an unforeseen failure"))
}


class ClusterAnswer(BaseModel):
    """`GET /api/cluster`: one process of a cluster's view of it."""

    node: str = Field(description="this process (host-pid-random, for this run)")
    nodes: list[str] = Field(description="the live processes")
    owners: dict[str, str | None] = Field(
        description="each channel's owner; null while it is being taken over")
    owned: list[str] = Field(description="the channels this process reads")
    broker: bool = Field(description="whether this process reaches the broker now (a round "
                         "trip answered within the last 1.5 s)")
    fresh: bool = Field(True, description="false: the broker did not answer within 0.5 s, and "
                        "`nodes` and `owners` are what this process knew `as_of_s` ago")
    as_of_s: float = Field(0.0, description="how old `nodes` and `owners` are, in seconds")
