"""The hall: one channel per reader (a colour, a speaker), each with its runtime, its clients and
its PIN, sharing one voice."""

from __future__ import annotations

import asyncio
import contextlib
import functools
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

from audio.config import VoiceConfig, VoiceEngine
from audio.voices.cachefolder import CacheFolder
from hall.auth import Auth
from hall.channel import ChannelService
from hall.config import ChannelConfig, Config
from hall.errors import ChannelStopped
from hall.hub import Hub
from hall.keyfile import load_key
from hall.loopwatch import LoopWatch
from hall.pins import kept_pin
from hall.presses import ChannelPresses, Presses
from hall.runtime import ChannelRuntime
from hall.seam import CensusPort
from hall.sinks import NoDevice, SinkFactory, default_sink, output_info
from hall.speaker import ClipStore, SoundingClock, SpeakerFeed
from hall.speakerlink import SpeakerLink
from hall.tenure import ALWAYS, Tenure
from hall.viewlink import ViewLinks
from hall.voices import OnDisk, VoiceFactory, VoiceLike, Voices
from reader.clip import Clip


async def _close(close: Callable[[int, str], Awaitable[None]], reason: str) -> None:
    # 1001, going away: the channel is gone (a page stops reconnecting on this reason)
    with contextlib.suppress(Exception):
        async with asyncio.timeout(2):
            await close(1001, reason)


class _MatchClock:
    """The engine's timeline clock of a runtime (it changes when a match is recovered)."""

    def __init__(self, rt: ChannelRuntime) -> None:
        self._rt = rt

    def now(self) -> float:
        return self._rt.match_clock.now()


