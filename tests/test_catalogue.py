import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from audio.config import VoiceConfig, VoiceEngine
from audio.errors import CodecError, PackError
from audio.voices.catalogue import import_pack, list_voices, render_all
from audio.voices.pack import PackLayout, read_pack
from audio.voices.packvoice import PackVoice
from audio.voices.voice import RenderedVoice
from reader.clip import Verse
from reader.poems import all_poems, poem

from .packs import ALL, dominant_hz, shuffle100
from .voice_fakes import CountingVoice, verse


def test_list_voices_reports_every_engine() -> None:
    by_engine = {v["engine"]: v for v in list_voices()}
    assert set(by_engine) == {"openjtalk", "pyttsx3", "pack", "estimate"}
    assert by_engine["openjtalk"]["available"] is True
    assert "mei_normal" in str(by_engine["openjtalk"]["detail"])
    assert by_engine["pyttsx3"]["available"] is True
    assert "Japanese voice jpx/ja" in str(by_engine["pyttsx3"]["detail"])
    assert by_engine["pack"]["available"] is False
    assert "set voice.pack" in str(by_engine["pack"]["detail"])
    assert by_engine["estimate"]["available"] is True
    assert all("selected" not in v for v in by_engine.values())


def test_list_voices_describes_the_configured_pack(tmp_path: Path) -> None:
    folder = shuffle100(tmp_path / "p", [s for s in ALL if s != (9, Verse.KAMI)])
    cfg = VoiceConfig(engine=VoiceEngine.PACK, pack=folder)
    pack = {v["engine"]: v for v in list_voices(cfg)}["pack"]
    # it still reads every deck without poem 9: the colours other than poem 9's
    assert pack["selected"] is True and pack["available"] is True
    assert "shuffle100 layout, 201 files" in str(pack["detail"])
    others = sorted({p.color.value for p in all_poems()} - {poem(9).color.value})
    detail = str(pack["detail"])
    assert "lacks 9 kami (reads decks of " in detail and "; or set voice.pack_fallback)" in detail
    assert sorted(detail.split("reads decks of ")[1].split(";")[0].split(", ")) == others
    with_fallback = cfg.model_copy(update={"pack_fallback": True})
    assert {v["engine"]: v for v in list_voices(with_fallback)}["pack"]["available"] is True


def test_render_all_times_renders_and_cache_hits() -> None:
    voice = RenderedVoice(CountingVoice(rate=16000), None)
    clips = [verse(n) for n in range(1, 6)]
    seen: list[int] = []
    cold = render_all(voice, clips, lambda done, total, clip: seen.append(done))
    assert seen == [1, 2, 3, 4, 5]
    assert cold.clips == 5 and cold.rendered == 5 and len(cold.per_clip_s) == 5
    frames = sum(voice.frames(c) for c in clips)
    assert cold.audio_s == pytest.approx(frames / 16000)
    assert cold.rtf == pytest.approx(cold.wall_s / cold.audio_s)
    assert 0 <= cold.median_s <= cold.p99_s <= cold.wall_s
    warm = render_all(voice, clips)
    assert warm.rendered == 0 and warm.audio_s == cold.audio_s


def test_import_pack_writes_the_manifest_layout(tmp_path: Path) -> None:
    src = shuffle100(tmp_path / "Reader S", [(1, Verse.KAMI), (1, Verse.SHIMO), (0, Verse.KAMI)])
    done: list[str] = []
    out = import_pack(src, tmp_path / "packs", "ogg", 48000,
                      lambda i, n, slot: done.append(slot))
    assert out == tmp_path / "packs" / "Reader_S"
    assert done == ["000/kami", "001/kami", "001/shimo"]
    pack = read_pack(out)
    assert pack.layout is PackLayout.MANIFEST and pack.name == "Reader S"
    assert sorted(p.name for p in pack.files.values()) == [
        "000-kami.ogg", "001-kami.ogg", "001-shimo.ogg"]
    x = PackVoice(out, 48000, strict=False).render(verse(1, Verse.SHIMO))
    assert dominant_hz(x, 48000) == pytest.approx(210, abs=4)
    with pytest.raises(PackError, match="already exists"):
        import_pack(src, tmp_path / "packs")


def test_a_failed_import_leaves_nothing_behind(tmp_path: Path) -> None:
    src = shuffle100(tmp_path / "src", [(1, Verse.KAMI)])
    (src / "001b.mp3").write_bytes(np.zeros(64, dtype=np.uint8).tobytes())
    with pytest.raises(CodecError, match=r"001b\.mp3"):
        import_pack(src, tmp_path / "packs")
    assert list((tmp_path / "packs").iterdir()) == []


def test_voices_list_says_espeak_is_absent_instead_of_crashing(tmp_path: Path) -> None:
    # on a machine without espeak-ng, pyttsx3's espeak driver raises RuntimeError as it is
    # imported; a finder that raises the same stands in for the missing library, in a process
    # of its own (this one has loaded the real driver already)
    (tmp_path / "sitecustomize.py").write_text(
        "import sys\n"
        "class NoEspeak:\n"
        "    def find_spec(self, name, path=None, target=None):\n"
        "        if name == 'pyttsx3.drivers._espeak':\n"
        "            raise RuntimeError('This means you probably do not have eSpeak or "
        "eSpeak-ng installed!')\n"
        "        return None\n"
        "sys.meta_path.insert(0, NoEspeak())\n", "utf-8")
    env = {**os.environ, "PYTHONPATH": f"{tmp_path}{os.pathsep}{Path.cwd()}"}
    out = subprocess.run(
        [sys.executable, "-c", "import sys; from yomite.cli import main; "
         "sys.exit(main(['voices', 'list']))"],
        capture_output=True, text=True, timeout=120, env=env, cwd=tmp_path)
    assert out.returncode == 0, out.stderr
    assert "Traceback" not in out.stderr
    line = next(ln for ln in out.stdout.splitlines() if "pyttsx3" in ln)
    assert " no " in line and "absent" in line and "apt-get install espeak-ng" in line
    assert any("openjtalk" in ln and " yes " in ln for ln in out.stdout.splitlines())
