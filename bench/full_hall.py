"""A full hall: a whole match read into PulseAudio while the same machine serves everything a
hall throws at it, and what the sink played is checked for breaks.

On this machine, at once (the teacher's-laptop case, black-box, on the capture of the sink):
- a real `yomite serve` reads a match on channel `main` (Open JTalk, cold render cache,
  started in one tap: prepare then start at once) into a PulseAudio null sink of its own;
- headless Chromium has the console and the projector open and reloads them every few seconds;
- 200 viewer WebSockets are connected;
- 3 s after the start, a second channel prepares a cold five-colour deck (its render runs);
- two CPU burners spin;
- a referee's WebSocket raises and lowers its hand at random moments inside verses.

Reports: holes inside speech (runs of exact zeros over 2 ms in the capture where the
timeline says speech and the clip itself is not silent), speech segments bit-exact, underruns
(PortAudio's and ALSA's), late clips, whether `@audio` ever paused the match, and the
hold->silence p50/p99 (capture bracket, as bench/hold_to_silence.py) in the same run.
Target: 0 holes, 0 late clips, no @audio pause, hold->silence p99 <= 25 ms.

    make bench   (or: . $YH_RUN/env.sh; .venv/bin/python bench/full_hall.py [--cards 17])
    --in-process  plays from the server's own process (audio.process: false), to compare
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import random
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import httpx2
import numpy as np
import websockets

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
from audio.config import VoiceConfig
from audio.output.filesink import to_int16
from audio.voices.factory import make_voice
from bench import conditions
from bench.hallload import burners, pages, viewers
from bench.stalls import StallProbe
from reader.journal import read_journal, replay
from tests.audio_capture import Capture, OwnNullSink, Recorder
from tests.serverproc import Server

TOKEN = "full-hall-operator-token-0123456789"
COLORS5 = ["blue", "pink", "yellow", "green", "orange"]
HOLE = 96  # frames: 2 ms at 48 kHz
RATE = 48000


async def referee(base: str, seed: int) -> None:
    """The referee's phone, in a process of its own at a high priority (a phone is another
    device: its own delays are not the server's): prints SENT <monotonic> for every hold."""
    import os
    import signal

    instrument_priority(os.getpid())
    rng = random.Random(seed)
    stop = asyncio.Event()
    asyncio.get_running_loop().add_signal_handler(signal.SIGTERM, stop.set)
    op = {"Authorization": f"Bearer {TOKEN}"}
    async with httpx2.AsyncClient(base_url=base, timeout=30) as http:
        pin = (await http.get("/api/channels/main/pin", headers=op)).json()["pin"]
        ref = (await http.post("/api/channels/main/referees",
                               json={"pin": pin, "name": "bench"})).json()
    uri = base.replace("http://", "ws://") + f"/ws/channels/main?token={ref['token']}"
    async with websockets.connect(uri, max_size=None) as ws:
        state: dict[str, Any] = {}

        async def reader() -> None:
            async for text in ws:
                m = json.loads(text)
                if m["type"] == "state":
                    state.update(m)

        task = asyncio.create_task(reader())
        while not stop.is_set():
            m = state.get("match") or {}
            seg = m.get("segment") or {}
            if m.get("paused") or seg.get("kind") != "verse":
                await asyncio.sleep(0.02)
                continue
            await asyncio.sleep(rng.uniform(0.3, 1.2))  # a random moment inside the verse
            m = state.get("match") or {}
            if m.get("paused") or (m.get("segment") or {}).get("kind") != "verse":
                continue
            t = time.monotonic()
            await ws.send(json.dumps({"type": "hold"}))
            print("SENT", t, flush=True)
            await asyncio.sleep(0.6)
            await ws.send(json.dumps({"type": "release"}))
            await asyncio.sleep(rng.uniform(2.0, 4.0))
        task.cancel()


