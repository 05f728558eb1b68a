import ast
import re
import subprocess
import wave
from pathlib import Path

import numpy as np
import pytest

from audio.codec import (
    ENCODINGS,
    AudioTooLong,
    decode,
    encode,
    encode_opus,
    read_wav,
    write_wav,
)
from audio.errors import CodecError
from audio.pcm import loudness_lufs

from .voice_fakes import tone

AUDIO = Path(__file__).resolve().parent.parent / "audio"


def test_only_codec_imports_pyav() -> None:
    # FFmpeg's libraries come in through one module, as sounddevice does (audio/output)
    importers = []
    root = AUDIO.parent
    for package in ("reader", "audio", "api", "hall", "desk", "yomite"):
        for path in sorted((root / package).rglob("*.py")):
            for node in ast.walk(ast.parse(path.read_text("utf-8"))):
                names = (
                    [a.name for a in node.names] if isinstance(node, ast.Import)
                    else [node.module or ""] if isinstance(node, ast.ImportFrom) else []
                )
                if any(n == "av" or n.startswith("av.") for n in names):
                    importers.append(path.relative_to(root).as_posix())
    assert sorted(set(importers)) == ["audio/codec.py"]


def test_wav_round_trip_by_the_wave_module(tmp_path: Path) -> None:
    x = tone(0.25, 22050)
    y, rate = read_wav(write_wav(tmp_path / "t.wav", x, 22050))
    assert rate == 22050
    np.testing.assert_allclose(y, x, atol=1.5 / 32768)


@pytest.mark.parametrize("fmt", ["wav", "flac"])
def test_lossless_formats_round_trip(tmp_path: Path, fmt: str) -> None:
    x = tone(0.5, 48000)
    y = decode(encode(x, 48000, tmp_path / f"t.{fmt}", fmt), 48000)
    assert y.dtype == np.float32 and y.size == x.size
    np.testing.assert_allclose(y, x, atol=1.5 / 32768)


@pytest.mark.parametrize("fmt", ["mp3", "ogg"])
def test_lossy_formats_keep_length_and_loudness(tmp_path: Path, fmt: str) -> None:
    x = tone(1.0, 48000)
    y = decode(encode(x, 48000, tmp_path / f"t.{fmt}", fmt), 48000)
    assert abs(y.size - x.size) < 0.1 * 48000  # encoder padding only
    assert loudness_lufs(y, 48000) == pytest.approx(loudness_lufs(x, 48000), abs=0.5)


def test_int16_input_is_written_as_is(tmp_path: Path) -> None:
    x = (tone(0.1, 16000) * 32767).astype(np.int16)
    y = decode(encode(x, 16000, tmp_path / "t.wav", "wav"), 16000)
    np.testing.assert_array_equal(np.round(y * 32768).astype(np.int16), x)


def test_decode_resamples_and_mixes_down(tmp_path: Path) -> None:
    left, right = tone(0.5, 44100, amp=0.4), np.zeros(22050, dtype=np.float32)
    path = tmp_path / "stereo.wav"
    with wave.open(str(path), "wb") as w:
        w.setnchannels(2)
        w.setsampwidth(2)
        w.setframerate(44100)
        frames = np.stack([left, right], axis=1).ravel()
        w.writeframes((frames * 32767).astype("<i2").tobytes())
    y = decode(path, 48000)
    assert y.size == round(22050 * 48000 / 44100)
    assert np.max(np.abs(y)) == pytest.approx(0.2, abs=0.01)  # the mean of the two channels


def test_encode_refuses_to_clip_or_guess(tmp_path: Path) -> None:
    with pytest.raises(CodecError, match=r"loud\.wav: PCM peaks at 1\.500"):
        encode(np.array([0.0, 1.5], dtype=np.float32), 16000, tmp_path / "loud.wav", "wav")
    with pytest.raises(CodecError, match=r"t\.aiff: cannot encode 'aiff'"):
        encode(tone(0.1, 16000), 16000, tmp_path / "t.aiff", "aiff")


def test_decode_errors_name_the_file(tmp_path: Path) -> None:
    with pytest.raises(CodecError, match=r"nothere\.ogg: no such file"):
        decode(tmp_path / "nothere.ogg", 48000)
    junk = tmp_path / "junk.mp3"
    junk.write_bytes(b"this is not audio" * 100)
    with pytest.raises(CodecError, match=r"junk\.mp3: cannot decode"):
        decode(junk, 48000)
    with pytest.raises(CodecError, match=r"junk\.mp3: not a readable WAV"):
        read_wav(junk)


