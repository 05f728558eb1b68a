"""Recorded voice packs: a folder of one file per verse, read by a human reader.

Three layouts are recognised, the first that fits:

- **manifest**: a `yomite-pack.yaml` in the folder maps slots to files (any other file is
  ignored)::

      name: Reader A            # optional, shown in lists and used for the cache folder
      files:
        "001/kami": 001-1.flac  # poem 1, upper verse
        "001/shimo": 001-2.flac
        "000/kami": joka-1.flac # 000 is the jokā (prelude)
        "call/end_call": thanks.flac
      joka: {poem: naniwazu}    # optional: the jokā recorded is 難波津

- **Wasuramoti**: `<reader>_<NNN>_<1|2>.<ext>`, NNN 001..100 and 000 for the jokā, 1 the upper
  and 2 the lower verse (`inaba_001_1.ogg`).
- **Shuffle100**: `<NNN>a.<ext>` / `<NNN>b.<ext>` for upper and lower verse; the jokā is
  `000a`/`000b`, `joka_a`/`joka_b`, or one file for both verses, `序歌` (or `joka`): in that
  app's convention 難波津 with its lower verse read twice (`audio.voices.packjoka` hears whether
  it is, and where to cut).

In the Wasuramoti and Shuffle100 layouts a call is a file named after it, `call-<name>.<ext>` or
`<name>.<ext>`, for the names in CALLS (`end_call.m4a`: ありがとうございました).

Files may be wav, flac, ogg/opus, webm, m4a, mp3 or aac (`codec.CONTAINERS`, told from their
content), each at most `codec.MAX_DECODE_S` long. Every file is inside the pack's folder: a
manifest path that is absolute or climbs out (`..`), or a link (to a file or a folder) that points
elsewhere, is refused, naming the entry. A call (the memorisation call, the prelude intro, the
end call...) and the jokā that the pack does not record come from the fallback voice. A pack may
cover only some poems (a pack being recorded): it reads any match whose deck it covers (`lacks`
says which poems of a deck it cannot read, and the match is refused), unless
`fallback_for_missing` lets the fallback voice read those.

A manifest may also say `pace_s`, the seconds of speech a poem (upper plus lower verse) the pack
is fitted to, `speech_s`, each slot's measured speech length (written by import and the
recording page, so fitting needs no pass over the files), and `joka`, which poem its jokā is
(`poem: naniwazu`, reader.joka.JOKA_POEMS) and whether its `000/shimo` reads the lower verse
twice (`repeats_lower: true`).

The voice that reads a pack is `audio.voices.packvoice`'s.
"""

import hashlib
import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from enum import StrEnum
from pathlib import Path
from typing import Any, Final

import yaml

from audio.codec import DECODABLE
from audio.errors import PackError, VoiceError
from audio.voices.packjoka import JokaInfo
from reader.clip import Clip, ClipKind, Verse
from reader.joka import JOKA_POEMS

MANIFEST: Final = "yomite-pack.yaml"
POEMS: Final = range(0, 101)  # 0 is the jokā
# the calls a pack may record (reader.programme names its call clips so)
CALLS: Final = ("bow_call", "memorise_call", "prelude_intro", "extra_call", "again_call",
                "end_call", "move_call")

_EXT = r"\.(?P<ext>[A-Za-z0-9]+)"
_WASURAMOTI = re.compile(rf"(?P<reader>.+)_(?P<no>\d{{3}})_(?P<half>[12]){_EXT}")
_SHUFFLE100 = re.compile(rf"(?P<no>\d{{3}})(?P<half>[ab]){_EXT}", re.IGNORECASE)
_SHUFFLE100_JOKA = re.compile(rf"joka[_-]?(?P<half>[ab]){_EXT}", re.IGNORECASE)
_SHUFFLE100_JOKA_ONE = re.compile(rf"(?:序歌|joka){_EXT}", re.IGNORECASE)
_CALL_FILE = re.compile(rf"(?:call-)?(?P<call>{'|'.join(CALLS)}){_EXT}")
# Shuffle100's one-file jokā is 難波津, read upper, lower, lower again
_SHUFFLE100_JOKA_POEM: Final = "naniwazu"
_SLOT = re.compile(r"(?P<no>\d{3})/(?P<verse>kami|shimo)|call/(?P<call>[a-z][a-z0-9_]*)")
_HALF: Final = {"1": Verse.KAMI, "2": Verse.SHIMO, "a": Verse.KAMI, "b": Verse.SHIMO}


