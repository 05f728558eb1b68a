"""What the organisations' and rooms' routes take and answer (api/routes/orgs.py, rooms.py):
requests strict like api/models.py's, answers open (a newer server may say more)."""

from __future__ import annotations

from typing import Annotated

from pydantic import Field

from api.models import Name, Open, Strict

ORG_ID = r"^o-[a-z0-9]{8}$"
ROOM_NAME = r"^r-[a-z0-9]{8}$"

OrgName = Annotated[Name, Field(max_length=60)]
MaxOpen = Annotated[int, Field(ge=1, le=1000, description="rooms open at once")]
MaxClients = Annotated[int, Field(ge=2, le=10000, description="pages connected to a room")]


# ---------------------------------------------------------------------------- requests
class OrgRequest(Strict):
    name: OrgName = Field(description="as its operators see it (a school, a club)")
    max_open_rooms: MaxOpen | None = Field(None, description="null: rooms.max_open_per_org")
    max_clients_per_room: MaxClients | None = Field(
        None, description="null: rooms.max_clients_per_room")


class OrgPatch(Strict):
    name: OrgName | None = None
    max_open_rooms: MaxOpen | None = None
    max_clients_per_room: MaxClients | None = None


class RedeemRequest(Strict):
    code: str = Field(min_length=4, max_length=24,
                      description="the organisation's invite code (any case; spaces and "
                                  "hyphens are ignored)")
    name: Name = Field(description="the teacher's name, as the admin sees it")


class RoomRequest(Strict):
    org: str | None = Field(None, pattern=ORG_ID,
                            description="whose room: the admin names it; an organisation's "
                                        "operator opens its own (another is answered 404)")
    colors: list[Annotated[str, Field(max_length=16)]] | None = Field(
        None, min_length=1, max_length=5,
        description="the room's deck when a match names none (null: match.colors)")


# ---------------------------------------------------------------------------- answers
class OrgOperatorAnswer(Open):
    id: str
    name: str
    joined_at: str


class OrgAnswer(Open):
    id: str
    name: str
    code: str = Field(description="the invite code (the admin gives it to the teachers)")
    invite_url: str = Field(description="the start page with the code filled in")
    max_open_rooms: int
    max_clients_per_room: int
    created_at: str
    open_rooms: int
    operators: list[OrgOperatorAnswer]


class OrgRemoved(Open):
    removed: str
    rooms_closed: list[str]


class RedeemAnswer(Open):
    org: str
    org_name: str
    operator: str = Field(description="this operator's id")
    name: str
    token: str = Field(description="the bearer token that operates the organisation's rooms; "
                                   "kept by the page (never shown again)")


class RoomLinks(Open):
    console: str = Field(description="the operator console on this room (the organisation's "
                                     "token is needed there, kept by the browser)")
    projector: str = Field(description="the class's projector (its key admits it apart from "
                                       "the room's viewers)")
    viewer: str = Field(description="for anyone else who may watch the room (counted in "
                                    "max_clients_per_room); without a link the room is refused")
    speaker: str = Field(description="holds the room's speaker key: only for its speakers")
    referee: str = Field(description="the referees' join link, with the room's PIN")


class RoomQr(Open):
    console: str
    projector: str
    viewer: str
    speaker: str
    referee: str


class RoomAnswer(Open):
    room: str = Field(description="the room's channel name (its /api/channels/{ch})")
    org: str
    open: bool
    opened_at: str
    opened_by: str
    closed_at: str | None = None
    closed_why: str | None = Field(None, description="operator, idle, org_removed, failed")
    colors: list[str] | None = None
    clients: int | None = Field(None, description="pages connected now (an open room)")
    phase: str | None = Field(None, description="its match's phase (an open room)")
    links: RoomLinks | None = Field(None, description="an open room's pages")
    qr: RoomQr | None = Field(None, description="the API paths of its links' QR codes (SVG)")
    history: str = Field(description="the API path of its matches (open or closed)")


class OrgSummary(Open):
    id: str
    name: str
    max_open_rooms: int
    max_clients_per_room: int


class RoomsAnswer(Open):
    org: OrgSummary | None = Field(None, description="an organisation's operator's own")
    open: int = Field(description="rooms open (of the organisation, or all for the admin)")
    rooms: list[RoomAnswer]
