#!/usr/bin/env python3
"""What the sound server actually played: record the null sink's monitor, with timestamps.

Adapted from the audio harness recipe measured on these machines (README "Audio on a headless
machine"). Two halves:

- Run as a script (`python tests/audio_capture.py OUT.wav`), it records the monitor with
  `parec` and timestamps every read with CLOCK_MONOTONIC. It is a separate process so that the
  GIL of the process under test cannot delay the timestamps. It prints READY when data flows,
  STEADY once data has flowed without a stall (> 50 ms) for 0.3 s (an idle PulseAudio null sink
  renders up to 2 s ahead until a low-latency client holds it), and on SIGTERM writes OUT (s16le
  WAV, 2 channels: the sink's own layout, so no down-mix touches the samples) and
  OUT.times.npy: float64 (n, 2) rows [monotonic time a read returned, frame index after it].
- Imported, `Recorder` runs that script for the length of a `with` block and `Capture` reads
  the result: samples, activity segments, and for capture frame i a time bracket
  [t_line(i), t_arrival(i)] in which the server rendered it (about one sink block wide).
"""

from __future__ import annotations

import argparse
import contextlib
import os
import select
import signal
import subprocess
import sys
import time
import wave
from dataclasses import dataclass
from pathlib import Path
from types import TracebackType

import numpy as np

RATE = 48000
THRESHOLD = 1e-3  # |x| above this counts as sound; the null sink's silence is exactly 0


def _env_monitor() -> str:
    return os.environ.get("YOMITE_TEST_MONITOR", "yomite.monitor")


def _env_latency_ms() -> int:
    return int(os.environ.get("YH_SINK_LATENCY_MS", "5"))


