"""The audio's settings: the voice (`voice`: engine, speed, pack...) and the output (`audio`)."""

import math
from enum import StrEnum
from pathlib import Path
from typing import Any, Final, Literal

from pydantic import Field, ValidationError, field_validator

from reader.config import Frozen, Seconds, explain
from reader.errors import ConfigError, SpeedNotOffered


class VoiceEngine(StrEnum):
    OPENJTALK = "openjtalk"
    PYTTSX3 = "pyttsx3"
    PACK = "pack"
    ESTIMATE = "estimate"  # silence of the estimated length: dry runs


class ChantConfig(Frozen):
    """How the `reader` style reads a verse (audio.voices.chant): one reciting tone, the phrases
    joined, the last sound held, with a vibrato, and let go."""

    # the last mora of an upper / a lower verse, times the verse's median mora (before the
    # release); what it adds to a spoken last mora is taken out of the gap after the verse
    hold_upper: float = Field(4.0, ge=1, le=12)
    hold_lower: float = Field(4.7, ge=1, le=12)
    release_s: Seconds = Field(0.7, ge=0.05, le=3)  # the held sound fades 40 dB over this long
    vibrato_st: float = Field(0.8, ge=0, le=3)  # peak to peak; 0: none
    vibrato_hz: float = Field(5.2, ge=2, le=10)
    vibrato_delay_s: Seconds = Field(0.0, ge=0, le=2)
    accent: float = Field(0.1, ge=0, le=1)  # share of the words' pitch accent kept (0: flat)
    scoop_st: float = Field(2.0, ge=0, le=12)  # the first mora rises into the tone from below
    tone_hz: float | None = Field(345.0, ge=60, le=1000)  # null: each verse's own median
    phrase_gap_s: Seconds = Field(0.0, ge=0, le=0.5)
    # each verse its own vibrato (rate x0.9-1.1, depth x0.8-1.15) and hold (x1-1.12),
    # drawn from the verse: never two alike, the same verse always alike (false: all as set)
    vary: bool = True


class VoiceConfig(Frozen):
    engine: VoiceEngine = VoiceEngine.OPENJTALK
    # reader: verses chanted as a karuta reader does (voice.chant); natural: spoken with the
    # dictionary's accent and phrase pauses (for teaching the words). Open JTalk only.
    style: Literal["reader", "natural"] = "reader"
    chant: ChantConfig = ChantConfig()
    # 1.0 and 0.15 s read a poem (kami, 1 s, shimo, 1.5 s) in 7.06 s on average with Open JTalk:
    # the national rules' pace (bench/voice_render.py measures it over the hundred poems)
    speed: float = Field(1.0, gt=0.2, le=3.0)
    pitch: float = Field(0.0, ge=-12, le=12)  # semitones
    phrase_pause_s: Seconds = Field(0.15, ge=0, le=5)
    loudness_lufs: float = Field(-20.0, ge=-60, le=-5)
    pack: Path | None = None
    pack_fallback: bool = False
    # seconds of speech a poem (upper + lower verse) a pack is time-stretched to, pitch kept;
    # null keeps the reader's own pace (or the pack manifest's pace_s)
    pack_pace_s: Seconds | None = Field(None, ge=1, le=60)
    # how a pack fitted to a pace is fitted: reader (the pauses inside a verse cut to
    # pack_pause_s, the held end shortened only down to chant.hold_upper / hold_lower median
    # morae, the rest of the speech stretched) or uniform (one ratio for the whole verse)
    pack_shape: Literal["reader", "uniform"] = "reader"
    pack_pause_s: Seconds = Field(0.06, ge=0, le=0.5)
    # a pack's jokā recorded with its lower verse read twice (Shuffle100's 序歌): false reads
    # the lower verse once, as the programme reads every other lower verse; true keeps the repeat
    pack_joka_repeat: bool = False
    # where the recording page (/record) keeps the pack it records
    recording_pack: Path = Path("var/packs/recorded")
    cache_dir: Path = Path("var/cache")
    # the render cache's bound: past it, the least recently used clips that no prepared match
    # needs are deleted (audio.voices.cachefolder); a verse is about 1 MB as rendered
    cache_max_mb: int = Field(2048, ge=1, le=1_048_576)
    # a cache write that would leave less than this free on its disk is skipped (the clip kept
    # in memory): the cache never fills the disk the journals are written on
    cache_min_free_mb: int = Field(256, ge=0, le=1_048_576)


