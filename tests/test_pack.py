"""Recorded packs: layout detection, the missing-verse report, fallback on and off, calls,
manifest errors that name the field, and files in lossy formats."""

import math
import os
from pathlib import Path

import numpy as np
import pytest

from audio.codec import encode, write_wav
from audio.config import VoiceConfig, VoiceEngine
from audio.errors import PackError, VoiceError
from audio.pcm import loudness_lufs, peak
from audio.voices.factory import make_voice
from audio.voices.pack import (
    CALLS,
    PackLayout,
    describe_missing,
    read_pack,
)
from audio.voices.packvoice import PackVoice
from audio.voices.voice import RenderedVoice
from reader.clip import Clip, ClipKind, Verse

from .packs import ALL, RATE, dominant_hz, manifest, recording, shuffle100, wasuramoti
from .voice_fakes import CountingVoice, call, verse


def test_wasuramoti_layout_is_detected(tmp_path: Path) -> None:
    pack = read_pack(wasuramoti(tmp_path / "p"))
    assert pack.layout is PackLayout.WASURAMOTI and pack.name == "yomite_reader"
    assert len(pack.files) == 202 and pack.missing() == []
    assert pack.files["012/shimo"].name == "yomite_reader_012_2.wav"
    assert pack.files["000/kami"].name == "yomite_reader_000_1.wav"


@pytest.mark.parametrize("joka", ["000{}", "joka_{}", "joka{}"])
def test_shuffle100_layout_is_detected(tmp_path: Path, joka: str) -> None:
    pack = read_pack(shuffle100(tmp_path / "s100", joka=joka))
    assert pack.layout is PackLayout.SHUFFLE100 and pack.missing() == []
    assert pack.files["100/kami"].name == "100a.wav"


def test_other_files_are_ignored(tmp_path: Path) -> None:
    folder = wasuramoti(tmp_path / "p")
    (folder / "README.txt").write_text("recorded in 2024")
    (folder / "cover.jpg").write_bytes(b"\xff\xd8")
    assert len(read_pack(folder).files) == 202


def test_the_right_recording_is_played_for_each_clip(tmp_path: Path) -> None:
    voice = PackVoice(wasuramoti(tmp_path / "p"), 48000, -20.0)
    for no, v in [(1, Verse.KAMI), (57, Verse.SHIMO), (100, Verse.SHIMO)]:
        x = voice.render(Clip(ClipKind.VERSE, "あ", "あ", poem=no, verse=v))
        assert dominant_hz(x, 48000) == pytest.approx(200 + 7 * no + (v is Verse.SHIMO) * 3,
                                                      abs=4)
    joka = voice.render(Clip(ClipKind.PRELUDE, "あ", "あ", poem=0, verse=Verse.SHIMO))
    assert dominant_hz(joka, 48000) == pytest.approx(203, abs=4)


def test_pack_renders_are_trimmed_normalised_and_resampled(tmp_path: Path) -> None:
    x = PackVoice(wasuramoti(tmp_path / "p"), 48000, -18.0).render(verse(5))
    assert x.dtype == np.float32
    # silence cut on the noise floor (10 ms frames), 20 ms margins
    assert x.size / 48000 == pytest.approx(0.3 + 0.04, abs=0.011)
    assert x[0] == 0.0 and x[-1] == 0.0  # faded in and out: no step at either edge
    assert loudness_lufs(x, 48000) == pytest.approx(-18.0, abs=0.1)
    assert peak(x) <= 10 ** (-1 / 20)


def test_missing_verses_are_reported_by_poem(tmp_path: Path) -> None:
    lacking = {(12, Verse.KAMI), (57, Verse.SHIMO)}
    folder = wasuramoti(tmp_path / "p", [s for s in ALL if s not in lacking])
    with pytest.raises(PackError, match=r"pack yomite_reader .* lacks poems 12 kami, 57 shimo; "
                                        r"add the recordings or set voice.pack_fallback"):
        PackVoice(folder, 48000, fallback=CountingVoice(rate=48000))


