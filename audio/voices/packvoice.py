"""A recorded pack as a voice: each slot's file decoded, trimmed on its own noise floor (a room's
hiss is not speech), normalised, and made fit / `speed` times as long by Rubber Band, pitch kept:
a verse fitted to a pace the way a reader reads (`audio.voices.packshape`: pauses joined, the
held end shortened only down to the reader style's floor, the rest of the speech stretched), or
by one ratio (`shape=None`, voice.pack_shape uniform). The pack's layout and how it is read are
`audio.voices.pack`'s.

A jokā that reads its lower verse twice (Shuffle100's 序歌, `audio.voices.packjoka`) is read
with the lower verse once unless `joka_repeat`: the match's programme decides how often a lower
verse is read (`match.lower_verse_times`), for the jokā as for the cards.
"""

import json
import logging
import math
import threading
from collections.abc import Iterable, Mapping
from pathlib import Path

from audio.codec import decode
from audio.errors import CodecError, PackError, VoiceError
from audio.pcm import Pcm, trim_noise
from audio.voices import packshape
from audio.voices.pack import (
    MANIFEST,
    POEMS,
    clip_slot,
    covered_colours,
    describe_missing,
    read_pack,
    verse_slot,
)
from audio.voices.packjoka import JokaCut, JokaInfo, cut_one_file, split_at_pause
from audio.voices.packshape import Plan, ShapeStyle
from audio.voices.voice import Param, Voice, mastered, speed_params
from reader.clip import Clip, ClipKind, Verse
from reader.joka import JOKA_POEMS

log = logging.getLogger(__name__)


def _as_is(x: Pcm, _rate: int) -> Pcm:
    return x


