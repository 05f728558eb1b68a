"""A rate allowance with bursts (a token bucket) for what a client sends: a socket's messages,
a referee's hand going down. Pure bookkeeping, fed the time by its caller."""

from __future__ import annotations


class Budget:
    """A socket's message allowance: `rate` a second with bursts of `burst`. `take` says how
    long to wait before the message may be applied (the socket is then read no faster than
    the rate), or None once `burst` messages have had to wait with no pause in between long
    enough to win back half a burst: the sender does not slow down, and the socket is
    closed. A referee's sockets share one (ChannelService.read_budget): connecting again does
    not start a fresh one."""

    def __init__(self, rate: float, burst: int) -> None:
        self.rate, self.burst = rate, float(burst)
        self.tokens = float(burst)
        self.at: float | None = None
        self.waited = 0  # messages in a row that had to wait

    def take(self, now: float) -> float | None:
        if self.at is not None:
            self.tokens = min(self.burst, self.tokens + (now - self.at) * self.rate)
        self.at = now
        self.tokens -= 1.0
        if self.tokens >= self.burst / 2:
            self.waited = 0
        if self.tokens >= 0:
            return 0.0
        self.waited += 1
        if self.waited > self.burst:
            return None
        return -self.tokens / self.rate

    def cut(self, now: float) -> None:
        """The socket is closed for flooding: the sender owes a whole burst, so that its next
        socket is closed at once (`spent`) until it has kept quiet that long."""
        self.tokens, self.at, self.waited = -self.burst, now, int(self.burst)

    def spent(self, now: float) -> float:
        """How long the sender must still keep quiet (0: not at all): its last socket was
        closed for flooding and it has not won back a message since."""
        tokens = self.tokens if self.at is None else min(
            self.burst, self.tokens + (now - self.at) * self.rate)
        if tokens < self.burst / 2 and tokens < 1.0 and self.waited >= self.burst:
            return (1.0 - tokens) / self.rate
        return 0.0

    def rested(self, now: float) -> bool:
        """Full again: forgetting it changes nothing."""
        return self.at is None or self.tokens + (now - self.at) * self.rate >= self.burst