async def run(server: Server, a: argparse.Namespace, rng: random.Random) -> dict[str, Any]:
    stop = asyncio.Event()
    with burners(a.burners):
        view_task = asyncio.create_task(viewers(server.port, a.viewers, stop))
        page_task = asyncio.create_task(pages(server.base, TOKEN, stop, a.reload_s))
        await asyncio.sleep(3.0)  # the pages and sockets are up
        async with httpx2.AsyncClient(base_url=server.base, headers=server.op,
                                      timeout=120) as http:
            r = await http.post("/api/channels/main/match",
                                json={"colors": ["blue"], "seed": a.seed})
            assert r.status_code == 200, r.text
            t_start = time.monotonic()
            r = await http.post("/api/channels/main/match/start")
            assert r.status_code == 200, r.text
            start_ms = (time.monotonic() - t_start) * 1000
            ref = subprocess.Popen([sys.executable, __file__, "--referee", server.base,
                                    "--seed", str(a.seed)], stdout=subprocess.PIPE, text=True)
            await asyncio.sleep(3.0)
            r = await http.post("/api/channels/second/match",
                                json={"colors": COLORS5, "seed": a.seed + 1})
            assert r.status_code == 200, r.text
            resumes = 0
            deadline = time.monotonic() + 60 + a.cards * 30 + a.memorise
            while time.monotonic() < deadline:
                m = (await http.get("/api/channels/main")).json()["match"]
                if m["phase"] in ("finished", "closed"):
                    break
                audio_held = m["paused"] and any(h["referee"] == "@audio" for h in m["holds"])
                # what an operator does: resume (503 while the output is still down)
                if audio_held and (await http.post("/api/channels/main/match/resume")
                                   ).status_code == 200:
                    resumes += 1
                await asyncio.sleep(0.5)
            health = (await http.get("/api/health")).json()
            log = (await http.get("/api/channels/main/match/log")).json()
            second = (await http.get("/api/channels/second")).json()
        stop.set()
        ref.terminate()
        out, _ = ref.communicate(timeout=10)
        sent = [float(ln.split()[1]) for ln in out.splitlines() if ln.startswith("SENT ")]
        got = await view_task
        reloads = await page_task
    return {"health": health, "log": log, "sent": sent, "viewer_msgs": got, "resumes": resumes,
            "finished": m["phase"] in ("finished", "closed"),
            "reloads": reloads, "start_ms": start_ms, "second": second}


def analyse(cap: Capture, log: dict[str, Any], cache: Path) -> dict[str, Any]:
    """Holes inside speech, segment by segment, each aligned on its clip's first samples."""
    engine = replay(read_journal(log["journal"]))
    clips = {c.key: c for c in engine.programme_clips()}
    voice = make_voice(VoiceConfig(engine="openjtalk", cache_dir=cache), RATE)
    raw = cap.raw
    speech = [e for e in log["timeline"] if e["kind"] in ("call", "prelude", "verse")]
    holes: list[dict[str, Any]] = []
    exact = 0
    unfound = 0
    offset: int | None = None  # capture index of output frame 0, from the previous segment
    for e in speech:
        p16 = to_int16(voice.pcm(clips[e["clip"]]))
        skip = round(e.get("from_s", 0.0) * RATE)
        p16 = p16[skip : skip + e["end_frame"] - e["start_frame"]]
        nz = np.flatnonzero(p16)
        if nz.size == 0:
            continue
        e0 = int(nz[0])
        probe = p16[e0 : e0 + 32]
        guess = None if offset is None else e["start_frame"] + offset + e0
        lo = 0 if guess is None else max(0, guess - RATE)
        hi = len(raw) - len(probe) if guess is None else min(len(raw) - len(probe), guess + RATE)
        found = None
        for j in np.flatnonzero(raw[lo:hi] == probe[0]) + lo:
            if np.array_equal(raw[j : j + len(probe)], probe):
                found = int(j)
                if guess is None or found >= guess:
                    break
        if found is None:
            unfound += 1
            continue
        start = found - e0
        offset = start - e["start_frame"]
        n = len(p16) - (96 if e.get("cut") else 0)  # a cut piece ends in its fade
        w = raw[start : start + n]
        if e.get("cut"):
            # a flushed stop drops what was queued: the piece is heard up to a hard cut before
            # its cut frame, then silence (audio.flush_on_stop); a hole is silence with speech
            # after it, so the trailing silence is not one
            heard = np.flatnonzero(w)
            w = w[: int(heard[-1]) + 1] if heard.size else w[:0]
            n = len(w)
        if np.array_equal(w, p16[: len(w)]) and len(w) == n:
            exact += 1
        mask = np.concatenate([[False], (w == 0) & (p16[: len(w)] != 0), [False]])
        edges = np.flatnonzero(np.diff(mask.astype(np.int8)))
        for s, t in zip(edges[::2], edges[1::2], strict=True):
            if t - s > HOLE:
                holes.append({"clip": e["clip"], "at_s": (e["start_frame"] + s) / RATE,
                              "ms": (t - s) * 1000 / RATE,
                              "heard": cap.t_arrival(start + int(s))})
    return {"segments": len(speech), "exact": exact, "unaligned": unfound, "holes": holes}


