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
                  "gaps": {"after_bow_s": 0.2, "after_call_s": 0.2, "between_verses_s": 0.2,
                           "between_cards_s": 0.2, "before_move_s": 0.2}},
        "voice": {"engine": "estimate", "speed": 3.0},
        "audio": {"output": "null"},
        "server": {"channels": [{"name": "main"}, {"name": "green"}]},
    }, TOKEN).start()
    try:
        yield s
    finally:
        s.stop()


def test_banner_prints_urls_pin_and_qr(server):
    log = server.log()
    # the output is a log here, not a terminal: the token stays out of it (issue 25, item 15),
    # and the link with it is in a file only this user may read
    assert TOKEN not in log
    kept = server.tmp / "journal" / "console-link.txt"
    assert f"operator console: http://127.0.0.1:{server.port}/console (the link with the " \
        f"operator's token is in {kept}" in log
    assert kept.read_text("utf-8").strip() == (
        f"http://127.0.0.1:{server.port}/console#token={TOKEN}")
    assert kept.stat().st_mode & 0o077 == 0
    assert "channel green: audio -> null output" in log
    assert "PIN " in log and "scan to referee channel main" in log


def test_openapi_and_roles_on_the_real_server(server):
    with httpx2.Client(base_url=server.base, timeout=30) as c:
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
        async with httpx2.AsyncClient(base_url=server.base, timeout=30) as c:
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
                async with asyncio.timeout(180):  # the whole match, on a busy machine
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


def test_phones_get_the_lan_address_and_a_busy_port_or_folder_is_said_first(tmp_path):
    """Item 1: listening on every interface, the banner, the join link and the QR code carry
    the default route's address (this machine's name resolves to loopback), over https with
    the server's own CA (docs/tls.md), and a phone-like client that trusts the CA reaches the
    referee page there; plain http from that address is sent to https, while this machine's
    own loopback is still served plain http. Item 10: a second server on the same port, or
    in the same journal folder, stops at once with the reason and prints no links."""
    import subprocess
    import sys
    from pathlib import Path

    import yaml

    from api.addresses import default_route_address

    from .serverproc import free_port

    lan = default_route_address()
    assert lan is not None, "the test needs a LAN address"
    config = {"voice": {"engine": "estimate"}, "audio": {"output": "null"}}
    (tmp_path / "a").mkdir()
    a = Server(tmp_path / "a", config, TOKEN, host="0.0.0.0", tls=True)
    assert a.base.startswith("http://127.0.0.1:")  # loopback: plain http on a TLS server
    a.start()
    try:
        log = a.log()
        assert f"yomite is serving on https://{lan}:{a.port}" in log
        assert f"referees: https://{lan}:{a.port}/referee/main#pin=" in log
        assert f"download http://{lan}:{a.port}/ca.crt" in log
        assert "127.0.0.1" not in log.split("scan to referee")[0]
        with httpx2.Client(base_url=a.base, timeout=30) as c:
            p = c.get("/api/channels/main/pin", headers=a.op).json()
        assert p["join_url"] == f"https://{lan}:{a.port}/referee/main#pin={p['pin']}"
        assert p["bases"][0]["source"].startswith("default route")
        # over the LAN interface, as a phone that trusts the CA would
        r = httpx2.get(p["join_url"], timeout=30, verify=a.verify)
        assert r.status_code == 200 and "referee.js" in r.text
        r = httpx2.get(f"http://{lan}:{a.port}/referee/main", timeout=30)
        assert r.status_code == 308
        assert r.headers["location"] == f"https://{lan}:{a.port}/referee/main"
        svg = httpx2.get(f"{a.base}/api/channels/main/qr.svg",
                         params={"base": "http://evil.example"}, headers=a.op, timeout=30)
        assert svg.status_code == 422 and svg.json()["error"] == "unknown_base"

        yomite = str(Path(sys.executable).parent / "yomite")

        def second(folder: Path, port: int) -> subprocess.CompletedProcess[str]:
            folder.mkdir(exist_ok=True)
            cfg = folder / "config.yaml"
            cfg.write_text(yaml.safe_dump({**config, "journal_dir": str(tmp_path / folder.name
                                                                        / "journal")}), "utf-8")
            return subprocess.run([yomite, "--config", str(cfg), "serve", "--host", "0.0.0.0",
                                   "--port", str(port)], capture_output=True, text=True,
                                  timeout=60, cwd=folder)

        busy = second(tmp_path / "b", a.port)
        assert busy.returncode == 2, busy.stdout + busy.stderr
        assert f"port {a.port} on 0.0.0.0 is already in use" in busy.stderr
        assert "operator console" not in busy.stdout + busy.stderr
        shared = subprocess.run(
            [yomite, "--config", str(a.config_path), "serve", "--host", "0.0.0.0", "--port",
             str(free_port())], capture_output=True, text=True, timeout=60, cwd=tmp_path / "a")
        assert shared.returncode == 2, shared.stdout + shared.stderr
        assert "another yomite already serves from" in shared.stderr
        assert f"port {a.port}" in shared.stderr  # who holds it
        assert "operator console" not in shared.stdout + shared.stderr
    finally:
        a.stop()

    # a hall behind a reverse proxy: server.public_url is what phones are given
    import io

    from fastapi.testclient import TestClient

    from api.addresses import candidates
    from api.app import create_app
    from hall.config import parse_config
    from yomite.server import banner

    cfg = parse_config({**config, "journal_dir": str(tmp_path / "c"),
                        "server": {"public_url": "https://yomite.hall.test"}})
    with TestClient(create_app(cfg, operator_token=TOKEN, listen=("0.0.0.0", 8123))) as c:
        p = c.get("/api/channels/main/pin", headers=a.op).json()
        out = io.StringIO()
        banner(c.app.state.hall, candidates("0.0.0.0", 8123, cfg.server.public_url), TOKEN,
               False, out)
    assert p["join_url"].startswith("https://yomite.hall.test/referee/main#pin=")
    assert [b["base"] for b in p["bases"]][:2] == ["https://yomite.hall.test",
                                                   f"http://{lan}:8123"]
    assert "yomite is serving on https://yomite.hall.test" in out.getvalue()
    assert f"http://{lan}:8123   (default route" in out.getvalue()


