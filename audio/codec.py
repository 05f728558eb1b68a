"""Audio files in and out. The only module that imports pydub (which runs ffmpeg for anything
but WAV); everything it returns is mono float32 PCM at the rate asked for."""

import wave
from pathlib import Path
from typing import Final

import numpy as np
import numpy.typing as npt
from pydub import AudioSegment  # type: ignore[import-untyped]
from pydub.exceptions import (  # type: ignore[import-untyped]
    CouldntDecodeError,
    CouldntEncodeError,
)

from .errors import CodecError
from .pcm import Pcm, as_pcm, resample

# The formats `encode` writes; ffmpeg (a Debian package) does all but wav.
ENCODINGS: Final[dict[str, dict[str, str]]] = {
    "wav": {}, "flac": {}, "mp3": {"bitrate": "192k"}, "ogg": {"codec": "libvorbis"},
}
# What a recorded pack may hold: anything ffmpeg decodes, these by name.
DECODABLE: Final = frozenset({"wav", "flac", "mp3", "ogg", "oga", "opus", "m4a", "aac", "webm"})


def decode(path: Path, rate: int) -> Pcm:
    """The audio in `path` as mono float32 at `rate` (channels averaged, then resampled)."""
    try:
        if path.suffix.lower() == ".wav":
            # pydub reads WAV itself but never closes the file it opened: hand it ours
            with path.open("rb") as fh:
                seg = AudioSegment.from_file(fh, format="wav")
        else:
            # anything else goes to ffmpeg by name (an m4a must be seekable: no pipe)
            seg = AudioSegment.from_file(str(path))
    except FileNotFoundError:
        raise CodecError(f"{path}: no such file") from None
    except (CouldntDecodeError, IndexError, OSError) as e:
        # pydub raises IndexError for some truncated WAVs, CouldntDecodeError for the rest
        raise CodecError(f"{path}: cannot decode audio ({_first_line(e)})") from None
    if seg.frame_count() == 0:
        raise CodecError(f"{path}: the file holds no audio")
    width = seg.sample_width
    samples = np.array(seg.get_array_of_samples(), dtype=np.float64)
    # pydub hands back signed integers of `width` bytes (8-bit WAV is unsigned on disk, but
    # pydub already recentres it)
    samples /= float(1 << (8 * width - 1))
    if seg.channels > 1:
        samples = samples.reshape(-1, seg.channels).mean(axis=1)
    return resample(samples, seg.frame_rate, rate)


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


def _first_line(e: BaseException) -> str:
    text = str(e).strip()
    return text.splitlines()[0] if text else type(e).__name__
