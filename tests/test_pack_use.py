"""Packs as users have them: a pack that covers only some poems (a match whose deck it lacks is
refused with the poem numbers, in the API and on the command line), Shuffle100's one-file jokā
序歌, a competitive reader fitted to 7 s a poem, tempo that keeps pitch, trimming on the
recording's own noise floor, .m4a files, and the import's progress."""

import io
import json
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
import yaml
from fastapi.testclient import TestClient

from api.app import create_app
from audio.codec import write_wav
from audio.pcm import trim_noise, trim_silence
from audio.voices.catalogue import import_pack
from audio.voices.pack import read_pack
from audio.voices.packvoice import PackVoice
from hall.config import parse_config
from reader.clip import Clip, ClipKind, Verse
from reader.poems import all_poems
from yomite.offline import import_progress, render_match

from .packs import ALL, RATE, dominant_hz, recording, shuffle100, wasuramoti
from .voice_fakes import tone, verse

TOKEN = "operator-token-for-tests-0123456789"
OP = {"Authorization": f"Bearer {TOKEN}"}
YOMITE = str(Path(sys.executable).parent / "yomite")
CACHE = "/tmp/yomite-test-cache"
BLUE = [p.no for p in all_poems() if p.color.value == "blue"]
PINK = [p.no for p in all_poems() if p.color.value == "pink"]


def noisy(x: np.ndarray, level_db: float, seed: int = 1) -> np.ndarray:
    rng = np.random.default_rng(seed)
    noise = rng.normal(0.0, 10 ** (level_db / 20), x.size).astype(np.float32)
    return (x + noise).astype(np.float32)


def m4a(src: np.ndarray, path: Path, rate: int = RATE) -> Path:
    wav = path.with_suffix(".wav")
    write_wav(wav, src, rate)
    subprocess.run(["ffmpeg", "-v", "error", "-y", "-i", str(wav), "-c:a", "aac", "-b:a", "96k",
                    str(path)], check=True, timeout=60)
    wav.unlink()
    return path


def pack_config(tmp: Path, folder: Path, **voice: object) -> dict[str, object]:
    return {
        "match": {"memorise_s": 1, "cards": 3},
        # the calls come from Open JTalk: its renders are kept between runs like every test's
        "voice": {"engine": "pack", "pack": str(folder), "cache_dir": CACHE,
                  **voice},
        "audio": {"output": "null"},
        "journal_dir": str(tmp / "journal"),
    }


def test_a_partial_pack_reads_the_decks_it_covers_and_refuses_the_others(
    tmp_path: Path,
) -> None:
    folder = wasuramoti(tmp_path / "blue", [(n, v) for n in [0, *BLUE] for v in Verse])
    app = create_app(parse_config(pack_config(tmp_path, folder)), operator_token=TOKEN)
    with TestClient(app) as c:
        ok = c.post("/api/channels/main/match", json={"colors": ["blue"]}, headers=OP)
        assert ok.status_code == 200, ok.text
        c.post("/api/channels/main/match/abort", headers=OP)
        bad = c.post("/api/channels/main/match", json={"colors": ["blue", "pink"]}, headers=OP)
        assert bad.status_code == 422
        body = bad.json()
        assert body["error"] == "bad_deck"
        assert f"lacks poems {', '.join(map(str, sorted(PINK)))} of this deck" in body["detail"]


def test_render_refuses_a_deck_the_pack_lacks_unless_told_to_fall_back(tmp_path: Path) -> None:
    folder = wasuramoti(tmp_path / "blue", [(n, v) for n in [0, *BLUE] for v in Verse])
    cfg = tmp_path / "config.yaml"
    data = pack_config(tmp_path, folder)
    data["match"] = {"memorise_s": 1, "cards": 1, "prelude": {"enabled": False}}
    cfg.write_text(yaml.safe_dump(data), "utf-8")
    args = [YOMITE, "--config", str(cfg), "render", "--poems", f"{BLUE[0]},{PINK[0]}",
            "--seed", "3", "--out", str(tmp_path / "m.wav")]
    refused = subprocess.run(args, capture_output=True, text=True, timeout=120)
    assert refused.returncode == 2
    assert f"lacks poems {PINK[0]} of this deck" in refused.stderr
    assert "--pack-fallback" in refused.stderr and "Traceback" not in refused.stderr
    done = subprocess.run([*args, "--pack-fallback"], capture_output=True, text=True,
                          timeout=300)
    assert done.returncode == 0, done.stderr
    assert json.loads(done.stdout)["cards"] == 1


