"""How a request to a channel can fail beyond the engine's own errors (reader.errors): the edge
maps each to an HTTP status (api/errors.py)."""

from __future__ import annotations


class ChannelFault(Exception):
    """Applying an item failed in a way no rule foresaw (a voice that cannot say a clip): the
    channel is paused by `@fault` and the message says why."""


class ChannelStopped(Exception):
    """The channel's task has ended (the server is shutting down): nothing more is applied."""

    code = "channel_stopped"


class NotSent(ChannelStopped):
    """A cluster's process could not send the command to the channel's reader (the broker is
    out of its reach, or it no longer reads the channel itself): it was not applied, and never
    will be; sending it again cannot double it."""

    code = "not_sent"


class Expired(ChannelStopped):
    """The command did not reach the channel's reader, or was not applied, before its
    deadline: it is not applied after it (cluster.remote, cluster.owner)."""

    code = "expired"


class JournalUnavailable(Exception):
    """The journal cannot be written: the move is refused (or paused) until it can."""


class RoomRefused(Exception):
    """A request about organisations or rooms that the rules refuse (hall.orgs, hall.rooms):
    `code` names the case (no_such_room, too_many_rooms, wrong_code...), `hint` what to do."""

    def __init__(self, code: str, detail: str, hint: str = "") -> None:
        self.code, self.detail, self.hint = code, detail, hint
        super().__init__(detail)
