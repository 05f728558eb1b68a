"""How long this process may read a channel (its runtime's tenure).

On one machine: always. In a cluster the channel's lease says (cluster.lease): a process that
took a channel another may still have been reading waits until that one's lease is certainly
over (`reads_from`), and it reads only while its own lease is proven (`reads_until`, on its own
monotonic clock, whatever the broker is doing). The runtime checks both itself, before it
applies anything, so a fence never waits on a call to the broker (hall.runtime)."""

from __future__ import annotations

from typing import Protocol


class Tenure(Protocol):
    def reads_from(self) -> float:
        """The first instant (time.monotonic) at which the reading may go forward."""
        ...

    def reads_until(self) -> float:
        """The instant (time.monotonic) from which this process must not read: the runtime
        stops the reading there and refuses every item after."""
        ...

    def why_ended(self) -> str:
        """Why the tenure is over, in English (the pages say it in their language)."""
        ...


class Always:
    """One machine's tenure: from the start, for ever."""

    def reads_from(self) -> float:
        return float("-inf")

    def reads_until(self) -> float:
        return float("inf")

    def why_ended(self) -> str:
        return ""


ALWAYS = Always()