def test_24_bit_wav_decodes_at_full_precision(tmp_path: Path) -> None:
    # studio recordings for packs are often 24-bit
    x = tone(0.1, 48000, amp=0.5).astype(np.float64)
    v = np.round(x * (2**23 - 1)).astype(np.int32)
    raw = np.stack([v & 255, (v >> 8) & 255, (v >> 16) & 255], axis=1).astype(np.uint8)
    path = tmp_path / "t24.wav"
    with wave.open(str(path), "wb") as w:
        w.setnchannels(1)
        w.setsampwidth(3)
        w.setframerate(48000)
        w.writeframes(raw.tobytes())
    np.testing.assert_allclose(decode(path, 48000), x, atol=1e-6)


def ffmpeg(*args: str) -> None:
    subprocess.run(["ffmpeg", "-v", "error", "-nostdin", "-y", *args], check=True, timeout=120)


def silence(path: Path, seconds: float, rate: int = 48000) -> Path:
    """A tiny file of long silence (FLAC codes silence in a few bytes a block)."""
    ffmpeg("-f", "lavfi", "-i", f"anullsrc=r={rate}:cl=mono", "-t", f"{seconds:g}",
           "-c:a", "flac", "-frame_size", "65535", "-f", "flac", str(path))
    return path


def test_decode_stops_at_the_length_limit(tmp_path: Path) -> None:
    # ten minutes of silence in a few KB: only the first seconds are ever decoded
    long = silence(tmp_path / "long.flac", 600)
    assert long.stat().st_size < 64 << 10
    with pytest.raises(AudioTooLong, match=r"long\.flac: the audio lasts more than 5 s") as e:
        decode(long, 48000, max_s=5)
    assert e.value.limit_s == 5
    # at the limit or under it, the whole file comes back
    x = tone(4.0, 48000)
    y = decode(encode(x, 48000, tmp_path / "short.flac", "flac"), 48000, max_s=5)
    np.testing.assert_allclose(y, x, atol=1.5 / 32768)
    assert decode(silence(tmp_path / "five.flac", 5), 48000, max_s=5).size == 5 * 48000


# Files of every container `decode` reads, made by the ffmpeg program (an encoder independent of
# the PyAV that decodes them): the ffmpeg options for each
MADE = {
    "flac": ["-c:a", "flac", "-f", "flac"],
    "ogg": ["-c:a", "libvorbis", "-f", "ogg"],
    "opus": ["-c:a", "libopus", "-f", "ogg"],
    "webm": ["-c:a", "libopus", "-f", "webm"],
    "m4a": ["-c:a", "aac", "-f", "mp4"],
    "mp3": ["-c:a", "libmp3lame", "-f", "mp3"],
    "mp3-no-tag": ["-c:a", "libmp3lame", "-id3v2_version", "0", "-write_xing", "0", "-f", "mp3"],
    "aac": ["-c:a", "aac", "-f", "adts"],
    "wav-float": ["-c:a", "pcm_f32le", "-f", "wav"],
    "wav-stereo": ["-af", "pan=stereo|c0=c0|c1=c0", "-f", "wav"],
}


def made(tmp_path: Path, x: np.ndarray) -> dict[str, Path]:
    src = write_wav(tmp_path / "src.wav", x, 48000)
    files = {}
    for name, opts in MADE.items():
        files[name] = tmp_path / f"{name}.bin"  # a name that says nothing
        ffmpeg("-i", str(src), *opts, str(files[name]))
    return files


def test_the_format_is_read_from_the_content_not_the_name(tmp_path: Path) -> None:
    x = tone(1.0, 48000, amp=0.4)
    for name, path in made(tmp_path, x).items():
        y = decode(path, 48000, max_s=5)
        assert abs(y.size - x.size) < 0.1 * 48000, name
        assert loudness_lufs(y, 48000) == pytest.approx(loudness_lufs(x, 48000), abs=0.5), name


