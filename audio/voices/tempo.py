"""Tempo that keeps pitch: Rubber Band (Debian's `rubberband-cli`) stretches a clip in time.

Why Rubber Band: it is the time-stretcher audio software trusts (Ardour, Sonic Visualiser
and ffmpeg's own `rubberband` filter use its library), its R3 engine (`--fine`) is
made for speech and music alike, and the command-line tool runs offline in two passes, studying
the whole clip before stretching it, so the output length is exactly the one asked for. It is a
Debian package, with nothing fetched at run time. A ratio of 1 never calls it.

Used for `voice.speed` on every engine (Open JTalk's own rate factor is not linear: at 0.8 its
speech lasts 1.12-1.19x, not 1.25x) and to fit a recorded pack to a pace.
"""

import math
import shutil
import subprocess
import tempfile
from pathlib import Path
from typing import Final

import numpy as np

from audio.codec import read_wav, write_wav
from audio.errors import VoiceError
from audio.pcm import Pcm, as_pcm

RUBBERBAND: Final = "rubberband"
MIN_RATIO, MAX_RATIO = 0.05, 20.0  # speed 0.2-3 times a pack's fit of 0.25-4
_TIMEOUT_S: Final = 120.0


def available() -> bool:
    return shutil.which(RUBBERBAND) is not None


def version() -> str:
    """Rubber Band's version (part of every stretched clip's cache key), or "absent"."""
    if not available():
        return "absent"
    try:
        out = subprocess.run([RUBBERBAND, "--version"], capture_output=True, text=True,
                             timeout=10, check=False)
    except (OSError, subprocess.TimeoutExpired):
        return "unknown"
    return (out.stdout or out.stderr).strip().splitlines()[0] if (out.stdout or out.stderr) \
        else "unknown"


def stretch(x: Pcm, rate: int, ratio: float) -> Pcm:
    """`x` lasting `ratio` times as long (2.0: half the tempo), its pitch kept; exactly
    round(len(x) * ratio) frames. VoiceError if Rubber Band is missing or fails."""
    a = as_pcm(x)
    if not (MIN_RATIO <= ratio <= MAX_RATIO) or not math.isfinite(ratio):
        raise VoiceError(f"time-stretch ratio {ratio:g} is outside {MIN_RATIO}-{MAX_RATIO}")
    if ratio == 1.0 or a.size == 0:
        return a.copy()
    exe = shutil.which(RUBBERBAND)
    if exe is None:
        raise VoiceError(
            "changing the tempo of a voice needs Rubber Band: apt-get install rubberband-cli "
            "(or set voice.speed: 1.0)"
        )
    want = round(a.size * ratio)
    top = float(np.max(np.abs(a)))
    scale = 1.0 / top if top > 1.0 else 1.0
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
    if y.size < want:  # the duration is asked in seconds: pad or cut the last frame or two
        y = np.concatenate([y, np.zeros(want - y.size, dtype=np.float32)])
    y = y[:want]
    if scale != 1.0:
        y = y / np.float32(scale)
    return as_pcm(y)
