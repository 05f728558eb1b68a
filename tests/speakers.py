"""Browser speakers for tests and benches: each a Chromium process of its own playing into a null
sink of its own (two speakers in one room are two devices), recorded with timestamps, and the
analysis of what they played against the server's timeline.

- `SpeakerBrowser`: a null sink (with its keeper), a headless Chromium whose PulseAudio stream
  goes there (PULSE_SINK in its environment), and a `Recorder` of the sink's monitor.
- `TimelineMap`: the server's timeline (`s` of a `sync` answer) as time.monotonic(), measured
  from this process over the WebSocket like a page does (the lowest-delay probes of a burst).
- `ScheduleLog`: every clip a speaker schedule ever listed (a WebSocket of the speaker
  audience), with the stops.
- `onset` / `last_sound` / `lag_ms`: where sound starts and ends in a capture, and the lag
  between two captures.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import signal
import subprocess
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import httpx2
import numpy as np
import websockets
from playwright.sync_api import Browser, Page, Playwright

from audio.codec import decode

from .audio_capture import THRESHOLD, Capture, Recorder
from .chromium import AUDIO_ARGS, AUDIO_LAUNCH, CHROMIUM, CHROMIUM_ARGS, require_chromium

RATE = 48000


def _realtime() -> None:
    """In a child before it runs: real-time below the sound server, where allowed."""
    with contextlib.suppress(OSError, AttributeError):
        os.sched_setscheduler(0, os.SCHED_FIFO, os.sched_param(3))


class SpeakerBrowser:
    """One speaker device: its own null sink, its own Chromium, its own recording."""

    def __init__(self, pw: Playwright, name: str, wav: Path) -> None:
        self.name = f"{name}_{os.getpid()}"
        self.wav = wav
        load = subprocess.run(
            ["pactl", "load-module", "module-null-sink", f"sink_name={self.name}",
             f"rate={RATE}", "channels=2", "norewinds=1"],
            capture_output=True, text=True)
        if load.returncode != 0:
            raise RuntimeError(f"cannot add a null sink ({load.stderr.strip()}); is the audio "
                               "harness up? run the tests with `make test`")
        self.module = load.stdout.strip()
        # an idle null sink renders 2 s ahead: a low-latency client holds it to real time. The
        # keeper runs real-time as the recorder does (tests/audio_capture.py): starved by a
        # loaded machine, it let the sink render in bursts, and a recorder never saw it steady
        self.keeper = subprocess.Popen(
            ["parec", "-d", f"{self.name}.monitor", "--raw", "--latency-msec=5"],
            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, preexec_fn=_realtime)
        env = {**os.environ, "PULSE_SINK": self.name}
        require_chromium()
        self.browser: Browser = pw.chromium.launch(
            executable_path=CHROMIUM, args=[*CHROMIUM_ARGS, *AUDIO_ARGS], env=env,
            **AUDIO_LAUNCH)
        self.page: Page | None = None
        self.errors: list[str] = []
        self.recorder: Recorder | None = None
        self.promoted = 0

    def open(self, url: str) -> Page:
        page = self.browser.new_page(viewport={"width": 800, "height": 700}, locale="ja-JP")
        page.on("pageerror", lambda e: self.errors.append(f"{self.name}: {e}"))
        page.on("console", lambda m: self.errors.append(f"{self.name}: console: {m.text}")
                if m.type in ("error", "warning") else None)
        page.goto(url)
        self.page = page
        return page

    def enable(self, timeout_s: float = 10) -> None:
        """Tap the page's button, then wait until it keeps time and hears its output."""
        assert self.page is not None
        self.page.click("#enable")
        self.page.wait_for_function(
            "() => window.Y && Y.speaker && Y.speaker.ready && Y.speaker.gateSettled",
            timeout=timeout_s * 1000)
        self.promoted = promote_audio_threads(self.name)


    def record(self) -> Recorder:
        self.recorder = Recorder(self.wav, source=f"{self.name}.monitor").__enter__()
        return self.recorder

    def stop_recording(self) -> Capture:
        assert self.recorder is not None
        self.recorder.__exit__(None, None, None)
        assert self.recorder.capture is not None
        return self.recorder.capture

    def freeze(self, seconds: float) -> float:
        """Stop every process of this speaker's Chromium (SIGSTOP) for `seconds`, as a phone
        that hangs or a laptop that sleeps a moment; returns the monotonic time it thawed."""
        pids = browser_pids(self.name)
        assert pids, "no Chromium process found for this speaker"
        for pid in pids:
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signal.SIGSTOP)
        try:
            time.sleep(seconds)
        finally:
            for pid in pids:
                with contextlib.suppress(ProcessLookupError):
                    os.kill(pid, signal.SIGCONT)
        return time.monotonic()

    def stats(self) -> dict[str, Any]:
        assert self.page is not None
        out: dict[str, Any] = self.page.evaluate("Y.speaker.stats()")
        return out

    def close(self) -> None:
        with contextlib.suppress(Exception):
            if self.recorder is not None and self.recorder.proc.poll() is None:
                self.recorder.proc.kill()
        with contextlib.suppress(Exception):
            self.browser.close()
        self.keeper.kill()
        self.keeper.wait()
        subprocess.run(["pactl", "unload-module", self.module], capture_output=True, check=False)


