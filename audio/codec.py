"""Audio files in and out: everything `decode` returns is mono float32 PCM at the rate asked for.

Both ways go through PyAV (FFmpeg's libraries, inside its wheel; the only module that imports
it): no program is run, so no `ffmpeg` needs to be installed.

Decoding never follows a file's say-so: the container is told from the file's first bytes and
must be one a recording comes in (`CONTAINERS`); the file is opened here and handed to FFmpeg
as an open file, with that one demuxer forced and no way to open anything else (no protocol, a
refusing `io_open`, no MP4 external references), so a playlist, a concat list or an SDP, which
name other files or addresses, is refused before anything is read. Only the first audio stream
is decoded, frame by frame (a damaged packet skipped, as the ffmpeg program does), and decoding
stops past a length limit, so memory stays bounded whatever a file claims (30 minutes of
silence fit in 27 KB of FLAC).

Encoding writes wav with the `wave` module, flac, mp3 (LAME, 192 kbit/s) and ogg (Vorbis) with
PyAV, and the speakers' clips as Ogg Opus with exact pre-skip and length (`encode_opus`).
"""

from __future__ import annotations

import io
import math
import wave
from collections.abc import Iterator
from fractions import Fraction
from pathlib import Path
from typing import TYPE_CHECKING, Any, BinaryIO, Final, NoReturn

import numpy as np
import numpy.typing as npt

from audio.errors import CodecError
from audio.pcm import Pcm, as_pcm, resample

if TYPE_CHECKING:
    # PyAV is imported where it is used: its 0.1 s of CPU is not paid at start-up by a hall
    # that never decodes or encodes
    import av

# The formats `encode` writes, each but wav through PyAV: (muxer, encoder, channels, bit rate,
# encoder options). Vorbis is FFmpeg's own encoder (PyAV's wheel has no libvorbis), which FFmpeg
# calls experimental and which takes only two channels: the clip goes in both (a decoder that
# mixes down gets it back; the coupled channels cost little).
_ENCODERS: Final[dict[str, tuple[str, str, int, int | None, dict[str, str]]]] = {
    "flac": ("flac", "flac", 1, None, {}),
    "mp3": ("mp3", "libmp3lame", 1, 192_000, {}),
    "ogg": ("ogg", "vorbis", 2, None, {"strict": "experimental"}),
}
ENCODINGS: Final = ("wav", *_ENCODERS)
# What a recorded pack may hold, by name; what decides is the content (CONTAINERS).
DECODABLE: Final = frozenset({"wav", "flac", "mp3", "ogg", "oga", "opus", "m4a", "aac", "webm"})
# The containers `decode` reads, as people name them; each is read with one FFmpeg demuxer.
CONTAINERS: Final = ("wav", "flac", "ogg", "webm", "mp4/m4a", "mp3", "aac")
# The longest audio `decode` reads unless its caller says otherwise: a verse lasts seconds, a
# one-file jokā under a minute.
MAX_DECODE_S: Final = 300.0
# No microphone records faster; a file that claims more is not a recording (and its decoded
# length would no longer bound the memory resampling needs).
MAX_SOURCE_RATE: Final = 192_000
# FFmpeg's demuxer for each container, with options that keep it inside its one file
_DEMUXERS: Final[dict[str, tuple[str, dict[str, str]]]] = {
    "wav": ("wav", {}), "flac": ("flac", {}), "ogg": ("ogg", {}),
    "webm": ("matroska", {}), "mp4/m4a": ("mov", {"enable_drefs": "0"}),
    "mp3": ("mp3", {}), "aac": ("aac", {}),
}
# The rates libopus encodes at; a clip at any other rate is resampled to 48 kHz first.
_OPUS_RATES: Final = frozenset({8000, 12000, 16000, 24000, 48000})


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
    import av

    try:
        kind = container(path)
        with path.open("rb") as fh:
            x, src_rate = _decode_mono(fh, kind, path, max_s)
    except FileNotFoundError:
        raise CodecError(f"{path}: no such file") from None
    except (av.FFmpegError, ValueError) as e:  # PyAV's errors, and a frame's layout changing
        raise CodecError(f"{path}: cannot decode audio ({_why(e)})") from None
    except OSError as e:
        raise CodecError(f"{path}: cannot read ({e.strerror or e})") from None
    if x.size == 0:
        raise CodecError(f"{path}: the file holds no audio")
    return x if src_rate == rate else resample(x, src_rate, rate)