class AudioConfig(Frozen):
    rate: int = Field(48000, ge=8000, le=192000)
    # `output: null` in YAML is no value at all: read as "null" (no sound), as written
    output: Literal["device", "null"] = "device"
    device: str | int | None = None
    blocksize: int = Field(256, ge=32, le=8192)
    # seconds of audio queued ahead in the output (or PortAudio's "low"/"high"): deep enough to
    # ride out a machine that stops for tens of ms (docs/reliability.md); a stop drops it
    latency: Literal["low", "high"] | float = 0.06
    # a stop throws away the queued audio at once (abort and restart the stream) instead of
    # fading out behind it: silence in p99 8.3 ms whatever the latency (docs/audio-output.md)
    flush_on_stop: bool = True
    fade_ms: float = Field(2.0, ge=0, le=100)
    schedule_lead_ms: float = Field(30.0, ge=0, le=1000)
    process: bool = True
    render_workers: int | None = Field(None, ge=0, le=64)
    # how soon an idle CPU must wake while the audio process plays, in µs (a PM QoS request
    # where allowed: audio/output/wakeup.py); null leaves the machine's idle policy alone
    cpu_wakeup_us: int | None = Field(0, ge=0, le=100_000)

    @field_validator("output", mode="before")
    @classmethod
    def _null_is_no_sound(cls, v: Any) -> Any:
        return "null" if v is None else v


# What a match may change of the voice (the console's voice speed): never the engine, the pack
# or the cache folder, which are the installation's
# "recorded": true reads the match from the pack the recording page records (voice.engine
# pack, voice.pack the recording_pack), whatever engine the hall is configured with
VOICE_SETTINGS: tuple[str, ...] = ("speed", "pitch", "phrase_pause_s", "style")
VOICE_MATCH_KEYS: tuple[str, ...] = (*VOICE_SETTINGS, "recorded")


# The speeds a match and the console's preview may ask for: the console's 読む速さ
# (api/static/console.html: 0.25 to 3 in steps of 0.05), and the configured voice.speed. Every
# other float would be a new render of every clip, kept in the cache (issue 47).
SPEED_MIN: Final = 0.25
SPEED_MAX: Final = 3.0
SPEED_STEP: Final = 0.05


def offered_speed(speed: float, configured: float) -> bool:
    """Whether `speed` is one the console offers, or the configured one."""
    if not math.isfinite(speed):
        return False
    steps = speed / SPEED_STEP
    return speed == configured or (SPEED_MIN - 1e-9 <= speed <= SPEED_MAX + 1e-9
                                   and abs(steps - round(steps)) < 1e-6)


# a spoken verse's last mora, in median morae (measured: upper 1.26, lower 0.98, issue 21)
SPOKEN_LAST_MORA: tuple[float, float] = (1.26, 0.98)


def held_s(voice: VoiceConfig) -> tuple[float, float]:
    """How much longer the `reader` style sounds the last mora of an upper and of a lower
    verse than speech would, on average (median mora 0.128 s at speed 1), its release
    included: taken out of the gap after each verse (the held sound fades into it, as a
    reader's does), so the pace stays about the same."""
    if voice.style != "reader" or voice.engine is not VoiceEngine.OPENJTALK:
        return (0.0, 0.0)
    mora = 0.128 / voice.speed
    c = voice.chant
    release = c.release_s / voice.speed
    return (round(max(0.0, c.hold_upper - SPOKEN_LAST_MORA[0]) * mora + release, 3),
            round(max(0.0, c.hold_lower - SPOKEN_LAST_MORA[1]) * mora + release, 3))


def voice_view(voice: VoiceConfig) -> dict[str, Any]:
    """A match's voice as the console shows it: its settings, and whether it reads the
    recording page's pack."""
    return {**{k: getattr(voice, k) for k in VOICE_SETTINGS},
            "recorded": voice.engine is VoiceEngine.PACK and voice.pack == voice.recording_pack}


def with_voice_overrides(voice: VoiceConfig, overrides: dict[str, Any]) -> VoiceConfig:
    """A match's voice: the configured one with per-match `overrides` (VOICE_MATCH_KEYS)."""
    for k in overrides:
        if k not in VOICE_MATCH_KEYS:
            raise ConfigError(f"overrides: voice.{k}: cannot be changed per match; allowed keys "
                              f"here: {', '.join(VOICE_MATCH_KEYS)}")
    speed = overrides.get("speed")
    if (isinstance(speed, int | float) and not isinstance(speed, bool)
            and not offered_speed(float(speed), voice.speed)):
        raise SpeedNotOffered(float(speed), SPEED_MIN, SPEED_MAX, SPEED_STEP, voice.speed)
    overrides = dict(overrides)
    recorded = overrides.pop("recorded", False)
    if not isinstance(recorded, bool):
        raise ConfigError(f"overrides: voice.recorded: true or false, not {recorded!r}")
    merged = {**voice.model_dump(mode="json"), **overrides}
    if recorded:
        merged.update(engine="pack", pack=str(voice.recording_pack))
    try:
        return _VoiceOnly.model_validate({"voice": merged}).voice
    except ValidationError as e:
        raise explain(e, "overrides", _VoiceOnly) from None


class _VoiceOnly(Frozen):
    voice: VoiceConfig
