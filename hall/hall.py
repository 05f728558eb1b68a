"""The hall: one channel per reader (a colour, a speaker), each with its runtime, its clients and
its PIN, sharing one voice."""

from __future__ import annotations

import asyncio
import contextlib
import copy
import logging
import os
import secrets
from collections.abc import Callable
from pathlib import Path
from typing import Any

from audio.config import VoiceConfig, VoiceEngine
from audio.errors import AudioError
from audio.output.sink import NullSink, Sink
from hall.auth import Auth
from hall.budget import Budget
from hall.config import ChannelConfig, Config
from hall.hub import Hub
from hall.keyfile import load_key
from hall.loopwatch import LoopWatch
from hall.runtime import ChannelRuntime
from hall.speaker import ClipStore, SoundingClock, SpeakerFeed
from hall.speakerlink import SpeakerLink
from hall.voices import VoiceFactory, VoiceLike
from reader.clip import Clip
from reader.errors import ConfigError
from reader.events import Hold, Release

log = logging.getLogger("yomite.hall")

SinkFactory = Callable[[Config, ChannelConfig], tuple[Sink, str]]


def device_sink(cfg: Config, device: str | int | None) -> tuple[Sink, str]:
    """The speakers (raises AudioError if they cannot be opened), and a line saying so: in an
    audio process of their own unless `audio.process` is false."""
    a = cfg.audio
    name = device if device is not None else "default"
    if a.process:
        from audio.output.process import ProcessSink

        proc = ProcessSink(device, a.rate, blocksize=a.blocksize, latency=a.latency,
                           fade_ms=a.fade_ms, cpu_wakeup_us=a.cpu_wakeup_us)
        rt = "real-time" if proc.realtime else "normal priority"
        wake = ("" if proc.cpu_wakeup_us is None
                else f", CPU wake-up held at {proc.cpu_wakeup_us} µs")
        return proc, (f"device {name} ({proc.blocksize} frames/block, "
                      f"{proc.latency * 1000:.1f} ms stream latency, audio process {proc.pid}, "
                      f"{rt}{wake})")
    from audio.output.device import DeviceSink

    sink = DeviceSink(device, a.rate, blocksize=a.blocksize, latency=a.latency,
                      fade_ms=a.fade_ms)
    return sink, (f"device {name} ({sink.blocksize} frames/block, "
                  f"{sink.latency * 1000:.1f} ms stream latency)")


class NoDevice(NullSink):
    """Stands in for speakers that could not be opened: the match runs, no one hears it. The
    channel says so (state `audio: "no_device"`, health, the console asks before starting)."""

    def __init__(self, rate: int, reason: str, *, fade_ms: float) -> None:
        super().__init__(rate, fade_ms=fade_ms)
        self.reason = reason


def default_sink(cfg: Config, ch: ChannelConfig) -> tuple[Sink, str]:
    """The channel's speakers, or no sound (said clearly) when there is no usable device.
    A channel read only by browser speakers runs on a wall clock (a null sink)."""
    a = cfg.audio
    if ch.output == "browser":
        return (NullSink(a.rate, fade_ms=a.fade_ms),
                "browser speakers only (server.channels[].output: browser)")
    if a.output == "null":
        return NullSink(a.rate, fade_ms=a.fade_ms), "null output (config audio.output: null)"
    try:
        return device_sink(cfg, ch.device if ch.device is not None else a.device)
    except AudioError as e:
        log.warning("channel %s: no audio device (%s); audio goes nowhere", ch.name, e)
        return (NoDevice(a.rate, str(e), fade_ms=a.fade_ms),
                f"NO AUDIO DEVICE ({e}): audio goes nowhere")


# phases after which a match's seed may be shown to everyone (感想戦: its order is all read)
OVER = ("finished", "closed", "aborted")


