"""Restarts in a row (issue 25, item 9): a match recovered once and restarted again is still
the channel's match, on every page, paused by yomite's own hand; the operator can abort it and
prepare the next. (At the second restart the journal already held the recovered hand: raising
it again published nothing, and every page showed no match while preparing was refused.)"""

from __future__ import annotations

from pathlib import Path

import httpx2
import pytest

from .serverproc import Server

pytestmark = pytest.mark.server

TOKEN = "restarts-operator-token-0123456789"


def test_a_match_survives_three_restarts_in_a_row(tmp_path: Path) -> None:
    s = Server(tmp_path, {"match": {"memorise_s": 600, "cards": 2},
                          "voice": {"engine": "estimate"}, "audio": {"output": "null"}},
               TOKEN).start()
    try:
        with httpx2.Client(base_url=s.base, headers=s.op, timeout=30) as c:
            assert c.post("/api/channels/main/match", json={"seed": 3}).status_code == 200
            assert c.post("/api/channels/main/match/start").status_code == 200
        for restart in range(3):
            s.stop()
            s.start()
            with httpx2.Client(base_url=s.base, timeout=30) as viewer:
                m = viewer.get("/api/channels/main").json()["match"]
            assert m is not None, f"restart {restart + 1}: no match shown"
            assert m["paused"] and [h["referee"] for h in m["holds"]] == ["@recovered"], m
        with httpx2.Client(base_url=s.base, headers=s.op, timeout=30) as c:
            assert c.post("/api/channels/main/match/abort").status_code == 200
            r = c.post("/api/channels/main/match", json={"seed": 4})
            assert r.status_code == 200, r.text
    finally:
        s.stop()