def hold_to_silence(cap: Capture, sent: list[float]) -> tuple[np.ndarray, np.ndarray, int]:
    """[lower, upper] of each hold's send -> silence, for the holds sent while the voice was
    sounding (speech in the 20 ms before the send: a hold that came after the verse had ended
    stops nothing); and how many came in silence."""
    lo, hi = [], []
    loud = np.abs(cap.x) > 0
    n = len(loud)
    quiet = 0
    for t in sent:
        i = int(np.searchsorted(cap.times[:, 0], t))
        j = int(cap.times[max(i - 1, 0), 1])
        if not loud[max(0, j - 960) : j].any():
            quiet += 1
            continue
        while j < n and loud[j : j + 9600].any():
            j += int(np.flatnonzero(loud[j : j + 9600])[-1]) + 1
        lo.append((cap.t_line(j) - t) * 1000)
        hi.append((cap.t_arrival(j) - t) * 1000)
    return np.array(lo), np.array(hi), quiet


def instrument_priority(pid: int) -> None:
    """Every thread of a measuring process real-time (SCHED_FIFO 2: above the server's event
    loop, below its audio process and the sound server) where allowed, else nice -15: on two
    busy cores a CFS instrument's own wake-ups came up to 50 ms late and widened each bracket
    (its timestamps are the send time and the capture's read times)."""
    import os

    for tid in os.listdir(f"/proc/{pid}/task"):
        try:
            os.sched_setscheduler(int(tid), os.SCHED_FIFO, os.sched_param(2))
        except OSError:
            with contextlib.suppress(OSError):
                os.setpriority(os.PRIO_PROCESS, int(tid), -15)


def measuring_instrument(pid: int) -> None:
    """The recorder and its parec as instruments (instrument_priority)."""
    kids = subprocess.run(["pgrep", "-P", str(pid)], capture_output=True, text=True).stdout
    for p in [pid, *map(int, kids.split())]:
        with contextlib.suppress(OSError):
            instrument_priority(p)


