"""A channel owned by another process, as this process's service sees it (hall.seam.RuntimePort):
commands go to the owner over the bus and are answered once the owner applied them (and stored
their journal lines); the owner's states come back whole, each with its number, so a state
that arrives late or twice changes nothing, and a process that just started asks for the
latest at once.

A command is applied exactly when it was acknowledged. It is sent only while this process
reaches the broker (cluster.link: else NotSent at once, and nothing is queued in the client to
be sent at a heal), with an id (the owner applies an id once) and a deadline on the owner's
own monotonic clock, by which the owner must have applied it or never will: this process's
deadline (`ASK_TIMEOUT_S` from the send) less `REPLY_S` for the answer's way back, carried
over to the owner's clock by a bound that can only be early. Every message of the owner says
its clock when sent (`Yomite-Mono`); received here at `t`, it proves the owner's clock is at
least `mono + (now − t)`, whatever the way's delay (cluster.owner). So a command refused here
for want of an answer (Expired) is never applied after, even if the request was held in a
socket through a partition and delivered at its heal.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import secrets
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from nats.errors import NoRespondersError
from nats.errors import TimeoutError as NatsTimeout

from audio.output.events import SinkStats
from cluster.bus import Bus
from cluster.link import BrokerLink
from cluster.messages import (
    MONO,
    Output,
    ProtocolError,
    Reply,
    StaleOwner,
    decode,
    encode,
    item_request,
    press_request,
    read_reply,
)
from cluster.mirror import JournalMirror
from cluster.speakers import RemoteSpeakers
from hall.errors import ChannelFault, ChannelStopped, Expired, NotSent
from hall.inbox import Item
from hall.presses import Press, Verdict
from hall.recovery import RecoveryReport
from hall.rendering import START_RENDER_TIMEOUT_S
from hall.states import ChannelState
from reader.clock import Clock
from reader.engine import Engine
from reader.events import Hold, Release, Start
from reader.journal import parse_lines

log = logging.getLogger("yomite.cluster")

ASK_TIMEOUT_S = 3.0  # a command the owner has not answered in this long fails, saying why
REPLY_S = 0.5  # of which the owner's answer has this long to come back
# two machines' monotonic clocks may run apart by this much a second (crystals are within
# 100 ppm): a bound on the owner's clock learnt a while ago is taken this much earlier
DRIFT = 2e-4


class OwnerClockBound:
    """A lower bound of an owner's monotonic clock, as this process's monotonic clock plus an
    offset: each message of the owner, sent at its `mono` and received here at `t`, proves
    `offset ≥ mono − t` (it took some time on its way). The best proof is kept, aged by
    `DRIFT`. Only ever early: a deadline given in it is never later on the owner than meant."""

    def __init__(self, clock: Callable[[], float] = time.monotonic) -> None:
        self._clock = clock
        self._best: tuple[float, float] | None = None  # (offset, when it was proven)

    def learn(self, owner_mono: float) -> None:
        now = self._clock()
        cand = owner_mono - now
        if self._best is None or cand > self._aged(now):
            self._best = (cand, now)

    def _aged(self, now: float) -> float:
        assert self._best is not None
        offset, at = self._best
        return offset - DRIFT * (now - at)

    def owner_at(self, local: float) -> float | None:
        """The owner's clock at this process's `local` instant, at the earliest; None before
        any message of this owner."""
        if self._best is None:
            return None
        return local + self._aged(self._clock())


class _OwnerClock(Clock):
    """The owner's timeline as seen here: its last state's time, moved on by this process's
    clock since that state arrived (for the pages' countdowns; the speakers keep time with the
    owner itself)."""

    def __init__(self) -> None:
        self.at_s = 0.0
        self.received = time.monotonic()

    def now(self) -> float:
        return self.at_s + (time.monotonic() - self.received)


class RemoteRuntime:
    def __init__(self, bus: Bus, name: str, journal_dir: Path, rate: int,
                 mirror: JournalMirror, on_state: Callable[[ChannelState], None],
                 on_output: Callable[[Output], None],
                 speakers: RemoteSpeakers | None = None, *, link: BrokerLink | None = None,
                 after_epoch: int = -1) -> None:
        """`after_epoch`: states of this epoch and older are stale (this process owned the
        channel in it and lost it: what it published then, held in a socket through a
        partition, must not be shown again at the heal)."""
        self.name = name
        self.link = link
        self.speakers = speakers  # the channel's browser speakers here (started with this)
        self.bus = bus
        self._journal_dir = journal_dir / name
        self._rate = rate
        self._mirror = mirror
        self._on_state = on_state
        self._on_output = on_output
        self._state = ChannelState.before_start(name)
        # (the owner's epoch: its lease's revision when it took the channel, the number of
        # its publication) last shown: a later owner's states come after an earlier one's
        self._seq_from: tuple[int, int] = (after_epoch, 1 << 62) if after_epoch >= 0 else (-1, -1)
        self._bounds: dict[int, OwnerClockBound] = {}  # by the owner's epoch
        self._epoch = -1  # the owner's epoch last heard
        self._clock = _OwnerClock()
        self._sub: Any = None
        self.owner = ""

    async def start(self) -> None:
        self._sub = await self.bus.nc.subscribe(self.bus.subjects.state(self.name),
                                                cb=self._on_msg)
        await self.latest()
        if self.link is not None:
            self.link.on_change.append(self._on_link)
        if self.speakers is not None:
            await self.speakers.start()

    async def latest(self) -> None:
        """Ask the owner for its latest state (shown if newer than the one shown)."""
        with contextlib.suppress(ChannelStopped):  # no owner yet: its first state will come
            await self._ask(encode({"op": "latest"}), timeout_s=1.0)

    def _on_link(self, up: bool) -> None:
        if up:  # back: the owner's latest at once, not at its next change
            loop = asyncio.get_running_loop()
            for aw in (self.latest(), *((self.speakers.refresh(),) if self.speakers else ())):
                task = loop.create_task(aw)
                task.add_done_callback(lambda t: t.cancelled() or t.exception())

    async def stop(self) -> None:
        if self.link is not None and self._on_link in self.link.on_change:
            self.link.on_change.remove(self._on_link)
        if self.speakers is not None:
            await self.speakers.stop()
        if self._sub is not None:
            try:
                await self._sub.unsubscribe()
            except Exception as e:
                log.debug("remote %s: unsubscribe failed: %s", self.name, e)
            self._sub = None

    async def _on_msg(self, msg: Any) -> None:
        try:
            self._show(read_reply(decode(msg.data)), msg.headers or {})
        except Exception as e:
            log.warning("remote %s: a state that is not ours: %s", self.name, e)

    def _show(self, r: Reply, headers: dict[str, str]) -> None:
        try:
            key = (int(headers.get("Yomite-Epoch", "0")), int(headers.get("Yomite-N", "0")))
            mono = float(headers[MONO]) if MONO in headers else None
        except ValueError:
            return
        if mono is not None:
            self._bound(key[0]).learn(mono)
        if key <= self._seq_from:
            return  # late or twice: what it says is already shown
        self._seq_from = key
        self._epoch = key[0]
        self.owner = headers.get("Yomite-Owner", "")
        self._state = r.state
        m = r.state.match
        if m is not None:
            self._clock.at_s = m.snapshot.at_s
            self._clock.received = time.monotonic()
        self._on_output(r.output)
        self._on_state(r.state)

    def _bound(self, epoch: int) -> OwnerClockBound:
        bound = self._bounds.get(epoch)
        if bound is None:
            if len(self._bounds) > 8:  # owners long gone
                for old in sorted(self._bounds)[:-4]:
                    del self._bounds[old]
            bound = self._bounds[epoch] = OwnerClockBound()
        return bound

    def _unsent(self, why: str) -> NotSent:
        return NotSent(f"not sent: {why}; nothing was applied (channel {self.name})")

    async def _ask(self, data: bytes, timeout_s: float = ASK_TIMEOUT_S) -> Reply:
        """A request to the owner (`data`: not yet stamped with an id and a deadline),
        answered within `timeout_s` or refused for good (see the module's docstring)."""
        if self.link is not None and not self.link.up:
            raise self._unsent("this server does not reach the cluster's broker now, so the "
                               "channel's reader is out of its reach; try again when the page "
                               "says the link is back")
        end = time.monotonic() + timeout_s
        body = decode(data)
        if body.get("op") == "latest":
            return await self._request(data, end, read_only=True)
        body["id"] = secrets.token_hex(8)
        for _ in range(3):
            deadline = self._owner_deadline(end)
            if deadline is None:
                # no word from this owner yet: its latest state first (read-only), then the
                # command with what that answer proved
                await self._request(encode({"op": "latest"}), end, read_only=True)
                deadline = self._owner_deadline(end)
                if deadline is None:
                    raise self._unsent("the channel's reader did not say its clock")
            body["epoch"], body["deadline"] = self._epoch, deadline
            try:
                return await self._request(encode(body), end, read_only=False)
            except StaleOwner:
                continue  # another process reads it now: its clock is known from the answer
        raise self._unsent("the channel's reader changed while the command was on its way")

    def _owner_deadline(self, end: float) -> float | None:
        bound = self._bounds.get(self._epoch)
        return None if bound is None else bound.owner_at(end - REPLY_S)

    async def _request(self, data: bytes, end: float, *, read_only: bool) -> Reply:
        try:
            msg = await self.bus.nc.request(self.bus.subjects.cmd(self.name), data,
                                            timeout=max(0.05, end - time.monotonic()))
        except NoRespondersError:
            # the broker knows nobody who would take it: it went nowhere
            raise self._unsent("the channel has no reader at the moment (another process "
                               "takes it within seconds); try again") from None
        except Exception as e:
            if read_only:
                raise ChannelStopped(f"channel {self.name}'s reader did not answer: {e}; try "
                                     "again") from None
            # it may have been sent: answer only once its deadline has passed on the owner
            await asyncio.sleep(max(0.0, end - time.monotonic()))
            why = ("did not answer in time" if isinstance(e, NatsTimeout | TimeoutError)
                   else f"could not be reached ({type(e).__name__})")
            raise Expired(f"channel {self.name}'s reader {why}: the command was not "
                          "confirmed and is never applied after this; look at the channel's "
                          "state before sending it again") from None
        try:
            r = read_reply(decode(msg.data))
        except ProtocolError as e:
            raise ChannelStopped(f"channel {self.name}'s owner answered oddly: {e}") from None
        finally:
            self._learn(msg.headers or {})
        self._show(r, msg.headers or {})
        return r

    def _learn(self, headers: dict[str, str]) -> None:
        """An answer's clock, even an error's: it bounds the owner's clock all the same."""
        try:
            epoch, mono = int(headers["Yomite-Epoch"]), float(headers[MONO])
        except (KeyError, ValueError):
            return
        self._bound(epoch).learn(mono)
        if epoch > self._epoch and (epoch, 0) > self._seq_from:
            self._epoch = epoch  # a new owner answered before its first state came

    # ------------------------------------------------------------------ hall.seam.RuntimePort
    async def submit(self, item: Item, deadline: float | None = None) -> ChannelState:
        # a start waits on its owner until the first clips are rendered (hall.runtime, up to
        # START_RENDER_TIMEOUT_S), as one made there would: with the usual few seconds it
        # expired while a cold voice rendered, and the operator was told to look and try again
        extra = START_RENDER_TIMEOUT_S if isinstance(item, Start) else 0.0
        return (await self._ask(item_request(item), timeout_s=ASK_TIMEOUT_S + extra)).state

    async def press(self, event: Hold | Release, press: Press, trusted: bool) -> Verdict | None:
        """A referee page's press, judged and applied by the owner (hall.presses): its verdict,
        or None from an owner that does not judge presses (then judged here, as before)."""
        try:
            r = await self._ask(press_request(event, press, trusted))
        except ChannelFault as e:
            if "unknown op" in str(e):
                return None
            raise
        return r.verdict

    def state(self) -> ChannelState:
        return self._state

    def set_volume(self, volume_db: float) -> None:
        task = asyncio.get_running_loop().create_task(
            self._ask(encode({"op": "volume", "volume_db": volume_db})))
        task.add_done_callback(lambda t: t.cancelled() or t.exception())

    def journal_records(self) -> list[dict[str, Any]]:
        path = self.journal_path
        if path is None:
            return []
        try:
            return list(parse_lines(path.read_text("utf-8").splitlines(), str(path),
                                    replayable=False).records)
        except Exception:
            return []

    def output_stats(self) -> SinkStats | None:
        return None

    @property
    def fault(self) -> str | None:
        return self._state.fault

    @property
    def running(self) -> bool:
        up = self.link.up if self.link is not None else self.bus.connected.is_set()
        return up and self._seq_from[1] >= 0

    @property
    def at_rest(self) -> bool:
        return True  # read by its owner: nothing of it here can be late (hall.seam)

    @property
    def match_clock(self) -> Clock:
        return self._clock

    @property
    def journal_dir(self) -> Path:
        return self._journal_dir

    @property
    def journal_path(self) -> Path | None:
        file = self._mirror.file(self.name)
        return self._journal_dir / file if file is not None else None

    @property
    def header(self) -> dict[str, Any] | None:
        return self._mirror.header(self.name)

    @property
    def engine(self) -> Engine | None:
        return None

    @property
    def rate(self) -> int:
        return self._rate

    @property
    def recovered(self) -> RecoveryReport | None:
        return self._state.recovered