class PackLayout(StrEnum):
    MANIFEST = "manifest"
    WASURAMOTI = "wasuramoti"
    SHUFFLE100 = "shuffle100"


def verse_slot(poem: int, verse: Verse) -> str:
    return f"{poem:03d}/{verse.value}"


def call_slot(name: str) -> str:
    return f"call/{name}"


def clip_slot(clip: Clip) -> str:
    if clip.kind is ClipKind.CALL:
        return call_slot(clip.name)
    if clip.poem is None or clip.verse is None:
        raise VoiceError(f"clip {clip.key} names no poem and verse: a pack cannot say it")
    return verse_slot(clip.poem, clip.verse)


@dataclass(frozen=True)
class Pack:
    """A pack folder as read from disk: which file says which slot."""

    folder: Path
    layout: PackLayout
    name: str
    files: Mapping[str, Path]
    pace_s: float | None = None
    speech_s: Mapping[str, float] | None = None
    # what its jokā is (None: the pack records none, or does not say which poem it is)
    joka: JokaInfo | None = None

    def missing(self) -> list[tuple[int, Verse]]:
        return [(n, v) for n in POEMS for v in Verse if verse_slot(n, v) not in self.files]

    def lacks(self, poems: Iterable[int]) -> list[int]:
        """The poems among `poems` (1-100) the pack cannot read: one verse or both missing."""
        return sorted({n for n in poems for v in Verse if verse_slot(n, v) not in self.files})

    def covers(self) -> list[int]:
        """The poems (1-100) with both verses recorded."""
        return [n for n in POEMS if n and not self.lacks([n])]

    def one_file_joka(self) -> bool:
        """The jokā is one recording of both verses (Shuffle100's 序歌)."""
        kami, shimo = self.files.get(verse_slot(0, Verse.KAMI)), self.files.get(
            verse_slot(0, Verse.SHIMO))
        return kami is not None and kami == shimo

    def fingerprint(self) -> str:
        """Changes when any file is added, removed, replaced or touched."""
        h = hashlib.sha256()
        for slot in sorted(self.files):
            st = self.files[slot].stat()
            h.update(f"{slot}\0{self.files[slot].name}\0{st.st_size}\0{st.st_mtime_ns}\n".encode())
        return h.hexdigest()


def describe_missing(missing: Iterable[tuple[int, Verse]]) -> str:
    """`[(12, kami), (57, shimo), (60, kami), (60, shimo), (61, kami), (61, shimo)]` as
    "12 kami, 57 shimo, 60-61 kami and shimo"; poem 0 is written "000 (jokā)"."""
    by_poem: dict[int, set[Verse]] = {}
    for no, verse in missing:
        by_poem.setdefault(no, set()).add(verse)
    parts: list[str] = []
    run: list[int] = []

    def label(no: int) -> str:
        return "000 (jokā)" if no == 0 else str(no)

    def flush() -> None:
        if run:
            span = label(run[0]) if len(run) == 1 else f"{label(run[0])}-{label(run[-1])}"
            parts.append(f"{span} kami and shimo")
            run.clear()

    for no in sorted(by_poem):
        if len(by_poem[no]) == len(Verse):
            if run and run[-1] != no - 1:
                flush()
            run.append(no)
            continue
        flush()
        parts.append(f"{label(no)} {next(iter(by_poem[no])).value}")
    flush()
    return ", ".join(parts)


