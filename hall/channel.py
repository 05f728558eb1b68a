"""One channel's service in the hall: its runtime, its clients (the hub), its PIN and referees, and
the budget of the referees' hands (a hold at once, releases paced). It is the in-process
implementation of the channel's port (hall.seam.ChannelPort)."""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

from audio.output.events import SinkStats
from hall.auth import Auth
from hall.budget import Budget
from hall.errors import ChannelStopped
from hall.hub import Client, Hub
from hall.inbox import Item
from hall.pins import new_pin
from hall.presence import Presence
from hall.seam import NOWHERE, CensusPort, Elsewhere, Latest, RuntimePort, SpeakersPort
from hall.speaker import SpeakerFeed
from hall.speakerlink import SpeakerLink
from hall.states import (
    ChannelState,
    OperatorView,
    ProjectorView,
    RefereeView,
    SpeakerHealth,
    SpeakersView,
)
from hall.viewlink import ViewLinks
from hall.views import public_view
from reader.events import Hold, Release

log = logging.getLogger("yomite.hall")

# a speaker page's counters (hall.states.SpeakerHealth); a rise of any but `placed` is trouble
TROUBLE = ("late", "missed", "resyncs", "epochs", "steps")


class ChannelService:
    def __init__(self, name: str, hub: Hub, pin: str, auth: Auth,
                 debounce_s: float = 0.0, *, changes_per_s: float = 1e9,
                 changes_burst: int = 1000000, pin_path: Path | None = None,
                 pin_digits: int = 6, channel_changes_per_s: float = 1e9,
                 channel_changes_burst: int = 1000000) -> None:
        self.name = name
        self.hub = hub
        self.pin = pin
        self.auth = auth
        self.debounce_s = debounce_s
        self.changes_per_s = changes_per_s
        self.changes_burst = changes_burst
        self.pin_path = pin_path
        self.pin_digits = pin_digits
        self.runtime: RuntimePort | None = None
        self.speakers: SpeakersPort | None = None
        self.census: CensusPort | None = None  # a cluster's: the pages on its other processes
        self.speaker_link: SpeakerLink | None = None  # who may be a speaker (Hall sets it)
        self.view_links: ViewLinks | None = None  # who may watch a room (Hall sets it)
        self.presence = Presence(self.broadcast)  # told as referees and speakers come and go
        self._last_change: dict[str, float] = {}
        self._tokens: dict[str, tuple[float, float]] = {}  # referee: (tokens, at)
        # releases waiting for their budget, the last intent of each referee, in the order
        # they began to wait
        self._pending: dict[str, Release] = {}
        self.deferred = 0  # hand changes that had to wait (bouncing thumbs, scripts)
        self.channel_changes_per_s = channel_changes_per_s
        self.channel_changes_burst = channel_changes_burst
        self._channel_tokens = (float(channel_changes_burst), -1e18)  # (tokens, at)
        self._releasing = False  # a budgeted release is in the inbox (one at a time)
        self._next_timer: asyncio.TimerHandle | None = None
        self._release_task: asyncio.Task[Any] | None = None
        self._read_budgets: dict[str, Budget] = {}  # referee: its sockets' message allowance
        self.audio = ""  # the output in English (logs, the API); output_info for the pages
        self.output_info: dict[str, Any] = {"code": "other"}
        self.output = "device"  # server.channels[].output
        self.volume_db = 0.0
        self.projector = ProjectorView()
        self.seq = 0
        self._state = ChannelState.before_start(name)  # the runtime's latest
        self._listeners: list[Callable[[Latest], None]] = []
        # a cluster's process: whether it reaches the cluster's broker now (cluster.link; None
        # on one machine). Every page of the channel here says so
        self.broker_up: bool | None = None
        # awaited after each command and hand the runtime applied, before it is answered: a
        # cluster's owner waits there until the journal's lines are in the broker's stream
        # (`until`, time.monotonic: a command's deadline, by which its sender must be
        # answered: past it the wait ends, saying the command was applied but not yet stored)
        self.durable: Callable[[float | None], Awaitable[None]] | None = None
        # told of a PIN or speaker key changed here ("pin" | "speaker-key", the value): a
        # cluster shares it with its other processes
        self.on_secret: Callable[[str, str], None] | None = None
        # the clients' fan-out is the first subscriber to the channel's states
        self.subscribe(self._to_hub)

    def _bucket(self, ref: str, now: float) -> float:
        """The referee's change allowance now (a token bucket: `changes_burst` at most,
        refilled at `changes_per_s`)."""
        tokens, at = self._tokens.get(ref, (float(self.changes_burst), now))
        return min(float(self.changes_burst), tokens + (now - at) * self.changes_per_s)

    def _spend(self, ref: str, now: float) -> None:
        self._tokens[ref] = (self._bucket(ref, now) - 1.0, now)
        self._last_change[ref] = now
        if len(self._tokens) > 4096:  # forget hands that have been still for a while
            full = [k for k, (tok, at) in self._tokens.items()
                    if k not in self._pending and tok + (now - at) * self.changes_per_s
                    >= self.changes_burst]
            for k in full:
                self._tokens.pop(k, None)
                self._last_change.pop(k, None)

    def _due(self, ref: str, now: float) -> float:
        """How long the referee's next release must wait for its own budget (and the
        debounce window)."""
        return max(self._last_change.get(ref, -1e9) + self.debounce_s - now,
                   (1.0 - self._bucket(ref, now)) / self.changes_per_s)

    def _channel_bucket(self, now: float) -> float:
        tokens, at = self._channel_tokens
        return min(float(self.channel_changes_burst),
                   tokens + (now - at) * self.channel_changes_per_s)

    async def hand(self, event: Hold | Release, *, trusted: bool = False,
                   deadline: float | None = None) -> None:
        """A referee's hand goes up or down.

        A hand going up is applied at once, always: a hold stops the reading, whatever else,
        and waits behind no budget. A hand going down is what is budgeted: per referee (its
        `changes_per_s`, and the debounce window after its last change: a bouncing thumb, a
        script) and per channel (`channel_changes_per_s`, all referees together: a crowd of
        scripts), and the channel's releases go to the inbox one at a time, so that a hold is
        never queued behind a crowd's changes. A release that may not go yet waits, and only
        the referee's last intent counts (a hold meanwhile cancels it): the match always
        ends up where the hands finally are, and the journal's lines are bounded by the
        channel's budget (a hand can only go up again after it went down). The budgets are
        the referee's, kept here, whatever socket or request it comes by. `trusted` (the
        operator) is never budgeted. `deadline`: ChannelPort.hand's (not a waiting release's)."""
        assert self.runtime is not None
        ref = event.referee
        now = asyncio.get_running_loop().time()
        if isinstance(event, Hold):
            # a release that waits is forgotten: the hand stays up (and goes up if it was
            # down: the hold is applied anyway, a hand already up changes nothing). The
            # debounce window starts again.
            if self._pending.pop(ref, None) is not None:
                self.deferred += 1
            self._last_change[ref] = now
            await self.runtime.submit(event, deadline)
            await self._durable(deadline)
            return
        if trusted:
            self._pending.pop(ref, None)
            await self.runtime.submit(event, deadline)
            await self._durable(deadline)
            return
        if (not self._releasing and not self._pending and self._due(ref, now) <= 0
                and self._channel_bucket(now) >= 1.0):
            self._spend(ref, now)
            self._spend_channel(now)
            self._releasing = True
            try:
                await self.runtime.submit(event, deadline)
            finally:
                self._releasing = False
                self._next_release()
            await self._durable(deadline)
            return
        self._pending[ref] = event  # a referee already waiting keeps its place
        self.deferred += 1
        self._next_release()

    def _spend_channel(self, now: float) -> None:
        self._channel_tokens = (self._channel_bucket(now) - 1.0, now)

    def _next_release(self) -> None:
        """Send the next waiting release whose budgets allow it to the inbox, or look again
        when one will (the referees in the order they began to wait)."""
        if self._next_timer is not None:
            self._next_timer.cancel()
            self._next_timer = None
        if self._releasing or not self._pending or self.runtime is None:
            return
        loop = asyncio.get_running_loop()
        now = loop.time()
        wait = (1.0 - self._channel_bucket(now)) / self.channel_changes_per_s
        due = min(self._pending, key=lambda r: max(self._due(r, now), 0.0))
        wait = max(wait, self._due(due, now))
        if wait > 0:
            self._next_timer = loop.call_later(wait, self._next_release)
            return
        event = self._pending.pop(due)
        self._spend(due, now)
        self._spend_channel(now)
        self._releasing = True
        # (kept: the loop holds its tasks only weakly)
        self._release_task = loop.create_task(self.runtime.submit(event))
        self._release_task.add_done_callback(self._released)

    def _released(self, task: asyncio.Task[Any]) -> None:
        self._releasing = False
        if not task.cancelled() and task.exception() is not None:
            log.info("channel %s: a waiting release failed: %s", self.name, task.exception())
        self._next_release()

    def read_budget(self, referee: str, rate: float, burst: int) -> Budget:
        """The message allowance of a referee's sockets: the referee's, so that connecting
        again (or twice) does not give a flooding script a fresh one."""
        budget = self._read_budgets.get(referee)
        if budget is None:
            if len(self._read_budgets) > 4096:  # forget referees whose sockets are quiet
                now = asyncio.get_running_loop().time()
                for k in [k for k, b in self._read_budgets.items() if b.rested(now)]:
                    del self._read_budgets[k]
            budget = self._read_budgets[referee] = Budget(rate, burst)
        return budget

    def rotate_pin(self) -> str:
        """A new PIN for the channel (kept across restarts); OSError if it cannot be kept.
        Referees who joined keep their tokens; guesses at the old PIN no longer count."""
        pin = self.adopt_pin(new_pin(self.pin_digits))
        if self.on_secret is not None:
            self.on_secret("pin", pin)
        return pin

    def adopt_pin(self, pin: str) -> str:
        """This PIN from now on (a new one, or one changed through another process of a
        cluster)."""
        if self.pin_path is not None:
            self.pin_path.parent.mkdir(parents=True, exist_ok=True)
            tmp = self.pin_path.with_suffix(".tmp")
            tmp.write_text(pin, "utf-8")
            os.replace(tmp, self.pin_path)
        self.pin = pin
        self.auth.pins.unlock(self.name)
        self.broadcast()
        return pin

    async def remove_referee(self, rid: str) -> bool:
        """Forget a referee of this channel: its token dies, its hand is lowered and its
        connections are closed. False if it is not one of this channel's."""
        ref = self.auth.referee(rid)
        if ref is None or ref.channel != self.name:
            return False
        self.auth.remove(rid)  # OSError if the removal cannot be recorded: nothing changed
        self._pending.pop(rid, None)
        if self.runtime is not None:
            m = self._state.match
            if m is not None and any(h.referee == rid for h in m.snapshot.holds):
                try:
                    await self.runtime.submit(Release(rid))
                except Exception as e:  # the hand stays up: the operator can still lower it
                    log.warning("channel %s: lowering removed referee %s's hand failed: %s",
                                self.name, rid, e)
        for c in [c for c in self.hub.clients if c.referee == rid]:
            self.hub.remove(c)
            asyncio.get_running_loop().create_task(_close(c.close, "removed by the operator"))
        self.broadcast()
        return True

    def new_speaker_link(self) -> str:
        """A new speaker key: the old link stops working and the speakers that joined with it
        are disconnected (their pages say to open the new link). OSError if it cannot be
        kept."""
        assert self.speaker_link is not None
        key = self.adopt_speaker_key(SpeakerLink.new_key())
        if self.on_secret is not None:
            self.on_secret("speaker-key", key)
        return key

    def adopt_speaker_key(self, key: str) -> str:
        """This speaker key from now on (see new_speaker_link): the speakers that joined with
        another are disconnected."""
        assert self.speaker_link is not None
        self.speaker_link.adopt(key)
        for c in list(self.hub.speakers):
            self.hub.remove(c)
            asyncio.get_running_loop().create_task(_close(c.close, "speaker_link_changed"))
        self.broadcast()
        return key

    def sync(self, probe: dict[str, Any]) -> dict[str, Any]:
        """The answer to a clock probe: the sounding timeline's time (see hall.speaker)."""
        if self.speakers is not None:
            return self.speakers.sync(probe)
        assert self.runtime is not None
        out = SpeakerFeed.echo(probe)
        out["s"] = self.runtime.match_clock.now()
        return out

    def set_volume(self, volume_db: float) -> None:
        self.volume_db = volume_db
        if self.runtime is not None:
            self.runtime.set_volume(volume_db)
        if self.speakers is not None:
            self.speakers.set_volume(volume_db)
        self.broadcast()

    def set_projector(self, projector: ProjectorView) -> None:
        """What the projector shows (the operator's choice), at once on every page."""
        self.projector = projector
        self.broadcast()

    def on_state(self, state: ChannelState) -> None:
        self._state = state
        self.broadcast()

    def referees(self) -> tuple[RefereeView, ...]:
        connected: dict[str, int] = {}
        for c in self.hub.clients:
            if c.referee:
                connected[c.referee] = connected.get(c.referee, 0) + 1
        m = self._state.match
        holding = {h.referee for h in m.snapshot.holds} if m is not None else set()
        return tuple(
            RefereeView(r.id, r.name, connected.get(r.id, 0) > 0, r.id in holding)
            for r in self.auth.referees(self.name)
        )

    def output_stats(self) -> dict[str, int] | None:
        """The output's counters: underruns, late clips, faults. One underrun is flagged by
        PortAudio (`underflows`) and said by ALSA (`xruns`) alike, and either may miss one:
        counted once, as the larger of the two (their sum counted each twice)."""
        stats = self.runtime.output_stats() if self.runtime is not None else None
        return output_counters(stats) if stats is not None else None

    def elsewhere(self) -> Elsewhere:
        return self.census.elsewhere(self.name) if self.census is not None else NOWHERE

    def speaker_pages(self) -> int:
        """Speaker pages connected, to this process and to a cluster's others."""
        return len(self.hub.speakers) + self.elsewhere().speakers

    def client_count(self) -> int:
        """Pages connected, to this process and to a cluster's others."""
        return len(self.hub.clients) + self.elsewhere().clients

    def operator_view(self) -> OperatorView:
        away = self.elsewhere()
        return OperatorView(
            state=self._state, channel=self.name, seq=self.seq, output=self.audio,
            speakers=SpeakersView(self.output, len(self.hub.speakers) + away.speakers),
            volume_db=self.volume_db, output_stats=self.output_stats(),
            referees=self.referees(), pin=self.pin, output_info=self.output_info,
            speaker_health=self.speaker_health() + away.health, projector=self.projector,
            broker=self.broker_up)

    def speaker_health(self) -> tuple[SpeakerHealth, ...]:
        out = []
        for c in sorted(self.hub.speakers, key=lambda c: c.number):
            r = c.report
            if r is None:
                continue
            out.append(SpeakerHealth(
                number=c.number, placed=int(r["placed"]), late=int(r["late"]),
                missed=int(r["missed"]), resyncs=int(r["resyncs"]), epochs=int(r["epochs"]),
                steps=int(r["steps"]), rtt_ms=r.get("rtt_ms"), latency_ms=r.get("latency_ms")))
        return tuple(out)

    def speaker_report(self, client: Client, report: dict[str, Any]) -> None:
        """A speaker page's report of itself: kept on its connection; the console is told at
        once when a count of trouble rose (a report that says nothing new publishes
        nothing: 200 viewers are not sent a state every few seconds a speaker)."""
        page = report.pop("page", None)
        if page is not None:
            self.hub.claim_page(client, page)
        before = client.report
        client.report = report
        if before is None or any(report[k] != before[k] for k in TROUBLE):
            self.broadcast()

    def broadcast(self) -> None:
        self.seq += 1
        latest = Latest(self.seq, self.operator_view())
        for listener in list(self._listeners):
            listener(latest)

    def _to_hub(self, latest: Latest) -> None:
        self.hub.publish(latest.state, lambda: public_view(latest.state))

    # ------------------------------------------------------------------ the port (hall.seam)
    async def apply(self, item: Item, deadline: float | None = None) -> ChannelState:
        if self.runtime is None:
            raise ChannelStopped(f"channel {self.name} has not started")
        state = await self.runtime.submit(item, deadline)
        await self._durable(deadline)
        return state

    async def _durable(self, until: float | None = None) -> None:
        if self.durable is not None:
            await self.durable(until)

    def latest(self) -> Latest:
        return Latest(self.seq, self.operator_view())

    def subscribe(self, listener: Callable[[Latest], None]) -> Callable[[], None]:
        self._listeners.append(listener)

        def unsubscribe() -> None:
            if listener in self._listeners:
                self._listeners.remove(listener)

        return unsubscribe


async def _close(close: Callable[[int, str], Any], reason: str) -> None:
    with contextlib.suppress(Exception):
        async with asyncio.timeout(2):
            await close(1008, reason)


def output_counters(st: SinkStats) -> dict[str, int]:
    """A sink's counters as `/api/health` and the console give them (see `output_stats`)."""
    return {"underruns": max(st.underflows, st.xruns), "underflows": st.underflows,
            "xruns": st.xruns, "late_clips": st.late_clips, "late_frames": st.late_frames,
            "dropped_clips": st.dropped_clips, "faults": st.faults}
