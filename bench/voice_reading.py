"""How the voice reads, in figures: what Open JTalk is told to say for the hundred poems, the
calls and the jokā (from the front end's labels, no synthesis), and how linear `voice.speed` is
for every engine; with --styles, the reading style's table (issue 21) for `natural` and
`reader` over the 200 verses, and the pace a poem; with --pack, the same table for a recorded
pack's verses as recorded and fitted to a pace by `voice.pack_shape` `reader` and `uniform`
(bench/pack_shape.py; without a folder, a demonstration pack built from Open JTalk's natural
style with a held last vowel). Prints figures; passes or fails nothing.

    .venv/bin/python -m bench.voice_reading [--verses N]   # speed ratios over N verses (20)
    .venv/bin/python -m bench.voice_reading --styles [--poems N]   # the style table (100)
    .venv/bin/python -m bench.voice_reading --pack [FOLDER] [--pace S] [--poems N]
"""

import argparse
import statistics
import tempfile
from pathlib import Path

import numpy as np

from audio.codec import write_wav
from audio.voices.espeak import Pyttsx3Voice
from audio.voices.openjtalk import OpenJTalkVoice, clip_readings
from audio.voices.packvoice import PackVoice
from audio.voices.pronunciation import dictionary_labels, label_morae
from audio.voices.recording import spoken_clips
from audio.voices.voice import Voice
from reader.clip import Clip, Verse
from reader.config import MatchConfig
from reader.poems import all_poems
from reader.programme import verse_clip

RATE = 48000


def all_clips() -> list[Clip]:
    return [*(verse_clip(p.no, v) for p in all_poems() for v in Verse),
            *spoken_clips(MatchConfig())]


def reading_figures() -> None:
    phrases = fallbacks = same = agree = compared = inside = longs = 0
    fell: list[str] = []
    for clip in all_clips():
        for r in clip_readings(clip):
            phrases += 1
            ours = label_morae(r.labels)
            longs += r.spoken.count("ー")
            if r.fallback is not None:
                fallbacks += 1
                fell.append(f"{clip.key} {r.yomi}")
                continue
            dic = label_morae(dictionary_labels(r.text))
            if len(dic) == len(ours):
                same += 1
                compared += len(ours)
                agree += sum(a.high == b.high for a, b in zip(ours, dic, strict=True))
            cuts, n = {0}, 0
            for w in r.words:
                n += len(w.morae)
                cuts.add(n)
            inside += sum(1 for i in range(1, len(ours))
                          if ours[i].phrase != ours[i - 1].phrase and i not in cuts)
    print(f"phrases: {phrases} (500 verse phrases, the calls and the jokā)")
    print(f"  high/low pitch agreeing with Open JTalk's dictionary analysis of the text: "
          f"{agree / compared:.1%} of {compared} morae, over the {same} phrases whose "
          "dictionary reading has the reference's mora count")
    print(f"  accent phrase boundaries inside a dictionary word: {inside}")
    print(f"  long vowels said as one (ー): {longs}")
    print(f"  read from the kana alone (dictionary agreement under 1/3): {fallbacks}: "
          f"{'; '.join(fell)}")


def ratios(voice_at: dict[float, Voice], clips: list[Clip]) -> dict[float, list[float]]:
    base = {c.key: voice_at[1.0].render(c).size for c in clips}
    return {s: [v.render(c).size / base[c.key] for c in clips]
            for s, v in voice_at.items() if s != 1.0}


def show(title: str, rs: dict[float, list[float]]) -> None:
    for speed, r in rs.items():
        print(f"  {title:<12} speed {speed:<4}: x{statistics.median(r):.4f} as long (median; "
              f"min {min(r):.4f}, max {max(r):.4f}; exact {1 / speed:.4f})")


