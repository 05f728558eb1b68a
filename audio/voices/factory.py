"""The voice the configuration names (`make_voice`): an engine, wrapped in the render cache. The
one module that knows every engine, so that the engines need not know each other."""

from __future__ import annotations

import logging
from typing import assert_never

from audio.config import VoiceConfig, VoiceEngine
from audio.errors import PackError, VoiceError
from audio.voices.voice import EstimateVoice, RenderedVoice, Voice

log = logging.getLogger(__name__)


def make_voice(voice_cfg: VoiceConfig, rate: int) -> RenderedVoice:
    """The configured voice, cached under `voice_cfg.cache_dir` (no disk cache for `estimate`).

    For `pack`, calls (the memorisation call, the prelude intro, the end call) come from Open
    JTalk unless the pack records them (a manifest's `call/<name>`, a `call-<name>` file); the
    same Open JTalk voice reads poems the pack lacks when `pack_fallback` is true. A pack that
    covers only some poems is accepted: `lacks` tells which decks it cannot read.
    """
    cfg = voice_cfg
    match cfg.engine:
        case VoiceEngine.ESTIMATE:
            return RenderedVoice(EstimateVoice(rate, cfg.speed, cfg.phrase_pause_s))
        case VoiceEngine.OPENJTALK:
            return RenderedVoice(_openjtalk(cfg, rate), cfg.cache_dir)
        case VoiceEngine.PYTTSX3:
            from audio.voices.espeak import Pyttsx3Voice

            return RenderedVoice(
                Pyttsx3Voice(rate, cfg.speed, cfg.pitch, cfg.phrase_pause_s, cfg.loudness_lufs),
                cfg.cache_dir,
            )
        case VoiceEngine.PACK:
            from audio.voices.packshape import ShapeStyle
            from audio.voices.packvoice import PackVoice

            if cfg.pack is None:
                raise VoiceError("voice.engine is pack but voice.pack is not set: name the folder")
            shape = ShapeStyle(cfg.pack_pause_s, cfg.chant.hold_upper, cfg.chant.hold_lower)
            pack = PackVoice(
                cfg.pack, rate, cfg.loudness_lufs,
                fallback=_openjtalk(cfg, rate), fallback_for_missing=cfg.pack_fallback,
                strict=False, speed=cfg.speed, pace_s=cfg.pack_pace_s,
                shape=shape if cfg.pack_shape == "reader" else None,
                joka_repeat=cfg.pack_joka_repeat,
            )
            return RenderedVoice(pack, cfg.cache_dir)
        case _:
            assert_never(cfg.engine)


def pack_joka(cfg: VoiceConfig) -> str | None:
    """The poem (a key of reader.joka.JOKA_POEMS) a pack voice reads as its jokā, when the pack
    records its own and says which (Shuffle100's 序歌 is 難波津); None for every other voice,
    and for a pack that cannot be read (making the voice says why)."""
    if cfg.engine is not VoiceEngine.PACK or cfg.pack is None:
        return None
    from audio.voices.pack import read_pack

    try:
        joka = read_pack(cfg.pack).joka
    except PackError:
        return None
    return None if joka is None else joka.poem


def _openjtalk(cfg: VoiceConfig, rate: int) -> Voice:
    from audio.voices import hts
    from audio.voices.chant import ChantStyle
    from audio.voices.openjtalk import OpenJTalkVoice

    style = (ChantStyle(**cfg.chant.model_dump()) if cfg.style == "reader"
             and cfg.engine is VoiceEngine.OPENJTALK else None)
    if style is not None and not hts.available():
        log.warning("voice.style reader needs the HTS engine's API, which this pyopenjtalk "
                    "does not export: reading in the natural style")
        style = None
    return OpenJTalkVoice(rate, cfg.speed, cfg.pitch, cfg.phrase_pause_s, cfg.loudness_lufs,
                          chant=style)
