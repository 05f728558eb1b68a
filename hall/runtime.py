"""The runtime of one channel (one reader, one output): the task that drives the engine.

One inbox, one task: every REST call, WebSocket message, audio fault and timer becomes an item on
the inbox and is applied in order, so two referees pressing stop at once need no locks. The task
waits for the next item or the engine's next deadline, whichever comes first, then carries out
the engine's commands: silence first, then the journal line (durable before anything new is
heard), then the clips, then publication.

Nothing an item raises ends the task: an illegal move is answered, and anything unforeseen (a
voice that cannot say a clip, a bug) pauses the channel with yomite's own `@fault` hold and
its reason. A journal that cannot be written pauses it with `@journal`: the reading never goes
on without its record. When the task ends (shutdown), every request still waiting is answered.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from audio.errors import AudioError, VoiceError
from audio.output.events import DeviceFault, SinkEvent, SinkStats
from audio.output.sink import Reopenable, Sink
from hall.config import Config
from hall.errors import ChannelFault, ChannelStopped, Expired, JournalUnavailable, NotSent
from hall.inbox import AudioFault, Inbox, Item, RenderGate, Waiter
from hall.playout import SpeakersLike
from hall.reading import Gate, Reading
from hall.recovery import RecoveryReport
from hall.rendering import START_RENDER_TIMEOUT_S
from hall.states import ChannelState
from hall.tenure import ALWAYS, Tenure
from hall.voices import VoiceFactory, VoiceLike
from reader.clock import Clock
from reader.engine import Engine
from reader.errors import ReaderError
from reader.events import (
    LEASE,
    Abort,
    Bow,
    ClearHolds,
    Close,
    ExtraCard,
    Hold,
    ReadAgain,
    Release,
    Skip,
    Start,
    Tick,
)

log = logging.getLogger("yomite.runtime")

# moves that take the reading forward: refused while the journal cannot record them (a new
# match is not: it has a journal of its own)
_FORWARD = (Bow, Start, ExtraCard, ReadAgain, Skip, Close, ClearHolds)
# what a journal failure during an item does not make a failure of that item: a hand, an
# abort, the passing of time (their effect, a stop, never waits for the journal)
_STOPS = (Hold, Release, Abort, Tick, AudioFault)
# what may make the reading sound: held back until the tenure lets this process read
_SOUNDS = (*_FORWARD, Release)


class _TenureOver:
    """Internal: the tenure ended (hall.tenure): the reading stops here, for good."""


class ChannelRuntime:
    """One channel's owner: its inbox, and the task that applies each item to the channel's
    reading (hall.reading) in order, waking at the engine's deadlines."""

    def __init__(
        self,
        name: str,
        config: Config,
        voice: VoiceLike,
        sink: Sink,
        *,
        clock: Clock | None = None,
        journal_dir: Path | None = None,
        on_publish: Callable[[ChannelState], None] | None = None,
        on_record: Callable[[dict[str, Any]], None] | None = None,
        clock_speed: float = 1.0,
        voices: VoiceFactory | None = None,
        speakers: SpeakersLike | None = None,
        volume_db: float = 0.0,
        colors: tuple[str, ...] | None = None,
        deck_key: bytes | None = None,
    ) -> None:
        """`colors`: the channel's deck when a match names none (else match.colors).
        `deck_key`: the server's key of the reading orders (reader.deck.keyed_seed); None
        (the command line) shuffles by the seed alone. `clock_speed`: clock seconds per
        loop second (dry runs run fast)."""
        self.name = name
        self.reading = Reading(name, config, voice, sink, clock=clock, journal_dir=journal_dir,
                               on_publish=on_publish, on_record=on_record, voices=voices,
                               speakers=speakers, volume_db=volume_db, colors=colors,
                               deck_key=deck_key)
        self._clock_speed = clock_speed
        self._inbox = Inbox()
        self._current: Waiter = None
        self._task: asyncio.Task[None] | None = None
        # how long this process may read the channel (a cluster's lease); checked before every
        # item, so no item is applied after it, whatever the event loop was waiting on
        self.tenure: Tenure = ALWAYS
        self.ended: str | None = None  # why the tenure ended (None: it has not)
        self.on_ended: Callable[[str], None] | None = None  # told once, when it ends

    # ------------------------------------------------------------------ the reading's face
    @property
    def engine(self) -> Engine | None:
        return self.reading.engine

    @property
    def voice(self) -> VoiceLike:
        """The current match's voice."""
        return self.reading.voice

    @property
    def sink(self) -> Sink:
        return self.reading.sink

    @property
    def rate(self) -> int:
        return self.reading.rate

    @property
    def speakers(self) -> SpeakersLike | None:
        return self.reading.speakers

    @speakers.setter
    def speakers(self, feed: SpeakersLike | None) -> None:
        self.reading.speakers = feed

    @property
    def fault(self) -> str | None:
        """The last unforeseen failure, for the pages and health."""
        return self.reading.fault

    @property
    def recovered(self) -> RecoveryReport | None:
        return self.reading.recovered

    @property
    def header(self) -> dict[str, Any] | None:
        """The journal's first line."""
        return self.reading.header

    @property
    def journal_dir(self) -> Path:
        return self.reading.journal_dir

    @property
    def journal_path(self) -> Path | None:
        return self.reading.journal_path

    @property
    def match_clock(self) -> Clock:
        """The engine's clock: the output's, shifted for a match recovered from its journal."""
        return self.reading.match_clock

    @property
    def at_rest(self) -> bool:
        """No match, or one that is not being read (ready, finished, closed, aborted)."""
        return self.reading.at_rest

    def state(self) -> ChannelState:
        return self.reading.state

    def output_stats(self) -> SinkStats:
        return self.sink.stats()

    def no_device(self, reason: str) -> None:
        """The speakers could not be opened: the channel reads into nothing, and says so."""
        self.reading.no_device(reason)

    def set_volume(self, volume_db: float) -> None:
        """The channel's volume: the device takes it from the next clip sent."""
        self.reading.set_volume(volume_db)

    def recover(self) -> RecoveryReport | None:
        """Bring back the channel's latest match from its journal (Reading.recover)."""
        return self.reading.recover()

    def journal_records(self) -> list[dict[str, Any]]:
        """Every record of the current match (read from the file: in a worker thread)."""
        return self.reading.journal_records()

    # ------------------------------------------------------------------ the inbox
    async def submit(self, item: Item, deadline: float | None = None) -> ChannelState:
        """Queue an item and wait until it has been applied; returns the channel state.
        Raises the ReaderError the engine raised (an illegal move, a bad deck), ChannelFault,
        JournalUnavailable, or ChannelStopped once the task has ended: never waits for ever.

        A start first waits (without holding the inbox or the event loop) until the call and
        the clip after it are rendered, so a start sent together with its prepare, on a cold
        cache, never cuts the call's head; a VoiceError if they cannot be rendered.

        An item that may make the reading sound waits until the tenure lets this process read
        (a cluster's process that just took the channel); `deadline` (time.monotonic): the
        item is not applied after it (Expired: its sender has given up)."""
        if isinstance(item, _SOUNDS):
            wait = self.tenure.reads_from() - time.monotonic()
            if wait > 0:
                await asyncio.sleep(wait)
        if isinstance(item, Start):
            answer = await self._submit(RenderGate())
            gate = answer.future if isinstance(answer, Gate) else None
            if gate is not None:
                try:
                    async with asyncio.timeout(START_RENDER_TIMEOUT_S):
                        await asyncio.wrap_future(gate)
                except TimeoutError:
                    raise VoiceError(f"the first clips were not rendered in "
                                     f"{START_RENDER_TIMEOUT_S:.0f} s: the voice is too slow "
                                     "on this machine (render the deck ahead with "
                                     "`yomite voices render`)") from None
        state = await self._submit(item, deadline)
        assert isinstance(state, ChannelState)
        return state

    async def _submit(self, item: Item, deadline: float | None = None) -> ChannelState | Gate:
        if self.ended is not None:
            raise NotSent(self.ended)
        if self._task is not None and self._task.done():
            raise ChannelStopped(f"channel {self.name} is stopped")
        if deadline is not None and time.monotonic() > deadline:
            raise _expired(self.name)
        result: ChannelState | Gate = await self._inbox.put(item, deadline)
        return result

    def post(self, item: Item) -> None:
        """Queue an item without waiting (audio callbacks, dropped clients)."""
        if self._task is not None and self._task.done():
            return
        self._inbox.post(item)

    def start(self) -> asyncio.Task[None]:
        self.sink.set_listener(self._on_sink_event, asyncio.get_running_loop())
        self._task = asyncio.create_task(self.run(), name=f"channel-{self.name}")
        return self._task

    async def stop(self) -> None:
        if self._task is not None:
            self._task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._task
        self.reading.journal.close()

    @property
    def running(self) -> bool:
        return self._task is not None and not self._task.done()

    async def run(self) -> None:
        try:
            while True:
                item, fut, deadline = await self._next()
                self._current = fut
                try:
                    # the tenure first, whatever came: an item taken from the inbox in the
                    # same turn of the loop as the tenure's end is refused, not applied
                    if self.ended is None and time.monotonic() >= self.tenure.reads_until():
                        self._end_tenure()
                    if isinstance(item, _TenureOver):
                        if self.ended is None:
                            self._end_tenure()
                    elif self.ended is not None:
                        if fut is not None and not fut.done():
                            fut.set_exception(NotSent(self.ended))
                    elif deadline is not None and time.monotonic() > deadline:
                        if fut is not None and not fut.done():
                            fut.set_exception(_expired(self.name))
                    else:
                        await self._handle(item, fut)
                except Exception as e:  # _handle answers everything itself; a bug must not
                    log.exception("channel %s: handling an item failed", self.name)  # end us
                    if fut is not None and not fut.done():
                        fut.set_exception(ChannelFault(f"{type(e).__name__}: {e}"))
                self._current = None
        finally:
            self._fail_pending(ChannelStopped(f"channel {self.name} stopped"))

    def end_tenure(self) -> None:
        """The tenure is over, as its holder saw before this loop did (a cluster's renewal
        that found the lease lost): the reading stops now, as at the tenure's end."""
        if self.ended is None:
            self._end_tenure()

    def _end_tenure(self) -> None:
        """This process may no longer read the channel: the reading stops where it is (a hand
        of yomite's own, `@lease`, cuts it: the pages here say why), and nothing is applied
        after. Told once to `on_ended` (the cluster gives the channel up here)."""
        why = self.tenure.why_ended() or "this process no longer reads the channel"
        self.ended = why
        # how late the loop came to it (a frozen or busy process): nothing was applied since
        # the tenure's end all the same, not even the passing of time
        until = self.tenure.reads_until()
        late = max(0.0, time.monotonic() - until) if until > float("-inf") else 0.0
        log.warning("channel %s: the reading stops here, %.3f s after its tenure ended: %s",
                    self.name, late, why)
        if self.engine is not None and not self.reading.broken and not self.at_rest:
            try:
                self.reading.apply(Hold(LEASE, why))
            except Exception as e:  # silence anyway: the output is stopped below
                log.warning("channel %s: the stop could not be recorded: %s", self.name, e)
        with contextlib.suppress(Exception):
            self.sink.stop(self.sink.position())
        for fut in self._inbox.drain():
            if fut is not None and not fut.done():
                fut.set_exception(NotSent(why))
        if self.on_ended is not None:
            self.on_ended(why)

    def _fail_pending(self, error: Exception) -> None:
        """Answer every request still waiting: the one being applied and the queued ones."""
        waiting = [self._current, *self._inbox.drain()]
        for fut in waiting:
            if fut is not None and not fut.done():
                fut.set_exception(error)
        self._current = None

    async def _handle(self, item: Item, fut: Waiter) -> None:
        def fail(e: BaseException) -> None:
            if fut is not None and not fut.done():
                fut.set_exception(e)

        if isinstance(item, ClearHolds) and isinstance(self.sink, Reopenable) \
                and self.sink.faulted:
            # the operator resumes after an audio fault: the output must come back first
            try:
                await asyncio.to_thread(self.sink.reopen)
            except AudioError as e:
                fail(e)
                return
            self.reading.audio_status = "ok"
        if isinstance(item, _FORWARD) and not self.reading.journal.writable():
            fail(JournalUnavailable(self.reading.journal.words()))
            return
        journal_ok = self.reading.journal.ok
        try:
            result = self.reading.apply(item)
        except ReaderError as e:
            fail(e)
            if self.engine is not None and not self.reading.broken:
                try:
                    self.reading.carry_out(self.engine.handle(Tick()))  # flush a kept catch-up
                except Exception as e2:
                    self.reading.on_fault(e2, item)
            return
        except JournalUnavailable as e:
            fail(e)
            return
        except Exception as e:  # unforeseen: the reader pauses and says why, and goes on
            fail(ChannelFault(self.reading.on_fault(e, item)))
            return
        if journal_ok and not self.reading.journal.ok and not isinstance(item, _STOPS):
            fail(JournalUnavailable(self.reading.journal.words()))
            return
        if fut is not None and not fut.done():
            fut.set_result(result)

    async def _next(self) -> tuple[Item | _TenureOver, Waiter, float | None]:
        failures = 0
        while True:
            # the tenure first: after a stall of the loop (a frozen process, a busy machine)
            # nothing queued meanwhile, not even the passing of time, goes before it
            until = self.tenure.reads_until() - time.monotonic()
            if self.ended is None and until <= 0:
                return _TenureOver(), None, None
            try:
                deadline = (self.engine.next_deadline()
                            if self.engine is not None and not self.reading.broken
                            and self.ended is None else None)
            except Exception as e:
                failures += 1
                self.reading.on_fault(e, None)
                if failures > 1:  # paused, and still it cannot plan: wait for a new match
                    self.reading.broken = True
                continue
            wait = None if self.ended is not None or until == float("inf") else until
            if deadline is not None:
                delay = deadline - self.reading.match_clock.now()
                if delay <= 0:
                    return Tick(), None, None
                delay /= self._clock_speed
                wait = delay if wait is None else min(wait, delay)
            if wait is None:
                return await self._inbox.get()
            try:
                async with asyncio.timeout(max(wait, 0.001)):
                    return await self._inbox.get()
            except TimeoutError:
                continue  # re-read the clocks: the device clock may lag the loop's

    def _on_sink_event(self, ev: SinkEvent) -> None:
        if isinstance(ev, DeviceFault):
            self.post(AudioFault(ev.reason))


def _expired(name: str) -> Expired:
    return Expired(f"channel {name}: the command reached its reader after its sender's "
                   "deadline: not applied, and it never will be")