def public_view(state: dict[str, Any]) -> dict[str, Any]:
    """What viewers, referees and speakers see (README "Who sees what, and when"): nothing of a
    card before its lower verse has been read: not which poem is read, not the seed while the
    match is under way, not how long a verse of a card will be (the 20 upper verses of a
    colour all differ in length: its end would name the poem at its first sample)."""
    out = copy.deepcopy(state)
    out.pop("pin", None)
    out.pop("output_stats", None)
    # a projector shows whose hand is up, never who has joined: only those names go out
    if "referees" in out:
        out["referees"] = [r for r in out["referees"] if r.get("holding")]
    m = out.get("match")
    if m:
        if m.get("phase") not in OVER:
            m["seed"] = None
        seg = m.get("segment")
        if seg:
            seg["poem"] = None
            if seg.get("kind") == "verse":
                seg["ends_s"] = None
        if m.get("cut"):
            m["cut"]["poem"] = None
        for c in m.get("cards", []):
            if c["finished_s"] is None:
                c["poem"] = None
        k = m.get("kimariji")
        if k:
            # the cards read only; which cards are left, and how, is the operator's
            m["kimariji"] = {"read": k["read"]}
    return out


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
        self.runtime: ChannelRuntime | None = None
        self.speakers: SpeakerFeed | None = None
        self.speaker_link: SpeakerLink | None = None  # who may be a speaker (Hall sets it)
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
        self.audio = ""
        self.output = "device"  # server.channels[].output
        self.volume_db = 0.0
        self.seq = 0
        self._state: dict[str, Any] = {"channel": name, "audio": "", "match": None}

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

    async def hand(self, event: Hold | Release, *, trusted: bool = False) -> None:
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
        operator) is never budgeted."""
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
            await self.runtime.submit(event)
            return
        if trusted:
            self._pending.pop(ref, None)
            await self.runtime.submit(event)
            return
        if (not self._releasing and not self._pending and self._due(ref, now) <= 0
                and self._channel_bucket(now) >= 1.0):
            self._spend(ref, now)
            self._spend_channel(now)
            self._releasing = True
            try:
                await self.runtime.submit(event)
            finally:
                self._releasing = False
                self._next_release()
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
        pin = new_pin(self.pin_digits)
        if self.pin_path is not None:
            self.pin_path.parent.mkdir(parents=True, exist_ok=True)
            tmp = self.pin_path.with_suffix(".tmp")
            tmp.write_text(pin, "utf-8")
            os.replace(tmp, self.pin_path)
        self.pin = pin
        self.auth.unlock(self.name)
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
            m = self._state.get("match") or {}
            if any(h["referee"] == rid for h in m.get("holds", [])):
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
        key = self.speaker_link.rotate()
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

    def on_state(self, state: dict[str, Any]) -> None:
        self._state = state
        self.broadcast()

    def referees(self) -> list[dict[str, Any]]:
        connected: dict[str, int] = {}
        for c in self.hub.clients:
            if c.referee:
                connected[c.referee] = connected.get(c.referee, 0) + 1
        m = self._state.get("match") or {}
        holding = {h["referee"] for h in m.get("holds", [])}
        return [
            {"id": r.id, "name": r.name, "connected": connected.get(r.id, 0) > 0,
             "holding": r.id in holding}
            for r in self.auth.referees(self.name)
        ]

    def output_stats(self) -> dict[str, int] | None:
        """The output's counters: underruns (PortAudio's flags and ALSA's), late clips, faults."""
        if self.runtime is None:
            return None
        st = self.runtime.sink.stats()
        return {"underruns": st.underflows + st.xruns, "underflows": st.underflows,
                "xruns": st.xruns, "late_clips": st.late_clips, "late_frames": st.late_frames,
                "dropped_clips": st.dropped_clips, "faults": st.faults}

    def operator_view(self) -> dict[str, Any]:
        return {**self._state, "channel": self.name, "seq": self.seq, "output": self.audio,
                "speakers": {"mode": self.output, "pages": len(self.hub.speakers)},
                "volume_db": self.volume_db, "output_stats": self.output_stats(),
                "referees": self.referees(), "pin": self.pin}

    def broadcast(self) -> None:
        self.seq += 1
        op = self.operator_view()
        self.hub.publish(op, public_view(op))


async def _close(close: Callable[[int, str], Any], reason: str) -> None:
    with contextlib.suppress(Exception):
        async with asyncio.timeout(2):
            await close(1008, reason)


def new_pin(digits: int) -> str:
    return f"{secrets.randbelow(10 ** digits):0{digits}d}"


def _pin(path: Path, digits: int = 6) -> str:
    """The channel's PIN, kept across restarts so that the QR codes on the mats stay valid.
    A kept PIN shorter than `digits` (the 4-digit PINs of old) is replaced."""
    try:
        pin = path.read_text("utf-8").strip()
        if pin.isdigit() and digits <= len(pin) <= 12:
            return pin
    except OSError:
        pass
    pin = new_pin(digits)
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(pin, "utf-8")
    except OSError as e:
        log.warning("cannot keep the PIN in %s (%s): it changes at the next start", path, e)
    return pin


class _MatchClock:
    """The engine's timeline clock of a runtime (it changes when a match is recovered)."""

    def __init__(self, rt: ChannelRuntime) -> None:
        self._rt = rt

    def now(self) -> float:
        return self._rt.match_clock.now()