OPENER = """import sys
from pathlib import Path
Path(sys.argv[1]).write_text(sys.argv[2], "utf-8")
"""


@pytest.mark.parametrize("command", [[], ["serve"]], ids=["yomite", "yomite serve"])
def test_yomite_alone_opens_the_console_in_the_browser_and_serve_does_not(tmp_path, command):
    """`yomite` with no command (a teacher on a laptop) serves and opens the operator's
    console, with its token, in this computer's browser; `yomite serve` (a hall's service)
    opens nothing. The browser is $BROWSER, here a script that writes down what it was asked to
    open."""
    import os
    import signal
    import subprocess
    import sys
    import time

    import yaml

    from .serverproc import YOMITE, free_port

    port = free_port()
    (tmp_path / "opener.py").write_text(OPENER, "utf-8")
    opened = tmp_path / "opened.txt"
    cfg = tmp_path / "config.yaml"
    cfg.write_text(yaml.safe_dump({
        "voice": {"engine": "estimate"}, "audio": {"output": "null"},
        "journal_dir": str(tmp_path / "journal"),
        "server": {"host": "127.0.0.1", "port": port,
                   "security": {"operator_token": TOKEN}}}), "utf-8")
    env = {**os.environ, "BROWSER": f"{sys.executable} {tmp_path / 'opener.py'} {opened} %s"}
    base = f"http://127.0.0.1:{port}"
    with open(tmp_path / "out.log", "wb") as log:
        proc = subprocess.Popen([str(YOMITE), "--config", str(cfg), *command], cwd=tmp_path,
                                env=env, stdout=log, stderr=subprocess.STDOUT)
    try:
        deadline = time.monotonic() + 120
        while True:
            assert proc.poll() is None, (tmp_path / "out.log").read_text()
            try:
                if httpx2.get(f"{base}/api/health", timeout=10).status_code == 200:
                    break
            except httpx2.TransportError:
                pass
            assert time.monotonic() < deadline, "no server in 120 s"
            time.sleep(0.1)
        if command:  # serve: a service opens no browser (given the time the other took)
            time.sleep(3)
            assert not opened.exists()
            return
        while not opened.exists():
            assert time.monotonic() < deadline, "no browser opened in 120 s"
            time.sleep(0.1)
        time.sleep(0.2)  # the opener's write done
        link = opened.read_text("utf-8")
        assert link == f"{base}/console#token={TOKEN}"
        assert httpx2.get(link.split("#")[0], timeout=30).status_code == 200
        assert "opening the console in this computer's browser" in (
            tmp_path / "out.log").read_text()
    finally:
        proc.send_signal(signal.SIGINT)
        try:
            proc.wait(30)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()


def test_the_test_server_takes_another_port_when_its_own_was_taken_meanwhile(tmp_path):
    """A free port may be taken before the server binds it (another worker's connection gets
    it as its ephemeral port): the harness starts the server again on another, and only for
    that reason (the fresh two-burner run of the twelfth session lost a module to it)."""
    import socket

    s = Server(tmp_path, {"voice": {"engine": "estimate"}, "audio": {"output": "null"}}, TOKEN)
    taken = s.port
    with socket.socket() as blocker:
        blocker.bind(("127.0.0.1", taken))
        blocker.listen()
        s.start()
        try:
            assert s.port != taken
            assert f"port {taken} on 127.0.0.1 is already in use" in s.log()
            assert httpx2.get(f"{s.base}/api/health", timeout=10).status_code == 200
        finally:
            s.stop()