def test_fallback_reads_only_what_is_missing(tmp_path: Path) -> None:
    folder = wasuramoti(tmp_path / "p", [s for s in ALL if s != (12, Verse.KAMI)])
    fallback = CountingVoice(rate=48000)
    voice = PackVoice(folder, 48000, fallback=fallback, fallback_for_missing=True)
    voice.render(verse(11))
    voice.render(verse(12, Verse.SHIMO))
    assert fallback.total == 0
    voice.render(verse(12))
    assert fallback.renders == {verse(12).key: 1}
    assert "lacks 1 verses: 12 kami, read by counting" in voice.describe()


def test_fallback_needs_a_voice(tmp_path: Path) -> None:
    folder = wasuramoti(tmp_path / "p", [s for s in ALL if s[0] != 1])
    with pytest.raises(PackError, match=r"lacks poems 1 kami and shimo; .* give a "
                                        r"fallback voice"):
        PackVoice(folder, 48000, fallback_for_missing=True)


def test_calls_come_from_the_fallback_even_without_pack_fallback(tmp_path: Path) -> None:
    fallback = CountingVoice(rate=48000)
    voice = PackVoice(wasuramoti(tmp_path / "p"), 48000, fallback=fallback)
    voice.render(call("end_call"))
    assert fallback.renders == {call("end_call").key: 1}
    bare = PackVoice(wasuramoti(tmp_path / "p"), 48000)
    with pytest.raises(PackError, match=r"records no call 'end_call'.*\"call/end_call\""):
        bare.render(call("end_call"))


def test_a_manifest_maps_verses_and_calls(tmp_path: Path) -> None:
    folder = tmp_path / "m"
    folder.mkdir()
    files = {f"{n:03d}/{v.value}": f"v{n:03d}{v.value}.wav" for n, v in ALL}
    for (n, v), name in zip(ALL, files.values(), strict=True):
        write_wav(folder / name, recording(n, v), RATE)
    write_wav(folder / "thanks.wav", recording(99, Verse.KAMI), RATE)
    lines = "\n".join(f'  "{slot}": {name}' for slot, name in files.items())
    manifest(folder, f"name: Reader M\nfiles:\n{lines}\n  \"call/end_call\": thanks.wav\n")
    fallback = CountingVoice(rate=48000)
    voice = PackVoice(folder, 48000, fallback=fallback)
    assert voice.pack.layout is PackLayout.MANIFEST and voice.name == "pack-Reader M"
    x = voice.render(call("end_call"))
    assert fallback.total == 0 and dominant_hz(x, 48000) == pytest.approx(893, abs=4)
    voice.render(call("memorise_call", "ふだをおぼえてください"))
    assert fallback.total == 1  # not in the manifest: the fallback says it
    assert "calls: end_call recorded; others from counting" in voice.describe()