def test_a_damaged_frame_does_not_lose_the_file(tmp_path: Path) -> None:
    # as the ffmpeg program (and any player) does: a packet that does not decode is skipped, a
    # read error ends the audio; a take with one bad frame still reads
    x = tone(2.0, 48000, amp=0.4)
    files = made(tmp_path, x)
    rng = np.random.default_rng(1)
    for name in ("aac", "m4a", "mp3", "flac"):
        data = bytearray(files[name].read_bytes())
        for k in rng.integers(len(data) // 4, len(data) // 2, 8):  # frames, not an index
            data[k] = int(rng.integers(0, 256))
        files[name].write_bytes(bytes(data))
        assert decode(files[name], 48000).size > 0.4 * x.size, name


def test_no_program_is_needed(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    # a laptop without ffmpeg: every container decodes, every format encodes, clips for the
    # speakers too, with nothing on the PATH
    x = tone(1.0, 48000, amp=0.4)
    files = made(tmp_path, x)
    empty = tmp_path / "bin"
    empty.mkdir()
    monkeypatch.setenv("PATH", str(empty))
    for name, path in files.items():
        y = decode(path, 48000, max_s=5)
        assert abs(y.size - x.size) < 0.1 * 48000, name
    for fmt in ENCODINGS:
        y = decode(encode(x, 48000, tmp_path / f"out.{fmt}", fmt), 48000)
        assert abs(y.size - x.size) < 0.1 * 48000, fmt
        assert loudness_lufs(y, 48000) == pytest.approx(loudness_lufs(x, 48000), abs=0.5), fmt
    clip = tmp_path / "clip.ogg"
    clip.write_bytes(encode_opus(x, 48000))
    assert decode(clip, 48000).size == x.size


def reference_length(path: Path) -> int:
    """The frames the ffmpeg program decodes from `path` at 48 kHz (a decoder not ours)."""
    out = subprocess.run(["ffmpeg", "-v", "error", "-nostdin", "-i", str(path), "-f", "f32le",
                          "-ac", "1", "-ar", "48000", "pipe:1"],
                         check=True, capture_output=True, timeout=120).stdout
    return len(out) // 4


@pytest.mark.parametrize("frames", [1, 959, 960, 961, 12_345, 48_000, 7 * 48_000 + 17])
def test_opus_clips_decode_to_their_exact_length(tmp_path: Path, frames: int) -> None:
    # the speaker pages schedule clips to the sample: the stream's pre-skip and last granule
    # must give back exactly the clip, starting on its first sample
    rng = np.random.default_rng(frames)
    x = (rng.standard_normal(frames) * 0.1).astype(np.float32)
    clip = tmp_path / "clip.ogg"
    clip.write_bytes(encode_opus(x, 48000))
    assert clip.read_bytes()[28:36] == b"OpusHead"
    assert reference_length(clip) == frames
    y = decode(clip, 48000)
    assert y.size == frames
    if frames >= 12_345:  # long enough to find it: the clip is not shifted
        lags = np.arange(-400, 401)
        corr = [float(np.dot(x[400:-400], y[400 + k:frames - 400 + k])) for k in lags]
        assert lags[int(np.argmax(corr))] == 0


@pytest.mark.parametrize(("rate", "frames"), [(24_000, 24_001), (44_100, 44_100 + 333)])
def test_opus_clips_at_other_rates(tmp_path: Path, rate: int, frames: int) -> None:
    # 24 kHz is one of Opus's own rates; 44.1 kHz is resampled to 48 kHz first
    x = tone(frames / rate, rate, amp=0.4)
    clip = tmp_path / "clip.ogg"
    clip.write_bytes(encode_opus(x, rate))
    assert decode(clip, rate).size == x.size
    assert loudness_lufs(decode(clip, rate), rate) == pytest.approx(
        loudness_lufs(x, rate), abs=0.5)


@pytest.mark.parametrize(("name", "text"), [
    ("playlist.mp3", "#EXTM3U\n#EXT-X-TARGETDURATION:10\n#EXTINF:1.0,\n{secret}\n"
                     "#EXT-X-ENDLIST\n"),
    ("list.ogg", "ffconcat version 1.0\nfile '{secret}'\n"),
    ("sdp.webm", "v=0\no=- 0 0 IN IP4 127.0.0.1\ns=x\nc=IN IP4 127.0.0.1\nt=0 0\n"
                 "m=audio 5004 RTP/AVP 0\n"),
    ("notes.flac", "just some words, not audio at all\n" * 10),
])
def test_only_audio_containers_are_decoded(tmp_path: Path, name: str, text: str) -> None:
    # a file that names another (a playlist, a concat list, an SDP) would make ffmpeg open it
    secret = encode(tone(1.0, 48000, freq=1234), 48000, tmp_path / "secret.flac", "flac")
    path = tmp_path / name
    path.write_text(text.format(secret=secret), "utf-8")
    with pytest.raises(CodecError, match=rf"{re.escape(name)}: cannot decode audio: its "
                                         r"content is not wav, flac, ogg, webm"):
        decode(path, 48000)
