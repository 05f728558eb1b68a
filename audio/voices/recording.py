"""A voice pack being recorded, one take at a time (the recording page, `/record`).

The pack is a folder in yomite's own manifest layout (`audio.voices.pack`): one FLAC per slot
(`001-kami.flac`, `000-shimo.flac` for the jokā, `call-end_call.flac`) and `yomite-pack.yaml`
mapping slots to files with each take's speech length. The manifest is rewritten (through a
temporary file and a rename) after every take, so the pack is usable at any moment for the
colours it completes: a match whose deck it covers reads from it (`PackVoice.lacks`).

A take is checked before it is kept: it must be audio in a container a recording comes in
(told from its bytes, so a playlist naming another file is refused unread), last at most
MAX_RAW_S (decoding stops there), hold speech after trimming on its own noise floor, not clip,
and not be too quiet; otherwise `TakeRefused` says what to do.
"""

from __future__ import annotations

import contextlib
import math
import os
import tempfile
import threading
from collections.abc import Iterator
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any, Final

import numpy as np
import yaml

from audio.codec import AudioTooLong, decode, encode
from audio.errors import CodecError, PackError, VoiceError
from audio.pcm import Pcm, loudness_lufs, noise_floor_db, peak, trim_noise
from audio.voices.pack import MANIFEST, call_slot, read_pack, verse_slot
from reader.clip import Clip, Verse
from reader.config import MatchConfig, Spoken
from reader.poems import all_poems
from reader.programme import call_clip, prelude_clip

MAX_UPLOAD_BYTES: Final = 8 << 20  # a 30 s take is ~0.3 MB of Opus, ~2.9 MB of 16-bit WAV
MAX_TAKE_S: Final = 30.0
MAX_RAW_S: Final = MAX_TAKE_S + 5  # with the silence around the speech
MIN_SPEECH_S: Final = 0.3
CLIP_LEVEL: Final = 0.999  # a sample at full scale: the microphone's converter clipped
MAX_CLIPPED: Final = 10  # samples at full scale allowed in a take (a stray peak)
MIN_PEAK_DBFS: Final = -35.0  # quieter than this, the reader is too far from the microphone
# how far a take's loud part (its 95th percentile of 20 ms frames) must stand above its own
# noise floor for it to hold speech: a voice stands 20-40 dB above a room's noise; a take of
# steady noise (a fan, a hum, nothing said) stands a few dB at most
SPEECH_ABOVE_FLOOR_DB: Final = 12.0
UPLOAD_TYPES: Final = {"audio/webm": "webm", "audio/ogg": "ogg", "audio/wav": "wav",
                       "audio/x-wav": "wav", "audio/wave": "wav", "audio/mp4": "m4a",
                       "audio/mpeg": "mp3", "audio/flac": "flac"}
RATE: Final = 48000
FORMAT: Final = "flac"


class TakeRefused(VoiceError):
    """A take that cannot be kept; `code` names why (clipped, too_quiet, no_speech...)."""

    def __init__(self, code: str, detail: str, hint: str) -> None:
        super().__init__(detail)
        self.code = code
        self.detail = detail
        self.hint = hint


@dataclass(frozen=True)
class Slot:
    """One thing a reader records: a verse of a poem (1-100), a verse of the jokā (0), or a
    call. `colour` is the poem's Goshiki colour (None for the jokā and the calls)."""

    slot: str
    kind: str  # "verse" | "prelude" | "call"
    text: str
    yomi: str
    poem: int | None = None
    verse: str | None = None
    colour: str | None = None
    name: str | None = None


def spoken_fields(model: Any, path: tuple[str, ...] = ()) -> Iterator[tuple[tuple[str, ...],
                                                                          Spoken]]:
    """Every `Spoken` (a text with its yomi) in the match settings, with its path: the calls
    and the jokā, including calls added to the settings later."""
    for name in type(model).model_fields:
        value = getattr(model, name)
        if isinstance(value, Spoken):
            yield (*path, name), value
        elif hasattr(type(value), "model_fields"):
            yield from spoken_fields(value, (*path, name))


def spoken_clips(match: MatchConfig) -> list[Clip]:
    """The clips of every call of the settings and of the jokā, as the programme names them."""
    out = []
    for path, spoken in spoken_fields(match):
        if path[:1] == ("prelude",) and path[-1] in ("kami", "shimo"):
            out.append(prelude_clip(match, Verse(path[-1])))
        else:
            out.append(call_clip("_".join(path), spoken))
    return out


