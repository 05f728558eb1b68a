"""The voice the configuration names (`make_voice`): an engine, wrapped in the render cache. The
one module that knows every engine, so that the engines need not know each other."""

from __future__ import annotations

import logging
from typing import assert_never

from audio.config import VoiceConfig, VoiceEngine
from audio.errors import PackError, VoiceError
from audio.voices.cachefolder import MB, CacheFolder
from audio.voices.voice import EstimateVoice, RenderedVoice, Voice

log = logging.getLogger(__name__)


def cache_folder(cfg: VoiceConfig, *, bounded: bool = True) -> CacheFolder:
    """The render cache's folder as `cfg` sets it: `cache_dir`, its free-space reserve and
    (`bounded`: the server's one, whose keeper evicts) its bound."""
    return CacheFolder(cfg.cache_dir, max_bytes=cfg.cache_max_mb * MB if bounded else None,
                       min_free_bytes=cfg.cache_min_free_mb * MB)


def make_voice(voice_cfg: VoiceConfig, rate: int,
               folder: CacheFolder | None = None) -> RenderedVoice:
    """The configured voice, cached under `voice_cfg.cache_dir` (no disk cache for `estimate`)
    through `folder` (the server's, which bounds it and knows the clips its matches need) when
    it is that folder; else through one of its own, unbounded (the command line, a render
    worker: the server's keeper bounds the folder they write into).

    For `pack`, calls (the memorisation call, the prelude intro, the end call) come from Open
    JTalk unless the pack records them (a manifest's `call/<name>`, a `call-<name>` file); the
    same Open JTalk voice reads poems the pack lacks when `pack_fallback` is true. A pack that
    covers only some poems is accepted: `lacks` tells which decks it cannot read.
    """
    cfg = voice_cfg
    if folder is None or folder.root != cfg.cache_dir:
        folder = cache_folder(cfg, bounded=False)
    match cfg.engine:
        case VoiceEngine.ESTIMATE:
            return RenderedVoice(EstimateVoice(rate, cfg.speed, cfg.phrase_pause_s))
        case VoiceEngine.OPENJTALK:
            return RenderedVoice(_openjtalk(cfg, rate), folder=folder)
        case VoiceEngine.PYTTSX3:
            from audio.voices.espeak import Pyttsx3Voice

            return RenderedVoice(
                Pyttsx3Voice(rate, cfg.speed, cfg.pitch, cfg.phrase_pause_s, cfg.loudness_lufs),
                folder=folder,
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
            return RenderedVoice(pack, folder=folder)
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