def speed_figures(n: int) -> None:
    clips = [verse_clip(p.no, v) for p in all_poems() for v in Verse][:: max(1, 200 // n)][:n]
    print(f"\nvoice.speed over {len(clips)} verses (speech and phrase pauses stretched alike)")
    show("Open JTalk", ratios({s: OpenJTalkVoice(RATE, speed=s) for s in (1.0, 0.8, 1.25)},
                              clips))
    show("pyttsx3", ratios({s: Pyttsx3Voice(RATE, speed=s) for s in (1.0, 0.8, 1.25)}, clips))
    with tempfile.TemporaryDirectory(prefix="yomite-bench-pack-") as tmp:
        folder = Path(tmp)
        rng = np.random.default_rng(1)
        for c in clips:
            secs = 2.0 + rng.uniform(0, 1.5)
            t = np.arange(round(secs * RATE)) / RATE
            x = (0.3 * np.sin(2 * np.pi * 180 * t) * (1 + 0.5 * np.sin(2 * np.pi * 4 * t)) / 1.5)
            write_wav(folder / f"{c.poem:03d}{'a' if c.verse is Verse.KAMI else 'b'}.wav",
                      x.astype(np.float32), RATE)
        show("pack", ratios({s: PackVoice(folder, RATE, strict=False, speed=s)
                             for s in (1.0, 0.8, 1.25)}, clips))


def style_figures(poems: int) -> None:
    """The table of issue 21 for each style, the `reader` targets checked verse by verse, and
    the pace: a poem's upper verse, gap, lower verse, gap, as the programme times them."""
    from audio.config import VoiceConfig, held_s
    from audio.voices.chant import ChantStyle
    from bench.reading_style import measure, summary
    from reader.programme import build_programme

    chosen = all_poems()[:poems]
    cfg = VoiceConfig()
    for style, chant in (("natural", None), ("reader", ChantStyle(**cfg.chant.model_dump()))):
        voice = OpenJTalkVoice(RATE, chant=chant)
        rows = {v: [] for v in Verse}
        paces, misses = [], []
        match = MatchConfig(held_s=held_s(cfg.model_copy(update={"style": style})))
        segs = build_programme(match, [chosen[0].no], 1)
        gaps = [s.silence_s for s in segs if s.card == 1 and s.clip is None]
        for p in chosen:
            secs = 0.0
            for v in Verse:
                clip = verse_clip(p.no, v)
                x = voice.render(clip)
                morae_s, onset = voice.timing(clip)
                r = measure(x, RATE, morae_s, onset)
                rows[v].append(r)
                secs += x.size / RATE
                if style == "reader":
                    why = [k for k, bad in (
                        ("hold", r.last_ratio < (3 if v is Verse.KAMI else 4)),
                        ("range", r.pitch_range_st > 3), ("final", abs(r.final_st) > 1),
                        ("vibrato", not (0.5 <= r.vibrato_st <= 1 and 4.5 <= r.vibrato_hz <= 6)),
                        ("release", r.release_s < 0.3), ("pause", r.pauses > 0)) if bad]
                    if why:
                        misses.append(f"{clip.key} ({', '.join(why)})")
            paces.append(secs + sum(gaps))
        print(f"\nstyle {style}: {len(chosen)} poems, gaps after the verses {gaps} s; a poem "
              f"{statistics.mean(paces):.2f} s on average (p10-p90 "
              f"{np.percentile(paces, 10):.2f}-{np.percentile(paces, 90):.2f})")
        for v in Verse:
            print(f"  {v.value}:")
            for k, cell in summary(rows[v]).items():
                print(f"    {k:<38} {cell}")
        if style == "reader":
            print(f"  verses missing a reader target: {len(misses)} of {2 * len(chosen)}"
                  + (f": {'; '.join(misses)}" if misses else ""))


def pack_figures(folder: str, poems: int, pace_s: float) -> None:
    """The style table for a pack as recorded, and fitted to `pace_s` both ways."""
    from audio.config import VoiceConfig
    from audio.voices.packshape import ShapeStyle
    from bench.pack_shape import demo_pack, fitted_figures, misses
    from bench.reading_style import cell, summary

    cfg = VoiceConfig()
    shape = ShapeStyle(cfg.pack_pause_s, cfg.chant.hold_upper, cfg.chant.hold_lower)
    with tempfile.TemporaryDirectory(prefix="yomite-bench-pack-") as tmp:
        if folder:
            path, timings = Path(folder), None
            chosen = [p.no for p in all_poems()
                      if not PackVoice(path, RATE, strict=False).pack.lacks([p.no])][:poems]
            print(f"\npack {path}: {len(chosen)} poems; mora timing estimated from the "
                  "recordings (speech less pauses and held end over the morae less one)")
        else:
            path, chosen = Path(tmp) / "demo", [p.no for p in all_poems()[:poems]]
            timings = demo_pack(path, OpenJTalkVoice(RATE), chosen, RATE)
            print(f"\nno pack given: a demonstration pack of {len(chosen)} poems built from Open "
                  "JTalk's natural style (phrases 150 ms apart), each verse's last vowel held "
                  "1 s and released over 0.7 s; mora timing from the HTS engine, carried "
                  "through each fit")
        columns = {}
        for title, pace, how in (("as recorded", None, None), ("reader", pace_s, shape),
                                 ("uniform", pace_s, None)):
            rows, per_poem = fitted_figures(path, chosen, RATE, pace, how, timings)
            columns[title] = (rows, per_poem)
            print(f"  {title:<12} {per_poem:.2f} s of speech a poem; verses missing the hold "
                  f"(>= 3 / 4 median morae) or with a pause >= 100 ms: {misses(rows)} of "
                  f"{2 * len(chosen)}")
    print(f"  fitted to {pace_s:g} s of speech a poem (pause {shape.pause_s:g} s, held end "
          f"floor {shape.hold_upper:g} / {shape.hold_lower:g} median morae)")
    for v in Verse:
        cells = {t: {"median mora (s)": cell([r.median_mora_s for r in rows[v]], "{:.3f}"),
                     **summary(rows[v])} for t, (rows, _) in columns.items()}
        print(f"  {v.value:<38} " + " ".join(f"{t:<22}" for t in cells))
        for k in cells["reader"]:
            print(f"    {k:<36} " + " ".join(f"{c[k]:<22}" for c in cells.values()))


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--verses", type=int, default=20)
    ap.add_argument("--styles", action="store_true")
    ap.add_argument("--poems", type=int, default=None, help="100 for --styles, 20 for --pack")
    ap.add_argument("--pack", nargs="?", const="", default=None, metavar="FOLDER")
    ap.add_argument("--pace", type=float, default=4.5, help="seconds of speech a poem (--pack)")
    args = ap.parse_args()
    if args.pack is not None:
        pack_figures(args.pack, args.poems or 20, args.pace)
        return
    if args.styles:
        style_figures(args.poems or 100)
        return
    reading_figures()
    speed_figures(args.verses)


if __name__ == "__main__":
    main()
