"""Browser speakers against the timeline: two /speaker pages, each a Chromium of its own playing
into a PulseAudio null sink of its own (tests/speakers.py), read a match from a real
`yomite serve` (a browser-only channel, Open JTalk) while the operator holds at random moments
of the verses. Both sinks are recorded with timestamps; printed:

- onset error: each clip's first sound in a capture against the timeline (the schedule's
  `at_s` mapped to time.monotonic by `sync` probes from this process, plus where the decoded
  clip's own sound starts), p50 and p1..p99, per speaker;
- between speakers: B's onset minus A's, per clip;
- gap error: onset-to-onset against the timeline's;
- hold -> silence: the operator's request to the last sound in each capture;
- the pages' own figures: probe round trip, drift, output latency, underrun steps followed.

The capture times a sample when the null sink renders it; the sink reports its latency (~5 ms)
to Chromium as still to come, so onsets sit that much early: the offset between speakers and
the spread around the bias are what a room hears.

    make bench   (or: . $YH_RUN/env.sh; .venv/bin/python bench/speaker_sync.py --holds 30)
    --load   the same under a full hall's load (bench/hallload.py: two CPU burners, 200 viewer
             WebSockets, the console and the projector reloaded every 4 s); target B - A p99
             <= 5 ms, hold -> silence p99 <= 100 ms, 0 clips missed
"""

from __future__ import annotations

import argparse
import random
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import httpx2
import numpy as np
from playwright.sync_api import sync_playwright

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
from bench.hallload import HallLoad
from tests.serverproc import Server
from tests.speakers import (
    ClipAudio,
    ScheduleLog,
    SpeakerBrowser,
    TimelineMap,
    last_sound,
    onset,
    pct,
    speaker_link,
)

TOKEN = "speaker-bench-operator-token-0123456789"


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0] if __doc__ else None)
    ap.add_argument("--holds", type=int, default=30)
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--load", action="store_true",
                    help="under a full hall's load: two CPU burners, 200 viewer WebSockets, the "
                         "console and the projector reloaded in Chromium every 4 s")
    ap.add_argument("--viewers", type=int, default=200)
    ap.add_argument("--burners", type=int, default=2)
    a = ap.parse_args()
    rng = random.Random(a.seed)
    with tempfile.TemporaryDirectory() as tmp_s:
        tmp = Path(tmp_s)
        server = Server(tmp, {
            "match": {"memorise_s": 1, "cards": 20, "prelude": {"enabled": False},
                      "resume": {"lead_in_s": 0.5}},
            "voice": {"engine": "openjtalk", "cache_dir": "/tmp/yomite-test-cache"},
            "audio": {"output": "null"},
            "server": {"channels": [{"name": "main", "output": "browser"}]},
        }, TOKEN).start()
        try:
            if a.load:
                with HallLoad(server.base, server.port, TOKEN, viewers=a.viewers,
                              burners=a.burners) as load:
                    run(server, tmp, a.holds, rng)
                print(f"  load: {a.burners} CPU burners, {a.viewers} viewers "
                      f"({load.figures.get('viewer_states', 0)} states received), "
                      f"{load.figures.get('reloads', 0)} page reloads")
            else:
                run(server, tmp, a.holds, rng)
        finally:
            for client in _clients.values():
                client.close()
            server.stop()


_clients: dict[str, httpx2.Client] = {}


def api(server: Server, method: str, path: str, **kw: Any) -> dict[str, Any]:
    # one connection per server: a new client costs tens of ms before its first byte, which
    # is not the hold's time to silence
    c = _clients.get(server.base)
    if c is None:
        c = _clients[server.base] = httpx2.Client(base_url=server.base, headers=server.op,
                                                   timeout=30)
    r = c.request(method, path, **kw)
    r.raise_for_status()
    out: dict[str, Any] = r.json()
    return out


def run(server: Server, tmp: Path, holds: int, rng: random.Random) -> None:
    ws = f"ws://127.0.0.1:{server.port}/ws/channels/main"
    link, key = speaker_link(server.base, server.op)
    schedule = ScheduleLog(f"{ws}?audience=speaker&token={key}")
    clips = ClipAudio(server.base, tmp, key)
    with sync_playwright() as pw:
        a = SpeakerBrowser(pw, "bench_a", tmp / "a.wav")
        b = SpeakerBrowser(pw, "bench_b", tmp / "b.wav")
        try:
            for s in (a, b):
                s.open(link)
                s.enable()
            api(server, "POST", "/api/channels/main/match", json={"colors": ["blue"],
                                                                   "seed": 5})
            tmap = TimelineMap.measure(ws)
            a.record()
            b.record()
            api(server, "POST", "/api/channels/main/match/start")
            sent: list[tuple[float, float]] = []
            while len(sent) < holds:
                m = api(server, "GET", "/api/channels/main")["match"]
                if m["phase"] == "finished":
                    break
                seg = m["segment"] or {}
                now = time.monotonic() + tmap.offset
                if (m["paused"] or seg.get("kind") != "verse"
                        or not seg["started_s"] + 0.3 < now < (seg["ends_s"] or 0) - 0.3):
                    time.sleep(0.02)
                    continue
                time.sleep(rng.uniform(0, 0.5))
                t = time.monotonic()
                api(server, "PUT", "/api/channels/main/holds/@operator")
                time.sleep(0.4)
                sent.append((t, time.monotonic()))
                api(server, "DELETE", "/api/channels/main/holds/@operator")
                time.sleep(rng.uniform(1.0, 3.0))
            time.sleep(1.0)
            caps = [a.stop_recording(), b.stop_recording()]
            stats = [a.stats(), b.stats()]
        finally:
            schedule.close()
            a.close()
            b.close()
    report(schedule, clips, tmap, caps, stats, sent)


