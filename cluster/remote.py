"""A channel owned by another process, as this process's service sees it (hall.seam.RuntimePort):
commands go to the owner over the bus and are answered once the owner applied them (and stored
their journal lines); the owner's states come back whole, each with its number, so a state
that arrives late or twice changes nothing, and a process that just started asks for the
latest at once.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from nats.errors import NoRespondersError
from nats.errors import TimeoutError as NatsTimeout

from audio.output.events import SinkStats
from cluster.bus import Bus
from cluster.messages import Output, ProtocolError, Reply, decode, encode, item_request, read_reply
from cluster.mirror import JournalMirror
from cluster.speakers import RemoteSpeakers
from hall.errors import ChannelStopped
from hall.inbox import Item
from hall.recovery import RecoveryReport
from hall.states import ChannelState
from reader.clock import Clock
from reader.engine import Engine
from reader.journal import parse_lines

log = logging.getLogger("yomite.cluster")

ASK_TIMEOUT_S = 3.0  # a command the owner has not answered in this long fails, saying why


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
                 speakers: RemoteSpeakers | None = None) -> None:
        self.name = name
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
        self._seq_from: tuple[int, int] = (-1, -1)
        self._clock = _OwnerClock()
        self._sub: Any = None
        self.owner = ""

    async def start(self) -> None:
        self._sub = await self.bus.nc.subscribe(self.bus.subjects.state(self.name),
                                                cb=self._on_msg)
        with contextlib.suppress(ChannelStopped):  # no owner yet: its first state will come
            await self._ask(encode({"op": "latest"}), timeout_s=1.0)
        if self.speakers is not None:
            await self.speakers.start()

    async def stop(self) -> None:
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
        except ValueError:
            return
        if key <= self._seq_from:
            return  # late or twice: what it says is already shown
        self._seq_from = key
        self.owner = headers.get("Yomite-Owner", "")
        self._state = r.state
        m = r.state.match
        if m is not None:
            self._clock.at_s = m.snapshot.at_s
            self._clock.received = time.monotonic()
        self._on_output(r.output)
        self._on_state(r.state)

    async def _ask(self, data: bytes, timeout_s: float = ASK_TIMEOUT_S) -> ChannelState:
        try:
            msg = await self.bus.nc.request(self.bus.subjects.cmd(self.name), data,
                                            timeout=timeout_s)
        except NoRespondersError:
            raise ChannelStopped(f"channel {self.name} has no owner at the moment (another "
                                 "process takes it within seconds); try again") from None
        except NatsTimeout:
            raise ChannelStopped(f"channel {self.name}'s owner did not answer in "
                                 f"{timeout_s:.0f} s; try again") from None
        except Exception as e:
            raise ChannelStopped(f"channel {self.name} cannot be reached: the cluster's "
                                 f"broker is out of reach ({e}); try again") from None
        try:
            r = read_reply(decode(msg.data))
        except ProtocolError as e:
            raise ChannelStopped(f"channel {self.name}'s owner answered oddly: {e}") from None
        self._show(r, msg.headers or {})
        return r.state

    # ------------------------------------------------------------------ hall.seam.RuntimePort
    async def submit(self, item: Item) -> ChannelState:
        return await self._ask(item_request(item))

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
        return self.bus.connected.is_set() and self._seq_from[1] >= 0

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
