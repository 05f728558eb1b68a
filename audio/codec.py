"""Audio files in and out: everything `decode` returns is mono float32 PCM at the rate asked for.

Decoding runs the `ffmpeg` executable itself, never on a file's say-so: the container is told
from the file's first bytes and must be one a recording comes in (`CONTAINERS`); ffmpeg is then
made to use that demuxer and to open no file but the one named (`-protocol_whitelist file`, and
no MP4 external references), so a playlist, a concat list or an SDP, which name other files or
addresses, is refused before anything is opened. Decoding stops at a length limit: ffmpeg is
asked for no more than the limit (`-t`) and its output is read incrementally with a cap, so
memory stays bounded whatever a file claims (30 minutes of silence fit in 27 KB of FLAC).
A later move to PyAV keeps this interface: `decode(path, rate, max_s=...)`.

Encoding goes through pydub (the only module that imports it), which runs ffmpeg for all but
WAV.
"""

import math
import subprocess
import tempfile
import wave
from pathlib import Path
from typing import IO, Final

import numpy as np
import numpy.typing as npt
from pydub import AudioSegment  # type: ignore[import-untyped]
from pydub.exceptions import CouldntEncodeError  # type: ignore[import-untyped]

from audio.errors import CodecError
from audio.pcm import Pcm, as_pcm, resample

# The formats `encode` writes; ffmpeg (a Debian package) does all but wav.
ENCODINGS: Final[dict[str, dict[str, str]]] = {
    "wav": {}, "flac": {}, "mp3": {"bitrate": "192k"}, "ogg": {"codec": "libvorbis"},
}
# What a recorded pack may hold, by name; what decides is the content (CONTAINERS).
DECODABLE: Final = frozenset({"wav", "flac", "mp3", "ogg", "oga", "opus", "m4a", "aac", "webm"})
# The containers `decode` reads, as people name them; each is read with one ffmpeg demuxer.
CONTAINERS: Final = ("wav", "flac", "ogg", "webm", "mp4/m4a", "mp3", "aac")
# The longest audio `decode` reads unless its caller says otherwise: a verse lasts seconds, a
# one-file jokā under a minute.
MAX_DECODE_S: Final = 300.0
# No microphone records faster; a file that claims more is not a recording (and its decoded
# length would no longer bound the memory resampling needs).
MAX_SOURCE_RATE: Final = 192_000
_READ_BYTES: Final = 1 << 20
# ffmpeg's demuxer for each container, with options that keep it inside its one file
_DEMUXERS: Final[dict[str, tuple[str, ...]]] = {
    "wav": ("-f", "wav"), "flac": ("-f", "flac"), "ogg": ("-f", "ogg"),
    "webm": ("-f", "matroska"), "mp4/m4a": ("-f", "mov", "-enable_drefs", "0"),
    "mp3": ("-f", "mp3"), "aac": ("-f", "aac"),
}


class AudioTooLong(CodecError):
    """The audio lasts longer than the caller's limit; decoding stopped there."""

    def __init__(self, path: Path, limit_s: float) -> None:
        super().__init__(f"{path}: the audio lasts more than {limit_s:g} s")
        self.limit_s = limit_s


def container(path: Path) -> str | None:
    """The container of the audio in `path` (one of CONTAINERS), told from its first bytes;
    None when it is none of them (a playlist, a list of files, text, anything else)."""
    with path.open("rb") as fh:
        head = fh.read(16)
        if head[:4] in (b"RIFF", b"RIFX", b"RF64", b"BW64") and head[8:12] == b"WAVE":
            return "wav"
        if head[:4] == b"OggS":
            return "ogg"
        if head[:4] == b"\x1a\x45\xdf\xa3":  # EBML: Matroska, of which WebM is a profile
            return "webm"
        if head[4:8] == b"ftyp":  # an ISO media file's first box
            return "mp4/m4a"
        if head[:3] == b"ID3" and len(head) >= 10:
            # an ID3v2 tag (its size in 7-bit bytes) may precede MP3, AAC or FLAC
            size = int.from_bytes(bytes(b & 0x7F for b in head[6:10]), "big")
            fh.seek(10 + size + (10 if head[5] & 0x10 else 0))
            head = fh.read(16)
    if head[:4] == b"fLaC":
        return "flac"
    if len(head) >= 4 and head[0] == 0xFF:
        b1, b2 = head[1], head[2]
        if b1 & 0xF6 == 0xF0:  # 12 sync bits, layer 0: an ADTS frame
            return "aac"
        if (b1 & 0xE0 == 0xE0 and (b1 >> 3) & 3 != 1 and (b1 >> 1) & 3 != 0
                and b2 >> 4 != 0xF and (b2 >> 2) & 3 != 3):  # a valid MPEG audio frame header
            return "mp3"
    return None