def slots(match: MatchConfig) -> list[Slot]:
    """What a whole pack records, in the order a reader would: the hundred poems, the jokā,
    the calls."""
    out = [
        Slot(verse_slot(p.no, v), "verse", p.kami if v is Verse.KAMI else p.shimo,
             p.kami_yomi if v is Verse.KAMI else p.shimo_yomi, p.no, v.value, p.color.value)
        for p in all_poems() for v in Verse
    ]
    calls = []
    for path, spoken in spoken_fields(match):
        if path[:1] == ("prelude",) and path[-1] in ("kami", "shimo"):
            out.append(Slot(verse_slot(0, Verse(path[-1])), "prelude", spoken.text, spoken.yomi,
                            0, path[-1]))
        else:
            name = "_".join(path)  # memorise_call, prelude_intro, end_call: the clips' names
            calls.append(Slot(call_slot(name), "call", spoken.text, spoken.yomi, name=name))
    return out + calls


@dataclass(frozen=True)
class TakeReport:
    slot: str
    speech_s: float
    raw_s: float
    peak_dbfs: float
    loudness_lufs: float
    noise_floor_dbfs: float
    clipped_samples: int

    def as_dict(self) -> dict[str, Any]:
        return {k: (round(v, 2) if isinstance(v, float) else v) for k, v in asdict(self).items()}


