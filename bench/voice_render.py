"""Voice rendering figures on this machine: Open JTalk's real-time factor over the 200 verses,
the pace of a poem at the default settings, and the time to render one colour (20 poems and the
calls) cold and from the caches. Prints figures; passes or fails nothing.

    .venv/bin/python bench/voice_render.py [--colour blue] [--skip-pyttsx3]
"""

import argparse
import os
import platform
import statistics
import tempfile
import time
from pathlib import Path

import numpy as np

from audio.config import VoiceConfig
from audio.pcm import Pcm
from audio.voices.catalogue import render_all
from audio.voices.espeak import Pyttsx3Voice
from audio.voices.openjtalk import OpenJTalkVoice
from audio.voices.voice import RenderedVoice, Voice
from reader.clip import Clip, EstimatedDurations, Verse
from reader.config import MatchConfig
from reader.poems import Color, all_poems
from reader.programme import build_programme, verse_clip

RATE = 48000


def verses() -> list[Clip]:
    return [verse_clip(p.no, v) for p in all_poems() for v in Verse]


def colour_clips(colour: Color) -> list[Clip]:
    """Every clip a match of one colour needs: what `yomite voices render` prefetches."""
    nos = [p.no for p in all_poems() if p.color is colour]
    segs = build_programme(MatchConfig(), nos, len(nos))
    return list({s.clip.key: s.clip for s in segs if s.clip is not None}.values())


def timed_renders(
    voice: Voice, clips: list[Clip]
) -> tuple[dict[str, Pcm], list[float], list[float]]:
    """Renders with their real-time factors by wall clock and by this thread's CPU time (the
    second is what the engine costs; the first also counts whatever else the machine runs)."""
    out: dict[str, Pcm] = {}
    wall: list[float] = []
    cpu: list[float] = []
    for clip in clips:
        t0, c0 = time.perf_counter(), time.thread_time()
        x = voice.render(clip)
        seconds = x.size / voice.rate
        wall.append((time.perf_counter() - t0) / seconds)
        cpu.append((time.thread_time() - c0) / seconds)
        out[clip.key] = x
    return out, wall, cpu


def pace(rendered: dict[str, Pcm]) -> list[float]:
    gaps = MatchConfig().gaps
    return [
        (rendered[verse_clip(p.no, Verse.KAMI).key].size
         + rendered[verse_clip(p.no, Verse.SHIMO).key].size) / RATE
        + gaps.between_verses_s + gaps.between_cards_s
        for p in all_poems()
    ]


def per_mora_ms(rendered: dict[str, Pcm], pause_s: float) -> tuple[float, int]:
    """Seconds of speech (phrase pauses taken out) per mora, over the 200 verses."""
    small = EstimatedDurations.SMALL
    morae = speech = 0.0
    for clip in verses():
        phrases = clip.yomi.split()
        morae += sum(1 for ch in clip.yomi if not ch.isspace() and ch not in small)
        speech += rendered[clip.key].size / RATE - (len(phrases) - 1) * pause_s
    return 1000 * speech / morae, int(morae)


def report_engine(title: str, voice: Voice) -> None:
    t0 = time.perf_counter()
    rendered, rtf, cpu = timed_renders(voice, verses())
    wall = time.perf_counter() - t0
    per_poem = pace(rendered)
    mora_ms, morae = per_mora_ms(rendered, VoiceConfig().phrase_pause_s)
    print(f"\n{title}: 200 verses, one thread, {wall:.1f} s")
    for label, v in [("wall", rtf), ("cpu ", cpu)]:
        print(f"  real-time factor ({label})   median {statistics.median(v):.3f}   "
              f"p99 {float(np.percentile(v, 99)):.3f}   max {max(v):.3f}")
    print(f"  poem (kami + 1.0 s + shimo + 1.5 s)   mean {statistics.mean(per_poem):.2f} s   "
          f"min {min(per_poem):.2f} s   max {max(per_poem):.2f} s")
    print(f"  pace: {mora_ms:.0f} ms a mora (speech only, {morae} morae; "
          f"{1000 / mora_ms:.1f} morae a second)")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--colour", default="blue", choices=[c.value for c in Color])
    ap.add_argument("--skip-pyttsx3", action="store_true")
    args = ap.parse_args()
    cfg = VoiceConfig()
    print(f"{platform.python_implementation()} {platform.python_version()}, "
          f"{os.cpu_count()} cores, {platform.machine()}, load average "
          f"{os.getloadavg()[0]:.1f}; voice defaults: speed {cfg.speed}, "
          f"phrase pause {cfg.phrase_pause_s} s, {cfg.loudness_lufs} LUFS, {RATE} Hz")

    def ojt() -> OpenJTalkVoice:
        return OpenJTalkVoice(RATE, cfg.speed, cfg.pitch, cfg.phrase_pause_s, cfg.loudness_lufs)

    report_engine("Open JTalk", ojt())
    if not args.skip_pyttsx3:
        report_engine("pyttsx3 (espeak-ng)", Pyttsx3Voice(
            RATE, cfg.speed, cfg.pitch, cfg.phrase_pause_s, cfg.loudness_lufs))

    clips = colour_clips(Color(args.colour))
    with tempfile.TemporaryDirectory(prefix="yomite-bench-") as tmp:
        first = RenderedVoice(ojt(), Path(tmp))
        c0 = time.thread_time()
        cold = render_all(first, clips)
        cold_cpu = time.thread_time() - c0
        memory = render_all(first, clips)
        disk = render_all(RenderedVoice(ojt(), Path(tmp)), clips)
    print(f"\none colour ({args.colour}: {len(clips)} clips = 40 verses, the jokā and the calls, "
          f"{cold.audio_s:.0f} s of speech), Open JTalk, one thread")
    for label, f in [("cold (renders)", cold), ("warm, memory cache", memory),
                     ("warm, disk cache (new process)", disk)]:
        print(f"  {label:<32} {f.wall_s:8.3f} s   per clip median {f.median_s * 1000:7.2f} ms   "
              f"p99 {f.p99_s * 1000:7.2f} ms   rendered {f.rendered}")
    print(f"  cold, CPU time of the rendering thread: {cold_cpu:.1f} s (the wall time above "
          f"also counts whatever else the machine ran: load average {os.getloadavg()[0]:.1f})")


if __name__ == "__main__":
    main()
