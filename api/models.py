"""Request bodies and WebSocket messages: strict (an unknown field is a 422 naming it, and no
value is coerced: `true` is not a number, `"3"` is not a card count) and every text checked
where it enters (NFKC, no control or format characters: see reader.text)."""

from __future__ import annotations

from typing import Annotated, Any, Literal

from pydantic import AfterValidator, BaseModel, ConfigDict, Field

from reader.deck import SEED_MAX
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
    overrides: dict[str, Any] = Field(default={})


class JoinRequest(Strict):
    pin: str = Field(pattern=r"^[0-9]{6,12}$")
    name: Name


class HoldRequest(Strict):
    name: Annotated[str, Field(max_length=40), AfterValidator(_line)] = ""


class AbortRequest(Strict):
    reason: Line = ""


# ---------------------------------------------------------------------- the WebSocket
class WsHold(Strict):
    """Raise a hand: a referee its own; the operator its own, or `referee`'s."""

    type: Literal["hold"]
    referee: RefereeId | None = None


class WsRelease(Strict):
    """Lower a hand (same rule as hold)."""

    type: Literal["release"]
    referee: RefereeId | None = None


class WsPing(Strict):
    """Answered by a pong with the channel's latest seq."""

    type: Literal["ping"]


WsMessage = Annotated[WsHold | WsRelease | WsPing, Field(discriminator="type")]
