"""Everything that can happen to a match, as a closed union of frozen dataclasses.

Every REST call, WebSocket message, audio fault and passing of time becomes one of these and is
applied by Engine.handle, in order, from one inbox.
"""

from dataclasses import asdict, dataclass, fields
from typing import Any

from .errors import JournalError

# Holds raised by yomite itself rather than by a referee; the API refuses these ids from clients.
SYSTEM_PREFIX = "@"
AUDIO_FAULT = "@audio"  # the output device failed: paused until the operator resumes
RECOVERED = "@recovered"  # the server restarted from the journal: paused until the operator resumes
OPERATOR = "@operator"  # the operator paused from the console
FAULT = "@fault"  # something unforeseen failed (a voice that cannot say a clip): paused, with why
JOURNAL = "@journal"  # the journal cannot be written: paused until it can and the operator resumes
# a cluster's process stopping for an upgrade paused the match between two cards; the process
# that takes the channel lowers it at once (cluster.drain)
HANDOVER = "@handover"
# a cluster's process that can no longer prove its lease on the channel (cut off from the
# broker, or too slow to renew it) stopped reading there: another process reads it now
# (cluster.lease, hall.tenure). Seen only by the clients of the process that stopped.
LEASE = "@lease"


@dataclass(frozen=True, slots=True)
class Bow:
    """Rule 1: read the bow call alone and stay ready (in game 1 and the final, players shuffle
    and choose their cards after the bow, before the memorisation call)."""


@dataclass(frozen=True, slots=True)
class Start:
    """Begin the match: the bow call (unless the players have bowed or it is disabled), then
    the memorisation call."""


@dataclass(frozen=True, slots=True)
class Hold:
    """A referee raises a hand (rule 10). Raising a hand that is already up changes nothing."""

    referee: str
    name: str = ""


@dataclass(frozen=True, slots=True)
class Release:
    """A referee lowers a hand. Lowering a hand that is not up changes nothing."""

    referee: str


@dataclass(frozen=True, slots=True)
class ClearHolds:
    """The operator lowers every hand (including yomite's own holds)."""


@dataclass(frozen=True, slots=True)
class Tick:
    """Time has passed; the engine catches up with the clock."""


@dataclass(frozen=True, slots=True)
class ExtraCard:
    """After the planned cards: announce and read one more card (rule 16, a final's tie)."""


@dataclass(frozen=True, slots=True)
class ReadAgain:
    """Between cards (or once finished): announce and read the last card again, upper and
    lower verse, then go on with the next card (a class's teacher, on request)."""


@dataclass(frozen=True, slots=True)
class Skip:
    """Go on at once to the next card's upper verse: the rest of the memorisation, the prelude
    or the card being read is left out (a class's teacher)."""


@dataclass(frozen=True, slots=True)
class Close:
    """Rule 18, when every mat is ready for the next match: read 「ありがとうございました」 and
    the move call; the match is then closed."""


@dataclass(frozen=True, slots=True)
class Abort:
    """Stop the match for good."""

    reason: str = ""


Event = (Bow | Start | Hold | Release | ClearHolds | Tick | ExtraCard | ReadAgain | Skip | Close
         | Abort)

EVENT_TYPES: dict[str, type[Event]] = {
    "bow": Bow,
    "start": Start,
    "hold": Hold,
    "release": Release,
    "clear_holds": ClearHolds,
    "tick": Tick,
    "extra_card": ExtraCard,
    "read_again": ReadAgain,
    "skip": Skip,
    "close": Close,
    "abort": Abort,
}
_NAMES: dict[type[Event], str] = {v: k for k, v in EVENT_TYPES.items()}


def event_name(event: Event) -> str:
    return _NAMES[type(event)]


def event_to_dict(event: Event) -> dict[str, Any]:
    return {"type": _NAMES[type(event)], **asdict(event)}


def event_from_dict(data: dict[str, Any]) -> Event:
    try:
        cls = EVENT_TYPES[data["type"]]
        names = {f.name for f in fields(cls)}
        return cls(**{k: v for k, v in data.items() if k in names})
    except (KeyError, TypeError) as e:
        raise JournalError(f"not an event: {data!r} ({e})") from None
