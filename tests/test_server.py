"""The API against a real `yomite serve` process (uvicorn, real sockets)."""

import asyncio
import json

import httpx2
import pytest
import websockets

from .serverproc import Server

pytestmark = pytest.mark.server

TOKEN = "real-server-operator-token-0123456789"


@pytest.fixture(scope="module")
def server(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("srv")
    s = Server(tmp, {
        "match": {"memorise_s": 1, "cards": 2, "prelude": {"enabled": False},
                  "gaps": {"between_verses_s": 0.2, "between_cards_s": 0.2}},
        "voice": {"engine": "estimate", "speed": 3.0},
        "audio": {"output": "null"},
        "server": {"channels": [{"name": "main"}, {"name": "green"}]},
    }, TOKEN).start()
    yield s
    s.stop()


def test_banner_prints_urls_pin_and_qr(server):
    log = server.log()
    assert f"operator console: http://127.0.0.1:{server.port}/console#token={TOKEN}" in log
    assert "channel green: audio -> null output" in log
    assert "PIN " in log and "scan to referee channel main" in log


def test_openapi_and_roles_on_the_real_server(server):
    with httpx2.Client(base_url=server.base, timeout=5) as c:
        spec = c.get("/openapi.json").json()
        assert "/api/channels/{ch}/holds/{referee}" in spec["paths"]
        assert c.post("/api/channels/main/match", json={}).status_code == 401
        r = c.post("/api/channels/main/match", json={"seed": 3}, headers=server.op)
        assert r.status_code == 200 and r.json()["match"]["seed"] == 3
        pin = c.get("/api/channels/main/pin", headers=server.op).json()["pin"]
        ref = c.post("/api/channels/main/referees", json={"pin": pin, "name": "mat 7"}).json()
        h = {"Authorization": f"Bearer {ref['token']}"}
        assert c.post("/api/channels/main/match/start", headers=h).status_code == 403
        assert c.put("/api/channels/main/holds/someone", headers=h).status_code == 403
        assert c.put(f"/api/channels/main/holds/{ref['referee']}", headers=h).status_code == 200


def test_a_match_runs_to_the_end_with_a_hold_over_websocket(server):
    async def scenario():
        async with httpx2.AsyncClient(base_url=server.base, timeout=5) as c:
            await c.post("/api/channels/green/match", json={"colors": ["緑"], "seed": 12},
                         headers=server.op)
            pin = (await c.get("/api/channels/green/pin", headers=server.op)).json()["pin"]
            ref = (await c.post("/api/channels/green/referees",
                                json={"pin": pin, "name": "mat 1"})).json()
            uri = f"ws://127.0.0.1:{server.port}/ws/channels/green?token={ref['token']}"
            async with websockets.connect(uri) as ws:
                assert json.loads(await ws.recv())["type"] == "hello"
                await c.post("/api/channels/green/match/start", headers=server.op)
                seqs, phases, held = [], [], False
                async with asyncio.timeout(60):
                    while True:
                        m = json.loads(await ws.recv())
                        if m["type"] != "state" or m["match"] is None:
                            continue
                        seqs.append(m["seq"])
                        phases.append(m["match"]["phase"])
                        if m["match"]["phase"] == "reading" and not held:
                            held = True
                            await ws.send(json.dumps({"type": "hold"}))
                        if held and m["match"]["paused"] and m["match"]["holds"]:
                            await ws.send(json.dumps({"type": "release"}))
                        if m["match"]["phase"] == "finished":
                            # a tie in the final: one more card, then the hall closes
                            ended = "finished" if "tiebreak" in phases else "planned"
                            path = "extra-card" if ended == "planned" else "close"
                            r = await c.post(f"/api/channels/green/match/{path}",
                                             headers=server.op)
                            assert r.status_code == 200, r.text
                        if m["match"]["phase"] == "closed":
                            return seqs, phases, m

    seqs, phases, last = asyncio.run(scenario())
    assert seqs == sorted(seqs) and len(set(seqs)) == len(seqs)
    runs = [p for i, p in enumerate(phases) if i == 0 or phases[i - 1] != p]
    assert runs[-7:] == ["prelude", "reading", "finished", "tiebreak", "finished", "closing",
                         "closed"] or runs[-6:] == ["reading", "finished", "tiebreak",
                                                    "finished", "closing", "closed"], runs
    assert runs[0] in ("ready", "bowing")
    cards = last["match"]["cards"]
    assert len(cards) == 3 and all(c["poem"] is not None for c in cards)
    assert last["match"]["calls"]["move_call"] == "移動してください"


def test_tokens_never_reach_the_log(server):
    async def connect():
        uri = f"ws://127.0.0.1:{server.port}/ws/channels/main?token={TOKEN}"
        async with websockets.connect(uri) as ws:
            await ws.recv()

    asyncio.run(connect())
    httpx2.get(f"{server.base}/api/channels/main?token={TOKEN}")
    lines = [ln for ln in server.log().splitlines() if "GET /" in ln or "WebSocket" in ln]
    assert lines, "the access log is on"
    assert not any(TOKEN in ln for ln in lines)
    assert any("token=***" in ln for ln in lines)
