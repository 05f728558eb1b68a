"""The speakers: a sink on one persistent PortAudio output stream. sounddevice comes from
`audio.output.portaudio` (the only module that imports it, lazily): importing this module opens
nothing.

Design, and the figures behind each choice (one persistent stream, a trivial callback with a
lock-free inbox, the clock in whole blocks, the cooperative stop and the flush, faults, real-time
priority, the GIL): docs/audio-output.md.
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


def _apply(inbox: deque[tuple[Any, ...]], mixer: Mixer) -> None:
    """Carry out the queued plays and stops, in order (the audio thread, or the flush while
    that thread is stopped: the mixer has one writer at a time)."""
    while inbox:
        cmd = inbox.popleft()
        if cmd[0] == _PLAY:
            mixer.play(cmd[1], cmd[2], cmd[3], cmd[4])
        else:
            mixer.stop(cmd[1])


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
        flush_on_stop: bool = False,
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
        self.flush_on_stop = flush_on_stop
        self.flushes = 0  # stops carried out by a flush (abort and start)
        self._flush_wanted = threading.Event()
        self._flushing = False  # the flush's own abort: its stream is not finished
        # written by the audio thread (and by the flush while that thread is stopped):
        self._heard_next = 0.0  # PortAudio time at which the next frame will sound
        self._pad_target: float | None = None  # after a flush: when `pos` must sound
        self._pad_left = 0  # frames of silence still to write before the mixer's
        if gil_switch_interval_s is not None and sys.getswitchinterval() > gil_switch_interval_s:
            sys.setswitchinterval(gil_switch_interval_s)
        with self._lock:
            self._open()
        self._watchdog = threading.Thread(target=self._watch, name="yomite-audio-watchdog",
                                          daemon=True)
        self._watchdog.start()
        if flush_on_stop:
            threading.Thread(target=self._flush_loop, name="yomite-audio-flush",
                             daemon=True).start()

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
        if self.flush_on_stop and at_frame <= self._mixer.pos + self.blocksize:
            self._flush_wanted.set()  # a stop for now: drop what is queued (see the flush)

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
        self._flush_wanted.set()
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
        rate = self.rate

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
                if inbox:
                    _apply(inbox, mixer)
                if self._pad_target is not None:  # the first block after a flush
                    pad = self._pad_frames(time_info.outputBufferDacTime)
                    if pad < 0:  # restarted after the dropped audio's end: skip what is due
                        mixer.advance(-pad)
                        pad = 0
                    self._pad_left = pad
                left = self._pad_left
                if left:  # silence standing in for the audio the flush dropped
                    k = min(left, frames)
                    self._pad_left = left - k
                    outdata[:k, 0] = 0.0
                    mixer.render(outdata[k:, 0])
                else:
                    mixer.render(outdata[:, 0])
                # when the frame after this block will sound (PortAudio's clock; 0: unknown)
                self._heard_next = time_info.outputBufferDacTime + frames / rate
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

    # ------------------------------------------------------------------ the flush
    def _flush_loop(self) -> None:
        prio = self.realtime_priority  # as prompt as the audio thread, where allowed
        if prio is not None and hasattr(os, "sched_setscheduler"):
            with contextlib.suppress(OSError):
                os.sched_setscheduler(0, os.SCHED_FIFO, os.sched_param(prio))
        while True:
            self._flush_wanted.wait()
            self._flush_wanted.clear()
            if self._closed:
                return
            with self._lock:
                self._flush()

    def _flush(self) -> None:
        """Drop the audio queued in the stream and the sound server (lock held): abort, apply
        the stop to the mixer while no callback runs, start again. A stream that will not
        start is a fault, reported by the watchdog like any other."""
        stream = self._stream
        if stream is None or self._faulted or self._cb_error is not None:
            return
        self._flushing = True
        try:
            stream.abort()  # returns once PortAudio's audio thread has ended
            _apply(self._inbox, self._mixer)  # the audio thread's, while it is gone
            self._mixer.drop_queued()
            self._pad_target = self._heard_next  # where `pos` must sound: see _pad_frames
            self._pad_left = 0
            self._last_cb = time.monotonic()
            stream.start()
            self.flushes += 1
        except Exception as e:  # PortAudioError: the stream is broken
            self._cb_error = f"the output could not start again after a stop ({e})"
            self._wake.set()
        finally:
            self._flushing = False

    def _pad_frames(self, dac: float) -> int:
        """Audio thread, first block after a flush: the frames of silence (not counted by the
        clock) that put the frame the flush stopped at where it would have sounded (`dac`: when
        this block sounds); a restarted stream sounds at once, about a buffer early. Negative
        when it came back later than that (a busy machine): those frames are skipped, silent.
        Either way every frame after a flush sounds when it would have."""
        target, self._pad_target = self._pad_target, None
        if target and dac:
            pad = round((target - dac) * self.rate)
            if abs(pad) <= 2 * self.rate:
                return pad
        return round(self.latency * self.rate)  # no timing from PortAudio: one buffer

    def _on_finished(self, gen: int) -> None:
        # PortAudio's thread, after the stream became inactive: ours, or by itself
        if self._flushing:
            return  # the flush's abort; it starts the stream again
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
