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
from pathlib import Path
from typing import Any, Protocol

from audio.output.events import SinkStats
from hall.inbox import Item
from hall.recovery import RecoveryReport
from hall.states import ChannelState, OperatorView, SpeakerHealth
from reader.clock import Clock
from reader.engine import Engine
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

    async def apply(self, item: Item, deadline: float | None = None) -> ChannelState:
        """Forward a command to the owner and wait until it has been applied; returns the
        runtime's state. Raises what the owner raised (reader.errors.ReaderError, an
        audio.errors.AudioError, or hall.errors' ChannelFault, JournalUnavailable,
        ChannelStopped and its kinds NotSent and Expired). `deadline` (time.monotonic): not
        applied after it."""
        ...

    async def hand(self, event: Hold | Release, *, trusted: bool = False,
                   deadline: float | None = None) -> None:
        """A referee's hand up (applied at once) or down (budgeted per referee and per channel
        unless `trusted`: the operator); `deadline`: applied before it (time.monotonic) or
        never."""
        ...

    def latest(self) -> Latest:
        """The latest state and its sequence number."""
        ...

    def subscribe(self, listener: Callable[[Latest], None]) -> Callable[[], None]:
        """Call `listener` with every new state, in order, on the event loop (it must not
        block: a slow client is the listener's to queue or drop); returns the call that
        unsubscribes."""
        ...


class SpeakersPort(Protocol):
    """A channel's browser speakers as its edge serves them: hall.speaker.SpeakerFeed on the
    process that reads the channel, cluster.speakers.RemoteSpeakers on another."""

    def message(self) -> dict[str, Any]:
        """The whole current schedule, for a speaker page that connects."""
        ...

    def sync(self, probe: dict[str, Any]) -> dict[str, Any]:
        """The answer to a page's clock probe: its fields back, with the timeline's `s`."""
        ...

    def set_volume(self, volume_db: float) -> None: ...


@dataclass(frozen=True, slots=True)
class Elsewhere:
    """A channel's pages connected to a cluster's other processes (cluster.census)."""

    clients: int = 0
    speakers: int = 0
    health: tuple[SpeakerHealth, ...] = ()


NOWHERE = Elsewhere()


class CensusPort(Protocol):
    def elsewhere(self, channel: str) -> Elsewhere:
        """The channel's pages on the cluster's other processes, as they said last."""
        ...


class RuntimePort(Protocol):
    """What a channel's service needs of the runtime behind it: the owner's own
    (hall.runtime.ChannelRuntime), or, in a cluster's other processes, the owner reached over
    the broker (cluster.remote.RemoteRuntime)."""

    name: str

    async def submit(self, item: Item, deadline: float | None = None) -> ChannelState: ...
    def state(self) -> ChannelState: ...
    def set_volume(self, volume_db: float) -> None: ...
    def journal_records(self) -> list[dict[str, Any]]: ...
    def output_stats(self) -> SinkStats | None: ...

    @property
    def fault(self) -> str | None: ...
    @property
    def running(self) -> bool: ...
    @property
    def at_rest(self) -> bool:
        """Nothing is being read by this process for the channel (no match, one not being
        read, or one read by another process of a cluster): nothing of it here can be late."""
        ...
    @property
    def match_clock(self) -> Clock: ...
    @property
    def journal_dir(self) -> Path: ...
    @property
    def journal_path(self) -> Path | None: ...
    @property
    def header(self) -> dict[str, Any] | None: ...
    @property
    def engine(self) -> Engine | None: ...
    @property
    def rate(self) -> int: ...
    @property
    def recovered(self) -> RecoveryReport | None: ...
