"""The WebSocket protocol of a channel (`/ws/channels/{ch}`), as models: what the server sends
and what a client may send. `/api/ws-protocol.json` serves it as a JSON Schema document; the
tests check real sessions against these models."""

from __future__ import annotations

from typing import Annotated, Any, Literal

from pydantic import BaseModel, ConfigDict, Field, TypeAdapter

from api.models import ChannelState, PressFields, RefereeId


class _Message(BaseModel):
    model_config = ConfigDict(extra="forbid")


class Hello(_Message):
    """First message after the connection opens: who this connection is."""

    type: Literal["hello"]
    role: Literal["viewer", "referee", "operator"]
    referee: str | None = Field(description="the referee's id (a referee's token)")
    channel: str
    peers: list[str] | None = Field(None, description=(
        "one of a cluster's processes: the live processes' addresses (cluster.advertise), "
        "this one first; a page opened at one of them reconnects to the next when its own "
        "dies. Absent on one machine"))
    press_max_age_s: float | None = Field(None, description=(
        "a referee's (and the operator's): a hold that reaches the server older than this "
        "is refused (press_stale); a page that has no answer by then may say so"))


class State(ChannelState):
    """The channel's full state (as `GET /api/channels/{ch}`), on connect and after every
    change; `seq` rises with every state (a new connection may start lower: after `hello`,
    take the next state whatever its number)."""

    type: Literal["state"]


class Pong(_Message):
    """The answer to a ping, with the channel's latest `seq` and `s`, the channel's match
    clock (the states' `at_s`): a referee page estimates the server's clock from the pongs
    with the shortest round trip, and times its presses on it (`at_s`)."""

    type: Literal["pong"]
    seq: int
    s: float | None = None


class Error(_Message):
    """A message that could not be applied (only the sender is told)."""

    type: Literal["error"]
    error: Literal["too_large", "bad_message", "forbidden", "illegal_move", "press_stale",
                   "press_superseded"] | str
    detail: str
    move: int | None = Field(None, description=(
        "press_stale, press_superseded: the move of the press this answers"))
    last: int | None = Field(None, description=(
        "press_superseded: the referee's latest move the server took (a page whose counter "
        "is behind it moves past it)"))
    reason: str | None = Field(None, description='press_stale: "stale" (pressed too long '
                               'ago) or "moved_on" (the card or verse is no longer read)')


class _ClientMessage(BaseModel):
    # strict: `true` is not a number, and nothing unknown is taken
    model_config = ConfigDict(extra="forbid", strict=True)


class HoldMessage(PressFields):
    """Raise the sender's hand (a referee of this channel its own; the operator `referee`'s,
    default @operator). The same rule as PUT .../holds/{referee}, with the same optional
    press fields (`move`, `card`, `verse`, `at_s`): a refused hold is answered with an
    `error` `press_stale`, an older move than one taken with `press_superseded`."""

    type: Literal["hold"]
    referee: RefereeId | None = None


class ReleaseMessage(PressFields):
    """Lower the sender's hand (the same rule; never refused for its age)."""

    type: Literal["release"]
    referee: RefereeId | None = None


class Ping(_ClientMessage):
    """Keep-alive (a phone should ping every ~10 s and reconnect after ~25 s of silence; a
    referee page pings every 0.5 s while shown, and calls its link lost after 2 s)."""

    type: Literal["ping"]


class Sync(_ClientMessage):
    """A clock probe (speaker pages): answered at once with the same `id` and `c` and `s`,
    the timeline's time."""

    type: Literal["sync"]
    id: int | float | None = Field(None, allow_inf_nan=False)
    c: float | None = Field(None, allow_inf_nan=False)


Count = Annotated[int, Field(ge=0, le=10_000_000, strict=True)]
Ms = Annotated[float, Field(ge=0, le=100_000, allow_inf_nan=False)]


class Report(_ClientMessage):
    """A speaker page's report of itself (every few seconds; speaker pages only): its counters
    since it loaded, shown on the operator's console (hall.states.SpeakerHealth)."""

    type: Literal["report"]
    placed: Count
    late: Count
    missed: Count
    resyncs: Count
    epochs: Count
    steps: Count
    rtt_ms: Ms | None = None
    latency_ms: Ms | None = None
    # the page's own id, kept by its tab: a page that reconnects keeps its number
    page: Annotated[str, Field(pattern=r"^[A-Za-z0-9_-]{1,32}$")] | None = None


ServerMessage = Annotated[Hello | State | Pong | Error, Field(discriminator="type")]
ClientMessage = Annotated[HoldMessage | ReleaseMessage | Ping | Sync | Report,
                          Field(discriminator="type")]
SERVER = TypeAdapter(ServerMessage)
CLIENT = TypeAdapter(ClientMessage)


def protocol_schema() -> dict[str, Any]:
    """A JSON Schema document with both directions."""
    return {
        "$schema": "https://json-schema.org/draft/2020-12/schema",
        "title": "yomite channel WebSocket (/ws/channels/{ch})",
        "description": (
            "Connect to /ws/channels/{ch} (a referee or the operator adds ?token=...; a "
            "browser must come from the server's own origin). Every message is one JSON "
            "object with a `type`. The server sends `hello`, then `state` at once and after "
            "every change; a client sends `hold`, `release`, `ping` or `sync`, a speaker page "
            "also `report` (at most 4096 "
            "bytes; a referee's or viewer's socket at most 50 a second, bursts of 200)."),
        "server_to_client": SERVER.json_schema(ref_template="#/server_to_client/$defs/{model}"),
        "client_to_server": CLIENT.json_schema(ref_template="#/client_to_server/$defs/{model}"),
    }
