"""The wheel of `make dist` on a laptop with nothing but Python (issue 23): built once, installed
into a fresh venv, run from a folder outside the checkout with a PATH that holds no program at
all (no ffmpeg, ffprobe, rubberband or espeak-ng): render to WAV, FLAC and MP3, a speed of 0.8,
and `yomite serve` with the 授業 preset, its speaker clips in Ogg Opus.

Nothing is downloaded: the venv is made without pip, the wheel goes in with the suite's pip
(`--no-deps --no-index`), and the dependencies are the suite's own site-packages, added by a
.pth line. A path added that way has its own .pth files left unread, so the suite's editable
install of the checkout is not seen: the test asserts that every package comes from the wheel.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import sysconfig
import zipfile
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx2
import numpy as np
import pytest
import yaml
from websockets.sync.client import connect

from audio.codec import decode

from .serverproc import Server

pytestmark = pytest.mark.server

ROOT = Path(__file__).resolve().parent.parent
PACKAGES = ("reader", "audio", "hall", "api", "desk", "yomite")
TOKEN = "wheel-operator-token-0123456789abcdef"
MATCH = {"cards": 1, "memorise_s": 0.5, "prelude": {"enabled": False},
         "gaps": {"after_bow_s": 0.1, "after_call_s": 0.1, "between_verses_s": 0.2,
                  "between_cards_s": 0.2, "before_move_s": 0.1}}


@dataclass(frozen=True)
class Installed:
    wheel: Path
    venv: Path
    site: Path
    yomite: Path
    env: dict[str, str]
    tmp: Path

    def run(self, *args: str, cwd: Path) -> subprocess.CompletedProcess[str]:
        return subprocess.run([str(self.yomite), *args], cwd=cwd, env=self.env,
                              capture_output=True, text=True, timeout=600, check=False)


def _quiet_env() -> dict[str, str]:
    env = {k: v for k, v in os.environ.items()
           if k not in ("PYTHONPATH", "PYTHONHOME", "VIRTUAL_ENV", "PYTHONSTARTUP")}
    env["PYTHONNOUSERSITE"] = "1"
    return env


@pytest.fixture(scope="module")
def installed(tmp_path_factory: pytest.TempPathFactory) -> Installed:
    tmp = tmp_path_factory.mktemp("wheel")
    built = subprocess.run([sys.executable, str(ROOT / "scripts" / "dist.py"), str(tmp / "dist")],
                           capture_output=True, text=True, timeout=600, check=False)
    assert built.returncode == 0, built.stdout + built.stderr
    (wheel,) = (tmp / "dist").glob("yomite-*.whl")
    env = _quiet_env()
    venv = tmp / "venv"
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(venv)], check=True,
                   env=env, timeout=120)
    python = venv / "bin" / "python"
    site = Path(subprocess.run([str(python), "-c", "import sysconfig; "
                                "print(sysconfig.get_path('purelib'))"], env=env, check=True,
                               capture_output=True, text=True).stdout.strip())
    subprocess.run([sys.executable, "-m", "pip", "--python", str(python), "install", "-q",
                    "--no-deps", "--no-index", str(wheel)], check=True, env=env, timeout=300)
    deps = dict.fromkeys(sysconfig.get_path(k) for k in ("purelib", "platlib"))
    (site / "suite-dependencies.pth").write_text("".join(f"{d}\n" for d in deps), "utf-8")
    bare = tmp / "bare-path"  # a PATH with no program on it
    bare.mkdir()
    env["PATH"] = str(bare)
    (tmp / "elsewhere").mkdir()
    return Installed(wheel, venv, site, venv / "bin" / "yomite", env, tmp)


def test_the_wheel_holds_every_file_the_product_reads(installed: Installed) -> None:
    """Every file of the product's folders in the checkout (modules, pages, strings, poems,
    migrations) is in the wheel: a data file that setuptools' globs miss worked in the
    editable install and was absent from an installed one."""
    names = set(zipfile.ZipFile(installed.wheel).namelist())
    missing = [str(f.relative_to(ROOT)) for p in PACKAGES for f in (ROOT / p).rglob("*")
               if f.is_file() and "__pycache__" not in f.parts
               and str(f.relative_to(ROOT)) not in names]
    assert not missing, f"not in the wheel: {missing}"
    assert {"api/static/strings.ja.json", "reader/data/poems.json",
            "desk/migrations/script.py.mako", "desk/migrations/env.py"} <= names
    assert any(n.startswith("desk/migrations/versions/") for n in names)


def test_the_installed_packages_are_the_wheels_and_no_program_is_on_the_path(
        installed: Installed) -> None:
    code = ("import json, shutil; import " + ", ".join(PACKAGES) + "; print(json.dumps("
            "{'files': [m.__file__ for m in (" + ", ".join(PACKAGES) + ")], 'programs': "
            "[p for p in ('ffmpeg', 'ffprobe', 'rubberband', 'espeak-ng') if shutil.which(p)]}))")
    r = subprocess.run([str(installed.venv / "bin" / "python"), "-c", code],
                       cwd=installed.tmp / "elsewhere", env=installed.env, capture_output=True,
                       text=True, timeout=120, check=False)
    assert r.returncode == 0, r.stderr
    got = json.loads(r.stdout)
    for f in got["files"]:
        assert Path(f).is_relative_to(installed.site), f"{f} is not the wheel's"
    assert got["programs"] == []


def _render(installed: Installed, name: str, speed: float, fmt: str) -> tuple[Path, dict[str, Any]]:
    work = installed.tmp / "elsewhere"
    cfg = work / f"{name}.yaml"
    cfg.write_text(yaml.safe_dump({
        "match": MATCH, "journal_dir": str(work / "journal"),
        "voice": {"engine": "openjtalk", "speed": speed, "cache_dir": str(work / "cache")},
    }, allow_unicode=True), "utf-8")
    out, tl = work / f"{name}.{fmt}", work / f"{name}.json"
    r = installed.run("--config", str(cfg), "render", "--poems", "1", "--seed", "3",
                      "--out", str(out), "--timeline", str(tl), cwd=work)
    assert r.returncode == 0, r.stdout + r.stderr
    return out, json.loads(tl.read_text("utf-8"))


def _spoken_frames(timeline: dict[str, Any]) -> int:
    return sum(s["end_frame"] - s["start_frame"] for s in timeline["segments"]
               if s["kind"] not in ("gap", "memorise"))


def test_render_to_wav_flac_and_mp3_and_at_a_slower_speed(installed: Installed) -> None:
    wav, timeline = _render(installed, "match", 1.0, "wav")
    frames = timeline["frames"]
    assert decode(wav, 48000).size == frames
    flac, _ = _render(installed, "match", 1.0, "flac")
    assert decode(flac, 48000).size == frames
    mp3, _ = _render(installed, "match", 1.0, "mp3")
    assert abs(decode(mp3, 48000).size - frames) < 0.1 * 48000  # the encoder's padding only
    _, slow = _render(installed, "slow", 0.8, "wav")
    # speed 0.8: every spoken clip stretched by 1.25 (Rubber Band in-process: no program)
    assert _spoken_frames(slow) / _spoken_frames(timeline) == pytest.approx(1.25, rel=0.01)


def test_serve_starts_the_classroom_preset_and_its_speakers_get_ogg_opus(
        installed: Installed) -> None:
    work = installed.tmp / "server"
    work.mkdir()
    config = {"voice": {"engine": "openjtalk", "cache_dir": str(work / "cache")},
              "audio": {"output": "null"},
              "server": {"channels": [{"name": "main", "output": "browser"}]}}
    server = Server(work, config, TOKEN, yomite=installed.yomite, env=installed.env).start()
    try:
        assert "operator console:" in server.log() and "scan to referee" in server.log()
        op = httpx2.Client(base_url=server.base, headers=server.op, timeout=60)
        with op:
            presets = {p["id"]: p for p in op.get("/api/presets").json()}
            assert presets["classroom"]["label"] == "授業"
            key = op.get("/api/channels/main/speakers").json()["url"].split("#key=", 1)[1]
            ws = f"ws://127.0.0.1:{server.port}/ws/channels/main?audience=speaker&token={key}"
            with connect(ws, max_size=None) as spk:
                r = op.post("/api/channels/main/match", json={
                    "preset": "classroom", "seed": 4,
                    "overrides": {"cards": 1, "memorise_s": 1, "prelude": {"enabled": False}}})
                assert r.status_code == 200, r.text
                assert r.json()["voice"]["speed"] < 1.0  # the classroom's slower reading
                r = op.post("/api/channels/main/match/start")
                assert r.status_code == 200, r.text
                clips: list[dict[str, Any]] = []
                while not clips:
                    msg = json.loads(spk.recv(timeout=120))
                    if msg["type"] == "speaker":
                        clips = msg["clips"]
        clip = clips[0]
        r = httpx2.get(server.base + clip["url"], headers={"Authorization": f"Bearer {key}"},
                       timeout=60)
        assert r.status_code == 200 and r.headers["content-type"] == "audio/ogg"
        path = work / "clip.ogg"
        path.write_bytes(r.content)
        x = decode(path, 48000)
        assert len(x) == round(clip["duration_s"] * 48000)  # Opus keeps the exact length
        assert abs(x).max() > 0.05  # Open JTalk's speech, not the estimate's silence
    finally:
        server.stop()


def _m4a(path: Path, pcm: np.ndarray, rate: int) -> Path:
    """A mono AAC file in an MP4 container (.m4a, as phones and Shuffle100 packs have them),
    written by the suite's PyAV."""
    import av

    with av.open(str(path), "w", format="ipod") as out:
        stream = out.add_stream("aac", rate=rate, layout="mono")
        frame = av.AudioFrame.from_ndarray(pcm.reshape(1, -1).astype(np.float32), format="flt",
                                           layout="mono")
        frame.sample_rate = rate
        for packet in stream.encode(frame):
            out.mux(packet)
        for packet in stream.encode(None):
            out.mux(packet)
    return path


