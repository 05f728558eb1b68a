"""Fifty projectors on a big tournament's standings do not delay a referee's hold on another
channel of the same server (issue 25, item 6): a real `yomite serve`, 400 players, the pages
long-polling the public view (in a process of their own, as they are other machines), one
result a second, the referee's hand raised or lowered every 50 ms.

Before the fix every result woke every page and each page's view was built and encoded on the
event loop: the hand's round trip had a median of 1.1 s here (p99 6 s; 2 cores, loaded), with
none under 5 ms a floor. Now the view is built once per version in a worker thread and the loop
sends the same bytes to every page: a median of 5 ms, the p99 25-45 ms. The bound is on the
median: sixty times the fixed server's, a quarter of the bug's, out of reach of a busy machine's
scheduling; the p99 is printed, and measured against the floor by bench/hostile.py
(`standings`). tests/test_desk_views.py counts the builds (one per version, however many pages
wait)."""

from __future__ import annotations

import asyncio
import json
import socket

import httpx2
import pytest

from .desk_load import big_tournament, document, prepare_channel, run
from .serverproc import Server

pytestmark = pytest.mark.server

TOKEN = "desk-load-operator-token-0123456789ab"
PAGES = 50
SECONDS = 8.0
MEDIAN_BOUND_MS = 300


@pytest.fixture(scope="module")
def server(tmp_path_factory):
    s = Server(tmp_path_factory.mktemp("desk-load"), {
        "match": {"memorise_s": 600, "cards": 2},  # the referee's match outlasts the run
        "voice": {"engine": "estimate"}, "audio": {"output": "null"},
        "server": {"channels": [{"name": "a"}, {"name": "main"}]},
        "desk": {"database_url": "sqlite:///var/desk.sqlite3", "long_poll_s": 25},
    }, TOKEN).start()
    yield s
    s.stop()


def test_fifty_standings_pages_do_not_delay_a_hold(server):
    t = big_tournament()
    body = json.dumps(document(t), ensure_ascii=False).encode()
    assert len(body) > 32 * 1024  # the backup of a big day: over the general body cap
    r = httpx2.post(f"{server.base}/api/tournaments/import", content=body, headers=server.op,
                    timeout=120)
    assert r.status_code == 200, r.text
    hold = prepare_channel(server.base, server.op, "main")

    load = asyncio.run(run(server.base, server.op, t, hold, PAGES, SECONDS,
                           min_results=int(SECONDS)))
    print(f"{PAGES} pages, {load.results} results: the hold's round trip p50 "
          f"{load.quantile(0.5):.1f} ms, p99 {load.quantile(0.99):.1f} ms "
          f"({len(load.holds_ms)} raised and lowered); {load.responses} views sent")
    assert load.results >= SECONDS, "the desk entered a result a second (or more slowly, " \
        "on a busy machine, within 180 s)"
    assert load.responses >= PAGES * 2, "the pages were woken by the results"
    assert len(load.holds_ms) >= SECONDS * 10
    assert load.quantile(0.5) < MEDIAN_BOUND_MS, load.holds_ms
    assert "Traceback" not in server.log()


def test_a_page_that_leaves_is_not_kept_waiting(tmp_path):
    """Fifty projectors reloaded at once leave fifty long polls behind: each ends when its
    page's connection closes, not desk.long_poll_s later (nor at the server's shutdown, which
    would otherwise cancel them after its grace period, each with a traceback)."""
    s = Server(tmp_path, {"voice": {"engine": "estimate"}, "audio": {"output": "null"},
                          "server": {"channels": [{"name": "a"}]},
                          "desk": {"database_url": "sqlite:///var/desk.sqlite3",
                                   "long_poll_s": 60}}, TOKEN).start()
    try:
        # 30 s: the desk's first request makes its database (5 s, httpx's default, timed out
        # once in an idle fresh clone beside three workers' Chromium tests)
        httpx2.post(f"{s.base}/api/tournaments", json={"id": "t", "name": "t"},
                    headers=s.op, timeout=30).raise_for_status()
        v = httpx2.get(f"{s.base}/api/tournaments/t/public", headers=s.op,
                       timeout=30).json()["version"]
        socks = []
        for path in (f"/api/tournaments/t/public?after={v}", f"/api/tournaments/t?after={v}"):
            for _ in range(PAGES // 2):
                sock = socket.create_connection(("127.0.0.1", s.port))
                sock.sendall(f"GET {path} HTTP/1.1\r\nHost: 127.0.0.1\r\nAuthorization: "
                             f"Bearer {TOKEN}\r\n\r\n".encode())
                socks.append(sock)
        # the polls have reached the server (they wait): a change answers them all
        httpx2.patch(f"{s.base}/api/tournaments/t", json={"name": "u"},
                     headers=s.op, timeout=30).raise_for_status()
        for sock in socks:
            assert b" 200 OK" in sock.recv(4096)
            sock.sendall(f"GET /api/tournaments/t/public?after={v + 1} HTTP/1.1\r\n"
                         f"Host: 127.0.0.1\r\nAuthorization: Bearer {TOKEN}\r\n\r\n".encode())
            sock.close()  # ... and wait again, then leave
    finally:
        s.stop()
    log = s.log()
    assert "graceful shutdown exceeded" not in log and "Traceback" not in log