@pytest.mark.parametrize(("text", "message"), [
    ("files: [1, 2", r"yomite-pack\.yaml: not valid YAML"),
    ("- a\n- b\n", r"yomite-pack\.yaml: the top level must be a mapping"),
    ("name: R\nfils: {}\n", r"yomite-pack\.yaml: fils: unknown key; allowed keys: name, files"),
    ("name: [1]\nfiles: {'001/kami': a.wav}\n", r"yomite-pack\.yaml: name: expected a non-empty"),
    ("name: R\n", r"yomite-pack\.yaml: files: expected a mapping of slots"),
    ("files:\n  '001/kamii': a.wav\n", r"yomite-pack\.yaml: files\.001/kamii: unknown slot"),
    ("files:\n  '101/kami': a.wav\n", r"files\.101/kami: poem 101 is outside 000-100"),
    ("files:\n  '001/kami': 3\n", r"files\.001/kami: expected a file name, got 3"),
    ("files:\n  '001/kami': notes.txt\n", r"files\.001/kami: 'notes\.txt' is not an audio"),
    ("files:\n  '001/kami': gone.wav\n", r"files\.001/kami: no such file 'gone\.wav' in"),
    ("files: {'000/kami': a.wav}\njoka: naniwazu\n",
     r"yomite-pack\.yaml: joka: expected a mapping such as \{poem: naniwazu"),
    ("files: {'000/kami': a.wav}\njoka: {poem: tokai}\n",
     r"joka\.poem: 'tokai' is not a jokā yomite knows; use one of: naniwazu \(難波津に\.\.\.\), "
     r"or leave joka out"),
    ("files: {'000/kami': a.wav}\njoka: {poem: naniwazu, repeats_lower: twice}\n",
     r"joka\.repeats_lower: true \(000/shimo reads the lower verse twice\) or false, not "
     r"'twice'"),
    ("files: {'000/kami': a.wav}\njoka: {poem: naniwazu, repeat: true}\n",
     r"joka\.repeat: unknown key; allowed keys: poem, repeats_lower"),
])
def test_manifest_errors_name_file_and_field(tmp_path: Path, text: str, message: str) -> None:
    folder = manifest(tmp_path / "m", text)
    write_wav(folder / "a.wav", recording(1, Verse.KAMI), RATE)
    with pytest.raises(PackError, match=message):
        read_pack(folder)


def test_folders_that_are_not_packs_are_refused(tmp_path: Path) -> None:
    with pytest.raises(PackError, match="no such folder"):
        read_pack(tmp_path / "nowhere")
    (tmp_path / "empty").mkdir()
    with pytest.raises(PackError, match="no recordings yomite recognises"):
        read_pack(tmp_path / "empty")
    mixed = wasuramoti(tmp_path / "mixed", [(1, Verse.KAMI)])
    shuffle100(mixed, [(1, Verse.SHIMO)])
    with pytest.raises(PackError, match=r"mixes Wasuramoti files .* and Shuffle100 files"):
        read_pack(mixed)
    two = wasuramoti(tmp_path / "two", [(1, Verse.KAMI)], reader="a")
    wasuramoti(two, [(2, Verse.KAMI)], reader="b")
    with pytest.raises(PackError, match=r"several readers \(a, b\)"):
        read_pack(two)
    dup = shuffle100(tmp_path / "dup", [(1, Verse.KAMI)])
    encode(recording(1, Verse.KAMI), RATE, dup / "001a.flac", "flac")
    with pytest.raises(PackError, match=r"001a\.flac and 001a\.wav both record poem 1 kami"):
        read_pack(dup)
    far = shuffle100(tmp_path / "far", [(1, Verse.KAMI)])
    write_wav(far / "101a.wav", recording(1, Verse.KAMI), RATE)
    with pytest.raises(PackError, match=r"101a\.wav is for poem 101"):
        read_pack(far)


@pytest.mark.parametrize("fmt", ["ogg", "mp3", "flac"])
def test_compressed_recordings_play(tmp_path: Path, fmt: str) -> None:
    folder = shuffle100(tmp_path / "p", [s for s in ALL if s != (33, Verse.SHIMO)])
    encode(recording(33, Verse.SHIMO), RATE, folder / f"033b.{fmt}", fmt)
    x = PackVoice(folder, 48000, -20.0).render(verse(33, Verse.SHIMO))
    assert loudness_lufs(x, 48000) == pytest.approx(-20.0, abs=1.0)
    assert dominant_hz(x, 48000) == pytest.approx(200 + 7 * 33 + 3, abs=4)
    assert x.size / 48000 == pytest.approx(0.34, abs=0.03)  # encoder padding trimmed too


def test_an_undecodable_recording_names_the_slot_and_file(tmp_path: Path) -> None:
    folder = shuffle100(tmp_path / "p", [s for s in ALL if s != (2, Verse.KAMI)])
    (folder / "002a.ogg").write_bytes(b"not vorbis at all" * 50)
    voice = PackVoice(folder, 48000)
    with pytest.raises(PackError, match=r"002/kami: .*002a\.ogg: cannot decode"):
        voice.render(verse(2))