def _decode_mono(fh: BinaryIO, kind: str | None, path: Path, max_s: float) -> tuple[Pcm, int]:
    """The first audio stream of open file `fh`, averaged to mono as it is decoded, with its
    rate; AudioTooLong past `max_s`."""
    import av

    if kind is None:
        raise CodecError(f"{path}: cannot decode audio: its content is not "
                         f"{', '.join(CONTAINERS[:-1])} or {CONTAINERS[-1]}")
    demuxer, options = _DEMUXERS[kind]
    # Three locks on one door: a demuxer that reads no other file, any file it would open
    # asked of `_refuse_to_open`, and no protocol allowed to a context a demuxer makes of its
    # own (FFmpeg's concat does, without our opener: its contexts inherit only the lists).
    options = {**options, "protocol_whitelist": "none"}
    with av.open(fh, "r", format=demuxer, options=options, io_open=_refuse_to_open) as c:
        if not c.streams.audio:
            raise CodecError(f"{path}: the file holds no audio")
        stream = c.streams.audio[0]
        # packed float32 at the source's own rate and channels: the average is ours
        to_float = av.AudioResampler(format="flt")
        chunks: list[Pcm] = []
        skipped: list[av.FFmpegError] = []
        frames, src_rate, limit = 0, 0, 0
        for frame in _as_float(_decoded(c, stream, skipped), to_float):
            if not src_rate:
                src_rate = frame.sample_rate
                channels = frame.layout.nb_channels
                if channels < 1 or not 0 < src_rate <= MAX_SOURCE_RATE:
                    raise CodecError(f"{path}: {channels} channels at {src_rate} Hz is not a "
                                     f"recording yomite reads (at most {MAX_SOURCE_RATE} Hz)")
                limit = math.floor(max_s * src_rate)
            x = frame.to_ndarray().reshape(-1, channels)
            frames += x.shape[0]
            if frames > limit:
                raise AudioTooLong(path, max_s)
            chunks.append(as_pcm(x[:, 0] if channels == 1 else x.mean(axis=1, dtype=np.float64)))
    if not chunks and skipped:
        raise CodecError(f"{path}: cannot decode audio ({_why(skipped[0])})")
    return (np.concatenate(chunks) if chunks else np.zeros(0, dtype=np.float32)), src_rate


def _decoded(c: av.container.InputContainer, stream: av.audio.stream.AudioStream,
             skipped: list[av.FFmpegError]) -> Iterator[av.AudioFrame]:
    """The stream's frames as the ffmpeg program decodes them: a packet that does not decode
    is skipped and a read error ends the stream, keeping what came before (a recording with a
    damaged frame still reads, as it plays elsewhere); `skipped` gets the errors."""
    import av

    decoder, packets = stream.codec_context, c.demux(stream)
    while True:
        try:
            packet: av.Packet[av.audio.stream.AudioStream] | None = next(packets)
        except StopIteration:  # after an empty packet, which flushed the decoder
            return
        except av.FFmpegError as e:  # a read error: the end, with what the decoder holds
            skipped.append(e)
            packet = None
        try:
            yield from decoder.decode(packet)
        except av.FFmpegError as e:
            skipped.append(e)
        if packet is None:
            return


def _as_float(decoded: Iterator[av.AudioFrame],
              to_float: av.AudioResampler) -> Iterator[av.AudioFrame]:
    for frame in decoded:
        yield from to_float.resample(frame)
    yield from to_float.resample(None)


