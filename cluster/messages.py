"""The owner's request/reply on the bus: a command for a channel (an inbox item), its answer (the
channel's state, or the error the owner raised, the same class on this side), and the owner's
published states.

    request  {"op": "apply", "type": "Hold", "item": {...}}   -> {"state": {...}, "output": {...}}
             {"op": "press", "type": "Hold", "item": {...}, "press": {...}, "trusted": false}
                                                               -> {..., "verdict": {...}}
             {"op": "latest"}                                  -> {"state": {...}, "output": {...}}
             {"op": "volume", "volume_db": -6.0}               -> {"state": {...}, "output": {...}}
    error    {"error": {"type": "IllegalMove", "message": "...", "attrs": {...}}}

A command (every op but "latest") also carries its `id` (applied once), the owner's `epoch` it
was meant for and its `deadline` on that owner's monotonic clock (cluster.remote); every
message of the owner carries, in its headers, its name, epoch, publication number and its
monotonic clock when sent (`MONO`).

A referee page's press ("press") is judged by the owner (hall.presses: its move applied once,
never an older after a newer), whatever process the page reached: the socket's press and its
REST fallback's copy may arrive through two processes.
"""

from __future__ import annotations

import json
import typing
from dataclasses import dataclass
from typing import Any

from audio.errors import AudioError, CodecError, DeviceError, PackError, VoiceError
from cluster.codec import from_plain, to_plain
from hall.errors import ChannelFault, ChannelStopped, Expired, JournalUnavailable, NotSent
from hall.inbox import Item, PrepareMatch
from hall.presses import Press, Verdict
from hall.states import ChannelState
from reader.errors import (
    BadDeck,
    ConfigError,
    IllegalMove,
    JournalError,
    ReaderError,
    TooManyCards,
)
from reader.events import Event, Hold, Release, Tick


class StaleOwner(NotSent):
    """A command stamped for another owner's clock (the channel changed hands on its way): not
    applied; its sender stamps it again for this owner, whose clock the answer says."""


# what may be asked of a channel's owner: a new match, and every event of the reader but the
# passing of time (the owner's own)
ITEMS: dict[str, type] = {t.__name__: t for t in (PrepareMatch, *typing.get_args(Event))
                          if t is not Tick}
# what the owner may raise, rebuilt here as the same class (its message and attributes)
ERRORS: dict[str, type[Exception]] = {t.__name__: t for t in (
    ReaderError, IllegalMove, BadDeck, TooManyCards, ConfigError, JournalError, ChannelFault,
    ChannelStopped, NotSent, Expired, StaleOwner, JournalUnavailable, AudioError, VoiceError,
    PackError, CodecError, DeviceError)}
MAX_MESSAGE = 256 * 1024  # a request or state larger than this is refused
MONO = "Yomite-Mono"  # the sender's time.monotonic() when it sent the message



class ProtocolError(ValueError):
    """A message on the bus that is not one of ours."""


@dataclass(frozen=True, slots=True)
class Output:
    """The owner's output, as every process's views show it (hall.channel.ChannelService)."""

    audio: str
    info: dict[str, Any]
    mode: str
    volume_db: float


@dataclass(frozen=True, slots=True)
class Reply:
    state: ChannelState
    output: Output
    verdict: Verdict | None = None  # a press's, judged by the owner


def encode(obj: dict[str, Any]) -> bytes:
    return json.dumps(obj, ensure_ascii=False, separators=(",", ":")).encode("utf-8")


def decode(data: bytes) -> dict[str, Any]:
    if len(data) > MAX_MESSAGE:
        raise ProtocolError(f"a message of {len(data)} bytes (at most {MAX_MESSAGE})")
    try:
        obj = json.loads(data)
    except ValueError as e:
        raise ProtocolError(f"not JSON: {e}") from None
    if not isinstance(obj, dict):
        raise ProtocolError("not an object")
    return obj


def item_request(item: Item) -> bytes:
    name = type(item).__name__
    if name not in ITEMS:
        raise ProtocolError(f"a {name} is not sent to a channel's owner")
    return encode({"op": "apply", "type": name, "item": to_plain(item)})


def read_item(msg: dict[str, Any]) -> Item:
    t = ITEMS.get(str(msg.get("type")))
    if t is None:
        raise ProtocolError(f"unknown item {msg.get('type')!r}")
    item: Item = from_plain(t, msg.get("item"))
    return item


def press_request(event: Hold | Release, press: Press, trusted: bool) -> bytes:
    return encode({"op": "press", "type": type(event).__name__, "item": to_plain(event),
                   "press": to_plain(press), "trusted": trusted})


def read_press(msg: dict[str, Any]) -> tuple[Hold | Release, Press, bool]:
    t = {"Hold": Hold, "Release": Release}.get(str(msg.get("type")))
    if t is None:
        raise ProtocolError(f"a press of {msg.get('type')!r}")
    event: Hold | Release = from_plain(t, msg.get("item"))
    return event, from_plain(Press, msg.get("press")), msg.get("trusted") is True


def reply(state: ChannelState, output: Output, verdict: Verdict | None = None) -> bytes:
    out = {"state": to_plain(state), "output": to_plain(output)}
    if verdict is not None:
        out["verdict"] = to_plain(verdict)
    return encode(out)


def read_reply(msg: dict[str, Any]) -> Reply:
    """The owner's answer as a Reply, or the error it raised, raised here."""
    err = msg.get("error")
    if err is not None:
        raise error_from(err)
    v = msg.get("verdict")
    return Reply(from_plain(ChannelState, msg.get("state")), from_plain(Output, msg.get("output")),
                 None if v is None else from_plain(Verdict, v))


def error_reply(e: BaseException) -> bytes:
    attrs = {k: v for k, v in vars(e).items() if type(v) in (str, int, float, bool)
             or (isinstance(v, dict) and all(isinstance(x, str) for x in v.values()))}
    name = type(e).__name__ if type(e).__name__ in ERRORS else "ChannelFault"
    message = str(e) if name != "ChannelFault" or isinstance(e, ChannelFault) else \
        f"{type(e).__name__}: {e}"
    return encode({"error": {"type": name, "message": message, "attrs": attrs}})


def error_from(err: Any) -> Exception:
    if not isinstance(err, dict):
        return ChannelFault("the channel's owner answered with a broken error")
    cls = ERRORS.get(str(err.get("type")), ChannelFault)
    e = cls.__new__(cls)
    Exception.__init__(e, str(err.get("message", "")))
    for k, v in dict(err.get("attrs") or {}).items():
        if isinstance(k, str) and not k.startswith("_"):
            setattr(e, k, v)
    return e