def report(schedule: ScheduleLog, clips: ClipAudio, tmap: TimelineMap, caps: list[Any],
           stats: list[dict[str, Any]], sent: list[tuple[float, float]]) -> None:
    rows = []
    for c in sorted(schedule.clips.values(), key=lambda c: c["at_s"]):
        if c["offset_s"] != 0 or schedule.cancelled(c):
            continue
        e = tmap.mono(c["at_s"]) + clips.first_loud(c["url"]) / 48000
        if e > caps[0].t_line(len(caps[0].x)) - 0.3:
            continue
        rows.append((e, [onset(cap, e) for cap in caps]))
    print(f"\nspeaker sync: {len(rows)} clips, {len(sent)} holds, 2 Chromium speakers "
          f"(timeline probe round trip {tmap.rtt_ms:.2f} ms)")
    for i, name in enumerate("AB"):
        err = [(r[1][i] - r[0]) * 1000 for r in rows if r[1][i] is not None]
        gaps = [((rows[k + 1][1][i] - rows[k][1][i]) - (rows[k + 1][0] - rows[k][0])) * 1000
                for k in range(len(rows) - 1)
                if rows[k][1][i] is not None and rows[k + 1][1][i] is not None]
        stops = []
        parts = []  # (total, the server's, the page's, the rest), per hold, ms
        for th, tr in sent:
            end = last_sound(caps[i], th - 1.0, tr)
            if end is not None:
                stops.append((end - th) * 1000)
                acted = [x for x in stats[i].get("stopLags", [])
                         if x["faded"] and th - 0.05 <= tmap.mono(x["stop_s"]) <= tr]
                if acted:
                    srv = (tmap.mono(acted[0]["stop_s"]) - th) * 1000
                    # the gate (worker) acts first where there is one, else the page itself
                    page = acted[0]["lag_ms"]
                    if acted[0].get("gate_ms") is not None:
                        page = min(page, acted[0]["gate_ms"])
                    parts.append((stops[-1], srv, page, stops[-1] - srv - page))
        st = stats[i]
        # a slow trend is the instrument's clock (the capture times frames at a nominal 48 kHz
        # of CLOCK_MONOTONIC; the null sink's clock runs ~160 ppm off it): shown, and removed
        ts = [r[0] for r in rows if r[1][i] is not None]
        slope, icpt = np.polyfit(ts, err, 1) if len(err) > 2 else (0.0, 0.0)
        flat = [x - (slope * t + icpt) for t, x in zip(ts, err, strict=True)]
        print(f"  {name}: onset error trend {slope * 1e3:+.0f} ppm over {ts[-1] - ts[0]:.0f} s "
              f"from {slope * ts[0] + icpt:+.2f} ms at the first clip; around it p1..p99 "
              f"{pct(flat, 1):+.2f}..{pct(flat, 99):+.2f} ms")
        print(f"  {name}: onset error p50 {pct(err, 50):+.2f} ms, p1..p99 {pct(err, 1):+.2f}.."
              f"{pct(err, 99):+.2f} ms (missed {len(rows) - len(err)}); gap error |p50| "
              f"{pct([abs(g) for g in gaps], 50):.2f} p99 {pct([abs(g) for g in gaps], 99):.2f} "
              f"ms; hold -> silence p50 {pct(stops, 50):.1f} p99 {pct(stops, 99):.1f} max "
              f"{max(stops, default=float('nan')):.1f} ms")
        print(f"     page: probe rtt {st['rtt']:.2f} ms, drift {st['drift'] * 1e6:+.0f} ppm, "
              f"output latency {(st['latency'] or 0) * 1000:.0f} ms, clips placed "
              f"{st['placed']} (joined late {st['late']}), moved while sounding "
              f"{st['resyncs']}, output underrun steps followed {len(st['jumps'])}, clips the page "
              f"missed {st.get('missed', 0)}")
        for what, field in (("the page's main thread", "lag_ms"),
                            ("the socket's worker (the gate)", "gate_ms")):
            lags = [x[field] for x in st.get("stopLags", [])
                    if x["faded"] and x.get(field) is not None]
            if lags:
                print(f"     page: a stop acted on by {what} (the timeline's time then minus "
                      f"the stop's) p50 {pct(lags, 50):.1f} p99 {pct(lags, 99):.1f} max "
                      f"{max(lags):.1f} ms over {len(lags)} stops that silenced a clip")
        print(f"     page: audio gate {st.get('gate')}")
        worst = sorted(parts, reverse=True)[:5]
        print("     the slowest holds, ms (to silence = the server's + the page's + output): "
              + "; ".join(f"{t:.0f} = {s:.0f} + {p:.0f} + {r:.0f}" for t, s, p, r in worst))
    rx = [(t - tmap.mono(s)) * 1000 for s, t in schedule.stop_rx]
    print(f"  a stop received by a third WebSocket client (this process) after the stop's time: "
          f"p50 {pct(rx, 50):.1f} p99 {pct(rx, 99):.1f} max {max(rx, default=float('nan')):.1f} ms")
    both = [(r[1][1] - r[1][0]) * 1000 for r in rows if None not in r[1]]
    print(f"  B - A: p50 {pct(both, 50):+.2f} ms, |B - A| p99 {pct([abs(x) for x in both], 99):.2f}"
          f" max {max((abs(x) for x in both), default=float('nan')):.2f} ms")


if __name__ == "__main__":
    main()