def decode(path: Path, rate: int, *, max_s: float = MAX_DECODE_S) -> Pcm:
    """The audio in `path` as mono float32 at `rate` (channels averaged, then resampled).

    AudioTooLong if it lasts more than `max_s` seconds: no more than that is ever decoded or
    held. CodecError (naming the file) if it is not one of CONTAINERS or does not decode.
    """
    try:
        kind = container(path)
    except FileNotFoundError:
        raise CodecError(f"{path}: no such file") from None
    except OSError as e:
        raise CodecError(f"{path}: cannot read ({e.strerror or e})") from None
    if kind is None:
        raise CodecError(f"{path}: cannot decode audio: its content is not "
                         f"{', '.join(CONTAINERS[:-1])} or {CONTAINERS[-1]}")
    cmd = [
        "ffmpeg", "-nostdin", "-hide_banner", "-v", "error",
        "-protocol_whitelist", "file", *_DEMUXERS[kind], "-i", f"file:{path}",
        "-map", "0:a:0", "-vn", "-sn", "-dn", "-map_metadata", "-1",
        # half a second past the limit: enough to tell a longer file, never much more
        "-t", f"{max_s + 0.5:.3f}",
        "-c:a", "pcm_f32le", "-bitexact", "-f", "wav", "pipe:1",
    ]
    with tempfile.TemporaryFile() as err:
        try:
            proc = subprocess.Popen(cmd, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
                                    stderr=err)
        except OSError as e:
            raise CodecError(f"{path}: cannot run ffmpeg ({e.strerror or e}); install it "
                             "(Debian: apt install ffmpeg)") from None
        assert proc.stdout is not None
        with proc:  # closes the pipe and waits for ffmpeg, however this block ends
            try:
                head = _wav_head(proc.stdout)
                x = None if head is None else _read_mono(proc.stdout, *head, path, max_s)
            except BaseException:
                proc.kill()  # past the limit (or interrupted): stop ffmpeg, do not drain it
                raise
        if proc.returncode != 0 or head is None or x is None:
            err.seek(0)
            why = _first_line(err.read(4096).decode("utf-8", "replace")).removeprefix(
                f"file:{path}: ")  # ffmpeg names the file too
            raise CodecError(f"{path}: cannot decode audio ({why or 'ffmpeg failed'})")
    if x.size == 0:
        raise CodecError(f"{path}: the file holds no audio")
    src_rate = head[1]
    return x if src_rate == rate else resample(x, src_rate, rate)


def _wav_head(out: IO[bytes]) -> tuple[int, int] | None:
    """The channels and rate of ffmpeg's WAV output, read up to its data; None if it ended
    before (ffmpeg failed)."""
    riff = out.read(12)
    if len(riff) < 12 or riff[:4] != b"RIFF" or riff[8:12] != b"WAVE":
        return None
    fmt: tuple[int, int] | None = None
    while True:
        chunk = out.read(8)
        if len(chunk) < 8:
            return None
        kind, size = chunk[:4], int.from_bytes(chunk[4:], "little")
        if kind == b"data":
            return fmt
        if size > 1 << 16:  # ffmpeg writes a few small chunks before the data, nothing more
            return None
        body = out.read(size + (size & 1))
        if kind == b"fmt " and len(body) >= 8:
            fmt = (int.from_bytes(body[2:4], "little"), int.from_bytes(body[4:8], "little"))