def buffer_s(latency: str | None, blocksize: int, rate: int = 48000) -> float:
    """The audio queued ahead of the speakers: the configured latency (0.06 by default);
    PortAudio's "low" / "high" on ALSA are about two / four blocks."""
    if latency is None:
        return 0.06
    if latency in ("low", "high"):
        return (2 if latency == "low" else 4) * blocksize / rate
    return float(latency)


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--cards", type=int, default=17)
    ap.add_argument("--memorise", type=float, default=10)
    ap.add_argument("--viewers", type=int, default=200)
    ap.add_argument("--burners", type=int, default=2)
    ap.add_argument("--reload-s", type=float, default=4.0)
    ap.add_argument("--seed", type=int, default=5)
    ap.add_argument("--in-process", action="store_true")
    ap.add_argument("--loop-priority", type=int, default=1,
                    help="server.realtime_priority (0: the event loop at nice -10 only)")
    ap.add_argument("--server-log", type=Path, help="keep the server's log here")
    ap.add_argument("--blocksize", type=int, default=256, help="audio.blocksize (frames)")
    ap.add_argument("--latency", help="audio.latency: low, high or seconds of output buffer "
                    "(default: the configuration's, 0.06)")
    ap.add_argument("--no-flush", action="store_true",
                    help="audio.flush_on_stop: false (a hold fades out behind the buffer)")
    ap.add_argument("--anyway", action="store_true",
                    help="print the figures even where the conditions are not met (marked)")
    ap.add_argument("--referee", help=argparse.SUPPRESS)
    a = ap.parse_args()
    if a.referee:
        asyncio.run(referee(a.referee, a.seed))
        return
    rng = random.Random(a.seed)
    before = conditions.machine()
    conditions.require_quiet(before, a.anyway)
    with tempfile.TemporaryDirectory() as tmp, OwnNullSink() as sink:
        cache = Path(tmp) / "cache"  # cold
        server = Server(Path(tmp), {
            "match": {"memorise_s": a.memorise, "cards": a.cards,
                      "resume": {"lead_in_s": 0.5}},
            "voice": {"engine": "openjtalk", "cache_dir": str(cache)},
            "audio": {"output": "device", "device": "pulse", "process": not a.in_process,
                      "blocksize": a.blocksize, "flush_on_stop": not a.no_flush,
                      **({} if a.latency is None else {"latency": a.latency if a.latency in
                                                       ("low", "high") else float(a.latency)})},
            "server": {"channels": [{"name": "main"}, {"name": "second"}],
                       "realtime_priority": a.loop_priority,
                       "client_queue": 256},
        }, TOKEN).start()
        assert server.proc is not None
        problems = conditions.report(before, server.proc.pid, a.blocksize,
                                     need_worker=not a.in_process)
        hold = "fades out behind it" if a.no_flush else "flushes it"
        print(f"  output buffer {buffer_s(a.latency, a.blocksize) * 1000:.0f} ms (audio.latency "
              f"{a.latency or 'default'}); a hold {hold}")
        try:
            with StallProbe() as probe, \
                    Recorder(Path(tmp) / "cap.wav", source=sink.monitor) as rec:
                measuring_instrument(rec.proc.pid)
                r = asyncio.run(run(server, a, rng))
        finally:
            server.stop()
        cap = rec.capture
        assert cap is not None
        res = analyse(cap, r["log"], cache)
        lo, hi, quiet = hold_to_silence(cap, r["sent"])
        log_text = server.log()
        if a.server_log:
            a.server_log.write_text(log_text, "utf-8")
    stalls = probe.result()
    problems += conditions.during(stalls, buffer_s(a.latency, a.blocksize))
    if not conditions.verdict(problems, a.anyway):
        sys.exit(2)
    main_h = r["health"]["channels"]["main"]
    out = main_h["output_stats"]
    audio_pauses = sum(1 for rec in r["log"]["records"] for f in rec.get("facts", ())
                       if f.get("fact") == "hold" and f.get("referee") == "@audio")
    alsa_lines = log_text.count("underrun occurred")
    sec = r["second"]["render"] or {}
    print(f"full hall ({'in-process output' if a.in_process else 'audio process'}): "
          f"{a.cards} cards, {a.viewers} viewers ({r['viewer_msgs']} states received), "
          f"{r['reloads']} page reloads, {a.burners} CPU burners, second channel rendered "
          f"{sec.get('done')}/{sec.get('total')} five-colour clips")
    print(f"  start (one tap, cold) answered in {r['start_ms']:.0f} ms; event loop "
          f"{r['health']['event_loop']}")
    print(f"  speech segments {res['segments']}: bit-exact {res['exact']}, unaligned "
          f"{res['unaligned']}; holes inside speech (> 2 ms of zeros): {len(res['holes'])} "
          f"{[round(h['ms'], 1) for h in res['holes']][:10]}")
    print(f"  {stalls.summary()}")
    own = [h for h in res["holes"] if stalls.covering(h["heard"]) is None]
    print(f"  holes while the machine itself was stopped: {len(res['holes']) - len(own)}; "
          f"holes outside one (one CPU late, or none seen): {len(own)} "
          f"{[round(h['ms'], 1) for h in own][:10]}")
    print(f"  underruns {out['underruns']} (PortAudio {out['underflows']}, ALSA {out['xruns']}; "
          f"ALSA lines printed by the server: {alsa_lines}); late clips {out['late_clips']} "
          f"({out['late_frames']} frames); faults {out['faults']}; @audio pauses "
          f"{audio_pauses} (resumed by the operator {r['resumes']} times); match "
          f"{'finished' if r['finished'] else 'NOT FINISHED in time'}")
    warnings = [ln for ln in log_text.splitlines() if "WARNING" in ln or "ERROR" in ln]
    if warnings:
        print(f"  server warnings ({len(warnings)}):", *warnings[:12], sep="\n    ")
    if len(lo):
        print(f"  hold -> silence, {len(lo)} holds while speech sounded ({quiet} more came "
              f"after a verse had ended) (ms): p50 [{np.percentile(lo, 50):.1f}, "
              f"{np.percentile(hi, 50):.1f}]  p99 [{np.percentile(lo, 99):.1f}, "
              f"{np.percentile(hi, 99):.1f}]  max [{lo.max():.1f}, {hi.max():.1f}]")


if __name__ == "__main__":
    main()
