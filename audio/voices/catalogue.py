"""What the `yomite voices list|render|import` commands need: which voices this machine has,
rendering a set of clips with figures, and copying a recorded pack into yomite's own layout."""

import re
import shutil
import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
import yaml

from audio.codec import decode, encode
from audio.config import VoiceConfig, VoiceEngine
from audio.errors import PackError, VoiceError
from audio.pcm import trim_noise
from audio.voices.pack import MANIFEST, covered_colours, describe_missing, read_pack
from audio.voices.packjoka import JokaCut, cut_one_file
from audio.voices.voice import Progress, RenderedVoice
from reader.clip import Clip

VoiceInfo = dict[str, str | bool]


def list_voices(voice_cfg: VoiceConfig | None = None) -> list[VoiceInfo]:
    """One entry per engine: `engine`, `available`, `detail` (what was found or what is
    missing), and `selected` when a config is given. Loads each engine once to find out."""
    entries: list[VoiceInfo] = [_openjtalk_info(), _pyttsx3_info(), _pack_info(voice_cfg), {
        "engine": VoiceEngine.ESTIMATE.value,
        "available": True,
        "detail": "silence as long as the estimated speech, for dry runs",
    }]
    if voice_cfg is not None:
        for e in entries:
            e["selected"] = e["engine"] == voice_cfg.engine.value
    return entries


def _openjtalk_info() -> VoiceInfo:
    try:
        from audio.voices.openjtalk import OpenJTalkVoice

        params = OpenJTalkVoice().params
    except (ImportError, OSError, RuntimeError) as e:
        return {"engine": "openjtalk", "available": False, "detail": f"cannot load: {e}"}
    return {
        "engine": "openjtalk",
        "available": True,
        "detail": f"pyopenjtalk-plus {params['version']}, HTS voice {params['hts_voice']}",
    }


def _pyttsx3_info() -> VoiceInfo:
    try:
        from audio.voices.espeak import Pyttsx3Voice

        voice = Pyttsx3Voice()
        found = voice.voice_id
    except (ImportError, OSError, RuntimeError, VoiceError) as e:
        # without espeak-ng, pyttsx3's driver raises RuntimeError as it is imported
        return {"engine": "pyttsx3", "available": False,
                "detail": f"absent: {e} (on Debian: apt-get install espeak-ng)"}
    return {
        "engine": "pyttsx3",
        "available": True,
        "detail": f"{voice.params['synth']}, Japanese voice {found}",
    }


def _pack_info(voice_cfg: VoiceConfig | None) -> VoiceInfo:
    if voice_cfg is None or voice_cfg.pack is None:
        return {
            "engine": "pack",
            "available": False,
            "detail": "set voice.pack to a folder of recordings (Wasuramoti, Shuffle100 or "
            f"{MANIFEST} layout)",
        }
    try:
        pack = read_pack(voice_cfg.pack)
    except PackError as e:
        return {"engine": "pack", "available": False, "detail": str(e)}
    missing = [(n, v) for n, v in pack.missing() if n != 0]
    detail = f"{pack.name}: {pack.layout} layout, {len(pack.files)} files in {pack.folder}"
    if missing:
        if voice_cfg.pack_fallback:
            how = "Open JTalk reads them"
        else:
            colours = covered_colours(pack)
            how = (f"reads decks of {', '.join(colours)}" if colours
                   else "covers no whole colour yet") + "; or set voice.pack_fallback"
        detail += f"; lacks {describe_missing(missing)} ({how})"
    return {
        "engine": "pack",
        "available": not missing or voice_cfg.pack_fallback or bool(pack.covers()),
        "detail": detail,
    }


@dataclass(frozen=True)
class RenderFigures:
    """Timings of one `render_all` run. `rtf` is wall time over audio time (lower is faster)."""

    clips: int
    audio_s: float
    wall_s: float
    rendered: int  # clips the voice had to synthesise (the rest came from a cache)
    per_clip_s: tuple[float, ...] = field(repr=False)

    @property
    def rtf(self) -> float:
        return self.wall_s / self.audio_s if self.audio_s else 0.0

    @property
    def median_s(self) -> float:
        return float(np.median(self.per_clip_s)) if self.per_clip_s else 0.0

    @property
    def p99_s(self) -> float:
        return float(np.percentile(self.per_clip_s, 99)) if self.per_clip_s else 0.0


