"""A room's quota of viewers (its organisation's `max_clients_per_room`): whether one more
viewer's page may join. The class's own pages (its operators' consoles, its referees, its
speakers, its projector) are not counted: viewers cannot keep them out.

A page is let in by `take` before its socket is accepted, and is in the channel's hub only
after that await: two pages joining at the same instant would both find the room one short of
full. So a page let in counts as `coming` until `seated` says it is in the hub (or gone), and
the quota is exact on one process. A cluster's processes agree on each room's pages through the
broker (cluster.pageseats)."""

from __future__ import annotations

from collections import Counter

from hall.hall import Hall


class PageSeats:
    """One process's: the pages connected here and to a cluster's others as this process
    heard of them (`ChannelService.client_count`), and those being let in."""

    def __init__(self, hall: Hall) -> None:
        self.hall = hall
        self._coming: Counter[str] = Counter()

    def here(self, channel: str) -> int:
        """The channel's viewers on this process, those being let in with them."""
        svc = self.hall.channels.get(channel)
        return (svc.hub.viewers if svc is not None else 0) + self._coming[channel]

    async def take(self, channel: str, most: int) -> bool:
        """A seat for one more viewer; False when `most` viewers hold one (or there is no
        such channel). After True, `seated` once the page is in the hub or gone."""
        svc = self.hall.channels.get(channel)
        # (a cluster's other processes' pages are counted whole: their census does not tell
        # viewers apart, so a room there looks fuller, never emptier)
        if svc is None or (svc.hub.viewers + svc.elsewhere().clients
                           + self._coming[channel]) >= most:
            return False
        self._coming[channel] += 1
        return True

    def seated(self, channel: str) -> None:
        """The page a seat was taken for is in the hub now, or will not be."""
        self._coming[channel] -= 1
        if self._coming[channel] <= 0:
            del self._coming[channel]