def test_a_shuffle100_pack_of_m4a_files_is_read(installed: Installed) -> None:
    """A Shuffle100-layout pack (001a, 001b...) recorded as m4a: the installed wheel decodes
    it in-process (no ffmpeg on the PATH) and reads poem 1 from it, each verse as long as its
    recording (the calls the pack lacks read by Open JTalk)."""
    from reader.clip import Verse

    from .packs import RATE, recording

    work = installed.tmp / "elsewhere"
    pack = work / "pack-m4a"
    pack.mkdir()
    for v, half in ((Verse.KAMI, "a"), (Verse.SHIMO, "b")):
        _m4a(pack / f"001{half}.m4a", recording(1, v), RATE)
    cfg = work / "pack.yaml"
    cfg.write_text(yaml.safe_dump({
        "match": {**MATCH, "prelude": {"enabled": False}}, "journal_dir": str(work / "journal"),
        "voice": {"engine": "pack", "pack": str(pack), "pack_fallback": True,
                  "cache_dir": str(work / "cache")},
    }, allow_unicode=True), "utf-8")
    out, tl = work / "pack.wav", work / "pack.json"
    r = installed.run("--config", str(cfg), "render", "--poems", "1", "--seed", "3",
                      "--out", str(out), "--timeline", str(tl), cwd=work)
    assert r.returncode == 0, r.stdout + r.stderr
    verses = [s for s in json.loads(tl.read_text("utf-8"))["segments"]
              if s.get("poem") == 1 and s["kind"] == "verse"]
    assert {s["verse"] for s in verses} == {"kami", "shimo"}, verses
    tone_s = 0.3  # each recording's tone; the pack's silences are trimmed around it
    for s in verses:
        seconds = (s["end_frame"] - s["start_frame"]) / 48000
        assert tone_s * 0.8 < seconds < tone_s + 0.25, (s, seconds)