def test_not_strict_opens_an_incomplete_pack_for_inspection(tmp_path: Path) -> None:
    folder = wasuramoti(tmp_path / "p", [s for s in ALL if s[0] < 90])
    voice = PackVoice(folder, 48000, strict=False)
    assert "lacks 22 verses: 90-100 kami and shimo" in voice.describe()
    voice.render(verse(89))
    with pytest.raises(PackError, match="lacks poems 95 shimo"):
        voice.render(verse(95, Verse.SHIMO))


def test_describe_missing_merges_runs() -> None:
    missing = [(0, Verse.KAMI), (3, Verse.KAMI), (3, Verse.SHIMO), (4, Verse.KAMI),
               (4, Verse.SHIMO), (5, Verse.SHIMO), (7, Verse.KAMI), (7, Verse.SHIMO)]
    assert describe_missing(missing) == "000 (jokā) kami, 3-4 kami and shimo, 5 shimo, " \
                                        "7 kami and shimo"


def test_a_changed_recording_changes_the_cache_key(tmp_path: Path) -> None:
    folder = wasuramoti(tmp_path / "p")
    before = RenderedVoice(PackVoice(folder, 48000), None).cache_key(verse(1))
    path = folder / "yomite_reader_050_1.wav"
    st = path.stat()
    os.utime(path, ns=(st.st_atime_ns, st.st_mtime_ns + 1_000_000_000))
    after = RenderedVoice(PackVoice(folder, 48000), None).cache_key(verse(1))
    assert before != after


def test_fallback_rate_must_match(tmp_path: Path) -> None:
    with pytest.raises(VoiceError, match="renders at 16000 Hz, the pack at 48000 Hz"):
        PackVoice(wasuramoti(tmp_path / "p"), 48000, fallback=CountingVoice(rate=16000))


def test_make_voice_builds_a_pack_with_open_jtalk_behind_it(tmp_path: Path) -> None:
    folder = wasuramoti(tmp_path / "p", [s for s in ALL if s != (40, Verse.SHIMO)])
    cfg = VoiceConfig(engine=VoiceEngine.PACK, pack=folder, cache_dir=tmp_path / "cache")
    # a pack that covers only some poems is accepted; it says which it cannot read
    partial = make_voice(cfg, 48000)
    assert partial.lacks(range(1, 101)) == [40] and partial.lacks([1, 2, 39]) == []
    with pytest.raises(PackError, match="lacks poems 40 shimo"):
        partial.pcm(verse(40, Verse.SHIMO))
    voice = make_voice(cfg.model_copy(update={"pack_fallback": True}), 48000)
    assert voice.lacks(range(1, 101)) == []
    inner = voice.voice
    assert isinstance(inner, PackVoice)
    assert inner.fallback is not None and inner.fallback.name == "openjtalk"
    x = voice.pcm(verse(40, Verse.SHIMO, yomi="ひとのとうまで"))  # read by Open JTalk
    assert math.isfinite(loudness_lufs(x, 48000)) and x.size > 48000 // 2


def outside(tmp_path: Path) -> Path:
    """A recording outside the pack's folder (something a pack must never reach)."""
    folder = tmp_path / "elsewhere"
    folder.mkdir(exist_ok=True)
    return write_wav(folder / "x.wav", recording(5, Verse.KAMI), RATE)


@pytest.mark.parametrize("layout", ["wasuramoti", "shuffle100"])
def test_a_symlink_out_of_the_pack_is_refused_naming_it(tmp_path: Path, layout: str) -> None:
    if layout == "wasuramoti":
        folder = wasuramoti(tmp_path / "p", [(1, Verse.KAMI)], reader="r")
        link = folder / "r_002_1.wav"
    else:
        folder = shuffle100(tmp_path / "p", [(1, Verse.KAMI)])
        link = folder / "002a.wav"
    link.symlink_to(outside(tmp_path))
    with pytest.raises(PackError, match=rf"{link.name}: points outside the pack's folder"):
        read_pack(folder)


