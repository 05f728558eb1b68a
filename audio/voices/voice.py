"""Voices: what turns a `Clip` into PCM, and the cache every voice is used through.

A `Voice` renders one clip at a time and may be slow (Open JTalk takes ~0.1 s per phrase).
`RenderedVoice` wraps any voice with a memory cache and an on-disk cache and is what the rest of
yomite holds: the engine asks it how long a clip is (`frames`, so it satisfies
`reader.clip.ClipDurations`), the sink asks it for samples (`pcm`), and a background thread
renders a match's clips ahead of time (`prefetch`) during the memorisation period.
"""

import hashlib
import json
import logging
import re
import threading
from collections import OrderedDict
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Final, Protocol, runtime_checkable

import numpy as np

from audio.errors import VoiceError
from audio.pcm import Pcm, fade_edges, normalise_loudness, resample, silence, trim_silence
from audio.voices.cachefolder import CacheFolder
from reader.clip import Clip, ClipKind, EstimatedDurations

log = logging.getLogger(__name__)

# Bump when rendering, trimming, normalisation or the cache format changes: old cache files
# then miss. 2: Open JTalk reads the text's words and accents, speed by time-stretch, fades.
PIPELINE_VERSION: Final = 2
# Every clip fades in and out over this long, so no clip edge ticks.
EDGE_FADE_MS: Final = 5.0

# Seconds per mora at speed 1.0, measured on Open JTalk over the hundred poems (bench figure):
# the estimate voice uses it so that dry runs keep the same timing as a real match.
MORA_S_AT_SPEED_1: Final = 0.128

Param = str | int | float | bool | None
Progress = Callable[[int, int, Clip], None]  # (done, total, clip just rendered)


class Voice(Protocol):
    """Something that can say a clip.

    `render` returns mono float32 PCM in [-1, 1] at `rate`, leading and trailing silence
    trimmed and loudness normalised; it raises `VoiceError` if it cannot. It may be called from
    several threads at once: an implementation guards whatever its engine cannot share.
    `params` holds everything that changes the sound (engine and version, speed, pitch, pause,
    loudness target, rate...): the render cache is keyed on it, so leaving one out serves stale
    audio after a settings change.
    """

    @property
    def name(self) -> str: ...

    @property
    def rate(self) -> int: ...

    @property
    def params(self) -> Mapping[str, Param]: ...

    def render(self, clip: Clip) -> Pcm: ...


@runtime_checkable
class PartialVoice(Protocol):
    """A voice that may not say every poem (a recorded pack that covers only some)."""

    def lacks(self, poems: Iterable[int]) -> list[int]: ...


# Kana (both scripts, with ー and the iteration marks), spaces between phrases, and the few
# punctuation marks the engines treat as pauses.
_SPEAKABLE = re.compile(r"[\u3041-\u309f\u30a0-\u30ff\s、。！？!?]*")


def phrases(clip: Clip) -> list[str]:
    """The clip's yomi split into phrases at spaces, refusing anything but kana.

    The engines misread kanji (Open JTalk reads 庵 as アン, espeak-ng says "Chinese letter"),
    so a yomi must be written the way it is said.
    """
    parts = clip.yomi.split()
    if not parts:
        raise VoiceError(f"clip {clip.key} has an empty yomi: there is nothing to say")
    if not _SPEAKABLE.fullmatch(clip.yomi):
        odd = dict.fromkeys(ch for ch in clip.yomi if not _SPEAKABLE.fullmatch(ch))
        raise VoiceError(
            f"clip {clip.key}: yomi {clip.yomi!r} has {''.join(odd)!r}; write the yomi in kana "
            "as it is pronounced (the text field can keep the kanji)"
        )
    return parts


def mastered(
    x: Pcm,
    rate: int,
    target_lufs: float,
    voice: str,
    clip: Clip,
    *,
    stretch: float = 1.0,
    trim: Callable[[Pcm, int], Pcm] = trim_silence,
) -> Pcm:
    """What every voice delivers: `x` trimmed (`trim`), made `stretch` times as long with its
    pitch kept (`voice.speed` 0.8 is a stretch of 1.25), loudness-normalised and faded in and
    out over `EDGE_FADE_MS`; a VoiceError if the voice produced silence."""
    out = trim(x, rate)
    if out.size == 0:
        raise VoiceError(f"voice {voice} rendered silence for clip {clip.key} ({clip.yomi!r})")
    if stretch != 1.0:
        from audio.voices.tempo import stretch as time_stretch

        out = time_stretch(out, rate, stretch)
    return fade_edges(normalise_loudness(out, rate, target_lufs), rate, EDGE_FADE_MS)


def speed_params(speed: float) -> dict[str, Param]:
    """What `speed` adds to a voice's cache key: the speed, and the stretcher's version when
    it is used."""
    if speed == 1.0:
        return {"speed": speed}
    from audio.voices.tempo import version

    return {"speed": speed, "stretcher": version()}


