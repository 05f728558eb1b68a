"""The seam between a channel's owner and the places its clients connect (the REST routes, the
WebSockets, the desk): `ChannelPort`, the few operations an edge needs of a channel.

A channel lives in one owner (its runtime: one inbox, one task, the engine, the journal and the
output); an edge forwards commands and hands to it and relays whole states back, never reaching
into the owner's internals. Today the owner and its edges share one process, and the port is
the channel's service itself (hall.channel.ChannelService). Tomorrow the owner may be another
process, with the port carried over a broker (issue 24, the association server): one more
implementation of this protocol, with the same snapshots (a rising `seq`, whole states, so a
client that missed some catches up from the latest) and the same errors.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Protocol

from hall.inbox import Item
from hall.states import ChannelState, OperatorView
from reader.events import Hold, Release


@dataclass(frozen=True, slots=True)
class Latest:
    """A channel's latest state as its operator sees it (hall.views.public_view gives what
    everyone else sees), and its sequence number: it rises with every change."""

    seq: int
    state: OperatorView


class ChannelPort(Protocol):
    @property
    def name(self) -> str: ...

    async def apply(self, item: Item) -> ChannelState:
        """Forward a command to the owner and wait until it has been applied; returns the
        runtime's state. Raises what the owner raised (reader.errors.ReaderError, an
        audio.errors.AudioError, or hall.errors' ChannelFault, JournalUnavailable,
        ChannelStopped)."""
        ...

    async def hand(self, event: Hold | Release, *, trusted: bool = False) -> None:
        """A referee's hand up (applied at once) or down (budgeted per referee and per channel
        unless `trusted`: the operator)."""
        ...

    def latest(self) -> Latest:
        """The latest state and its sequence number."""
        ...

    def subscribe(self, listener: Callable[[Latest], None]) -> Callable[[], None]:
        """Call `listener` with every new state, in order, on the event loop (it must not
        block: a slow client is the listener's to queue or drop); returns the call that
        unsubscribes."""
        ...