def _refuse_to_open(url: str, flags: int, options: dict[str, str]) -> NoReturn:
    """FFmpeg asks this for any file but the one it was given: there is none to give."""
    raise PermissionError(f"{url}: a recording is one file; it names no other")


def encode(pcm: npt.NDArray[np.floating | np.integer], rate: int, path: Path, fmt: str) -> Path:
    """Write mono `pcm` (float in [-1, 1], or int16) to `path` as wav, flac, mp3 or ogg.

    Float input outside [-1, 1] is refused rather than clipped: the caller's gain is wrong.
    """
    import av

    if fmt not in ENCODINGS:
        raise CodecError(f"{path}: cannot encode {fmt!r}; choose one of {', '.join(ENCODINGS)}")
    data = _to_int16(pcm, path)
    path.parent.mkdir(parents=True, exist_ok=True)
    if fmt == "wav":
        return write_wav(path, data, rate)
    muxer, encoder, channels, bit_rate, options = _ENCODERS[fmt]
    try:
        with path.open("wb") as fh:
            _encode(fh, muxer, encoder, data, rate, channels, bit_rate, options)
    except (av.FFmpegError, ValueError, OSError) as e:
        path.unlink(missing_ok=True)
        raise CodecError(f"{path}: cannot encode as {fmt} ({_why(e)})") from None
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

    libopus states its look-ahead as the stream's initial padding and the last packet's
    duration as what is left of the clip; FFmpeg's Ogg muxer writes them as the pre-skip and
    the final granule, given frames timed in samples from 0 (as here). A rate libopus does
    not take (it takes 8, 12, 16, 24 and 48 kHz) is resampled to 48 kHz first.
    """
    import av

    where = Path("<opus>")
    data = _to_int16(pcm, where)
    if rate not in _OPUS_RATES:
        data = _to_int16(np.clip(resample(data.astype(np.float32) / 32768.0, rate, 48000),
                                 -1.0, 1.0), where)
        rate = 48000
    buf = io.BytesIO()
    try:
        _encode(buf, "ogg", "libopus", data, rate, 1, bitrate_kbps * 1000,
                {"application": "audio"})
    except (av.FFmpegError, ValueError, OSError) as e:
        raise CodecError(f"cannot encode a clip as Ogg Opus ({_why(e)})") from None
    return buf.getvalue()


def _encode(out: BinaryIO, muxer: str, encoder: str, data: npt.NDArray[np.int16], rate: int,
            channels: int, bit_rate: int | None, options: dict[str, str]) -> None:
    """Mono int16 `data`, in each of `channels`, through `encoder` into a `muxer` stream
    written to `out`."""
    import av

    layout = "mono" if channels == 1 else "stereo"
    with av.open(out, "w", format=muxer) as c:
        stream: Any = c.add_stream(encoder, rate=rate, layout=layout, options=options)
        if bit_rate is not None:
            stream.bit_rate = bit_rate
        if data.size:
            packed = np.repeat(data, channels).reshape(1, -1)
            frame = av.AudioFrame.from_ndarray(packed, format="s16", layout=layout)
            frame.sample_rate, frame.pts, frame.time_base = rate, 0, Fraction(1, rate)
            # PyAV cuts the one frame to the encoder's frame size and converts its format
            c.mux(stream.encode(frame))
        c.mux(stream.encode(None))


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
    """A mono 16-bit WAV, written by the `wave` module (fast, for caches and tests)."""
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


def _why(e: BaseException) -> str:
    """What went wrong, in one line: FFmpeg's own words where it has them (PyAV's errors add
    the file's name, which every message here already starts with)."""
    text = getattr(e, "strerror", None) or str(e)  # FFmpeg's errors are OSError's kin
    text = text.strip()
    return text.splitlines()[0] if text else type(e).__name__