class Hall:
    def __init__(self, config: Config, voice: VoiceLike, auth: Auth,
                 make_sink: SinkFactory = default_sink,
                 make_voice: Callable[[VoiceConfig], VoiceLike] | None = None,
                 cache: CacheFolder | None = None) -> None:
        """`cache`: the render cache's folder (the server's, which keeps it under its bound):
        the speaker pages' clips are kept there too, and each channel's prepared match pins
        its clips in it."""
        self.config = config
        self.cache = cache
        self.voice = voice
        self.auth = auth
        self.make_sink = make_sink
        self.voices = Voices(config.voice, voice, make_voice)
        self.clips: ClipStore | None = None
        self.channels: dict[str, ChannelService] = {}
        # each channel's referees' presses (hall.presses): the rule in front of its hands
        self.presses: dict[str, ChannelPresses] = {}
        self.loop_watch = LoopWatch()
        self.scheduling = "as started"  # what `yomite serve` set the event loop's thread to
        self._deck_key: bytes | None = None  # the orders' key, loaded at start
        self._view_key: bytes | None = None  # the view links' (hall.viewlink), loaded once
        self._added: dict[str, ChannelConfig] = {}  # channels made while running (rooms)
        self.census: CensusPort | None = None  # a cluster's: every channel's pages elsewhere
        for ch in config.server.channels:
            self._service(ch)

    def _service(self, ch: ChannelConfig) -> ChannelService:
        """A channel's service (its hub, PIN, referees' budgets and speaker link), not started."""
        config, auth = self.config, self.auth
        digits = config.server.security.pin_digits
        refs = config.server.referees
        pin_path = config.journal_dir / ch.name / "pin"
        svc = self.channels[ch.name] = ChannelService(
            ch.name, Hub(config.server.client_queue), kept_pin(pin_path, digits), auth,
            config.server.hold_debounce_ms / 1000.0,
            changes_per_s=refs.changes_per_s, changes_burst=refs.changes_burst,
            pin_path=pin_path, pin_digits=digits,
            channel_changes_per_s=refs.channel_changes_per_s,
            channel_changes_burst=refs.channel_changes_burst,
        )
        svc.speaker_link = SpeakerLink(ch.name, config.journal_dir / ch.name / "speaker.key",
                                       auth)
        svc.view_links = ViewLinks.derive(self._view_secret(), ch.name)
        auth.set_view_keys(ch.name, svc.view_links.projector_key, svc.view_links.viewer_key)
        svc.census = self.census
        presses = self.presses[ch.name] = ChannelPresses(
            Presses(refs.press_max_age_s, refs.press_grace_s), svc,
            functools.partial(_match_clock, svc))
        svc.subscribe(presses.see)
        return svc

    def _view_secret(self) -> bytes:
        """What the channels' view links are derived from (hall.viewlink): the clips' key."""
        if self._view_key is None:
            self._view_key = load_key(self.config.journal_dir / "speakers.key")
        return self._view_key

    def clip_store(self) -> ClipStore:
        if self.clips is None:
            cfg = self.config
            rate, kbps = cfg.audio.rate, cfg.server.speakers.bitrate_kbps

            def encode(voice: VoiceLike, clip: Clip) -> bytes:
                from audio.codec import encode_opus

                return encode_opus(voice.pcm(clip), rate, kbps)

            disk = None if cfg.voice.engine is VoiceEngine.ESTIMATE else (
                cfg.voice.cache_dir / "opus")
            folder = self.cache if self.cache is not None and (
                self.cache.root == cfg.voice.cache_dir) else None
            self.clips = ClipStore(load_key(cfg.journal_dir / "speakers.key"), encode, disk,
                                   folder=folder)
        return self.clips

    def _pin(self, channel: str, voice: VoiceLike, clips: list[Clip]) -> None:
        """The render cache keeps the clips of `channel`'s match, prepared or recovered (its
        renders and their encoded bytes) while it is the channel's latest: the eviction never
        takes them from a match being read, nor from its 感想戦."""
        if self.cache is None:
            return
        store = self.clips  # None: no channel of this hall has speaker pages
        paths: set[Path] = set()
        for clip in clips:
            if isinstance(voice, OnDisk):
                render = voice.cache_path(clip)
                if render is not None:
                    paths.add(render)
            encoded = None if store is None else store.path_of(voice, clip)
            if encoded is not None:
                paths.add(encoded)
        self.cache.pin(channel, paths)

    def _unpin(self, channel: str) -> None:
        if self.cache is not None:
            self.cache.unpin(channel)

    async def start(self, *, own: bool = True) -> None:
        """Start every configured channel's runtime; `own=False` (a cluster's process) starts
        none: the cluster starts a channel here when this process takes its lease
        (`start_channel`)."""
        # the orders of this server's matches: a seed, shown or typed, says nothing of them
        # to anyone without this key (reader.deck.keyed_seed)
        self._deck_key = load_key(self.config.journal_dir / "deck.key")
        if own:
            for ch in self.config.server.channels:
                self.start_channel(ch)

    def config_of(self, name: str) -> ChannelConfig:
        """A channel's settings, configured or added (KeyError if there is no such one)."""
        if name in self._added:
            return self._added[name]
        for ch in self.config.server.channels:
            if ch.name == name:
                return ch
        raise KeyError(name)

    def start_channel(self, ch: ChannelConfig, *,
                      journal_tap: Callable[[str, dict[str, Any]], None] | None = None,
                      tenure: Tenure = ALWAYS,
                      on_ended: Callable[[str], None] | None = None) -> ChannelService:
        """Start the runtime of a channel whose service is made: its output, its speaker feed,
        its journal recovered (paused, if it was being read). `journal_tap` gets a copy of each
        journal line from the first (hall.journalkeeper; a cluster's owner); `tenure`: how
        long this process may read it (hall.tenure), `on_ended` told when that is over."""
        assert self._deck_key is not None, "Hall.start() first"
        voices: VoiceFactory = self.voices.get
        svc = self.channels[ch.name]
        sink, description = self.make_sink(self.config, ch)
        svc.audio = description
        svc.output_info = output_info(self.config, ch, sink)
        svc.output = ch.output
        svc.volume_db = ch.volume_db
        rt = ChannelRuntime(ch.name, self.config, self.voice, sink, on_publish=svc.on_state,
                            voices=voices, volume_db=ch.volume_db,
                            colors=ch.colors, deck_key=self._deck_key)
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
        rt.reading.pin_clips = functools.partial(self._pin, ch.name)
        rt.reading.journal.tap = journal_tap
        rt.tenure, rt.on_ended = tenure, on_ended
        rt.start()
        rt.recover()
        svc.on_state(rt.state())
        return svc

    async def stop_channel(self, name: str) -> None:
        """Stop the channel's runtime (its output silenced and closed, its journal closed); its
        clients stay connected (a cluster's process that gives the channel up)."""
        svc = self.channels[name]
        rt = svc.runtime
        if isinstance(rt, ChannelRuntime):
            svc.runtime = None
            svc.speakers = None
            await rt.stop()
            rt.sink.close()
            self._unpin(name)

    def add_channel(self, ch: ChannelConfig) -> ChannelService:
        """A channel made and started while the server runs (a room, hall.rooms): its journal
        recovered as at start. ValueError if the name is taken."""
        self.add_service(ch)
        try:
            return self.start_channel(ch)
        except BaseException:
            self._forget(ch.name)
            raise

    def add_service(self, ch: ChannelConfig) -> ChannelService:
        """A channel made while the server runs, not started (a cluster's process starts it
        when it takes its lease). ValueError if the name is taken."""
        if ch.name in self.channels:
            raise ValueError(f"there is a channel {ch.name} already")
        self._added[ch.name] = ch
        return self._service(ch)

    async def close_channel(self, name: str, reason: str) -> None:
        """Stop a channel and forget it: its clients are closed with `reason` (a page says it
        in its language), its runtime stops, its speaker link dies; its journals stay on disk.
        KeyError if there is no such channel."""
        svc = self.channels[name]
        self._forget(name)
        clients = list(svc.hub.clients)
        for c in clients:
            svc.hub.remove(c)
        await asyncio.gather(*(_close(c.close, reason) for c in clients))
        rt = svc.runtime
        if isinstance(rt, ChannelRuntime):
            svc.runtime = None
            await rt.stop()
            rt.sink.close()
        self._unpin(name)

    def _forget(self, name: str) -> None:
        self.channels.pop(name, None)
        self.presses.pop(name, None)
        self._added.pop(name, None)
        self.auth.forget_speaker_key(name)
        self.auth.forget_view_keys(name)

    def at_rest(self) -> bool:
        """No channel is reading: nothing it does now can be late (the garbage collector's
        moment, hall/gcpolicy)."""
        return all(svc.runtime is None or svc.runtime.at_rest for svc in self.channels.values())

    async def stop(self) -> None:
        await self.loop_watch.stop()
        for svc in self.channels.values():
            for c in list(svc.hub.clients):
                svc.hub.remove(c)
            await self.stop_channel(svc.name)


def _match_clock(svc: ChannelService) -> float:
    """A channel's match clock now (its states' `at_s`): what presses are timed on."""
    if svc.runtime is None:
        raise ChannelStopped(f"channel {svc.name} has not started")
    return svc.runtime.match_clock.now()
