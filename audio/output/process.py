"""The speakers, out of the web server's process: a `Sink` whose output stream and mixer run in
a process of their own (`audio.output.worker`), so that nothing the server does (garbage
collection, JSON for a thousand phones, serving a page, rendering a deck) can starve the audio.

Measured before choosing (this 2-core machine): with a DeviceSink in the server's process, ten
full collections with a million objects alive during a 5 s clip gave ten ALSA underruns and a
capture that no longer matched the clip; through the audio process the same collections
(260-340 ms each) left it bit-exact with no underrun (tests/test_process_sink.py keeps that
check). With 200 WebSockets connected each generation-2 collection held the server's
interpreter 47-93 ms (issue 11), and larger blocks do not help (512/1024 frames still broke, at
+15/+49 ms of stop latency). A hold still reaches silence in the same time: the command crosses
a socket (tens of µs) into the same cooperative stop.

How the two halves talk (the worker's docstring has the wire format):
- PCM goes through shared memory: the first time a clip is played its samples are copied once
  into a memfd, whose descriptor crosses the socket with the command; the worker maps it
  read-only and mixes straight from it. Later plays of the same array (a verse read again
  after a hold) send only its key. The parent keeps at most `pcm_cache_bytes` of keys; the
  worker forgets a key when told and unmaps the clip once it has finished playing.
- The clock is shared memory too: the worker's callback writes the output position (and its
  counters) after every block, so `now()` and `position()` are one memory read, exactly the
  frame the next callback will write, as with the in-process sink (the engine's clock stays
  the device's frame count, and an underrun never shifts it).
- Events (`ClipDone`, `Stopped`, `DeviceFault`) come back over the socket and are delivered as
  by every sink (`loop.call_soon_threadsafe`).
- Underruns are counted, not printed: PortAudio's flags (`underflows`) and ALSA's own
  "underrun occurred" lines on the worker's stderr (`xruns`), which never reach the console.
- Faults: the worker's DeviceSink keeps its watchdog (stream finished, stalled callbacks);
  the worker itself dying is a `DeviceFault` too. `reopen()` asks a live worker to reopen its
  stream (the schedule is kept), or starts a new worker whose clock goes on from the last
  position (the schedule of a dead worker is lost; the engine has paused and plans again).
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
import mmap
import os
import pickle
import socket
import subprocess
import sys
import threading
import time
import weakref
from collections import OrderedDict, deque
from typing import Any

import numpy as np

from audio.errors import DeviceError
from audio.output.device import COUNTERS, Latency
from audio.output.events import ClipDone, DeviceFault, Listener, Pcm, SinkStats, Stopped
from audio.output.sink import Delivery, check_pcm

log = logging.getLogger("yomite.audio")

_MAX = 1 << 16


class ProcessSink:
    """A `Sink` on a PortAudio output device, played by a worker process.

    Same contract and constructor as `audio.output.device.DeviceSink` (plus `realtime_priority` for
    the whole worker, `cpu_wakeup_us` (audio.output.wakeup) and `pcm_cache_bytes`). Opening
    starts the worker and waits until its stream runs; it raises DeviceError if the device
    cannot be opened. `reopen()` and `close()` may block (call them from a worker thread).
    """

    kind = "audio process"

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
        realtime_priority: int | None = 4,
        cpu_wakeup_us: int | None = None,
        pcm_cache_bytes: int = 64 << 20,
        open_timeout_s: float = 20.0,
        flush_on_stop: bool = False,
    ) -> None:
        if blocksize <= 0:
            raise ValueError("blocksize must be fixed (> 0): the clock counts whole blocks")
        self.rate = rate
        self.device = device
        self.blocksize = blocksize
        self.channels = 0
        self.latency = 0.0
        self.realtime = False
        self.cpu_wakeup_us: int | None = None  # the wake-up latency held (audio.output.wakeup)
        self.pcm_cache_bytes = pcm_cache_bytes
        self.open_timeout_s = open_timeout_s
        self._opts: dict[str, Any] = {
            "device": device, "rate": rate, "blocksize": blocksize, "latency": latency,
            "fade_ms": fade_ms, "channels": channels, "capacity": capacity,
            "stall_timeout_s": stall_timeout_s, "start_grace_s": start_grace_s,
            "underflow_limit": underflow_limit, "realtime_priority": realtime_priority,
            "cpu_wakeup_us": cpu_wakeup_us, "flush_on_stop": flush_on_stop,
            # the worker's interpreter runs nothing else: no need to shorten its GIL slices
            "gil_switch_interval_s": None,
        }
        self._deliver = Delivery()
        self._cfd = os.memfd_create("yomite-audio-counters", os.MFD_CLOEXEC)
        os.ftruncate(self._cfd, len(COUNTERS) * 8)
        self._counters = np.frombuffer(mmap.mmap(self._cfd, len(COUNTERS) * 8), dtype=np.int64)
        self._lock = threading.Lock()  # the worker handle and the PCM keys (never audio)
        self._proc: subprocess.Popen[bytes] | None = None
        self._sock: socket.socket | None = None
        self._alive = False
        self._faulted = False
        self._closed = False
        self._faults = 0
        self._xruns = 0
        self._keys: OrderedDict[int, tuple[weakref.ref[Any], int, int]] = OrderedDict()
        self._keys_bytes = 0
        self._next_key = 0
        self._replies: dict[str, deque[Any]] = {"opened": deque(), "reopened": deque()}
        self._replied = threading.Condition()
        self._request = 0
        self._threads: list[threading.Thread] = []
        with self._lock:
            self._spawn()

    # ------------------------------------------------------------------ the Sink contract
    def now(self) -> float:
        return int(self._counters[0]) / self.rate

    def position(self) -> int:
        return int(self._counters[0])

    def play(self, pcm: Pcm, at_frame: int, offset: int, tag: int) -> None:
        if self._closed:
            raise DeviceError("the audio output is closed")
        a = check_pcm(pcm, offset)
        with self._lock:
            if not self._alive or self._sock is None:
                return  # the fault has been reported; the engine plans again after reopen()
            key, fd = self._key_for(pcm if isinstance(pcm, np.ndarray) else a, a)
            msg = pickle.dumps(("play", key, a.size, int(at_frame), int(offset), tag))
            try:
                if fd is None:
                    self._sock.send(msg)
                else:
                    socket.send_fds(self._sock, [msg], [fd])
            except OSError:
                pass  # the worker died: its reader reports the fault
            finally:
                if fd is not None:
                    os.close(fd)

    def stop(self, at_frame: int) -> None:
        self._send(("stop", int(at_frame)))

    def set_listener(
        self, fn: Listener | None, loop: asyncio.AbstractEventLoop | None = None
    ) -> None:
        self._deliver.set(fn, loop)

    def stats(self) -> SinkStats:
        c = self._counters
        return SinkStats(late_clips=int(c[2]), late_frames=int(c[3]), dropped_clips=int(c[4]),
                         underflows=int(c[1]), faults=self._faults, xruns=self._xruns)

    @property
    def faulted(self) -> bool:
        return self._faulted

    @property
    def pid(self) -> int | None:
        return self._proc.pid if self._proc is not None else None

    def reopen(self) -> None:
        """Reopen the output: the live worker reopens its stream (the schedule is kept), or a
        new worker starts where the clock stopped. Raises DeviceError if that fails."""
        if self._closed:
            raise DeviceError("the audio output is closed")
        if self._alive:
            with self._replied:
                self._request += 1
                rid = self._request
                self._replies["reopened"].clear()
            self._send(("reopen", rid))
            # PortAudio may take 30 s to give up on a hung server
            how, err = self._wait_reply("reopened", self.open_timeout_s + 35.0, rid)
            if how == "ok" and err is None:
                self._faulted = False
                return
            if how == "ok":
                raise DeviceError(err)
            if how == "timeout":
                raise DeviceError("the audio process did not answer a reopen")
            # it died meanwhile: start a new one below
        with self._lock:
            self._spawn()
        self._faulted = False

    def close(self) -> None:
        if self._closed:
            return
        self._closed = True
        self._send(("close",))
        proc = self._proc
        if proc is not None:
            try:
                proc.wait(timeout=3.0)
            except subprocess.TimeoutExpired:  # a hung sound server: do not hang with it
                proc.kill()
                proc.wait()
        for t in self._threads:
            t.join(timeout=2.0)
        with contextlib.suppress(OSError):
            os.close(self._cfd)

    # ------------------------------------------------------------------ the worker
    def _spawn(self) -> None:
        """Start a worker and wait until its stream runs (lock held). Raises DeviceError."""
        self._keys.clear()
        self._keys_bytes = 0
        ours, theirs = socket.socketpair(socket.AF_UNIX, socket.SOCK_SEQPACKET)
        env = dict(os.environ)
        root = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
        env["PYTHONPATH"] = os.pathsep.join(p for p in (root, env.get("PYTHONPATH")) if p)
        try:
            proc = subprocess.Popen(
                [sys.executable, "-m", "audio.output.worker", str(theirs.fileno()),
                 str(self._cfd), json.dumps(self._opts)],
                pass_fds=(theirs.fileno(), self._cfd), env=env,
                stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
        except OSError as e:
            ours.close()
            theirs.close()
            raise DeviceError(f"cannot start the audio process: {e}",
                              code="no_audio_process") from None
        theirs.close()
        self._proc, self._sock, self._alive = proc, ours, True
        with self._replied:
            self._replies["opened"].clear()
        self._threads = [
            threading.Thread(target=self._read, args=(proc, ours), name="yomite-audio-events",
                             daemon=True),
            threading.Thread(target=self._read_stderr, args=(proc,), name="yomite-audio-stderr",
                             daemon=True)]
        for t in self._threads:
            t.start()
        how, reply = self._wait_reply("opened", self.open_timeout_s)
        if how != "ok":
            proc.kill()
            proc.wait()
            self._alive = False
            raise DeviceError(f"the audio process did not open the output ({how}, "
                              f"exit code {proc.returncode})", code="no_audio_process")
        err, info = reply
        if err is not None:
            proc.wait(timeout=5.0)
            self._alive = False
            raise DeviceError(err, code=str(info.get("code", "device_error")),
                              params=info.get("params"))
        self.channels = int(info["channels"])
        self.latency = float(info["latency"])
        self.realtime = bool(info["realtime"])
        self.cpu_wakeup_us = info.get("cpu_wakeup_us")

    def _read(self, proc: subprocess.Popen[bytes], sock: socket.socket) -> None:
        while True:
            try:
                data = sock.recv(_MAX)
            except OSError:
                data = b""
            if not data:
                break
            msg = pickle.loads(data)
            match msg[0]:
                case "done":
                    self._deliver(ClipDone(msg[1], msg[2]))
                case "stopped":
                    self._deliver(Stopped(msg[1]))
                case "fault":
                    self._faulted = True
                    self._faults += 1
                    self._deliver(DeviceFault(msg[1]))
                case "opened":
                    self._reply("opened", (msg[1], msg[2]))
                case "reopened":
                    self._reply("reopened", (msg[1], msg[2]))
        # the worker is gone
        with contextlib.suppress(subprocess.TimeoutExpired):
            proc.wait(timeout=5.0)
        sock.close()
        if self._proc is not proc:
            return
        self._alive = False
        self._reply("opened", None)
        self._reply("reopened", None)
        if not self._closed and not self._faulted:
            self._faulted = True
            self._faults += 1
            self._deliver(DeviceFault(f"the audio process ended (exit code {proc.returncode})"))

    def _read_stderr(self, proc: subprocess.Popen[bytes]) -> None:
        assert proc.stderr is not None
        with proc.stderr:
            for raw in proc.stderr:
                line = raw.decode("utf-8", "replace").rstrip()
                if "underrun occurred" in line:
                    self._xruns += 1  # ALSA says it once per underrun: counted, not printed
                elif line:
                    log.warning("audio process: %s", line)

    def _reply(self, kind: str, value: Any) -> None:
        with self._replied:
            self._replies[kind].append(value)
            self._replied.notify_all()

    def _wait_reply(self, kind: str, timeout: float,
                    rid: int | None = None) -> tuple[str, Any]:
        """("ok", the next reply of `kind`, for `rid` if given), ("dead", None) if the worker
        died first, ("timeout", None)."""
        deadline = time.monotonic() + timeout
        with self._replied:
            while True:
                q = self._replies[kind]
                while q:
                    v = q.popleft()
                    if v is None:
                        return "dead", None
                    if rid is None:
                        return "ok", v
                    if v[0] == rid:
                        return "ok", v[1]
                left = deadline - time.monotonic()
                if left <= 0:
                    return "timeout", None
                self._replied.wait(left)

    def _send(self, msg: tuple[Any, ...]) -> None:
        sock = self._sock
        if sock is None or not self._alive:
            return
        with contextlib.suppress(OSError):
            sock.send(pickle.dumps(msg))

    def _key_for(self, owner: Any, a: Pcm) -> tuple[int, int | None]:
        """The worker's key for this array, and a memfd of its samples if the worker does not
        have it yet (lock held)."""
        k = id(owner)
        hit = self._keys.get(k)
        if hit is not None and hit[0]() is owner:
            self._keys.move_to_end(k)
            return hit[1], None
        if hit is not None:
            self._forget(k)
        self._next_key += 1
        key = self._next_key
        fd = os.memfd_create("yomite-pcm", os.MFD_CLOEXEC)
        if a.size:
            os.ftruncate(fd, a.nbytes)
            with mmap.mmap(fd, a.nbytes) as mm:
                np.frombuffer(mm, dtype=np.float32)[:] = a
        try:
            ref = weakref.ref(owner)
        except TypeError:  # not weak-referenceable: sent every time
            return key, fd
        self._keys[k] = (ref, key, a.nbytes)
        self._keys_bytes += a.nbytes
        while self._keys_bytes > self.pcm_cache_bytes and len(self._keys) > 1:
            self._forget(next(iter(self._keys)))
        return key, fd

    def _forget(self, k: int) -> None:
        _ref, key, nbytes = self._keys.pop(k)
        self._keys_bytes -= nbytes
        self._send(("forget", key))