# as /proc names them; "Realtime AudioW" renders the page's graph once it has an AudioWorklet
# (the speaker's gate), and Chromium asks real-time scheduling for it as for the others
AUDIO_THREADS = ("AudioOutputDevi", "AudioWorkerThre", "threaded-ml", "Realtime AudioW")


def browser_pids(sink: str) -> set[int]:
    """The processes of the Chromium whose PulseAudio sink is `sink` (found by PULSE_SINK in
    the browser process's environment; its children, forked by the zygote, do not show it, so
    every descendant of a process that has it)."""
    needle = f"PULSE_SINK={sink}".encode()
    parent: dict[int, int] = {}
    roots: set[int] = set()
    for proc in Path("/proc").glob("[0-9]*"):
        try:
            stat = (proc / "stat").read_text()
            parent[int(proc.name)] = int(stat.rsplit(")", 1)[1].split()[1])
            if needle in (proc / "environ").read_bytes().split(b"\0"):
                roots.add(int(proc.name))
        except (OSError, ValueError, IndexError):
            continue
    ours = set(roots)
    grew = True
    while grew:
        grew = False
        for pid, ppid in parent.items():
            if ppid in ours and pid not in ours:
                ours.add(pid)
                grew = True
    return ours


def promote_audio_threads(sink: str, priority: int = 4) -> int:
    """Real-time scheduling for the audio threads of the Chromium whose PulseAudio sink is
    `sink`: on a desktop Chromium asks for it itself (through RealtimeKit), which this container
    lacks, and without it the load of other processes on a shared 2-core machine starves the
    browser's audio and it underruns. Priority 4 is below PulseAudio's own, as the server does
    for its own audio thread. Returns how many threads were promoted (0 if not permitted)."""
    done = 0
    for pid in browser_pids(sink):
        try:
            for task in Path(f"/proc/{pid}/task").iterdir():
                if (task / "comm").read_text().strip() in AUDIO_THREADS:
                    os.sched_setscheduler(int(task.name), os.SCHED_FIFO,
                                          os.sched_param(priority))
                    done += 1
        except OSError:
            continue
    return done


@dataclass
class TimelineMap:
    """timeline seconds = monotonic + offset (a wall-clock channel: the slope is 1)."""

    offset: float
    rtt_ms: float

    @classmethod
    def measure(cls, ws_url: str, probes: int = 30) -> TimelineMap:
        async def run() -> TimelineMap:
            best: tuple[float, float] | None = None
            async with websockets.connect(ws_url) as ws:
                for i in range(probes):
                    c0 = time.monotonic()
                    await ws.send(json.dumps({"type": "sync", "id": i, "c": c0}))
                    while True:
                        m = json.loads(await ws.recv())
                        if m.get("type") == "sync" and m.get("id") == i:
                            break
                    c1 = time.monotonic()
                    rtt = c1 - c0
                    if best is None or rtt < best[1]:
                        best = (m["s"] - (c0 + c1) / 2, rtt)
                    await asyncio.sleep(0.01)
            assert best is not None
            return cls(best[0], best[1] * 1000)

        return _in_thread(run)

    def mono(self, timeline_s: float) -> float:
        return timeline_s - self.offset


def speaker_link(base: str, headers: dict[str, str], channel: str = "main") -> tuple[str, str]:
    """The channel's speaker link and its key, as the operator's console gets them."""
    r = httpx2.get(f"{base}/api/channels/{channel}/speakers", headers=headers, timeout=30)
    r.raise_for_status()
    url = str(r.json()["url"])
    return url, url.split("#key=", 1)[1]


