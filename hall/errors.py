"""How a request to a channel can fail beyond the engine's own errors (reader.errors): the edge
maps each to an HTTP status (api/errors.py)."""

from __future__ import annotations


class ChannelFault(Exception):
    """Applying an item failed in a way no rule foresaw (a voice that cannot say a clip): the
    channel is paused by `@fault` and the message says why."""


class ChannelStopped(Exception):
    """The channel's task has ended (the server is shutting down): nothing more is applied."""


class JournalUnavailable(Exception):
    """The journal cannot be written: the move is refused (or paused) until it can."""


class RoomRefused(Exception):
    """A request about organisations or rooms that the rules refuse (hall.orgs, hall.rooms):
    `code` names the case (no_such_room, too_many_rooms, wrong_code...), `hint` what to do."""

    def __init__(self, code: str, detail: str, hint: str = "") -> None:
        self.code, self.detail, self.hint = code, detail, hint
        super().__init__(detail)