def _read_mono(out: IO[bytes], channels: int, src_rate: int, path: Path,
               max_s: float) -> Pcm:
    """ffmpeg's float32 frames, averaged to mono as they come; AudioTooLong past `max_s`."""
    if channels < 1 or not 0 < src_rate <= MAX_SOURCE_RATE:
        raise CodecError(f"{path}: {channels} channels at {src_rate} Hz is not a recording "
                         f"yomite reads (at most {MAX_SOURCE_RATE} Hz)")
    limit = math.floor(max_s * src_rate)
    frame = 4 * channels
    chunks: list[Pcm] = []
    frames = 0
    rest = b""
    while data := out.read(_READ_BYTES):
        data = rest + data
        whole = len(data) // frame * frame
        rest = data[whole:]
        x = np.frombuffer(data, dtype="<f4", count=whole // 4).reshape(-1, channels)
        frames += x.shape[0]
        if frames > limit:
            raise AudioTooLong(path, max_s)
        chunks.append(as_pcm(x[:, 0] if channels == 1 else x.mean(axis=1, dtype=np.float64)))
    return np.concatenate(chunks) if chunks else np.zeros(0, dtype=np.float32)


def encode(pcm: npt.NDArray[np.floating | np.integer], rate: int, path: Path, fmt: str) -> Path:
    """Write mono `pcm` (float in [-1, 1], or int16) to `path` as wav, flac, mp3 or ogg.

    Float input outside [-1, 1] is refused rather than clipped: the caller's gain is wrong.
    """
    if fmt not in ENCODINGS:
        raise CodecError(f"{path}: cannot encode {fmt!r}; choose one of {', '.join(ENCODINGS)}")
    data = _to_int16(pcm, path)
    seg = AudioSegment(data=data.tobytes(), sample_width=2, frame_rate=rate, channels=1)
    path.parent.mkdir(parents=True, exist_ok=True)
    try:
        # our own file handle, so it is closed even when ffmpeg fails (pydub leaks its own)
        with path.open("wb") as fh:
            seg.export(fh, format=fmt, **ENCODINGS[fmt])
    except (CouldntEncodeError, OSError) as e:
        path.unlink(missing_ok=True)
        raise CodecError(f"{path}: cannot encode as {fmt} ({_first_line(e)})") from None
    return path


def encode_opus(pcm: npt.NDArray[np.floating | np.integer], rate: int,
                bitrate_kbps: int = 48) -> bytes:
    """Mono `pcm` as Ogg Opus bytes (for the browser speakers).

    Opus rather than MP3: an Ogg Opus stream states its encoder delay (the header's pre-skip)
    and its exact length (the last page's granule position), and decoders must honour both, so
    the decoded clip starts and ends on the same samples as `pcm`: the timing a speaker page
    schedules stays exact. MP3 has no such rule (its 500-2000 samples of padding are removed
    only by decoders that read the LAME header). Opus is also made for speech, and Chromium,
    Firefox and Safari decode it with `decodeAudioData`.
    """
    import io

    data = _to_int16(pcm, Path("<opus>"))
    seg = AudioSegment(data=data.tobytes(), sample_width=2, frame_rate=rate, channels=1)
    buf = io.BytesIO()
    try:
        seg.export(buf, format="ogg", codec="libopus", bitrate=f"{bitrate_kbps}k",
                   parameters=["-application", "audio"])
    except (CouldntEncodeError, OSError) as e:
        raise CodecError(f"cannot encode a clip as Ogg Opus ({_first_line(e)})") from None
    return buf.getvalue()


def read_wav(path: Path) -> tuple[Pcm, int]:
    """A 16-bit PCM WAV (what TTS engines write) as mono float32, with its own rate."""
    try:
        with wave.open(str(path), "rb") as w:
            if w.getsampwidth() != 2:
                raise CodecError(f"{path}: expected 16-bit PCM, got {8 * w.getsampwidth()}-bit")
            frames = w.readframes(w.getnframes())
            channels, rate = w.getnchannels(), w.getframerate()
    except (wave.Error, EOFError, OSError) as e:
        raise CodecError(f"{path}: not a readable WAV file ({e})") from None
    x = np.frombuffer(frames, dtype="<i2").astype(np.float32) / 32768.0
    if channels > 1:
        x = x.reshape(-1, channels).mean(axis=1)
    return as_pcm(x), rate


def write_wav(path: Path, pcm: npt.NDArray[np.floating | np.integer], rate: int) -> Path:
    """A mono 16-bit WAV, written without pydub or ffmpeg (fast, for caches and tests)."""
    data = _to_int16(pcm, path)
    with wave.open(str(path), "wb") as w:
        w.setnchannels(1)
        w.setsampwidth(2)
        w.setframerate(rate)
        w.writeframes(data.astype("<i2").tobytes())
    return path


def _to_int16(pcm: npt.NDArray[np.floating | np.integer], path: Path) -> npt.NDArray[np.int16]:
    a = np.asarray(pcm)
    if a.ndim != 1:
        raise CodecError(f"{path}: expected mono PCM, got shape {a.shape}")
    if a.dtype == np.int16:
        return a
    if not np.issubdtype(a.dtype, np.floating):
        raise CodecError(f"{path}: expected float or int16 PCM, got {a.dtype}")
    top = float(np.max(np.abs(a))) if a.size else 0.0
    if not np.isfinite(top) or top > 1.0:
        raise CodecError(f"{path}: PCM peaks at {top:.3f}, outside [-1, 1]; lower the gain")
    return np.round(a * 32767.0).astype(np.int16)


def _first_line(e: BaseException | str) -> str:
    text = str(e).strip()
    return text.splitlines()[0] if text else type(e).__name__
