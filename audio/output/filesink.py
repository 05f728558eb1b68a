"""A sink that renders a match into a file, faster than real time.

Used with a `reader.clock.ManualClock` that the runtime jumps from deadline to deadline: the
clock says how far the match has "played", and the file sink renders up to there whenever it is
called. It shares the device sink's schedule (`audio.output.mixer.Mixer`), so the file holds
the very samples the speakers would have played, late head cuts and stop fades included.
"""

from __future__ import annotations

import wave
from pathlib import Path

import numpy as np

from audio.errors import AudioError
from audio.output.events import Pcm
from audio.output.sink import ClockedSink
from reader.clock import Clock, ManualClock

_FORMATS = ("wav", "flac", "mp3", "ogg")


class FileSink(ClockedSink):
    """Renders into a growing float32 buffer; `write(path)` saves it.

    Frames before `round(clock.now() * rate)` count as played: a clip due earlier is cut at the
    head, a stop due earlier fades from there. `clock` defaults to a fresh `ManualClock`
    (exposed as `.clock`) for the caller to move. Completions reach the listener when the sink
    notices the clock has passed them, i.e. on the next call of any method (or `sync()`).
    """

    kind = "file sink"

    def __init__(self, rate: int, clock: Clock | None = None, *, fade_ms: float = 5.0) -> None:
        super().__init__(rate, clock if clock is not None else ManualClock(), fade_ms=fade_ms)
        self._buf = np.zeros(rate * 8, dtype=np.float32)

    def sync(self) -> None:
        """Render up to the clock, reporting every clip and stop that ended on the way."""
        self._render_to(self._target())

    def finish(self) -> int:
        """Render everything still scheduled (past the clock if need be); returns the length
        in frames. Clips played afterwards at earlier frames are head-cut, as on a device."""
        self.sync()
        self._render_to(self._mixer.horizon())
        return self._mixer.pos

    def pcm(self) -> Pcm:
        """A copy of what has been rendered so far (mono float32)."""
        self.sync()
        return self._buf[: self._mixer.pos].copy()

    def write(self, path: str | Path, format: str | None = None) -> Path:
        """Render everything scheduled (`finish`) and save it as 16-bit mono; the format comes
        from the suffix unless given: WAV through the stdlib `wave`, FLAC, MP3 or Ogg through
        `audio.codec` (PyAV). Every format gets the same samples: `to_int16` of the mix."""
        p = Path(path)
        fmt = (format or p.suffix.lstrip(".") or "wav").lower()
        if fmt not in _FORMATS:
            raise AudioError(f"cannot write {p}: unknown format {fmt!r}; use one of "
                             f"{', '.join(_FORMATS)}")
        n = self.finish()  # may grow the buffer: slice it only afterwards
        samples = to_int16(self._buf[:n])
        if fmt == "wav":
            with wave.open(str(p), "wb") as w:
                w.setnchannels(1)
                w.setsampwidth(2)
                w.setframerate(self.rate)
                w.writeframes(samples.tobytes())
            return p
        from audio import codec  # the only PyAV importer: loaded only when a codec is needed

        return codec.encode(samples, self.rate, p, fmt)

    def _render_to(self, frame: int) -> None:
        m = self._mixer
        if frame <= m.pos:
            return
        if frame > self._buf.shape[0]:
            grown = np.zeros(max(frame, 2 * self._buf.shape[0]), dtype=np.float32)
            grown[: m.pos] = self._buf[: m.pos]
            self._buf = grown
        m.render(self._buf[m.pos : frame])


def to_int16(pcm: Pcm) -> np.ndarray:
    """16-bit samples as a sound server makes them: round(x * 32768), clipped."""
    scaled = np.rint(pcm.astype(np.float64) * 32768.0)
    return np.clip(scaled, -32768, 32767).astype("<i2")