def read_pack(folder: Path) -> Pack:
    """Detect the pack's layout and index its files; PackError if it is not a usable pack."""
    if not folder.is_dir():
        raise PackError(f"voice pack {folder}: no such folder")
    manifest = folder / MANIFEST
    if manifest.is_symlink() or manifest.exists():
        _inside(folder, manifest, str(manifest))
        return _read_manifest(folder, manifest)
    audio = sorted(p for p in folder.iterdir() if p.suffix[1:].lower() in DECODABLE)
    for p in audio:
        if p.is_symlink():
            _inside(folder, p, f"voice pack {folder}: {p.name}")
    audio = [p for p in audio if p.is_file()]
    wasuramoti = [(p, m) for p in audio if (m := _WASURAMOTI.fullmatch(p.name))]
    shuffle = [
        (p, m) for p in audio
        if (m := _SHUFFLE100.fullmatch(p.name) or _SHUFFLE100_JOKA.fullmatch(p.name))
    ]
    joka_one = [p for p in audio if _SHUFFLE100_JOKA_ONE.fullmatch(p.name)]
    if wasuramoti and shuffle:
        raise PackError(
            f"voice pack {folder} mixes Wasuramoti files ({wasuramoti[0][0].name}) and Shuffle100 "
            f"files ({shuffle[0][0].name}): keep one layout per folder, or add {MANIFEST}"
        )
    if wasuramoti:
        readers = sorted({m["reader"] for _, m in wasuramoti})
        if len(readers) > 1:
            raise PackError(
                f"voice pack {folder} holds Wasuramoti files of several readers "
                f"({', '.join(readers)}): put each reader in its own folder"
            )
        files = _index(folder, [(p, int(m["no"]), _HALF[m["half"]]) for p, m in wasuramoti])
        return Pack(folder, PackLayout.WASURAMOTI, readers[0], _with_calls(folder, files, audio))
    if shuffle:
        entries = [
            (p, int(m.groupdict().get("no") or 0), _HALF[m["half"].lower()]) for p, m in shuffle
        ]
        if joka_one:
            if any(no == 0 for _, no, _ in entries):
                raise PackError(
                    f"voice pack {folder}: {joka_one[0].name} and "
                    f"{next(p.name for p, no, _ in entries if no == 0)} both record the jokā; "
                    "keep one"
                )
            entries += [(joka_one[0], 0, v) for v in Verse]
        return Pack(folder, PackLayout.SHUFFLE100, folder.name,
                    _with_calls(folder, _index(folder, entries), audio),
                    joka=JokaInfo(_SHUFFLE100_JOKA_POEM) if joka_one else None)
    raise PackError(
        f"voice pack {folder} holds no recordings yomite recognises: expected "
        f"<reader>_001_1.ogg (Wasuramoti), 001a.m4a (Shuffle100) or a {MANIFEST} manifest"
    )


def _inside(folder: Path, path: Path, what: str) -> None:
    """PackError (starting with `what`) unless `path`, every link followed, is in `folder`: a
    pack never makes yomite read a file elsewhere (a link to a secret, a folder linked out)."""
    try:
        real = path.resolve(strict=False)
        root = folder.resolve(strict=True)
    except (OSError, RuntimeError) as e:  # a loop of links
        raise PackError(f"{what}: cannot follow ({e})") from None
    if not real.is_relative_to(root):
        raise PackError(f"{what}: points outside the pack's folder (to {real}); copy the "
                        f"file into {folder}")


def _index(folder: Path, entries: list[tuple[Path, int, Verse]]) -> dict[str, Path]:
    files: dict[str, Path] = {}
    for path, no, verse in entries:
        if no not in POEMS:
            raise PackError(
                f"voice pack {folder}: {path.name} is for poem {no}; poems are 001-100 "
                "and 000 is the jokā"
            )
        slot = verse_slot(no, verse)
        if slot in files and files[slot] != path:
            raise PackError(
                f"voice pack {folder}: {files[slot].name} and {path.name} both record poem "
                f"{no} {verse.value}; keep one"
            )
        files[slot] = path
    return files


def _with_calls(folder: Path, files: dict[str, Path], audio: list[Path]) -> dict[str, Path]:
    """`files` with the calls among `audio` (`end_call.m4a`, `call-end_call.m4a`)."""
    for path in audio:
        m = _CALL_FILE.fullmatch(path.name)
        if m is None:
            continue
        slot = call_slot(m["call"])
        if slot in files:
            raise PackError(f"voice pack {folder}: {files[slot].name} and {path.name} both "
                            f"record the call {m['call']}; keep one")
        files[slot] = path
    return files


def _manifest_joka(manifest: Path, value: Any, files: Mapping[str, Path]) -> JokaInfo | None:
    """The manifest's `joka:` (which poem the recorded jokā is); None when it records none."""
    if value is None:
        return None
    example = "{poem: naniwazu, repeats_lower: false}"
    if not isinstance(value, dict):
        raise PackError(f"{manifest}: joka: expected a mapping such as {example}, got {value!r}")
    unknown = sorted(str(k) for k in value if k not in ("poem", "repeats_lower"))
    if unknown:
        raise PackError(f"{manifest}: joka.{unknown[0]}: unknown key; allowed keys: poem, "
                        "repeats_lower")
    poem = value.get("poem")
    if not isinstance(poem, str) or poem not in JOKA_POEMS:
        known = ", ".join(f"{k} ({j.kami.text.split()[0]}...)" for k, j in JOKA_POEMS.items())
        raise PackError(f"{manifest}: joka.poem: {poem!r} is not a jokā yomite knows; use "
                        f"one of: {known}, or leave joka out to show the configured jokā")
    repeats = value.get("repeats_lower", False)
    if not isinstance(repeats, bool):
        raise PackError(f"{manifest}: joka.repeats_lower: true (000/shimo reads the lower "
                        f"verse twice) or false, not {repeats!r}")
    if any(verse_slot(0, v) not in files for v in Verse):
        return None  # the recording page may have taken the jokā out again
    return JokaInfo(poem, repeats)


