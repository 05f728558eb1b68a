"""Recording a pack through the API (in-process): a take is checked (level, clipping, speech,
size, type), trimmed on its noise floor and kept in the manifest layout; progress per colour;
only the operator may record; a pack in progress reads the matches whose deck it covers."""

import io
import json
import re
import subprocess
import sys
import wave
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import numpy as np
import pytest
from fastapi.testclient import TestClient

from api.app import create_app
from audio.codec import decode, encode
from audio.voices.pack import read_pack
from audio.voices.recording import MAX_UPLOAD_BYTES, UPLOAD_TYPES, RecordingPack, slots
from hall.config import parse_config
from reader.config import MatchConfig
from reader.poems import all_poems
from yomite.offline import render_match

from .packs import dominant_hz
from .voice_fakes import tone

TOKEN = "operator-token-for-tests-0123456789"
OP = {"Authorization": f"Bearer {TOKEN}"}
RATE = 48000
BLUE = [p.no for p in all_poems() if p.color.value == "blue"]


def take(freq: float = 440.0, amp: float = 0.3, seconds: float = 0.8, noise_db: float = -60,
         rate: int = RATE) -> bytes:
    """A WAV take: room noise, a tone (the 'voice'), room noise."""
    rng = np.random.default_rng(int(freq))
    room = np.zeros(rate // 3, dtype=np.float32)
    x = np.concatenate([room, tone(seconds, rate, freq, amp), room])
    x = x + rng.normal(0, 10 ** (noise_db / 20), x.size).astype(np.float32)
    buf = io.BytesIO()
    with wave.open(buf, "wb") as w:
        w.setnchannels(1)
        w.setsampwidth(2)
        w.setframerate(rate)
        w.writeframes((np.clip(x, -1, 1) * 32767).astype("<i2").tobytes())
    return buf.getvalue()


@pytest.fixture
def client(tmp_path: Path):
    cfg = parse_config({"match": {"memorise_s": 1, "cards": 3}, "voice": {
        "engine": "estimate", "recording_pack": str(tmp_path / "rec")},
        "audio": {"output": "null"}, "journal_dir": str(tmp_path / "journal")})
    with TestClient(create_app(cfg, operator_token=TOKEN)) as c:
        yield c


def put(c: TestClient, slot: str, body: bytes, kind: str = "audio/wav", headers=OP):
    return c.put(f"/api/recording/slots/{slot}", content=body,
                 headers={**headers, "Content-Type": kind})


def test_the_slots_are_the_poems_the_joka_and_every_call() -> None:
    all_slots = slots(MatchConfig())
    assert len([s for s in all_slots if s.kind == "verse"]) == 200
    assert [s.slot for s in all_slots if s.kind == "prelude"] == ["000/kami", "000/shimo"]
    calls = {s.name for s in all_slots if s.kind == "call"}
    assert {"memorise_call", "prelude_intro", "end_call"} <= calls
    first = all_slots[0]
    assert (first.slot, first.text, first.yomi, first.colour) == (
        "001/kami", "秋の田の かりほの庵の 苫をあらみ", "あきのたの かりおのいおの とまをあらみ",
        "pink")


def test_a_take_is_checked_trimmed_kept_and_counted(client: TestClient, tmp_path: Path) -> None:
    r = put(client, f"{BLUE[0]:03d}/kami", take(440))
    assert r.status_code == 200, r.text
    report = r.json()["take"]
    assert report["speech_s"] == pytest.approx(0.8 + 0.04, abs=0.03)  # room noise trimmed
    assert report["clipped_samples"] == 0 and -12 < report["peak_dbfs"] < -9
    assert r.json()["progress"]["colours"]["blue"] == {"done": 1, "total": 40}
    pack = read_pack(tmp_path / "rec")
    saved = decode(pack.files[f"{BLUE[0]:03d}/kami"], RATE)
    assert dominant_hz(saved, RATE) == pytest.approx(440, abs=3)
    assert pack.speech_s is not None and f"{BLUE[0]:03d}/kami" in pack.speech_s
    # played back as it was kept
    audio = client.get(f"/api/recording/slots/{BLUE[0]:03d}/kami/audio", headers=OP)
    assert audio.status_code == 200 and audio.headers["content-type"] == "audio/flac"
    state = client.get("/api/recording", headers=OP).json()
    one = next(s for s in state["slots"] if s["slot"] == f"{BLUE[0]:03d}/kami")
    assert one["recorded"] is True and one["text"] and one["yomi"]
    # recorded again: replaced, not added; deleted: gone
    assert put(client, f"{BLUE[0]:03d}/kami", take(660)).status_code == 200
    assert dominant_hz(decode(read_pack(tmp_path / "rec").files[f"{BLUE[0]:03d}/kami"], RATE),
                       RATE) == pytest.approx(660, abs=3)
    assert client.get("/api/recording", headers=OP).json()["progress"]["verses"]["done"] == 1
    assert client.delete(f"/api/recording/slots/{BLUE[0]:03d}/kami", headers=OP).json()[
        "progress"]["verses"]["done"] == 0


@pytest.mark.parametrize(("body", "kind", "status", "code"), [
    (take(amp=1.0), "audio/wav", 422, "clipped"),
    (take(amp=0.005, noise_db=-90), "audio/wav", 422, "too_quiet"),
    (take(seconds=0.05), "audio/wav", 422, "no_speech"),
    # steady noise and nothing said (a fan, a hum): was kept as 1.5 s of speech
    (take(amp=0.0, noise_db=-25, seconds=1.0), "audio/wav", 422, "no_speech"),
    (b"not audio at all", "audio/webm", 422, "undecodable_take"),
    (b"GIF89a", "image/gif", 422, "unsupported_type"),
    (b"", "audio/wav", 422, "empty_take"),
    (b"\0" * (MAX_UPLOAD_BYTES + 1), "audio/wav", 413, "take_too_large"),
])
def test_bad_takes_are_refused_with_what_to_do(client: TestClient, body: bytes, kind: str,
                                                status: int, code: str) -> None:
    r = put(client, "001/kami", body, kind)
    assert r.status_code == status, r.text
    assert r.json()["error"] == code and r.json()["hint"]
    assert client.get("/api/recording", headers=OP).json()["progress"]["verses"]["done"] == 0


def test_only_the_operator_records_and_slots_are_checked(client: TestClient) -> None:
    assert put(client, "001/kami", take(), headers={}).status_code == 401
    assert client.get("/api/recording").status_code == 401
    assert put(client, "101/kami", take()).json()["error"] == "no_such_slot"
    assert put(client, "call/nonsense", take()).status_code == 404
    assert client.get("/api/recording/slots/002/kami/audio", headers=OP).json()["error"] == (
        "not_recorded")
    assert client.get("/record").status_code == 200


def test_a_call_recorded_on_the_page_is_read_from_the_pack_not_the_fallback(
    client: TestClient, tmp_path: Path,
) -> None:
    from audio.voices.packvoice import PackVoice
    from reader.clip import Clip, ClipKind

    from .voice_fakes import CountingVoice

    calls = [s["slot"] for s in client.get("/api/recording", headers=OP).json()["slots"]
             if s["kind"] == "call"]
    assert "call/end_call" in calls and "call/memorise_call" in calls
    assert put(client, "call/end_call", take(520)).status_code == 200
    assert put(client, f"{BLUE[0]:03d}/kami", take(300)).status_code == 200
    pack = read_pack(tmp_path / "rec")
    assert pack.files["call/end_call"].name == "call-end_call.flac"
    fallback = CountingVoice(rate=RATE)
    voice = PackVoice(tmp_path / "rec", RATE, fallback=fallback, strict=False)
    thanks = voice.render(Clip(ClipKind.CALL, "ありがとうございました", "ありがとうございました",
                               name="end_call"))
    assert dominant_hz(thanks, RATE) == pytest.approx(520, abs=3) and fallback.total == 0
    assert "calls: end_call recorded" in voice.describe()


def test_a_pack_in_progress_reads_the_colours_it_completes(tmp_path: Path) -> None:
    folder = tmp_path / "rec"
    rec = RecordingPack(folder, MatchConfig())
    jobs = [(f"{no:03d}/{verse}", take(300 + 10 * i + 5 * j, seconds=0.4))
            for i, no in enumerate(BLUE) for j, verse in enumerate(("kami", "shimo"))]
    # four takes at a time: the manifest must come out with all forty
    with ThreadPoolExecutor(max_workers=4) as pool:
        list(pool.map(lambda job: rec.save(job[0], job[1], "audio/wav"), jobs))
    assert len(read_pack(folder).files) == 40
    assert rec.progress()["complete_colours"] == ["blue"]
    cfg = parse_config({"match": {"memorise_s": 1, "cards": 2, "prelude": {"enabled": False}},
                        "voice": {"engine": "pack", "pack": str(folder),
                                  "cache_dir": "/tmp/yomite-test-cache"},
                        "audio": {"output": "null"}})
    out = render_match(cfg, colors=("blue",), seed=4, out=tmp_path / "m.wav",
                       timeline=tmp_path / "m.json")
    assert out["voice"] == "pack-recorded" and out["cards"] == 2
    timeline = json.loads((tmp_path / "m.json").read_text("utf-8"))
    audio = decode(tmp_path / "m.wav", RATE)
    for seg in timeline["segments"]:
        if seg.get("kind") == "verse":
            i = BLUE.index(seg["poem"])
            j = 0 if seg["verse"] == "kami" else 1
            part = audio[seg["start_frame"]:seg["end_frame"]]
            assert dominant_hz(part, RATE) == pytest.approx(300 + 10 * i + 5 * j, abs=3)


def long_silence(path: Path, seconds: float) -> bytes:
    """A tiny FLAC of `seconds` of silence (30 min is ~27 KB)."""
    subprocess.run(["ffmpeg", "-v", "error", "-nostdin", "-y", "-f", "lavfi", "-i",
                    f"anullsrc=r={RATE}:cl=mono", "-t", f"{seconds:g}", "-c:a", "flac",
                    "-frame_size", "65535", "-f", "flac", str(path)], check=True, timeout=120)
    return path.read_bytes()


# run in a process of its own, so its peak memory is the take's alone
PEAK_OF_A_TAKE = """
import json, resource, sys
from pathlib import Path
from audio.voices.recording import RecordingPack, TakeRefused
from reader.config import MatchConfig
pack = RecordingPack(Path(sys.argv[1]), MatchConfig())
before = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
try:
    pack.save("001/kami", Path(sys.argv[2]).read_bytes(), "audio/flac")
    code = None
except TakeRefused as e:
    code = e.code
after = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
print(json.dumps({"code": code, "before_kb": before, "after_kb": after}))
"""


def test_a_tiny_take_of_long_silence_is_refused_without_decoding_it_whole(
    client: TestClient, tmp_path: Path,
) -> None:
    # 30 minutes in ~27 KB: decoded whole it took 1.6 GB; only the first 35 s may be decoded
    body = long_silence(tmp_path / "long.flac", 1800)
    assert len(body) < 64 << 10
    child = subprocess.run([sys.executable, "-c", PEAK_OF_A_TAKE, str(tmp_path / "rec2"),
                            str(tmp_path / "long.flac")], capture_output=True, text=True,
                           timeout=300, cwd=Path(__file__).resolve().parent.parent)
    assert child.returncode == 0, child.stderr
    peak = json.loads(child.stdout)
    assert peak["code"] == "take_too_long"
    grown_mb = (peak["after_kb"] - peak["before_kb"]) / 1024  # ru_maxrss is in KiB on Linux
    assert grown_mb < 200, f"decoding the take grew the process by {grown_mb:.0f} MB"
    # through the API: 422 with a code the page says in both languages
    r = put(client, "001/kami", body, "audio/flac")
    assert r.status_code == 422, r.text
    assert r.json()["error"] == "take_too_long" and "35 s" in r.json()["detail"]
    assert client.get("/api/recording", headers=OP).json()["progress"]["all"]["done"] == 0


@pytest.mark.parametrize("kind", sorted(set(UPLOAD_TYPES)))
def test_a_playlist_take_never_reads_another_file(client: TestClient, tmp_path: Path,
                                                  kind: str) -> None:
    # a secret recording elsewhere on the server, loud and clear enough to pass every check
    rate = 48000
    secret_pcm = decode_bytes(take(1234), tmp_path / "s.wav")
    secret = encode(secret_pcm, rate, tmp_path / "secret" / "secret.flac", "flac")
    playlist = (f"#EXTM3U\n#EXT-X-TARGETDURATION:10\n#EXTINF:2.0,\n{secret}\n"
                "#EXT-X-ENDLIST\n").encode()
    r = put(client, "001/kami", playlist, kind)
    assert r.status_code == 422, r.text
    assert r.json()["error"] == "undecodable_take"
    kept = tmp_path / "rec"
    assert not kept.exists() or not [p for p in kept.rglob("*") if p.is_file()]
    assert client.get("/api/recording", headers=OP).json()["progress"]["all"]["done"] == 0


def decode_bytes(data: bytes, path: Path) -> np.ndarray:
    path.write_bytes(data)
    return decode(path, RATE)


def test_every_refusal_of_a_take_has_words_in_both_languages() -> None:
    root = Path(__file__).resolve().parent.parent
    codes = set(re.findall(r'TakeRefused\(\s*"([a-z_]+)"',
                           (root / "audio" / "voices" / "recording.py").read_text("utf-8")))
    assert {"take_too_long", "undecodable_take", "clipped"} <= codes
    for lang in ("ja", "en"):
        strings = json.loads((root / "api" / "static" / f"strings.{lang}.json").read_text(
            "utf-8"))
        assert not sorted(c for c in codes if f"err_{c}" not in strings), lang
