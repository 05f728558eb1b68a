"""Tempo that keeps pitch: Rubber Band's library (through `pylibrb`) stretches a clip in time.

Why Rubber Band: it is the time-stretcher audio software trusts (Ardour, Sonic Visualiser
and ffmpeg's own `rubberband` filter use it), and its R3 engine (`ENGINE_FINER`, the command
line's `--fine`) is made for speech and music alike. Run offline, it studies the whole clip
before stretching it, so the output length is exactly the one asked for. `pylibrb` ships the
library inside its wheels (Linux, Windows, macOS): nothing to install beside the project, no
program to find on the PATH. It releases the GIL while it works (a thread stretching an 8 s
clip kept the main thread waiting at most 8.7 ms). Where pylibrb has no wheel (Linux aarch64,
macOS on Intel) the same engine is run as a program, `rubberband --fine`, if one is installed
(Debian's `rubberband-cli`, Homebrew's `rubberband`). A ratio of 1 never calls either.

Used for `voice.speed` on every engine (Open JTalk's own rate factor is not linear: at 0.8 its
speech lasts 1.12-1.19x, not 1.25x) and to fit a recorded pack to a pace.
"""

import math
import shutil
import subprocess
import tempfile
from importlib import metadata
from pathlib import Path
from typing import Any, Final

import numpy as np

from audio.codec import read_wav, write_wav
from audio.errors import VoiceError
from audio.pcm import Pcm, as_pcm

MIN_RATIO, MAX_RATIO = 0.05, 20.0  # speed 0.2-3 times a pack's fit of 0.25-4
RUBBERBAND: Final = "rubberband"
_TIMEOUT_S: Final = 120.0
_INSTALL: Final = ("pip install pylibrb (a dependency of the project, with wheels for Linux "
                   "x86_64, Windows and macOS arm64); elsewhere install the rubberband program "
                   "(Debian: apt-get install rubberband-cli, macOS: brew install rubberband); "
                   "or set voice.speed: 1.0")


def _library() -> Any:
    """pylibrb, or None if it cannot be imported."""
    try:
        import pylibrb
    except ImportError:
        return None
    return pylibrb


def available() -> bool:
    return _library() is not None or shutil.which(RUBBERBAND) is not None


def version() -> str:
    """Rubber Band's version (part of every stretched clip's cache key), or "absent"."""
    if _library() is not None:
        try:
            return f"pylibrb {metadata.version('pylibrb')} R3"
        except metadata.PackageNotFoundError:
            return "pylibrb unknown R3"
    if shutil.which(RUBBERBAND) is None:
        return "absent"
    try:
        out = subprocess.run([RUBBERBAND, "--version"], capture_output=True, text=True,
                             timeout=10, check=False)
    except (OSError, subprocess.TimeoutExpired):
        return "unknown"
    text = (out.stdout or out.stderr).strip().splitlines()
    return f"rubberband {text[0]}" if text else "unknown"


def stretch(x: Pcm, rate: int, ratio: float) -> Pcm:
    """`x` lasting `ratio` times as long (2.0: half the tempo), its pitch kept; exactly
    round(len(x) * ratio) frames. VoiceError if Rubber Band is missing or fails."""
    a = as_pcm(x)
    if not (MIN_RATIO <= ratio <= MAX_RATIO) or not math.isfinite(ratio):
        raise VoiceError(f"time-stretch ratio {ratio:g} is outside {MIN_RATIO}-{MAX_RATIO}")
    if ratio == 1.0 or a.size == 0:
        return a.copy()
    rb = _library()
    want = round(a.size * ratio)
    y = _with_library(rb, a, rate, want) if rb is not None else _with_program(a, rate, want)
    if y.size < want:  # pad or cut a last frame or two
        y = np.concatenate([y, np.zeros(want - y.size, dtype=np.float32)])
    return as_pcm(y[:want])


def _with_library(rb: Any, a: Pcm, rate: int, want: int) -> Pcm:
    block = np.ascontiguousarray(a, dtype=np.float32).reshape(1, -1)  # channels x samples
    try:
        s = rb.RubberBandStretcher(rate, 1, rb.Option.PROCESS_OFFLINE | rb.Option.ENGINE_FINER,
                                   initial_time_ratio=want / a.size)
        s.set_logging_level(0)  # its buffer notes go to stderr, past our logging
        s.set_max_process_size(a.size)
        s.set_expected_input_duration(a.size)
        s.study(block, final=True)
        s.process(block, final=True)
        y = np.asarray(s.retrieve_available(), dtype=np.float32)[0]
    except (RuntimeError, ValueError, TypeError, MemoryError) as e:
        raise VoiceError(f"Rubber Band could not stretch a clip: {e}") from None
    return as_pcm(y)


def _with_program(a: Pcm, rate: int, want: int) -> Pcm:
    exe = shutil.which(RUBBERBAND)
    if exe is None:
        raise VoiceError(f"changing the tempo of a voice needs Rubber Band: {_INSTALL}")
    top = float(np.max(np.abs(a)))
    scale = 1.0 / top if top > 1.0 else 1.0  # a 16-bit file in between
    with tempfile.TemporaryDirectory(prefix="yomite-tempo-") as tmp:
        src, dst = Path(tmp) / "in.wav", Path(tmp) / "out.wav"
        write_wav(src, a * np.float32(scale), rate)
        try:
            done = subprocess.run(
                [exe, "-q", "--fine", "-D", f"{want / rate:.9f}", str(src), str(dst)],
                capture_output=True, text=True, timeout=_TIMEOUT_S, check=False,
            )
        except (OSError, subprocess.TimeoutExpired) as e:
            raise VoiceError(f"Rubber Band could not stretch a clip: {e}") from None
        if done.returncode != 0 or not dst.exists():
            why = (done.stderr or done.stdout).strip().splitlines()[-1:] or ["no output"]
            raise VoiceError(f"Rubber Band failed (exit {done.returncode}): {why[0]}")
        y, got_rate = read_wav(dst)
    if got_rate != rate:
        raise VoiceError(f"Rubber Band wrote {got_rate} Hz, not {rate} Hz")
    return y / np.float32(scale) if scale != 1.0 else y
