"""Health off the hold path (issue 26): each channel's part of `/api/health` is made again only
when that channel changed, so a call costs the channels that changed since the last (a hall of
64 channels polled for health paid for all 64 every call), and what is kept is what a fresh
answer would say after each kind of change."""

import json
import time
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import httpx2
import pytest
import websockets.sync.client as wsc

from api.answers import Health
from api.routes.health import made_health
from hall.healthcache import HealthCache
from hall.hub import Hub
from tests.serverproc import Server

TOKEN = "health-operator-token-0123456789abcdef"


class FakeClient:
    transport = None


READ: list[int] = []  # the channels whose runtime state a part was made from


def fake_channel(i: int) -> SimpleNamespace:
    counters = {"underruns": 0, "late_clips": 0}

    def state() -> SimpleNamespace:
        READ.append(i)
        return SimpleNamespace(audio="ok", journal="ok")

    runtime = SimpleNamespace(fault=None, running=True, state=state)
    return SimpleNamespace(seq=i, hub=Hub(), audio="null", counters=counters,
                           output_stats=lambda: dict(counters), runtime=runtime)


def fake_hall(n: int) -> SimpleNamespace:
    return SimpleNamespace(
        channels={f"c{i}": fake_channel(i) for i in range(n)},
        loop_watch=SimpleNamespace(report=lambda: {"max_lag_ms": 0.0}),
        scheduling="normal", voice=None)


async def answer(hall: Any, cache: HealthCache) -> dict[str, Any]:
    body = await made_health(hall, None, cache)
    out: dict[str, Any] = json.loads(body)
    return out


async def test_a_call_makes_again_only_the_part_of_the_channel_that_changed():
    hall = fake_hall(64)
    cache = HealthCache()
    first = await answer(hall, cache)
    assert cache.parts.made == 64 and first["cache"]["channel_parts_made"] == 64
    again = await answer(hall, cache)
    assert cache.parts.made == 64, "nothing changed: no channel's part is made again"
    assert again["channels"] == first["channels"]

    c5 = hall.channels["c5"]
    changes = {
        "a state published (a hold, a phase)": lambda: setattr(c5, "seq", c5.seq + 1),
        "a client came": lambda: c5.hub.clients.add(FakeClient()),
        "a client was dropped": lambda: setattr(c5.hub, "dropped", c5.hub.dropped + 1),
        "an underrun": lambda: c5.counters.update(underruns=c5.counters["underruns"] + 1),
        "a send measured": lambda: c5.hub.lags.append(0.004),
        "a fault": lambda: setattr(c5.runtime, "fault", "boom"),
        "the output went away": lambda: setattr(c5, "audio", "no_device"),
    }
    for what, change in changes.items():
        made = cache.parts.made
        change()
        READ.clear()
        kept = await answer(hall, cache)
        assert set(READ) == {5}, f"{what}: the channels walked were {sorted(set(READ))}"
        assert cache.parts.made == made + 1, f"{what}: one part made, c5's"
        fresh = await answer(hall, HealthCache())
        assert kept["channels"] == fresh["channels"], f"{what}: the kept parts went stale"
    assert kept["channels"]["c5"]["clients"] == 1
    assert kept["channels"]["c5"]["output_stats"]["underruns"] == 1
    assert kept["channels"]["c5"]["fanout_lag_ms"]["max"] == pytest.approx(4.0)
    assert kept["channels"]["c5"]["fault"] == "boom"

    del hall.channels["c5"]
    assert "c5" not in (await answer(hall, cache))["channels"]


def health(c: httpx2.Client) -> dict[str, Any]:
    r = c.get("/api/health")
    r.raise_for_status()
    out: dict[str, Any] = r.json()
    Health.model_validate(out)  # the answer put together from kept parts has the model's shape
    return out


def test_a_real_server_makes_only_what_changed(tmp_path: Path):
    """Sixteen channels, one changing at a time: each answer makes the changed channel's part
    alone, and an answer made again with nothing changed makes none."""
    names = [f"c{i}" for i in range(16)]
    s = Server(tmp_path, {
        "voice": {"engine": "estimate"}, "audio": {"output": "null"},
        "server": {"channels": [{"name": n} for n in names]},
    }, TOKEN).start()
    try:
        with httpx2.Client(base_url=s.base, headers=s.op, timeout=60) as c:
            before = health(c)["cache"]
            assert before["channel_parts_made"] >= 16

            # nothing changes: once the answer is a second old it is made again, from the
            # kept parts (waited for, however slow the machine)
            deadline = time.monotonic() + 60
            now = health(c)["cache"]
            while now["answers_made"] == before["answers_made"]:
                assert time.monotonic() < deadline, "no answer made again in 60 s"
                time.sleep(0.2)
                now = health(c)["cache"]
            assert now["channel_parts_made"] == before["channel_parts_made"]

            def one_part_for(what: str, change: Any, check: Any) -> None:
                nonlocal now
                made = now["channel_parts_made"]
                change()
                body = health(c)
                now = body["cache"]
                assert now["channel_parts_made"] == made + 1, f"{what}: only c7's part"
                check(body["channels"]["c7"])

            state = c.get("/api/channels/c7").json()
            one_part_for("a match prepared",
                         lambda: c.post("/api/channels/c7/match", json={"seed": 1})
                         .raise_for_status(),
                         lambda ch: ch["recent_publishes"][-1][0] > state["seq"])
            # the match's clips are made in the background, each publishing its progress:
            # wait until they are all made, so that the next state is the hand's
            deadline = time.monotonic() + 120
            while (r := c.get("/api/channels/c7").json()["render"])["done"] < r["total"]:
                assert time.monotonic() < deadline, r
                time.sleep(0.1)
            health(c)  # the progress's states taken in
            now = health(c)["cache"]
            seq = c.get("/api/channels/c7").json()["seq"]
            one_part_for("a hand raised",
                         lambda: c.put("/api/channels/c7/holds/mat1").raise_for_status(),
                         lambda ch: ch["recent_publishes"][-1][0] ==
                         c.get("/api/channels/c7").json()["seq"] > seq)
            with wsc.connect(f"ws://127.0.0.1:{s.port}/ws/channels/c7") as ws:
                ws.recv()  # hello
                ws.recv()  # the state: the client is in the hub
                one_part_for("a phone connected", lambda: None,
                             lambda ch: ch["clients"] == 1)
    finally:
        s.stop()