# ---------------------------------------------------------------------- the recorder process
def record(out: str, source: str, rate: int, channels: int, latency_ms: int) -> None:
    """Record until told on stdin `UNTIL t` (a CLOCK_MONOTONIC time): then stop as soon as the
    capture holds every frame the sink rendered up to t (its frame line, t0 + i/rate, has passed
    t), however late this process itself was scheduled meanwhile; or at once on `NOW`, SIGTERM,
    or `give_up_s` after UNTIL (then it says so: the capture may be short)."""
    stop = [False]

    def on_signal(signum: int, frame: object) -> None:
        stop[0] = True

    signal.signal(signal.SIGTERM, on_signal)
    signal.signal(signal.SIGINT, on_signal)
    # real time (below the sound server's own priority) where allowed, for this process and the
    # parec it starts: a recorder starved by the machine's other work would stall and miss its
    # time stamps (the capture itself is safe in the server's buffer)
    with contextlib.suppress(OSError, AttributeError):
        os.sched_setscheduler(0, os.SCHED_FIFO, os.sched_param(3))
    cmd = ["parec", "-d", source, "--raw", "--format=s16le", f"--rate={rate}",
           f"--channels={channels}", f"--latency-msec={latency_ms}"]
    p = subprocess.Popen(cmd, stdout=subprocess.PIPE, bufsize=0)
    assert p.stdout is not None
    fd = p.stdout.fileno()
    stdin = sys.stdin.fileno()
    watched = [fd, stdin]
    frame_bytes = 2 * channels
    chunks: list[bytes] = []
    stamps: list[tuple[float, int]] = []
    nbytes = 0
    ready = steady = False
    t_last = t_stall = 0.0
    t0 = float("inf")  # the sink's frame line: frame i rendered no earlier than t0 + i/rate
    until: float | None = None
    give_up = float("inf")
    complete = True
    while not stop[0]:
        try:
            readable, _, _ = select.select(watched, [], [], 0.5)
        except InterruptedError:
            continue
        if stdin in readable:
            line = sys.stdin.readline().split()
            if not line or line[0] == "NOW":
                break
            if line[0] == "UNTIL":
                until = float(line[1])
                give_up = time.monotonic() + float(line[2])
            watched = [fd]
        if fd in readable:
            b = os.read(fd, 65536)  # drain continuously: a full pipe blocks parec
            t = time.monotonic()
            if not b:
                break
            chunks.append(b)
            nbytes += len(b)
            frames = nbytes // frame_bytes
            stamps.append((t, frames))
            t0 = min(t0, t - frames / rate)
            if not ready:
                ready = True
                t_stall = t
                print("READY", flush=True)
            elif not steady:
                if t - t_last > 0.05:
                    t_stall = t
                if t - t_stall > 0.3:
                    steady = True
                    print("STEADY", flush=True)
            t_last = t
        if until is not None and t0 + nbytes // frame_bytes / rate >= until:
            break
        if time.monotonic() > give_up:
            complete = False
            break
    p.terminate()
    try:
        p.wait(timeout=2)
    except subprocess.TimeoutExpired:
        p.kill()
    data = b"".join(chunks)
    data = data[: len(data) // frame_bytes * frame_bytes]
    with wave.open(out, "wb") as w:
        w.setnchannels(channels)
        w.setsampwidth(2)
        w.setframerate(rate)
        w.writeframes(data)
    np.save(out + ".times.npy", np.array(stamps, dtype=np.float64).reshape(-1, 2))
    print("DONE" if complete else "SHORT", len(data) // frame_bytes, flush=True)


# ---------------------------------------------------------------------- the test side
class Capture:
    """A finished recording: first channel as int16 (`raw`) and float (`x`), and timing."""

    def __init__(self, path: str | Path, rate: int = RATE) -> None:
        path = str(path)
        self.rate = rate
        with wave.open(path, "rb") as w:
            assert w.getframerate() == rate, w.getframerate()
            nch = w.getnchannels()
            frames = np.frombuffer(w.readframes(w.getnframes()), dtype="<i2").reshape(-1, nch)
        # a mono stream is up-mixed to every channel of the sink: analyse the first
        self.raw = frames[:, 0].astype(np.int16)
        self.channels_identical = all(
            np.array_equal(frames[:, 0], frames[:, c]) for c in range(1, nch)
        )
        self.x = self.raw.astype(np.float32) / 32768.0
        self.times = np.load(path + ".times.npy")
        if len(self.times) == 0:
            raise AssertionError(f"{path}: the recorder captured nothing")
        t, end = self.times[:, 0], self.times[:, 1]
        # the sink's clock against CLOCK_MONOTONIC: on a recording long enough for the fit to
        # beat the reads' jitter, the measured length of a frame (the null sink here runs
        # ~160 ppm fast, 10 ms a minute); on a short one, the nominal 1/rate
        fitted = float(np.polyfit(end, t, 1)[0]) if len(t) > 10 else 1.0 / rate
        self.rate_ppm = (1.0 / (fitted * rate) - 1.0) * 1e6
        self.frame_s = fitted if end[-1] - end[0] >= 5 * rate else 1.0 / rate
        self.t0 = float((t - end * self.frame_s).min())
        # how far reads lag that line (quality of the timestamps)
        self.jitter_ms = float(np.percentile(t - end * self.frame_s - self.t0, 99) * 1000)

    def t_line(self, i: int) -> float:
        """Earliest monotonic time at which capture frame i can have been rendered."""
        return self.t0 + i * self.frame_s

    def frame_at(self, mono: float) -> int:
        """The capture frame rendered at monotonic time `mono` (the inverse of `t_line`)."""
        return round((mono - self.t0) / self.frame_s)

    def t_arrival(self, i: int) -> float:
        """Monotonic time at which the read holding capture frame i returned (the latest)."""
        k = int(np.searchsorted(self.times[:, 1], i, side="right"))
        return float(self.times[min(k, len(self.times) - 1), 0])

    def segments(self, threshold: float = THRESHOLD, merge: int = 240) -> list[tuple[int, int]]:
        """[start, end) of every stretch of sound; runs closer than `merge` frames are joined
        (a tone crosses zero)."""
        loud = np.abs(self.x) > threshold
        if not loud.any():
            return []
        d = np.diff(loud.astype(np.int8), prepend=0, append=0)
        on, off = np.flatnonzero(d == 1), np.flatnonzero(d == -1)
        segs: list[list[int]] = []
        for s, e in zip(on, off, strict=True):
            if segs and s - segs[-1][1] < merge:
                segs[-1][1] = int(e)
            else:
                segs.append([int(s), int(e)])
        return [(s, e) for s, e in segs]

    def nonzero_segments(self, merge: int = 240) -> list[tuple[int, int]]:
        """Like `segments`, but sound is any sample that is not exactly 0."""
        return self.segments(threshold=0.0, merge=merge)


class OwnNullSink:
    """A null sink of one's own on the running sound server, for the length of a `with` block:
    streams that connect meanwhile play into it (PULSE_SINK, read by libpulse when a stream
    connects, is set in os.environ) and `.monitor` records it, so sound from anything else
    using the server cannot leak into a capture. Waits until its keeper (a low-latency
    recorder: an idle null sink renders 2 s ahead) holds it."""

    def __init__(self, name: str | None = None, rate: int = RATE,
                 env: dict[str, str] | None = None) -> None:
        self.name = name or f"yomite_test_{os.getpid()}_{time.monotonic_ns() % 10**6}"
        self.monitor = f"{self.name}.monitor"
        self.rate = rate
        self.env = env

    def __enter__(self) -> OwnNullSink:
        self.module = subprocess.run(
            ["pactl", "load-module", "module-null-sink", f"sink_name={self.name}",
             f"rate={self.rate}", "channels=2", "norewinds=1"],  # rewinds corrupt the monitor
            check=True, capture_output=True, text=True, env=self.env).stdout.strip()
        self.keeper = subprocess.Popen(
            ["parec", "-d", self.monitor, "--raw", f"--latency-msec={_env_latency_ms()}"],
            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, env=self.env)
        self._previous = os.environ.get("PULSE_SINK")
        os.environ["PULSE_SINK"] = self.name
        deadline = time.monotonic() + 30  # a busy machine may take a while to connect it
        while not recorded(self.monitor, self.env) and time.monotonic() < deadline:
            time.sleep(0.05)
        time.sleep(0.2)
        return self

    def __exit__(self, et: type[BaseException] | None, ev: BaseException | None,
                 tb: TracebackType | None) -> None:
        if self._previous is None:
            os.environ.pop("PULSE_SINK", None)
        else:
            os.environ["PULSE_SINK"] = self._previous
        self.keeper.kill()
        self.keeper.wait()
        subprocess.run(["pactl", "unload-module", self.module], capture_output=True,
                       env=self.env, check=False)


def recorded(source: str, env: dict[str, str] | None = None) -> bool:
    """Whether some client records `source` (pactl's short lists are tab-separated)."""
    def rows(what: str) -> list[list[str]]:
        out = subprocess.run(["pactl", "list", "short", what], capture_output=True, text=True,
                             env=env)
        return [ln.split("\t") for ln in out.stdout.splitlines()]

    index = next((r[0] for r in rows("sources") if r[1:2] == [source]), None)
    return index is not None and any(r[1:2] == [index] for r in rows("source-outputs"))


@dataclass(frozen=True)
class Hole:
    """Silence the sound server put where the plan had sound: it ran dry (an underrun
    downstream of the sink, when the machine did not run the audio threads in time). At plan
    frame `at`, `inserted` frames of silence pushed the rest later and `missing` planned frames
    were never heard (PulseAudio does either, or both, depending on where it ran dry)."""

    at: int
    inserted: int
    missing: int


def holes(captured: np.ndarray, expected: np.ndarray, window: int = 64) -> list[Hole]:
    """Compare a capture with what should have been played, both int16 and starting at the
    first sound, allowing only one kind of difference: runs of silence in the capture where the
    plan has sound, after which the capture goes on with the plan's own samples, in order (the
    signature of a sound server that ran dry). A sink that mis-schedules or corrupts shows
    something else: a sample the plan does not have there, which raises AssertionError naming
    the frame. An empty list means bit-exact.

    A hole cannot tell a load-induced underrun from a gap the sink made too long: a test
    treats any hole as a failed attempt and runs again (`retrying_holes` in test_device.py):
    load is random, a scheduling bug is not."""
    found: list[Hole] = []
    i = j = 0
    while i < len(expected):
        n = min(len(expected) - i, len(captured) - j)
        assert n > 0, f"the capture ends {len(expected) - i} frames early"
        differ = np.flatnonzero(captured[j : j + n] != expected[i : i + n])
        if differ.size == 0:
            i += n
            j += n
            continue
        i += int(differ[0])
        j += int(differ[0])
        assert captured[j] == 0, (
            f"frame {i} of the plan: captured {captured[j]}, expected {expected[i]}")
        zc = _zero_run(captured, j)
        zr = _zero_run(expected, i)
        assert zc > zr, f"frame {i} of the plan: {zr - zc} frames missing from the capture"
        if j + zc >= len(captured):  # the capture ends inside the hole
            found.append(Hole(i, 0, int(np.count_nonzero(expected[i:]))))
            break
        # where in the plan the capture goes on: somewhere the silence covers
        # ([i + zr, i + zc]), first with its next samples in the plan's order
        resume = captured[j + zc : j + zc + window]
        at = None
        for k in range(i + zr, min(i + zc, len(expected) - 1) + 1):
            if expected[k] == resume[0] and np.array_equal(
                    expected[k : k + len(resume)], resume[: len(expected) - k]):
                at = k
                break
        assert at is not None, (
            f"frame {i} of the plan: after {zc} frames of silence the capture goes on with "
            "samples the plan does not have there")
        # the plan's own silence in the span the capture skipped is not missing sound
        found.append(Hole(i, zc - (at - i), int(np.count_nonzero(expected[i:at]))))
        i, j = at, j + zc
    return found


def late_start(captured: np.ndarray, expected: np.ndarray, window: int = 64) -> int:
    """How many frames into the plan the capture's first sound is (both starting at their
    first sound): 0 when the first clip was heard from its first sample. A machine that stalled
    past a stream's start (or a clip's lead) has the sink start it late, at the right sample for
    the time, as it must: its first frames are never heard, a hole at the start, which
    comparing from the capture's first sound would otherwise take for a wrong sample."""
    head = captured[:window]
    if len(head) < window or np.array_equal(head, expected[:window]):
        return 0
    for k in np.flatnonzero(expected == head[0]):
        if np.array_equal(expected[k : k + window], head):
            return int(k)
    return 0  # not found: the comparison names the wrong sample


def holes_from_first_sound(captured: np.ndarray, expected: np.ndarray) -> list[Hole]:
    """`holes` of a whole capture (leading silence included) against a plan that starts at its
    first sound; a start the sink never played is a hole at frame 0 (`late_start`)."""
    sound = np.flatnonzero(captured)
    assert sound.size, "the capture is silent"
    captured = captured[int(sound[0]):]
    late = late_start(captured, expected)
    return ([Hole(0, 0, int(np.count_nonzero(expected[:late])))] if late else []) + holes(
        captured, expected[late:])


def dropouts(captured: np.ndarray, expected: np.ndarray) -> int:
    """Frames of silence the server put into the capture (`holes`, in all); 0: bit-exact."""
    return sum(h.inserted + h.missing for h in holes(captured, expected))


def _zero_run(x: np.ndarray, start: int) -> int:
    nz = np.flatnonzero(x[start:])
    return int(nz[0]) if nz.size else len(x) - start


class RecorderNotSteady(RuntimeError):
    """The capture never ran 0.3 s without a stall within 30 s: the sound server is down, or
    the machine so loaded that a capture proves nothing (a test may try again)."""


class Recorder:
    """Records the monitor for the duration of a `with` block; `.capture` afterwards."""

    def __init__(self, path: str | Path, source: str | None = None, rate: int = RATE,
                 latency_ms: int | None = None, env: dict[str, str] | None = None) -> None:
        self.path = str(path)
        self.source = source or _env_monitor()
        self.rate = rate
        self.latency_ms = _env_latency_ms() if latency_ms is None else latency_ms
        self.env = env
        self.capture: Capture | None = None

    def __enter__(self) -> Recorder:
        self.proc = subprocess.Popen(
            [sys.executable, os.path.abspath(__file__), self.path, "--source", self.source,
             "--rate", str(self.rate), "--latency-ms", str(self.latency_ms)],
            stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True, env=self.env)
        assert self.proc.stdout is not None
        deadline = time.monotonic() + 30.0
        seen: set[str] = set()
        while "STEADY" not in seen:
            left = deadline - time.monotonic()
            if left <= 0 or self.proc.poll() is not None:
                self.proc.kill()
                self.proc.wait()
                for pipe in (self.proc.stdin, self.proc.stdout):  # (or a ResourceWarning
                    if pipe is not None:                           # fails a later test)
                        pipe.close()
                raise RecorderNotSteady(
                    f"the recorder of {self.source} never became steady (saw {sorted(seen)}); "
                    "is the sound server up? run the tests via `make test`")
            r, _, _ = select.select([self.proc.stdout], [], [], left)
            if r:
                seen.add(self.proc.stdout.readline().strip())
        time.sleep(0.05)
        return self

    def __exit__(self, et: type[BaseException] | None, ev: BaseException | None,
                 tb: TracebackType | None) -> None:
        self.stop(complete=et is None)

    def stop(self, complete: bool = True, margin_s: float = 0.05) -> Capture | None:
        """Stop recording. `complete`: once everything the sink rendered until now (and
        `margin_s` more, for the sink's block and its clock's drift against CLOCK_MONOTONIC)
        has been captured, however busy the machine is; otherwise at once."""
        assert self.proc.stdin is not None and self.proc.stdout is not None
        with contextlib.suppress(BrokenPipeError):
            self.proc.stdin.write(f"UNTIL {time.monotonic() + margin_s} 20\n" if complete
                                  else "NOW\n")
            self.proc.stdin.close()
        out = self.proc.stdout.read()  # to its end: the recorder has written the file
        self.proc.stdout.close()
        self.proc.wait(timeout=30)
        if complete:
            assert "DONE" in out, (
                f"the recorder of {self.source} did not capture what was rendered: {out!r}")
            self.capture = Capture(self.path, self.rate)
        return self.capture


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0] if __doc__ else None)
    ap.add_argument("out")
    ap.add_argument("--source", default=_env_monitor())
    ap.add_argument("--rate", type=int, default=RATE)
    ap.add_argument("--channels", type=int, default=2)
    ap.add_argument("--latency-ms", type=int, default=_env_latency_ms())
    a = ap.parse_args()
    record(a.out, a.source, a.rate, a.channels, a.latency_ms)


if __name__ == "__main__":
    main()