@dataclass
class ScheduleLog:
    """Every clip and stop the speaker audience was sent, from a WebSocket of its own (its URL
    holds the channel's speaker key)."""

    ws_url: str
    clips: dict[str, dict[str, Any]] = field(default_factory=dict)
    stops: list[float] = field(default_factory=list)
    stop_rx: list[tuple[float, float]] = field(default_factory=list)  # (stop_s, monotonic rx)
    messages: int = 0

    def __post_init__(self) -> None:
        self._stop = threading.Event()
        self._seen_stops = 0
        self._thread = threading.Thread(target=lambda: asyncio.run(self._run()), daemon=True)
        self._thread.start()

    async def _run(self) -> None:
        async with websockets.connect(self.ws_url) as ws:
            while not self._stop.is_set():
                try:
                    text = await asyncio.wait_for(ws.recv(), 0.2)
                except TimeoutError:
                    continue
                rx = time.monotonic()
                m = json.loads(text)
                if m.get("type") != "speaker":
                    continue
                self.messages += 1
                for c in m["clips"]:
                    self.clips.setdefault(c["id"], {**c, "stops_before": m["stops"]})
                if m["stops"] > self._seen_stops:
                    self._seen_stops = m["stops"]
                    self.stops.append(float(m["stop_s"]))
                    self.stop_rx.append((float(m["stop_s"]), rx))

    def cancelled(self, clip: dict[str, Any]) -> bool:
        """Whether a stop came before the clip began (it was never heard)."""
        return any(s <= clip["at_s"] for s in self.stops[clip["stops_before"]:])

    def close(self) -> None:
        self._stop.set()
        self._thread.join(5)


class ClipAudio:
    """The served clips, decoded as a browser would (for where their sound starts)."""

    def __init__(self, base: str, folder: Path, key: str) -> None:
        self.base = base
        self.folder = folder
        self.headers = {"Authorization": f"Bearer {key}"}  # clips are for speakers only
        self._onset: dict[str, int] = {}

    def first_loud(self, url: str) -> int:
        """Index of the first sample over THRESHOLD in the decoded clip."""
        if url not in self._onset:
            path = self.folder / Path(url).name
            if not path.exists():
                r = httpx2.get(self.base + url, headers=self.headers, timeout=30)
                r.raise_for_status()
                path.write_bytes(r.content)
            x = decode(path, RATE)
            loud = np.flatnonzero(np.abs(x) > THRESHOLD)
            self._onset[url] = int(loud[0]) if loud.size else 0
        return self._onset[url]


def _in_thread(fn: Any) -> Any:
    """asyncio.run(fn()) on a thread of its own (Playwright's sync API holds a loop here)."""
    out: list[Any] = []
    err: list[BaseException] = []

    def target() -> None:
        try:
            out.append(asyncio.run(fn()))
        except BaseException as e:
            err.append(e)

    th = threading.Thread(target=target, daemon=True)
    th.start()
    th.join(60)
    if err:
        raise err[0]
    return out[0]


def loud(cap: Capture) -> np.ndarray:
    return np.abs(cap.x) > THRESHOLD


def index(cap: Capture, mono: float) -> int:
    return cap.frame_at(mono)


def onset(cap: Capture, expected: float, before_s: float = 0.12,
          after_s: float = 0.25) -> float | None:
    """Monotonic time of the first sound within [expected - before_s, expected + after_s],
    provided the 50 ms before that window are silent (else the window holds no onset)."""
    lo, hi = index(cap, expected - before_s), index(cap, expected + after_s)
    quiet = index(cap, expected - before_s - 0.05)
    if quiet < 0 or hi > len(cap.x):
        return None
    ld = loud(cap)
    if ld[quiet:lo].any():
        return None
    hits = np.flatnonzero(ld[lo:hi])
    return None if not hits.size else cap.t_line(lo + int(hits[0]))


def last_sound(cap: Capture, start: float, end: float) -> float | None:
    """Monotonic time just after the last loud sample in [start, end]."""
    a, b = max(0, index(cap, start)), min(len(cap.x), index(cap, end))
    hits = np.flatnonzero(loud(cap)[a:b])
    return None if not hits.size else cap.t_line(a + int(hits[-1]) + 1)


def lag_ms(a: Capture, b: Capture, start: float, end: float, max_lag_ms: float = 30) -> float:
    """How much later b plays what a plays over [start, end] (cross-correlation peak, ms)."""
    n = int(max_lag_ms * RATE / 1000)
    ia, ib = index(a, start), index(b, start)
    length = index(a, end) - ia
    x = a.x[ia:ia + length].astype(np.float64)
    y = b.x[max(0, ib - n):ib + length + n].astype(np.float64)
    if len(x) < length or len(y) < length + 2 * n or not np.any(x):
        raise AssertionError("the captures do not cover the interval")
    corr = np.correlate(y, x, mode="valid")  # corr[k]: y shifted by k - n
    k = int(np.argmax(corr))
    return (k - n) * 1000 / RATE


def pct(values: list[float], q: float) -> float:
    return float(np.percentile(np.asarray(values), q)) if values else float("nan")