def _read_manifest(folder: Path, manifest: Path) -> Pack:
    try:
        data: Any = yaml.safe_load(manifest.read_text("utf-8"))
    except (OSError, UnicodeDecodeError) as e:
        raise PackError(f"{manifest}: cannot read ({e})") from None
    except yaml.YAMLError as e:
        raise PackError(f"{manifest}: not valid YAML: {e}") from None
    if not isinstance(data, dict):
        raise PackError(f"{manifest}: the top level must be a mapping with a 'files' key")
    allowed = ("name", "files", "pace_s", "speech_s", "joka")
    unknown = sorted(str(k) for k in data if k not in allowed)
    if unknown:
        raise PackError(f"{manifest}: {unknown[0]}: unknown key; allowed keys: "
                        f"{', '.join(allowed)}")
    pace = data.get("pace_s")
    if pace is not None and (not isinstance(pace, int | float) or isinstance(pace, bool)
                             or not 1.0 <= pace <= 60.0):
        raise PackError(f"{manifest}: pace_s: expected seconds of speech a poem, 1-60, "
                        f"got {pace!r}")
    speech = data.get("speech_s") or {}
    if not isinstance(speech, dict) or not all(
        isinstance(v, int | float) and not isinstance(v, bool) and 0 < v < 600
        for v in speech.values()
    ):
        raise PackError(f"{manifest}: speech_s: expected a mapping of slots to seconds")
    name = data.get("name", folder.name)
    if not isinstance(name, str) or not name.strip():
        raise PackError(f"{manifest}: name: expected a non-empty string, got {name!r}")
    entries = data.get("files")
    if not isinstance(entries, dict) or not entries:
        raise PackError(
            f"{manifest}: files: expected a mapping of slots to files "
            f"(\"001/kami\": 001-1.flac), got {entries!r}"
        )
    files: dict[str, Path] = {}
    for slot, file in entries.items():
        where = f"{manifest}: files.{slot}"
        m = _SLOT.fullmatch(str(slot))
        if m is None:
            raise PackError(
                f"{where}: unknown slot; use \"NNN/kami\" or \"NNN/shimo\" (NNN 000-100, "
                f"000 the jokā) or \"call/<name>\" ({', '.join(CALLS)})"
            )
        if m["no"] is not None and int(m["no"]) not in POEMS:
            raise PackError(f"{where}: poem {int(m['no'])} is outside 000-100")
        if not isinstance(file, str) or not file.strip():
            raise PackError(f"{where}: expected a file name, got {file!r}")
        if Path(file).is_absolute() or ".." in Path(file).parts:
            raise PackError(f"{where}: {file!r} leaves the pack's folder; name a file inside "
                            f"{folder}, relative to it")
        path = folder / file
        if path.suffix[1:].lower() not in DECODABLE:
            raise PackError(
                f"{where}: {file!r} is not an audio format yomite decodes "
                f"({', '.join(sorted(DECODABLE))})"
            )
        _inside(folder, path, f"{where}: {file!r}")
        if not path.is_file():
            raise PackError(f"{where}: no such file {file!r} in {folder}")
        files[str(slot)] = path
    return Pack(folder, PackLayout.MANIFEST, name.strip(), files,
                None if pace is None else float(pace),
                {str(k): float(v) for k, v in speech.items()} or None,
                _manifest_joka(manifest, data.get("joka"), files))


def covered_colours(pack: Pack) -> list[str]:
    """The Goshiki colours whose twenty poems the pack records whole."""
    from reader.poems import all_poems

    by_colour: dict[str, list[int]] = {}
    for p in all_poems():
        by_colour.setdefault(p.color.value, []).append(p.no)
    return [c for c, nos in by_colour.items() if not pack.lacks(nos)]
