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

from audio.errors import AudioError
from audio.sink import NullSink, Sink
from reader.clip import Clip
from reader.config import ChannelConfig, Config, VoiceConfig, VoiceEngine
from reader.errors import ConfigError
from reader.events import Hold, Release

from .auth import Auth
from .hub import Hub
from .loopwatch import LoopWatch
from .runtime import ChannelRuntime, VoiceFactory, VoiceLike
from .speaker import ClipStore, SoundingClock, SpeakerFeed, load_secret

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
                           fade_ms=a.fade_ms)
        rt = "real-time" if proc.realtime else "normal priority"
        return proc, (f"device {name} ({proc.blocksize} frames/block, "
                      f"{proc.latency * 1000:.1f} ms stream latency, audio process {proc.pid}, "
                      f"{rt})")
    from audio.device import DeviceSink

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


def public_view(state: dict[str, Any]) -> dict[str, Any]:
    """What viewers and referees see: never which poem is being read before its lower verse
    has been read (a projector must not give a hint while it matters)."""
    out = copy.deepcopy(state)
    out.pop("pin", None)
    out.pop("output_stats", None)
    # a projector shows whose hand is up, never who has joined: only those names go out
    if "referees" in out:
        out["referees"] = [r for r in out["referees"] if r.get("holding")]
    m = out.get("match")
    if m:
        if m.get("segment"):
            m["segment"]["poem"] = None
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
                 pin_digits: int = 6) -> None:
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
        self._last_change: dict[str, float] = {}
        self._tokens: dict[str, tuple[float, float]] = {}  # referee: (tokens, at)
        self._pending: dict[str, Hold | Release] = {}
        self.deferred = 0  # hand changes that had to wait (bouncing thumbs, scripts)
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

    async def hand(self, event: Hold | Release) -> None:
        """A referee's hand goes up or down.

        A hand going up is applied at once, always: a hold stops the reading, whatever else.
        A hand going down that follows the previous change too closely (within the debounce
        window: a bouncing thumb) or too often (past the referee's rate: a script) waits,
        and only the last intent is applied when it may (a hold meanwhile cancels it): the
        match always ends up where the hand finally is, and no referee can make the channel
        write a journal line per message (a hand can only go up again after it went down)."""
        assert self.runtime is not None
        ref = event.referee
        loop = asyncio.get_running_loop()
        now = loop.time()
        if isinstance(event, Hold):
            if ref in self._pending:
                # the hand is still up: this cancels the release that waits
                self._pending[ref] = event
                self.deferred += 1
                return
            # no allowance spent: a hand can only go up again after it went down, and that
            # is what is counted; the debounce window starts again
            self._last_change[ref] = now
            await self.runtime.submit(event)
            return
        wait = max(self._last_change.get(ref, -1e9) + self.debounce_s - now,
                   (1.0 - self._bucket(ref, now)) / self.changes_per_s)
        if wait <= 0 and ref not in self._pending:
            self._spend(ref, now)
            await self.runtime.submit(event)
            return
        first = ref not in self._pending
        self._pending[ref] = event
        self.deferred += 1
        if first:
            loop.call_later(max(wait, 0.0), self._flush, ref)

    def _flush(self, ref: str) -> None:
        event = self._pending.pop(ref, None)
        if event is not None and self.runtime is not None:
            self._spend(ref, asyncio.get_running_loop().time())
            self.runtime.post(event)

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

    def sync(self, probe: dict[str, Any]) -> dict[str, Any]:
        """The answer to a clock probe: the sounding timeline's time (see api.speaker)."""
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
    settings ask for (made through `make`, i.e. `audio.voice.make_voice`), the last few
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
            )

    def clip_store(self) -> ClipStore:
        if self.clips is None:
            cfg = self.config
            rate, kbps = cfg.audio.rate, cfg.server.speakers.bitrate_kbps

            def encode(voice: VoiceLike, clip: Clip) -> bytes:
                from audio.codec import encode_opus

                return encode_opus(voice.pcm(clip), rate, kbps)

            disk = None if cfg.voice.engine is VoiceEngine.ESTIMATE else (
                cfg.voice.cache_dir / "opus")
            self.clips = ClipStore(load_secret(cfg.journal_dir / "speakers.key"), encode, disk)
        return self.clips

    async def start(self) -> None:
        voices: VoiceFactory = self.voices.get
        for ch in self.config.server.channels:
            svc = self.channels[ch.name]
            sink, description = self.make_sink(self.config, ch)
            svc.audio = description
            svc.output = ch.output
            svc.volume_db = ch.volume_db
            rt = ChannelRuntime(ch.name, self.config, self.voice, sink, on_publish=svc.on_state,
                                voices=voices, volume_db=ch.volume_db,
                                colors=ch.colors)
            if ch.output in ("browser", "both"):
                # a sound card's clock moves in blocks, and what it was handed is heard later
                device = ch.output == "both" and hasattr(sink, "blocksize")
                latency = (float(getattr(sink, "latency", 0.0))
                           + int(getattr(sink, "blocksize", 0)) / sink.rate) if device else 0.0
                svc.speakers = SpeakerFeed(
                    sink.rate, self.clip_store(),
                    SoundingClock(_MatchClock(rt), stepwise=device, latency_s=latency),
                    svc.hub.publish_speakers, volume_db=ch.volume_db,
                    fade_ms=self.config.audio.fade_ms)
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
