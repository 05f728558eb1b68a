"""The connection to the broker given up at once when its node is gone.

nats-py closes a connection it found dead (two pings unanswered) and waits until it is closed
before it reconnects to another node. Over TLS that close is asyncio's TLS shutdown, which waits
up to 30 s for the peer's answer: a broker node whose machine vanished (a power cut, a cable,
SIGSTOP) never answers, so every process connected to it stayed away from the cluster for
30 s more (33.9 s from the freeze to the reconnection over TLS, 2.2-3.0 s over plain TCP:
bench/broker_failover.py --freeze), past a lease's deadline. Here the close is waited for
`CLOSE_S` at most, then the socket is dropped (`abort`): a peer that vanished has nothing more
to say, and a live one has had its TLS close_notify (2.6-4.4 s from the freeze over TLS).
"""

from __future__ import annotations

import asyncio

from nats.aio.client import Client as NATS
from nats.aio.transport import TcpTransport

CLOSE_S = 0.5


class QuickClose(TcpTransport):
    async def wait_closed(self) -> None:
        try:
            await asyncio.wait_for(super().wait_closed(), CLOSE_S)  # type: ignore[no-untyped-call]
        except TimeoutError:
            writer = self._io_writer
            if writer is not None:
                writer.transport.abort()


def quick_close(nc: NATS) -> None:
    """Make `nc`'s transport, once connected, the one above. (nats-py makes its transport at
    the first connection and keeps it for every reconnection; before that, an empty one is
    replaced: hence after `connect`, and by its class, which adds no state.)"""
    if type(nc._transport) is TcpTransport:
        nc._transport.__class__ = QuickClose