def read_phrase_by_phrase(
    synthesise: Callable[[int, str, Clip], tuple[Pcm, int]],
    clip: Clip,
    *,
    engine: str,
    voice: str,
    rate: int,
    phrase_pause_s: float,
    target_lufs: float,
    speed: float = 1.0,
) -> Pcm:
    """How a synthesiser reads a clip: each phrase (5-7-5 / 7-7) synthesised at the engine's
    own pace (`synthesise(index, kana, clip)`) and trimmed, joined by `phrase_pause_s` of
    silence, resampled to `rate`, then stretched as a whole by 1 / `speed` (speech and pauses
    alike: 0.8 is 1.25x as long) and mastered."""
    parts: list[Pcm] = []
    sr = 0
    for i, phrase in enumerate(phrases(clip)):
        x, sr = synthesise(i, phrase, clip)
        x = trim_silence(x, sr)
        if x.size == 0:
            raise VoiceError(f"{engine} said nothing for {phrase!r} in clip {clip.key}")
        if parts:
            parts.append(silence(round(phrase_pause_s * sr)))
        parts.append(x)
    return mastered(resample(np.concatenate(parts), sr, rate), rate, target_lufs, voice, clip,
                    stretch=1.0 / speed)


class EstimateVoice:
    """Silence as long as `EstimatedDurations` says a clip takes: for dry runs and timing tests
    without a speech engine. `mora_s` defaults to Open JTalk's measured pace at `speed`."""

    name = "estimate"

    def __init__(self, rate: int, speed: float = 1.0, phrase_pause_s: float = 0.15) -> None:
        self._rate = rate
        self._durations = EstimatedDurations(rate, MORA_S_AT_SPEED_1 / speed,
                                             phrase_pause_s / speed)
        self._params: dict[str, Param] = {
            "engine": "estimate",
            "rate": rate,
            "mora_s": self._durations.mora_s,
            "phrase_pause_s": self._durations.phrase_pause_s,
        }

    @property
    def rate(self) -> int:
        return self._rate

    @property
    def params(self) -> Mapping[str, Param]:
        return self._params

    def render(self, clip: Clip) -> Pcm:
        return silence(self._durations.frames(clip))


@dataclass
class CacheStats:
    memory_hits: int = 0
    disk_hits: int = 0
    renders: int = 0


