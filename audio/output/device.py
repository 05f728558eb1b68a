"""The speakers: a sink on one persistent PortAudio output stream. sounddevice comes from
`audio.output.portaudio` (the only module that imports it, lazily): importing this module opens
nothing.

Design (the figures are from bench/stop_latency.py and bench/gap_error.py on the PulseAudio null
sink of scripts/audio-harness.sh, and from the harness's own measurements):

- One stream for the life of the sink, started at once and never stopped between clips: on the
  ALSA/PulseAudio path nothing drains, so stopping a stream drops its queued tail, and a new
  stream needs time before its first sample is heard. Clips are placed in the stream at exact
  frames by the shared `Mixer`, so gaps are sample-exact however late Python wakes up.
- The callback is trivial: it applies queued commands to the mixer, renders one block from
  clips already in memory, copies the first channel to the others and notes the time. No
  locks, no logging, no I/O, no array allocation; completions go out through the listener's
  loop (`call_soon_threadsafe`).
- Lock-free hand-off: `play` and `stop` (event-loop thread) append an immutable tuple to a
  `collections.deque`; the callback pops them from the other end. deque.append and
  deque.popleft are single C-level operations, atomic under the GIL and documented as
  thread-safe, so neither side ever waits for the other (a lock here could make the audio thread
  wait for a descheduled event-loop thread: an audible glitch). Only the audio thread touches
  the mixer (single writer); the event-loop thread only reads its integer counters, and reading
  one attribute is atomic. Capacity is fixed (`Mixer` slot lists), so nothing grows in the
  callback.
- Clock: `now()` is the number of frames handed to PortAudio divided by the rate, not
  interpolated. It moves in whole blocks (5.3 ms at 256 frames), which is what makes it exact:
  the frame the engine reads is exactly the first frame the next callback will write, so a
  `StopAudio(now)` fades from that very frame and the cut the journal records is the cut that
  was played; a clip sent for "now" is never late. Interpolating with time.monotonic would
  smooth the steps but put the clock up to a block ahead of what has been written, delaying
  stops by up to a block and making cut frames approximate, for no gain: the engine's deadlines
  are met to the sample anyway. It never goes backwards, and stands still while the device is
  down (the match clock pauses with the audio).
- Stop: a flag-style cooperative stop (the next callback starts the fade) rather than
  `abort()`: abort is faster (silent within ~5 ms) but throws away everything queued, clicks,
  must be called off the event loop (it blocks, for 30 s if the server hangs) and leaves a
  stream to restart before the next clip. The cooperative stop costs what is already queued:
  `stream.latency` (2 blocks with latency='low', 10.7 ms at 256 frames) plus up to one block
  until the next callback, plus the fade. Measured at 256 frames with a 5 ms fade, stop() to
  silence: p50 14-18 ms, p99 20-25 ms (capture bracket); the fade starts within p99 20 ms.
  Block size 128 with latency=0.008 gives p99 10-13 ms to silence, but with 8 ms of buffer it
  underruns sooner when the machine is busy; a 2 ms fade gives p99 16-20 ms at 256.
- Faults: a stream that finishes by itself (sound server killed, device unplugged), a callback
  that raises, callbacks that stop coming (a hung server), or a long run of underflows become
  one `DeviceFault(reason)` from a watchdog thread; the broken stream is discarded in a
  background thread (closing a stream whose server hangs blocks for up to 30 s) and the
  process carries on. `reopen()` opens a fresh stream; the schedule and the clock carry over.
- Priority: the first callback notes its thread id and the watchdog moves that thread (PortAudio's
  audio thread) to SCHED_FIFO (`realtime_priority`, below PulseAudio's own 5) if the process may
  (root, or an rtprio limit); otherwise nothing changes. Other processes' load then delays the
  callback far less; done from the watchdog so the callback itself makes no such system call.
- The GIL: the callback is Python, so it needs the GIL every block. A CPU-bound Python thread
  (rendering a voice, say) keeps it for up to `sys.getswitchinterval()` (5 ms by default) before
  the audio thread gets a turn, which on a 10.7 ms buffer is enough to underrun: measured here,
  one busy thread made holes in the output at block size 256. The sink therefore lowers the
  switch interval to 1 ms (`gil_switch_interval_s`; None leaves it alone), after which the
  output stayed bit-exact with one or two busy threads (PortAudio still flagged late
  callbacks, which the buffer absorbed). It is a process-wide setting; it costs CPU-bound
  threads a little throughput, which a reader that must not stutter can afford.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import sys
import threading
import time
from collections import deque
from typing import Any, Literal

import numpy as np

from audio.errors import DeviceError
from audio.output.events import DeviceFault, Listener, Pcm, SinkStats
from audio.output.mixer import Mixer
from audio.output.portaudio import describe_outputs, load_sounddevice
from audio.output.sink import Delivery, check_pcm

Latency = Literal["low", "high"] | float

_PLAY = 0
_STOP = 1

# What the callback writes into `counters` (int64) after each block, by index.
COUNTERS = ("position", "underflows", "late_clips", "late_frames", "dropped_clips")


class DeviceSink:
    """A `Sink` on a PortAudio output device (by name, index, or None for the default).

    Opening happens in the constructor; it raises DeviceError if the device cannot be found or
    opened. Later failures never raise: they are reported once as `DeviceFault` and the sink
    waits for `reopen()`. `reopen()` and `close()` may block while PortAudio talks to the sound
    server (seconds if it hangs): call them from a worker thread (`asyncio.to_thread`).
    """

    def __init__(
        self,
        device: str | int | None = None,
        rate: int = 48000,
        *,
        blocksize: int = 256,
        latency: Latency = "low",
        fade_ms: float = 5.0,
        channels: int | None = None,
        capacity: int = 32,
        stall_timeout_s: float = 1.0,
        start_grace_s: float = 3.0,
        underflow_limit: int = 200,
        gil_switch_interval_s: float | None = 0.001,
        realtime_priority: int | None = 4,
        start_frame: int = 0,
        counters: Any = None,
    ) -> None:
        if blocksize <= 0:
            raise ValueError("blocksize must be fixed (> 0): the clock counts whole blocks")
        if channels not in (None, 1, 2):
            raise ValueError(f"channels must be 1 or 2 (or None for the device's), not {channels}")
        self.rate = rate
        self.device = device
        self.blocksize = blocksize
        self.latency_request = latency
        self.channels_request = channels
        self.stall_timeout_s = stall_timeout_s
        self.start_grace_s = start_grace_s
        self.underflow_limit = underflow_limit
        self.realtime_priority = realtime_priority
        self._deliver = Delivery()
        self._mixer = Mixer(rate, fade_ms=fade_ms, capacity=capacity, emit=self._deliver)
        self._mixer.pos = start_frame  # a sink replacing another goes on with its clock
        # an int64 array (shared memory, read by another process: audio.output.process) that
        # the callback fills after every block: see `COUNTERS`
        self._counters = counters
        self._inbox: deque[tuple[Any, ...]] = deque()
        # State written by the audio thread only:
        self._last_cb = 0.0  # time.monotonic() of the last callback
        self._underflows = 0
        self._underflow_run = 0
        self._cb_error: str | None = None
        self._cb_thread = 0  # native id of the audio thread, noted by the first callback
        self._promoted = 0
        # State of the control side (event loop, watchdog); the lock is never taken by audio.
        self._lock = threading.Lock()
        self._stream: Any = None
        self._gen = 0  # stream generation: callbacks of a discarded stream render nothing
        self._finished_gen = -1  # generation whose stream finished by itself
        self._faulted = False
        self._faults = 0
        self._closed = False
        self.channels = 0
        self.latency = 0.0  # seconds, as PortAudio reports it for the open stream
        self._wake = threading.Event()
        if gil_switch_interval_s is not None and sys.getswitchinterval() > gil_switch_interval_s:
            sys.setswitchinterval(gil_switch_interval_s)
        with self._lock:
            self._open()
        self._watchdog = threading.Thread(target=self._watch, name="yomite-audio-watchdog",
                                          daemon=True)
        self._watchdog.start()

    # ------------------------------------------------------------------ the Sink contract
    def now(self) -> float:
        return self._mixer.pos / self.rate

    def position(self) -> int:
        return self._mixer.pos

    def play(self, pcm: Pcm, at_frame: int, offset: int, tag: int) -> None:
        if self._closed:
            raise DeviceError("the audio output is closed")
        self._inbox.append((_PLAY, check_pcm(pcm, offset), int(at_frame), int(offset), tag))

    def stop(self, at_frame: int) -> None:
        if self._closed:
            return
        self._inbox.append((_STOP, int(at_frame)))

    def set_listener(
        self, fn: Listener | None, loop: asyncio.AbstractEventLoop | None = None
    ) -> None:
        self._deliver.set(fn, loop)

    def stats(self) -> SinkStats:
        m = self._mixer
        return SinkStats(m.late_clips, m.late_frames, m.dropped_clips, self._underflows,
                         self._faults)

    @property
    def faulted(self) -> bool:
        return self._faulted

    def reopen(self) -> None:
        """Discard the current stream (if any) and open a fresh one on the same device.

        Raises DeviceError if that fails (the sink stays faulted; try again later). Clips
        scheduled meanwhile are kept; the clock resumes where it stopped.
        """
        with self._lock:
            if self._closed:
                raise DeviceError("the audio output is closed")
            self._discard()
            self._open()
            self._faulted = False
        self._wake.set()

    def close(self) -> None:
        if self._closed:
            return
        self._closed = True
        self._wake.set()
        with self._lock:
            reaper = self._discard()
        if reaper is not None:
            reaper.join(timeout=2.0)  # a hung server must not hang the shutdown
        self._watchdog.join(timeout=2.0)

    # ------------------------------------------------------------------ the audio thread
    def _make_callback(self, gen: int, channels: int) -> Any:
        mixer = self._mixer
        inbox = self._inbox
        f32 = np.float32
        counters = self._counters

        def callback(buffer: Any, frames: int, time_info: Any, status: Any) -> None:
            # a raw stream: sounddevice's numpy wrapper sets `.shape` in every callback, which
            # NumPy 2.5 deprecates (a warning raised inside the audio thread); a view of the
            # buffer made here costs the same and runs no warning machinery
            outdata = np.frombuffer(buffer, dtype=f32).reshape(frames, channels)
            if gen != self._gen or self._cb_error is not None:
                outdata.fill(0.0)  # a discarded stream, or a broken one awaiting the watchdog
                return
            try:
                if not self._cb_thread:
                    self._cb_thread = threading.get_native_id()
                    self._wake.set()
                if status.output_underflow:
                    self._underflows += 1
                    self._underflow_run += 1
                else:
                    self._underflow_run = 0
                while inbox:
                    cmd = inbox.popleft()
                    if cmd[0] == _PLAY:
                        mixer.play(cmd[1], cmd[2], cmd[3], cmd[4])
                    else:
                        mixer.stop(cmd[1])
                mixer.render(outdata[:, 0])
                for c in range(1, outdata.shape[1]):
                    outdata[:, c] = outdata[:, 0]
                self._last_cb = time.monotonic()
                if counters is not None:  # five aligned 8-byte stores: each one atomic
                    counters[0] = mixer.pos
                    counters[1] = self._underflows
                    counters[2] = mixer.late_clips
                    counters[3] = mixer.late_frames
                    counters[4] = mixer.dropped_clips
            except BaseException as e:  # must not escape into PortAudio: the watchdog reports
                outdata.fill(0.0)
                self._cb_error = f"{type(e).__name__}: {e}"
                self._wake.set()

        return callback

    # ------------------------------------------------------------------ control side
    def _open(self) -> None:
        """Open and start a stream (lock held). Raises DeviceError."""
        sd = load_sounddevice()
        try:
            info = sd.query_devices(self.device, "output")
        except (ValueError, sd.PortAudioError) as e:
            raise DeviceError(
                f"no output device {self.device!r} ({e}); outputs: {describe_outputs(sd)}. "
                "With PulseAudio, start the server before yomite (the device list is read "
                "once, at startup) and use device 'pulse'",
                code="no_such_device",
                params={"device": str(self.device), "outputs": describe_outputs(sd)}) from None
        channels = self.channels_request or min(2, int(info["max_output_channels"]))
        self._gen += 1
        gen = self._gen
        self._cb_error = None
        self._underflow_run = 0
        self._cb_thread = 0  # a new stream has a new audio thread
        try:
            stream = sd.RawOutputStream(
                device=int(info["index"]),
                samplerate=self.rate,
                channels=channels,
                dtype="float32",
                blocksize=self.blocksize,
                latency=self.latency_request,
                callback=self._make_callback(gen, channels),
                finished_callback=lambda: self._on_finished(gen),
            )
        except sd.PortAudioError as e:
            raise DeviceError(f"cannot open output device {info['name']!r}: {e}",
                              code="cannot_open", params={"device": str(info["name"])}) from None
        # the stall watchdog counts from here: give the first callback time to come
        self._last_cb = time.monotonic() + self.start_grace_s - self.stall_timeout_s
        try:
            stream.start()
        except sd.PortAudioError as e:
            self._reap(stream)
            raise DeviceError(f"cannot start output device {info['name']!r}: {e}",
                              code="cannot_open", params={"device": str(info["name"])}) from None
        self._stream = stream
        self.channels = channels
        self.latency = float(stream.latency)

    def _discard(self) -> threading.Thread | None:
        """Detach the current stream and close it in the background (lock held)."""
        stream, self._stream = self._stream, None
        self._gen += 1  # its callbacks, if any still come, now render silence
        if stream is None:
            return None
        t = threading.Thread(target=self._reap, args=(stream,), name="yomite-audio-reaper",
                             daemon=True)
        t.start()
        return t

    @staticmethod
    def _reap(stream: Any) -> None:
        try:
            stream.abort(ignore_errors=True)
            stream.close(ignore_errors=True)
        except Exception:  # the stream is being thrown away; nothing useful to do
            pass

    def _on_finished(self, gen: int) -> None:
        # PortAudio's thread, after the stream became inactive: ours, or by itself
        self._finished_gen = gen
        self._wake.set()

    def _watch(self) -> None:
        poll = min(0.05, self.stall_timeout_s / 4)
        while not self._closed:
            self._wake.wait(poll)
            self._wake.clear()
            if self._closed:
                return
            # never wait for the lock: reopen() may hold it for seconds while PortAudio opens
            if not self._lock.acquire(blocking=False):
                continue
            try:
                reason = self._diagnose()
                if reason is not None:
                    self._faulted = True
                    self._faults += 1
                    self._discard()
            finally:
                self._lock.release()
            tid = self._cb_thread  # once: a reopen may reset it meanwhile
            if reason is not None:
                self._deliver(DeviceFault(reason))
            elif tid and tid != self._promoted:
                self._promote(tid)

    def _promote(self, tid: int) -> None:
        """Real-time scheduling for the audio thread, if the process is allowed it."""
        self._promoted = tid
        prio = self.realtime_priority
        if prio is None or not hasattr(os, "sched_setscheduler"):
            return
        # not permitted (no rtprio limit): ordinary scheduling it is
        with contextlib.suppress(OSError):
            os.sched_setscheduler(tid, os.SCHED_FIFO, os.sched_param(prio))

    def _diagnose(self) -> str | None:
        if self._stream is None or self._faulted:
            return None
        if self._cb_error is not None:
            return f"the audio callback failed ({self._cb_error})"
        if self._finished_gen == self._gen:
            return ("the output stream stopped by itself: the device is gone or the sound "
                    "server went down")
        if self._underflow_run >= self.underflow_limit:
            return f"the output underflowed in {self._underflow_run} blocks in a row"
        idle = time.monotonic() - self._last_cb
        if idle > self.stall_timeout_s:
            return f"no audio callback for {idle:.1f} s: the device or sound server stalled"
        return None