class Voices:
    """The voices of the hall by their settings: the configured one, and those per-match
    settings ask for (made through `make`, i.e. `audio.voices.voice.make_voice`), the last few
    kept."""

    def __init__(self, config: VoiceConfig, default: VoiceLike,
                 make: Callable[[VoiceConfig], VoiceLike] | None, keep: int = 4) -> None:
        self._make = make
        self._keep = keep
        self._voices: dict[VoiceConfig, VoiceLike] = {config: default}
        self._default = config

    def get(self, cfg: VoiceConfig) -> VoiceLike:
        v = self._voices.pop(cfg, None)
        if v is None:
            if self._make is None:
                raise ConfigError("this server cannot change the voice per match")
            v = self._make(cfg)
        self._voices[cfg] = v  # most recent last
        while len(self._voices) > self._keep:
            old = next(k for k in self._voices if k != self._default)
            del self._voices[old]
        return v


class Hall:
    def __init__(self, config: Config, voice: VoiceLike, auth: Auth,
                 make_sink: SinkFactory = default_sink,
                 make_voice: Callable[[VoiceConfig], VoiceLike] | None = None) -> None:
        self.config = config
        self.voice = voice
        self.auth = auth
        self.make_sink = make_sink
        self.voices = Voices(config.voice, voice, make_voice)
        self.clips: ClipStore | None = None
        self.channels: dict[str, ChannelService] = {}
        self.loop_watch = LoopWatch()
        self.scheduling = "as started"  # what `yomite serve` set the event loop's thread to
        digits = config.server.security.pin_digits
        refs = config.server.referees
        for ch in config.server.channels:
            pin_path = config.journal_dir / ch.name / "pin"
            self.channels[ch.name] = ChannelService(
                ch.name, Hub(config.server.client_queue), _pin(pin_path, digits), auth,
                config.server.hold_debounce_ms / 1000.0,
                changes_per_s=refs.changes_per_s, changes_burst=refs.changes_burst,
                pin_path=pin_path, pin_digits=digits,
                channel_changes_per_s=refs.channel_changes_per_s,
                channel_changes_burst=refs.channel_changes_burst,
            )
            self.channels[ch.name].speaker_link = SpeakerLink(
                ch.name, config.journal_dir / ch.name / "speaker.key", auth)

    def clip_store(self) -> ClipStore:
        if self.clips is None:
            cfg = self.config
            rate, kbps = cfg.audio.rate, cfg.server.speakers.bitrate_kbps

            def encode(voice: VoiceLike, clip: Clip) -> bytes:
                from audio.codec import encode_opus

                return encode_opus(voice.pcm(clip), rate, kbps)

            disk = None if cfg.voice.engine is VoiceEngine.ESTIMATE else (
                cfg.voice.cache_dir / "opus")
            self.clips = ClipStore(load_key(cfg.journal_dir / "speakers.key"), encode, disk)
        return self.clips

    async def start(self) -> None:
        voices: VoiceFactory = self.voices.get
        # the orders of this server's matches: a seed, shown or typed, says nothing of them
        # to anyone without this key (reader.deck.keyed_seed)
        deck_key = load_key(self.config.journal_dir / "deck.key")
        for ch in self.config.server.channels:
            svc = self.channels[ch.name]
            sink, description = self.make_sink(self.config, ch)
            svc.audio = description
            svc.output = ch.output
            svc.volume_db = ch.volume_db
            rt = ChannelRuntime(ch.name, self.config, self.voice, sink, on_publish=svc.on_state,
                                voices=voices, volume_db=ch.volume_db,
                                colors=ch.colors, deck_key=deck_key)
            if ch.output in ("browser", "both"):
                # a sound card's clock moves in blocks, and what it was handed is heard later
                device = ch.output == "both" and hasattr(sink, "blocksize")
                latency = (float(getattr(sink, "latency", 0.0))
                           + int(getattr(sink, "blocksize", 0)) / sink.rate) if device else 0.0
                svc.speakers = SpeakerFeed(
                    sink.rate, self.clip_store(),
                    SoundingClock(_MatchClock(rt), stepwise=device, latency_s=latency),
                    svc.hub.publish_speakers, volume_db=ch.volume_db,
                    fade_ms=self.config.audio.fade_ms, channel=ch.name)
                rt.speakers = svc.speakers
            if isinstance(sink, NoDevice):
                rt.no_device(sink.reason)
            svc.runtime = rt
            rt.start()
            rt.recover()
            svc.on_state(rt.state())

    def at_rest(self) -> bool:
        """No channel is reading: nothing it does now can be late (the garbage collector's
        moment, api/gcpolicy)."""
        return all(svc.runtime is None or svc.runtime.at_rest for svc in self.channels.values())

    async def stop(self) -> None:
        await self.loop_watch.stop()
        for svc in self.channels.values():
            for c in list(svc.hub.clients):
                svc.hub.remove(c)
            if svc.runtime is not None:
                await svc.runtime.stop()
                svc.runtime.sink.close()