def render_all(
    voice: RenderedVoice, clips: Iterable[Clip], progress: Progress | None = None
) -> RenderFigures:
    """Render (or fetch from the cache) every clip in order, timing each."""
    todo = list(clips)
    before = voice.stats.renders
    per_clip: list[float] = []
    frames = 0
    start = time.perf_counter()
    for i, clip in enumerate(todo):
        t0 = time.perf_counter()
        frames += int(voice.pcm(clip).size)
        per_clip.append(time.perf_counter() - t0)
        if progress is not None:
            progress(i + 1, len(todo), clip)
    return RenderFigures(
        clips=len(todo),
        audio_s=frames / voice.rate,
        wall_s=time.perf_counter() - start,
        rendered=voice.stats.renders - before,
        per_clip_s=tuple(per_clip),
    )


def import_pack(
    src: Path,
    dst_root: Path,
    fmt: str = "flac",
    rate: int = 48000,
    progress: Callable[[int, int, str], None] | None = None,
) -> Path:
    """Copy the pack in `src` (any layout) to `dst_root/<pack name>/` in the manifest layout,
    transcoded to `fmt` at `rate`; returns the new folder. An existing folder is not touched.

    A one-file jokā (Shuffle100's 序歌) is cut into its two verses where `packjoka` hears them,
    the lower verse with its repeat if it has one (the manifest's `joka` says so). The manifest
    records each slot's speech length (trimmed on the recording's noise floor), so fitting the
    pack to a pace needs no pass over its files."""
    pack = read_pack(src)
    out = dst_root / (re.sub(r"[^\w.-]+", "_", pack.name).strip("._") or "pack")
    if out.exists():
        raise PackError(f"{out} already exists: remove it or import under another name")
    # build beside the target and rename at the end, so a failed import leaves nothing behind
    partial = out.with_name(out.name + ".partial")
    shutil.rmtree(partial, ignore_errors=True)
    files: dict[str, str] = {}
    speech: dict[str, float] = {}
    cuts: dict[Path, tuple[np.ndarray, JokaCut]] = {}
    try:
        for i, (slot, path) in enumerate(sorted(pack.files.items())):
            if slot.startswith("000/") and pack.one_file_joka():
                if path not in cuts:
                    whole = decode(path, rate)
                    cuts[path] = whole, cut_one_file(whole, rate)
                whole, cut = cuts[path]
                # the lower verse keeps its repeat: the manifest says so, the reading cuts it
                x = whole[: cut.upper_end] if slot.endswith("kami") else whole[cut.upper_end:]
            else:
                x = decode(path, rate)
            if not slot.startswith("call/"):
                speech[slot] = round(trim_noise(x, rate).size / rate, 3)
            top = float(np.max(np.abs(x))) if x.size else 0.0
            if top > 1.0:  # resampling a full-scale recording can overshoot a little
                x = x / np.float32(top)
            name = f"{slot.replace('/', '-')}.{fmt}"
            encode(x, rate, partial / name, fmt)
            files[slot] = name
            if progress is not None:
                progress(i + 1, len(pack.files), slot)
        manifest: dict[str, object] = {"name": pack.name, "files": files, "speech_s": speech}
        if pack.pace_s is not None:
            manifest["pace_s"] = pack.pace_s
        if pack.joka is not None and pack.joka.poem is not None:
            repeats = pack.joka.repeats_lower or any(c.repeats_lower for _, c in cuts.values())
            manifest["joka"] = {"poem": pack.joka.poem, "repeats_lower": repeats}
        (partial / MANIFEST).write_text(
            yaml.safe_dump(manifest, allow_unicode=True, sort_keys=True), "utf-8"
        )
        partial.rename(out)
    except BaseException:
        shutil.rmtree(partial, ignore_errors=True)
        raise
    return out