def _stands_out_db(x: Pcm, frame_ms: float = 20.0) -> float:
    """How many dB the take's loud part (the 95th percentile of its 20 ms frames' RMS) stands
    above its noise floor (`noise_floor_db`); inf over digital silence."""
    floor = noise_floor_db(x, RATE, frame_ms)
    n = max(1, round(frame_ms * RATE / 1000.0))
    if not math.isfinite(floor) or x.size < n:
        return math.inf
    frames = x[: x.size // n * n].astype(np.float64).reshape(-1, n)
    loud = float(np.percentile(np.sqrt(np.mean(frames * frames, axis=1)), 95))
    return 20.0 * math.log10(loud) - floor if loud > 0 else -math.inf


def _db(x: float) -> float:
    return 20.0 * float(np.log10(x)) if x > 0 else -120.0


class RecordingPack:
    """The pack the recording page fills (`voice.recording_pack`). Thread-safe: takes are
    decoded and checked in parallel, the manifest is written under one lock."""

    def __init__(self, folder: Path, match: MatchConfig, name: str = "recorded") -> None:
        self.folder = folder
        self.name = name
        self._lock = threading.Lock()
        self._slots = {s.slot: s for s in slots(match)}

    @property
    def all_slots(self) -> list[Slot]:
        return list(self._slots.values())

    def slot(self, slot: str) -> Slot:
        s = self._slots.get(slot)
        if s is None:
            raise PackError(f"there is no slot {slot!r}: use NNN/kami, NNN/shimo (000 the jokā) "
                            "or call/<name>")
        return s

    def _manifest(self) -> dict[str, Any]:
        path = self.folder / MANIFEST
        if not path.exists():
            return {"name": self.name, "files": {}, "speech_s": {}}
        data = yaml.safe_load(path.read_text("utf-8")) or {}
        data.setdefault("name", self.name)
        data.setdefault("files", {})
        data["speech_s"] = data.get("speech_s") or {}
        return dict(data)

    def recorded(self) -> dict[str, float]:
        """The slots recorded so far, with their speech lengths in seconds."""
        with self._lock:
            m = self._manifest()
        return {str(k): float(m["speech_s"].get(k, 0.0)) for k in m["files"]}

    def progress(self) -> dict[str, Any]:
        """Recorded / to record: for each colour (40 verses), for all 200 verses, and for the
        whole pack (the jokā and the calls too); the colours complete."""
        done = self.recorded()
        by_colour: dict[str, list[str]] = {}
        for s in self._slots.values():
            if s.colour is not None:
                by_colour.setdefault(s.colour, []).append(s.slot)
        colours = {c: {"done": sum(x in done for x in xs), "total": len(xs)}
                   for c, xs in by_colour.items()}
        verses = [s.slot for s in self._slots.values() if s.kind == "verse"]
        return {
            "colours": colours,
            "complete_colours": [c for c, v in colours.items() if v["done"] == v["total"]],
            "verses": {"done": sum(x in done for x in verses), "total": len(verses)},
            "all": {"done": sum(x in done for x in self._slots), "total": len(self._slots)},
        }

    def audio_path(self, slot: str) -> Path:
        self.slot(slot)
        with self._lock:
            if slot not in self._manifest()["files"]:
                raise PackError(f"{slot} is not recorded yet")
            # read as a pack: a manifest edited by hand still never names a file elsewhere
            return read_pack(self.folder).files[slot]

    def save(self, slot: str, data: bytes, content_type: str) -> TakeReport:
        """Check one take (bytes in one of `codec.CONTAINERS`, told from its content; the
        `content_type` must be one of UPLOAD_TYPES) and keep it, trimmed, as the slot's
        recording; the manifest is updated at once."""
        self.slot(slot)
        kind = content_type.split(";", 1)[0].strip().lower()
        ext = UPLOAD_TYPES.get(kind)
        if ext is None:
            raise TakeRefused("unsupported_type", f"cannot read a take of type {kind!r}",
                              f"send one of {', '.join(sorted(UPLOAD_TYPES))}")
        if not data:
            raise TakeRefused("empty_take", "the take is empty", "record again")
        if len(data) > MAX_UPLOAD_BYTES:
            raise TakeRefused("take_too_large", f"the take is {len(data)} bytes; at most "
                              f"{MAX_UPLOAD_BYTES}", f"keep a take under {MAX_TAKE_S:g} s")
        with tempfile.TemporaryDirectory(prefix="yomite-take-") as tmp:
            src = Path(tmp) / f"take.{ext}"
            src.write_bytes(data)
            try:
                # no more than MAX_RAW_S is ever decoded, whatever the file claims
                x = decode(src, RATE, max_s=MAX_RAW_S)
            except AudioTooLong:
                raise TakeRefused("take_too_long", f"the take lasts more than {MAX_RAW_S:g} s",
                                  f"read one verse, under {MAX_TAKE_S:g} s") from None
            except CodecError as e:
                why = str(e).removeprefix(f"{src}: ")  # the temporary file's name says nothing
                raise TakeRefused("undecodable_take", f"the take is not audio yomite reads "
                                  f"({why})", "record again; if it keeps failing, try another "
                                  "browser") from None
        raw_s = x.size / RATE
        clipped = int(np.count_nonzero(np.abs(x) >= CLIP_LEVEL))
        top = peak(x)
        speech = trim_noise(x, RATE)
        report = TakeReport(slot, speech.size / RATE, raw_s, _db(top),
                            loudness_lufs(speech, RATE) if speech.size else -120.0,
                            noise_floor_db(x, RATE), clipped)
        if clipped > MAX_CLIPPED:
            raise TakeRefused("clipped", f"{clipped} samples hit full scale: the take clipped",
                              "move back from the microphone or lower its gain, and record "
                              "again")
        if report.peak_dbfs < MIN_PEAK_DBFS:
            raise TakeRefused("too_quiet", f"the take peaks at {report.peak_dbfs:.0f} dBFS",
                              "come closer to the microphone or raise its gain, and record "
                              "again")
        if report.speech_s < MIN_SPEECH_S or _stands_out_db(x) < SPEECH_ABOVE_FLOOR_DB:
            raise TakeRefused("no_speech", "no speech stands out of the room's noise",
                              "read the verse aloud after pressing record")
        if report.speech_s > MAX_TAKE_S:
            raise TakeRefused("take_too_long", f"{report.speech_s:.1f} s of speech",
                              f"read one verse, under {MAX_TAKE_S:g} s")
        top_kept = peak(speech)
        if top_kept > 1.0:
            speech = speech / np.float32(top_kept)
        file = slot.replace("/", "-") + f".{FORMAT}"
        self.folder.mkdir(parents=True, exist_ok=True)
        tmp_audio = self.folder / f".{file}.partial"
        encode(speech, RATE, tmp_audio, FORMAT)
        with self._lock:
            os.replace(tmp_audio, self.folder / file)
            m = self._manifest()
            m["files"][slot] = file
            m["speech_s"][slot] = round(report.speech_s, 3)
            self._write(m)
        return report

    def delete(self, slot: str) -> None:
        self.slot(slot)
        with self._lock:
            m = self._manifest()
            file = m["files"].pop(slot, None)
            m["speech_s"].pop(slot, None)
            if file is None:
                raise PackError(f"{slot} is not recorded")
            self._write(m)
            with contextlib.suppress(FileNotFoundError):
                (self.folder / str(file)).unlink()

    def _write(self, manifest: dict[str, Any]) -> None:
        """Write the manifest (lock held); a manifest without files is removed, since a pack
        must hold at least one recording."""
        path = self.folder / MANIFEST
        if not manifest["files"]:
            path.unlink(missing_ok=True)
            return
        text = yaml.safe_dump(manifest, allow_unicode=True, sort_keys=True)
        fd, tmp = tempfile.mkstemp(dir=self.folder, suffix=".yaml.tmp")
        try:
            with os.fdopen(fd, "w", encoding="utf-8") as fh:
                fh.write(text)
            os.replace(tmp, path)
        except BaseException:
            Path(tmp).unlink(missing_ok=True)
            raise
        read_pack(self.folder)  # what we wrote must read back as a pack