class PackVoice:
    """A recorded pack as a `Voice`: decodes the slot's file, trims and normalises it.

    `fallback` (Open JTalk in `make_voice`) says the calls the pack does not record, and the
    verses it lacks when `fallback_for_missing` is true; it must render at the same rate.
    Construction fails with PackError, listing what is missing, if the pack lacks verses and
    may not fall back; with `strict=False` (for inspecting a pack) it succeeds, and rendering a
    missing verse raises instead.
    """

    def __init__(
        self,
        folder: Path,
        rate: int,
        loudness_lufs: float = -20.0,
        *,
        fallback: Voice | None = None,
        fallback_for_missing: bool = False,
        strict: bool = True,
        speed: float = 1.0,
        pace_s: float | None = None,
        shape: ShapeStyle | None = ShapeStyle(),  # noqa: B008 (frozen)
        joka_repeat: bool = False,
    ) -> None:
        self.pack = read_pack(folder)
        self._rate = rate
        self.loudness_lufs = loudness_lufs
        self.fallback = fallback
        self.fallback_for_missing = fallback_for_missing
        self.speed = speed
        self.pace_s = pace_s if pace_s is not None else self.pack.pace_s
        self.shape = shape
        self._fit: float | None = None
        self._fit_lock = threading.Lock()
        self.joka_repeat = joka_repeat
        self._joka_cut: JokaCut | None = None
        self._joka_lock = threading.Lock()
        # the jokā is not a card: like a call, the fallback says it when it is not recorded
        self.missing = [(n, v) for n, v in self.pack.missing() if n != 0]
        if fallback is not None and fallback.rate != rate:
            raise VoiceError(
                f"the fallback voice {fallback.name} renders at {fallback.rate} Hz, "
                f"the pack at {rate} Hz"
            )
        if strict and self.missing and not self._falls_back:
            raise PackError(self._lacks())
        self._params: dict[str, Param] = {
            "engine": "pack",
            "folder": str(folder.resolve()),
            "layout": self.pack.layout.value,
            "files": self.pack.fingerprint(),
            "rate": rate,
            "loudness_lufs": loudness_lufs,
            "fallback": None if fallback is None else json.dumps(
                dict(fallback.params), sort_keys=True, ensure_ascii=False
            ),
            "fallback_for_missing": fallback_for_missing,
            **speed_params(speed),
            "pace_s": self.pace_s,
            "trim": "noise-floor-tail",
            **self._shape_params(),
            # a one-file jokā is cut where packjoka hears its verses (v2), its repeat kept or not
            "joka": f"v2-{'repeat' if joka_repeat else 'once'}",
        }

    def _shape_params(self) -> dict[str, Param]:
        """How a fitted pack is shaped (nothing when it is not fitted: its clips stay cached)."""
        if self.pace_s is None:
            return {}
        from audio.voices.tempo import version

        out: dict[str, Param] = {"stretcher": version(),
                                 "shape": "uniform" if self.shape is None else "reader"}
        if self.shape is not None:
            out |= {"shape_version": packshape.VERSION, "shape_pause_s": self.shape.pause_s,
                    "shape_hold_upper": self.shape.hold_upper,
                    "shape_hold_lower": self.shape.hold_lower}
        return out

    @property
    def name(self) -> str:
        return f"pack-{self.pack.name}"

    @property
    def _falls_back(self) -> bool:
        return self.fallback_for_missing and self.fallback is not None

    def _lacks(self, missing: list[tuple[int, Verse]] | None = None) -> str:
        hint = (
            "set voice.pack_fallback: true to read them with Open JTalk"
            if self.fallback is not None else "give a fallback voice to read them"
        )
        return (
            f"pack {self.pack.name} ({self.pack.folder}, {self.pack.layout} layout) lacks poems "
            f"{describe_missing(self.missing if missing is None else missing)}; "
            f"add the recordings or {hint}"
        )

    def describe(self) -> str:
        """A few lines for people: what the pack holds, what it lacks, where calls come from."""
        p = self.pack
        lines = [f"pack {p.name}: {p.layout} layout, {len(p.files)} recordings in {p.folder}"]
        if not self.missing:
            lines.append("  complete: poems 1-100, upper and lower verses")
        else:
            who = (f", read by {self.fallback.name}" if self._falls_back and self.fallback
                   else "; a match whose deck holds them is refused")
            lacks = describe_missing(self.missing)
            lines.append(f"  lacks {len(self.missing)} verses: {lacks}{who}")
            colours = covered_colours(p)
            lines.append(f"  reads whole colours: {', '.join(colours) if colours else 'none yet'}")
        source = self.fallback.name if self.fallback is not None else "the fallback voice"
        lines.append(self._describe_joka(source))
        if self.pace_s is not None:
            how = ("by one ratio" if self.shape is None else
                   f"as a reader: pauses in a verse cut to {self.shape.pause_s:g} s, the held "
                   f"end kept {self.shape.hold_upper:g}/{self.shape.hold_lower:g} median morae")
            lines.append(f"  fitted to {self.pace_s:g} s of speech a poem, {how}")
        calls = sorted(s.removeprefix("call/") for s in p.files if s.startswith("call/"))
        # make_voice always gives Open JTalk as the fallback; a bare PackVoice may have none
        lines.append(
            f"  calls: {', '.join(calls)} recorded; others from {source}" if calls
            else f"  calls: none recorded; they come from {source}"
        )
        return "\n".join(lines)

    def _describe_joka(self, source: str) -> str:
        p = self.pack
        if verse_slot(0, Verse.KAMI) not in p.files:
            return f"  jokā: not recorded; read by {source}"
        line = "  jokā: recorded" + (" (one file, split at its pause)" if p.one_file_joka()
                                    else "")
        try:
            info = self.joka()
        except PackError as e:
            return f"{line}; cannot be heard: {e}"
        if info is None:
            return line + "; which poem is not said: shown as the configured jokā"
        poem = JOKA_POEMS[info.poem].kami.text.split()[0] if info.poem else "the configured jokā"
        line += f": {poem}"
        if info.repeats_lower:
            line += (", its lower verse read twice: read " + (
                "twice (voice.pack_joka_repeat: true)" if self.joka_repeat
                else "once (voice.pack_joka_repeat: false)"))
        return line

    def joka(self) -> JokaInfo | None:
        """Which poem the pack's jokā is and whether the recording reads the lower verse twice
        (heard from a one-file jokā, once: the file is decoded); None when the pack does not
        say which poem it records."""
        info = self.pack.joka
        if info is None or not self.pack.one_file_joka():
            return info
        return JokaInfo(info.poem, self._cut_of(None).repeats_lower)

    def _cut_of(self, x: Pcm | None) -> JokaCut:
        """Where the one-file jokā is cut (`x`: it decoded already, else it is decoded)."""
        with self._joka_lock:
            if self._joka_cut is None:
                if x is None:
                    x = self._decoded(verse_slot(0, Verse.KAMI))
                try:
                    self._joka_cut = cut_one_file(x, self._rate)
                except PackError as e:
                    raise PackError(f"pack {self.pack.name}, the jokā "
                                    f"({self.pack.files[verse_slot(0, Verse.KAMI)].name}): "
                                    f"{e}") from None
            return self._joka_cut

    @property
    def rate(self) -> int:
        return self._rate

    @property
    def params(self) -> Mapping[str, Param]:
        return self._params

    def lacks(self, poems: Iterable[int]) -> list[int]:
        """The poems among `poems` this voice cannot read (none when the fallback reads what
        the pack lacks)."""
        return [] if self._falls_back else self.pack.lacks(poems)

    def fit_ratio(self) -> float:
        """How many times as long the pack's verses are made to read a poem in `pace_s`
        seconds of speech (1.0 without `pace_s`): the same for every verse, so the reader's own
        rhythm between verses stays (inside a verse, `shape` shares it out). Measured once (from
        the manifest's `speech_s`, else by decoding the recordings)."""
        if self.pace_s is None:
            return 1.0
        with self._fit_lock:
            if self._fit is None:
                per_poem = [
                    self._speech_s(verse_slot(n, Verse.KAMI))
                    + self._speech_s(verse_slot(n, Verse.SHIMO))
                    for n in self.pack.covers()
                ]
                if not per_poem:
                    raise PackError(f"pack {self.pack.name} records no whole poem to fit")
                mean = sum(per_poem) / len(per_poem)
                self._fit = min(4.0, max(0.25, self.pace_s / mean))
                log.info("pack %s: %.2f s of speech a poem, fitted to %.2f s (x%.3f)",
                         self.pack.name, mean, self.pace_s, self._fit)
            return self._fit

    def _speech_s(self, slot: str) -> float:
        known = (self.pack.speech_s or {}).get(slot)
        if known is not None:
            return known
        return self._trimmed(slot).size / self._rate

    def _decoded(self, slot: str) -> Pcm:
        try:
            return decode(self.pack.files[slot], self._rate)
        except CodecError as e:
            raise PackError(f"pack {self.pack.name}, {slot}: {e}") from None

    def _trimmed(self, slot: str) -> Pcm:
        x = self._decoded(slot)
        if slot.startswith("000/"):
            x = self._joka_verse(x, Verse(slot.removeprefix("000/")))
        return trim_noise(x, self._rate)

    def fitted(self, clip: Clip) -> tuple[Pcm, Plan | None]:
        """The clip's recording, trimmed, and how it is fitted: a `Plan` for a verse (or the
        jokā) of a pack fitted to a pace as a reader; None where one ratio does (calls, a
        pack not fitted, `shape` None)."""
        slot = clip_slot(clip)
        x = self._trimmed(slot)
        if self.pace_s is None or self.shape is None or clip.kind is ClipKind.CALL:
            return x, None
        from audio.voices.kana import morae

        return x, packshape.fit(x, self._rate, len(morae(clip.yomi)), self._stretch(slot),
                                self.shape, lower=clip.verse is Verse.SHIMO)

    def _stretch(self, slot: str) -> float:
        stretch = self.fit_ratio() / self.speed
        if not math.isfinite(stretch):
            raise PackError(f"pack {self.pack.name}: cannot fit {slot}")
        return stretch

    def _joka_verse(self, x: Pcm, verse: Verse) -> Pcm:
        """The jokā's `verse` out of its recording: a one-file jokā cut where its verses are
        heard; a lower verse read twice (the manifest says so) cut at its pause, unless the
        repeat is kept."""
        if self.pack.one_file_joka():
            cut = self._cut_of(x)
            if verse is Verse.KAMI:
                return x[: cut.upper_end]
            return x[cut.upper_end: x.size if self.joka_repeat else cut.lower_end]
        info = self.pack.joka
        if (verse is Verse.SHIMO and info is not None and info.repeats_lower
                and not self.joka_repeat):
            try:
                return split_at_pause(x, self._rate)[0]
            except PackError as e:
                raise PackError(f"pack {self.pack.name}, 000/shimo (joka.repeats_lower): "
                                f"{e}") from None
        return x

    def render(self, clip: Clip) -> Pcm:
        slot = clip_slot(clip)
        if slot in self.pack.files:
            x, plan = self.fitted(clip)
            if plan is not None:
                x, stretch = packshape.render(x, self._rate, plan), 1.0
            else:
                stretch = self._stretch(slot)
            return mastered(x, self._rate, self.loudness_lufs, self.name, clip,
                            stretch=stretch, trim=_as_is)
        if clip.kind is ClipKind.CALL or clip.kind is ClipKind.PRELUDE:
            if self.fallback is None:
                what = f"call {clip.name!r}" if clip.kind is ClipKind.CALL else "jokā"
                raise PackError(
                    f"pack {self.pack.name} records no {what} and has no fallback "
                    f"voice: map \"{slot}\" in {MANIFEST}"
                )
            return self.fallback.render(clip)
        if self._falls_back and self.fallback is not None:
            return self.fallback.render(clip)
        if clip.poem is not None and clip.poem in POEMS and clip.verse is not None:
            raise PackError(self._lacks([(clip.poem, clip.verse)]))
        raise PackError(f"pack {self.pack.name} has no recording for {slot} ({clip.key})")