def test_shuffle100_one_file_joka_is_split_at_its_pause(tmp_path: Path) -> None:
    folder = shuffle100(tmp_path / "s", [s for s in ALL if 0 < s[0] < 4])
    gap = np.zeros(RATE // 2, dtype=np.float32)
    joka = noisy(np.concatenate([gap, tone(0.8, RATE, 300, 0.3), gap, tone(0.6, RATE, 520, 0.3),
                                 gap]), -60)
    m4a(joka, folder / "序歌.m4a")
    pack = read_pack(folder)
    assert pack.one_file_joka() and (0, Verse.KAMI) not in pack.missing()
    voice = PackVoice(folder, 48000, strict=False)
    kami = voice.render(Clip(ClipKind.PRELUDE, "あ", "あ", poem=0, verse=Verse.KAMI))
    shimo = voice.render(Clip(ClipKind.PRELUDE, "あ", "あ", poem=0, verse=Verse.SHIMO))
    assert dominant_hz(kami, 48000) == pytest.approx(300, abs=4)
    assert dominant_hz(shimo, 48000) == pytest.approx(520, abs=4)
    assert kami.size / 48000 == pytest.approx(0.8, abs=0.08)
    assert "jokā: recorded (one file, split at its pause)" in voice.describe()
    # imported, it becomes two files of our own layout
    out = import_pack(folder, tmp_path / "packs")
    manifest = yaml.safe_load((out / "yomite-pack.yaml").read_text("utf-8"))
    assert manifest["files"]["000/kami"] != manifest["files"]["000/shimo"]
    assert manifest["speech_s"]["000/shimo"] == pytest.approx(0.6, abs=0.08)


def test_a_competitive_pack_fitted_to_seven_seconds_a_poem_reads_at_that_pace(
    tmp_path: Path,
) -> None:
    # a slow reader (4.5-4.9 s upper verse, 3.5 s lower: 10.5 s a poem), in a room with noise
    folder = tmp_path / "slow"
    folder.mkdir()
    poems = [0, 1, 2, 3, 4, 5]
    room = np.zeros(RATE // 4, dtype=np.float32)
    for no in poems:
        for v, secs in ((Verse.KAMI, 4.5 + 0.2 * (no % 3)), (Verse.SHIMO, 3.5)):
            x = np.concatenate([room, tone(secs, RATE, 200 + 7 * no, 0.3), room])
            write_wav(folder / f"{no:03d}{'a' if v is Verse.KAMI else 'b'}.wav",
                      noisy(x, -55, no), RATE)
    cfg = parse_config(pack_config(tmp_path, folder, pack_pace_s=4.5) | {
        "match": {"memorise_s": 1, "cards": 3, "prelude": {"enabled": False}}})
    result = render_match(cfg, poems=(1, 2, 3, 4, 5), seed=11, out=tmp_path / "m.wav",
                          timeline=tmp_path / "m.json")
    segments = json.loads((tmp_path / "m.json").read_text("utf-8"))["segments"]
    kami = [s["start_s"] for s in segments if s.get("verse") == "kami" and s.get("card")]
    per_poem = np.diff(kami)
    assert result["cards"] == 3 and len(per_poem) == 2
    assert per_poem == pytest.approx([7.0, 7.0], abs=0.5)
    # the pitch is the reader's: a stretch, not a resampling
    shimo = PackVoice(folder, 48000, strict=False, pace_s=4.5).render(verse(2, Verse.SHIMO))
    assert dominant_hz(shimo, 48000) == pytest.approx(214, abs=3)


def test_speed_makes_pack_verses_longer_with_the_same_pitch(tmp_path: Path) -> None:
    folder = wasuramoti(tmp_path / "p")
    base = PackVoice(folder, 48000).render(verse(7))
    slow = PackVoice(folder, 48000, speed=0.8).render(verse(7))
    assert slow.size / base.size == pytest.approx(1.25, rel=0.02)
    assert dominant_hz(slow, 48000) == pytest.approx(dominant_hz(base, 48000), abs=3)
    assert PackVoice(folder, 48000, speed=0.8).params != PackVoice(folder, 48000).params


def test_trimming_follows_the_recordings_own_noise_floor() -> None:
    # 0.4 s of room noise at -40 dBFS either side of 0.5 s of speech at -10 dBFS
    room = np.zeros(round(0.4 * RATE), dtype=np.float32)
    x = noisy(np.concatenate([room, tone(0.5, RATE, 300, 0.45), room]), -40)
    kept_by_peak = trim_silence(x, RATE).size / RATE
    kept_by_floor = trim_noise(x, RATE).size / RATE
    assert kept_by_peak > 1.2  # the peak-relative trim keeps the room's noise
    assert kept_by_floor == pytest.approx(0.5 + 0.04, abs=0.02)


def test_m4a_packs_import_with_a_few_lines_of_progress_when_not_on_a_terminal(
    tmp_path: Path,
) -> None:
    folder = tmp_path / "m4a"
    folder.mkdir()
    slots = [(n, v) for n in range(0, 2) for v in Verse]
    for n, v in slots:
        m4a(recording(n, v), folder / f"{n:03d}{'a' if v is Verse.KAMI else 'b'}.m4a")
    lines: list[str] = []

    def progress(done: int, total: int, _slot: str) -> None:
        buf = io.StringIO()
        import_progress(done, total, buf)
        lines.extend(buf.getvalue().splitlines())

    out = import_pack(folder, tmp_path / "packs", progress=progress)
    assert lines == ["importing 1/4", "importing 2/4", "importing 3/4", "importing 4/4"]
    voice = PackVoice(out, 48000, strict=False)
    assert dominant_hz(voice.render(verse(1, Verse.SHIMO)), 48000) == pytest.approx(
        200 + 7 + 3, abs=4)
    # and 200 files make four lines, not 200
    many = io.StringIO()
    for i in range(1, 201):
        import_progress(i, 200, many)
    assert many.getvalue().splitlines() == [f"importing {n}/200" for n in (50, 100, 150, 200)]


def test_import_progress_is_a_bar_on_a_terminal() -> None:
    class Tty(io.StringIO):
        def isatty(self) -> bool:
            return True

    out = Tty()
    for i in range(1, 201):
        import_progress(i, 200, out)
    text = out.getvalue()
    assert text.count("\r") == 200 and text.count("\n") == 1
    assert text.endswith("[" + "#" * 30 + "] 200/200\n")


@pytest.mark.parametrize("how", ["symlink", "dotdot", "absolute"])
def test_voices_import_never_leaves_the_packs_folder(tmp_path: Path, how: str) -> None:
    secret = write_wav(tmp_path / "secret.wav", tone(0.5, RATE, 1234), RATE)
    folder = shuffle100(tmp_path / "pack", [s for s in ALL if 0 < s[0] < 3])
    if how == "symlink":
        (folder / "003a.wav").symlink_to(secret)
        entry = "003a.wav"
    else:
        files = {f"{n:03d}/{v.value}": f"{n:03d}{'a' if v is Verse.KAMI else 'b'}.wav"
                 for n, v in ALL if 0 < n < 3}
        files["003/kami"] = "../secret.wav" if how == "dotdot" else str(secret)
        (folder / "yomite-pack.yaml").write_text(yaml.safe_dump({"files": files}), "utf-8")
        entry = "files.003/kami"
    done = subprocess.run([YOMITE, "voices", "import", str(folder)], capture_output=True,
                          text=True, timeout=120, cwd=tmp_path)
    assert done.returncode == 2, done.stdout + done.stderr
    assert entry in done.stderr and "the pack's folder" in done.stderr
    assert "Traceback" not in done.stderr
    assert not (tmp_path / "var").exists() or not list((tmp_path / "var").rglob("*.flac"))