class RenderedVoice:
    """A voice whose renders are cached in memory (LRU, `memory_bytes`) and on disk.

    Disk files live under `cache_dir/<voice name>/` as .npy (float32, exactly what was
    rendered), named after the clip and a SHA-256 of the clip's fields, the voice's `params` and
    `PIPELINE_VERSION`; `cache_dir=None` turns the disk cache off. The folder is read and
    written through a `CacheFolder` (`folder`: the server's, which keeps it under its bound and
    never evicts a file being read or written; by default one of its own, unbounded): writes
    go through a temporary file and a rename, so a crash or a second process never leaves half
    a file; a write the disk has no room for is skipped and the clip kept in memory; an
    unreadable or evicted cache file is rendered again.

    Thread safety: the cache maps are guarded by one lock that is never held while rendering.
    Each clip being filled has its own lock, so two threads asking for the same clip render it
    once, while a cache hit on another clip (the event loop asking `frames`) never waits behind
    a render in the background thread. Arrays handed out are read-only: they are the cache.
    """

    def __init__(
        self, voice: Voice, cache_dir: Path | None = None, memory_bytes: int = 256 << 20,
        *, folder: CacheFolder | None = None,
    ) -> None:
        self.voice = voice
        if folder is None and cache_dir is not None:
            folder = CacheFolder(cache_dir)
        self.folder = folder
        self.cache_dir = cache_dir if cache_dir is not None or folder is None else folder.root
        self.memory_bytes = memory_bytes
        self.stats = CacheStats()
        self._lock = threading.Lock()
        self._memory: OrderedDict[str, Pcm] = OrderedDict()
        self._memory_used = 0
        self._frames: dict[str, int] = {}  # kept after eviction: the engine asks often
        self._filling: dict[str, threading.Lock] = {}
        self._voice_key = json.dumps(
            {"pipeline": PIPELINE_VERSION, "voice": dict(voice.params)},
            sort_keys=True, ensure_ascii=False,
        )

    @property
    def name(self) -> str:
        return self.voice.name

    @property
    def rate(self) -> int:
        return self.voice.rate

    @property
    def params(self) -> Mapping[str, Param]:
        return self.voice.params

    def render(self, clip: Clip) -> Pcm:
        return self.pcm(clip)

    def lacks(self, poems: Iterable[int]) -> list[int]:
        """The poems among `poems` this voice cannot read: a match of a deck holding any of
        them is refused where it is prepared. Every synthetic voice reads them all."""
        return self.voice.lacks(poems) if isinstance(self.voice, PartialVoice) else []

    def frames(self, clip: Clip) -> int:
        """The clip's length in frames at `rate` (renders it on first ask)."""
        key = self.cache_key(clip)
        with self._lock:
            n = self._frames.get(key)
        return n if n is not None else int(self.pcm(clip).size)

    def pcm(self, clip: Clip) -> Pcm:
        """The clip's samples: mono float32 at `rate`, read-only."""
        key = self.cache_key(clip)
        with self._lock:
            hit = self._remember(key)
            if hit is not None:
                return hit
            filling = self._filling.setdefault(key, threading.Lock())
        with filling:
            try:
                with self._lock:
                    hit = self._remember(key)  # another thread may have filled it meanwhile
                    if hit is not None:
                        return hit
                x = self._load(clip)
                if x is None:
                    x = self._check(self.voice.render(clip), clip)
                    x.flags.writeable = False
                    self._save(clip, x)
                    with self._lock:
                        self.stats.renders += 1
                else:
                    with self._lock:
                        self.stats.disk_hits += 1
                with self._lock:
                    self._store(key, x)
                return x
            finally:
                with self._lock:
                    if self._filling.get(key) is filling:
                        del self._filling[key]

    def adopt(self, clip: Clip, x: Pcm) -> Pcm:
        """Keep `x`, the clip as another process rendered it (the render pool's worker, which
        wrote it into the same folder, or kept it from a full disk), in memory."""
        x = self._check(np.asarray(x), clip)
        x.flags.writeable = False
        with self._lock:
            self._store(self.cache_key(clip), x)
        if self.folder is not None:
            self.folder.noted(x.nbytes)
        return x

    def prefetch(
        self,
        clips: Iterable[Clip],
        progress: Progress | None = None,
        *,
        stop: threading.Event | None = None,
    ) -> int:
        """Render `clips` in order (the first needed first); returns how many are ready.

        Meant for a background thread during memorisation and for the CLI's progress bar.
        Setting `stop` ends it between two clips (a match was aborted). Errors propagate: a clip
        that cannot be rendered now would fail on air later.
        """
        todo = list(clips)
        for i, clip in enumerate(todo):
            if stop is not None and stop.is_set():
                return i
            self.pcm(clip)
            if progress is not None:
                progress(i + 1, len(todo), clip)
        return len(todo)

    def cache_key(self, clip: Clip) -> str:
        fields = {
            "kind": clip.kind.value, "yomi": clip.yomi, "text": clip.text, "name": clip.name,
            "poem": clip.poem, "verse": None if clip.verse is None else clip.verse.value,
        }
        blob = self._voice_key + json.dumps(fields, sort_keys=True, ensure_ascii=False)
        return hashlib.sha256(blob.encode("utf-8")).hexdigest()

    def cache_path(self, clip: Clip) -> Path | None:
        if self.cache_dir is None:
            return None
        if clip.kind is ClipKind.CALL:
            label = f"call-{clip.name or 'unnamed'}"
        else:
            label = f"{clip.kind.value}-{clip.poem:03d}-{clip.verse}"
        folder = re.sub(r"[^A-Za-z0-9._-]+", "_", self.name)
        return self.cache_dir / folder / f"{label}-{self.cache_key(clip)[:24]}.npy"

    # -- below: called with self._lock held (_remember, _store) or per-clip lock held

    def _remember(self, key: str) -> Pcm | None:
        x = self._memory.get(key)
        if x is not None:
            self._memory.move_to_end(key)
            self.stats.memory_hits += 1
        return x

    def _store(self, key: str, x: Pcm) -> None:
        self._frames[key] = int(x.size)
        if key in self._memory:
            return
        self._memory[key] = x
        self._memory_used += x.nbytes
        while self._memory_used > self.memory_bytes and len(self._memory) > 1:
            _, old = self._memory.popitem(last=False)
            self._memory_used -= old.nbytes

    def _check(self, x: Pcm, clip: Clip) -> Pcm:
        if not isinstance(x, np.ndarray) or x.dtype != np.float32 or x.ndim != 1:
            what = getattr(x, "dtype", type(x).__name__), getattr(x, "shape", "")
            raise VoiceError(f"voice {self.name} returned {what} for {clip.key}, not mono float32")
        if x.size and not (np.isfinite(x).all() and float(np.max(np.abs(x))) <= 1.0):
            raise VoiceError(f"voice {self.name} returned samples outside [-1, 1] for {clip.key}")
        return x

    def _load(self, clip: Clip) -> Pcm | None:
        path = self.cache_path(clip)
        if path is None or self.folder is None:
            return None
        try:
            x = self.folder.read(path, _load_npy)  # None: not there (never, or evicted)
            if x is None:
                return None
            x = self._check(x, clip)
        except (OSError, ValueError, VoiceError) as e:
            log.warning("render cache %s is unreadable (%s); rendering %s again", path, e, clip.key)
            return None
        x.flags.writeable = False
        return x

    def _save(self, clip: Clip, x: Pcm) -> None:
        path = self.cache_path(clip)
        if path is None or self.folder is None:
            return
        # the cache only saves time: a full or read-only disk must not stop a match (the
        # folder skips the write, says so once, and the clip stays in memory)
        self.folder.write(path, lambda fh: np.save(fh, x, allow_pickle=False), x.nbytes + 128)


def _load_npy(path: Path) -> Pcm:
    x: Pcm = np.load(path, allow_pickle=False)
    return x


