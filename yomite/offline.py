"""Offline work: render a whole match to a file (with its timeline), render a deck's clips ahead,
import a voice pack. No event loop: a manual clock jumps from one engine deadline to the next."""

from __future__ import annotations

import json
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any, TextIO

from audio.output.filesink import FileSink
from audio.voices.factory import make_voice
from hall.config import Config
from hall.matchplan import as_read_by
from hall.playout import carry_out
from hall.voices import check_voice_covers
from reader.clip import Clip
from reader.clock import ManualClock
from reader.config import with_match_overrides
from reader.deck import Deck, parse_color
from reader.engine import Engine
from reader.events import Close, Event, Start, Tick
from reader.journal import JournalWriter
from reader.poems import all_poems
from reader.programme import build_programme, call_clips
from reader.snapshot import Snapshot
from reader.timeline import build_timeline

Progress = Callable[[int, int, Clip], None]


def render_match(
    cfg: Config,
    *,
    colors: tuple[str, ...] = (),
    poems: tuple[int, ...] = (),
    seed: int | None = None,
    overrides: dict[str, Any] | None = None,
    out: Path,
    timeline: Path | None = None,
    journal: Path | None = None,
    progress: Progress | None = None,
    close: bool = True,
) -> dict[str, Any]:
    """Render a whole match, uninterrupted, into `out` (wav/flac/mp3) and its timeline (JSON):
    with `close`, the end and move calls (rule 18) follow the last card at once.

    The timeline's frames are the file's sample positions: they agree to the sample.
    """
    match = with_match_overrides(cfg.match, overrides or {})
    # the voice's held last sounds come out of the gaps, and a pack's own jokā shows its text,
    # as on a channel
    match = as_read_by(match, cfg.voice)
    deck = Deck.build(colors=colors or (() if poems else match.colors), poems=poems, seed=seed)
    rate = cfg.audio.rate
    voice = make_voice(cfg.voice, rate)
    check_voice_covers(voice, deck)
    clock = ManualClock()
    sink = FileSink(rate, clock, fade_ms=cfg.audio.fade_ms)
    engine = Engine(match=match, deck=deck, voice=voice, clock=clock, rate=rate)
    t0 = time.perf_counter()
    clips = list(engine.programme_clips()) + (engine.closing_clips() if close else [])
    voice.prefetch(clips, progress)
    t_render = time.perf_counter() - t0
    records: list[dict[str, Any]] = []
    writer = JournalWriter(journal) if journal else None
    if writer:
        writer.append(engine.header())

    def record(entry: dict[str, Any]) -> None:
        records.append(entry)
        if writer:
            writer.append(entry)

    def publish(_snap: Snapshot) -> None:
        pass

    def run(event: Event) -> None:
        carry_out(engine.handle(event), voice, sink, record, publish)
        while (deadline := engine.next_deadline()) is not None:
            clock.set(max(clock.now(), deadline))
            carry_out(engine.handle(Tick()), voice, sink, record, publish)

    run(Start())
    if close:
        run(Close())
    if writer:
        writer.close()
    path = sink.write(out)
    frames = sink.position()
    entries = build_timeline(records, rate)
    texts = {c.key: c.text for c in engine.programme_clips()}
    for e in entries:
        if e.get("clip") in texts:
            e["text"] = texts[e["clip"]]
    if timeline is not None:
        timeline.write_text(json.dumps(
            {"rate": rate, "seed": deck.seed, "colors": [c.value for c in deck.colors],
             "order": list(deck.order[: engine.cards_planned]), "frames": frames,
             "segments": entries}, ensure_ascii=False, indent=1), "utf-8")
    return {
        "out": str(path),
        "timeline": str(timeline) if timeline else None,
        "seed": deck.seed,
        "cards": engine.cards_planned,
        "duration_s": round(frames / rate, 3),
        "voice": voice.name,
        "render_s": round(t_render, 2),
        "late_frames": sink.stats().late_frames,
    }


def render_voices(cfg: Config, *, colors: tuple[str, ...], progress: Progress | None) -> int:
    """Render (into the cache) every clip a match of these colours can need."""
    voice = make_voice(cfg.voice, cfg.audio.rate)
    cols = {parse_color(c) for c in colors} if colors else None
    nos = [p.no for p in all_poems() if cols is None or p.color in cols]
    match = as_read_by(cfg.match, cfg.voice)  # the clips a channel asks for, texts included
    segs = build_programme(match, nos, len(nos))
    every = [*call_clips(match), *(s.clip for s in segs if s.clip is not None)]
    clips = list({c.key: c for c in every}.values())
    t0 = time.perf_counter()
    voice.prefetch(clips, progress)
    dt = time.perf_counter() - t0
    st = voice.stats
    print(f"{len(clips)} clips with {voice.name} in {dt:.1f} s "
          f"({st.renders} rendered, {st.disk_hits} from the cache)")
    return 0


def import_pack(cfg: Config, path: Path, dest: Path = Path("var/packs")) -> int:
    """Copy a pack (Wasuramoti, Shuffle100 or ours) into yomite's layout and say how to use it."""
    from audio.voices import catalogue
    from audio.voices.packvoice import PackVoice

    out = catalogue.import_pack(path, dest, rate=cfg.audio.rate,
                                progress=lambda i, n, _s: import_progress(i, n))
    pack = PackVoice(out, cfg.audio.rate, cfg.voice.loudness_lufs, fallback=None,
                     fallback_for_missing=False, strict=False)
    print(pack.describe())
    print(f"to use it: set voice.engine: pack and voice.pack: {out} in config.yaml")
    return 0


def import_progress(done: int, total: int, out: TextIO | None = None) -> None:
    """A bar redrawn in place on a terminal; elsewhere (a log, a pipe) a line at every quarter,
    not one per file."""
    stream = out if out is not None else sys.stdout
    if stream.isatty():
        width = 30
        filled = width * done // max(total, 1)
        stream.write(f"\rimporting [{'#' * filled}{'.' * (width - filled)}] {done}/{total}"
                     + ("\n" if done == total else ""))
    elif done == total or done * 4 // max(total, 1) != (done - 1) * 4 // max(total, 1):
        stream.write(f"importing {done}/{total}\n")
    stream.flush()