@pytest.mark.parametrize("entry", ["../elsewhere/x.wav", "/etc/x.wav", "{outside}",
                                   "sub/../../elsewhere/x.wav", "link.wav", "dir/x.wav"])
def test_manifest_paths_out_of_the_pack_are_refused_naming_the_entry(tmp_path: Path,
                                                                      entry: str) -> None:
    secret = outside(tmp_path)
    folder = manifest(tmp_path / "m", "files:\n  '001/kami': a.wav\n  '001/shimo': "
                      + repr(entry.format(outside=secret)) + "\n")
    write_wav(folder / "a.wav", recording(1, Verse.KAMI), RATE)
    (folder / "sub").mkdir()
    (folder / "link.wav").symlink_to(secret)  # a file that links out
    (folder / "dir").symlink_to(secret.parent, target_is_directory=True)  # a folder that does
    with pytest.raises(PackError, match=r"yomite-pack\.yaml: files\.001/shimo: .* (leaves|points "
                                        r"outside) the pack's folder"):
        read_pack(folder)


def test_paths_inside_the_pack_may_use_subfolders_and_links(tmp_path: Path) -> None:
    folder = manifest(tmp_path / "m", "files:\n  '001/kami': takes/a.wav\n"
                      "  '001/shimo': same.wav\n")
    (folder / "takes").mkdir()
    write_wav(folder / "takes" / "a.wav", recording(1, Verse.KAMI), RATE)
    (folder / "same.wav").symlink_to("takes/a.wav")
    pack = read_pack(folder)
    assert pack.files["001/kami"] == folder / "takes" / "a.wav"
    assert pack.files["001/shimo"] == folder / "same.wav"


def test_a_manifest_that_links_out_of_the_pack_is_refused(tmp_path: Path) -> None:
    folder = tmp_path / "m"
    folder.mkdir()
    elsewhere = tmp_path / "elsewhere.yaml"
    elsewhere.write_text("files:\n  '001/kami': a.wav\n", "utf-8")
    (folder / "yomite-pack.yaml").symlink_to(elsewhere)
    write_wav(folder / "a.wav", recording(1, Verse.KAMI), RATE)
    with pytest.raises(PackError, match=r"yomite-pack\.yaml: points outside the pack's folder"):
        read_pack(folder)


@pytest.mark.parametrize("layout", ["wasuramoti", "shuffle100"])
def test_calls_recorded_as_files_are_played_instead_of_the_fallback(tmp_path: Path,
                                                                    layout: str) -> None:
    folder = (wasuramoti if layout == "wasuramoti" else shuffle100)(tmp_path / "p")
    write_wav(folder / "end_call.wav", recording(99, Verse.KAMI), RATE)
    write_wav(folder / "call-memorise_call.m4a.wav", recording(98, Verse.KAMI), RATE)  # no call
    write_wav(folder / "call-memorise_call.wav", recording(97, Verse.KAMI), RATE)
    fallback = CountingVoice(rate=48000)
    voice = PackVoice(folder, 48000, fallback=fallback)
    assert dominant_hz(voice.render(call("end_call")), 48000) == pytest.approx(893, abs=4)
    said = voice.render(call("memorise_call", "ふだをおぼえてください"))
    assert dominant_hz(said, 48000) == pytest.approx(879, abs=4)
    assert fallback.total == 0
    voice.render(call("prelude_intro", "ごよういよければ"))
    assert fallback.total == 1  # not recorded: the fallback says it
    assert "calls: end_call, memorise_call recorded; others from counting" in voice.describe()
    write_wav(folder / "call-end_call.wav", recording(99, Verse.KAMI), RATE)
    with pytest.raises(PackError, match=r"call-end_call\.wav and end_call\.wav both record the "
                                        r"call end_call; keep one"):
        read_pack(folder)


def test_the_calls_a_pack_records_are_the_calls_of_the_programme() -> None:
    from audio.voices.recording import slots
    from reader.config import MatchConfig

    assert set(CALLS) == {s.name for s in slots(MatchConfig()) if s.kind == "call"}
