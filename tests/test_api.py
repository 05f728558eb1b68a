"""The REST and WebSocket API in-process: one tiny app per test, no sound (null output)."""

import pytest
from fastapi.testclient import TestClient

from api.app import create_app
from hall.config import parse_config
from reader.programme import Phase

TOKEN = "operator-token-for-tests-0123456789"
OP = {"Authorization": f"Bearer {TOKEN}"}


def make_config(**match):
    m = {"memorise_s": 1, "cards": 3, "gaps": {"after_bow_s": 0.2}, **match}
    return parse_config({
        "match": m,
        "voice": {"engine": "estimate"},
        "audio": {"output": "null"},
        "server": {"channels": [{"name": "main"}, {"name": "pink"}]},
    })


@pytest.fixture
def client(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)  # journals go to ./var/journal
    app = create_app(make_config(), operator_token=TOKEN)
    with TestClient(app) as c:
        yield c


def join(c, ch="main", name="mat 1"):
    pin = c.get(f"/api/channels/{ch}/pin", headers=OP).json()["pin"]
    r = c.post(f"/api/channels/{ch}/referees", json={"pin": pin, "name": name})
    assert r.status_code == 200, r.text
    body = r.json()
    return body["referee"], {"Authorization": f"Bearer {body['token']}"}


def test_health_poems_and_channels(client):
    assert client.get("/api/health").json()["status"] == "ok"
    poems = client.get("/api/poems").json()
    assert len(poems) == 100 and poems[0]["kami_yomi"].startswith("あきのたの")
    assert client.get("/api/poems/100").json()["author"]
    r = client.get("/api/poems/0")
    assert r.status_code == 404 and r.json()["hint"] == "poems are 1..100"
    chans = client.get("/api/channels").json()
    assert [c["channel"] for c in chans] == ["main", "pink"]
    assert all("pin" not in c for c in chans), "viewers never see a PIN"
    assert "pin" in client.get("/api/channels/main", headers=OP).json()


def test_unknown_channel_is_404_and_names_the_channels(client):
    r = client.get("/api/channels/nope")
    assert r.status_code == 404
    assert r.json()["hint"] == "channels: main, pink"


def test_a_whole_match_lifecycle(client):
    # a long silence after the bow: the phase stays bowing however slowly the requests come
    r = client.post("/api/channels/main/match", json={"colors": ["青"], "seed": 42,
                    "overrides": {"gaps": {"after_bow_s": 30}}}, headers=OP)
    assert r.status_code == 200, r.text
    m = r.json()["match"]
    assert m["phase"] == "ready" and m["seed"] == 42 and m["colors"] == ["blue"]
    r = client.post("/api/channels/main/match/start", headers=OP)
    assert r.json()["match"]["phase"] == "bowing"
    r = client.post("/api/channels/main/match/start", headers=OP)
    assert r.status_code == 409
    assert r.json()["detail"].startswith("cannot start while the match is bowing")
    r = client.post("/api/channels/main/match/extra-card", headers=OP)
    assert r.status_code == 409 and "only possible when finished" in r.json()["detail"]
    r = client.post("/api/channels/main/match/close", headers=OP)
    assert r.status_code == 409
    assert r.json()["detail"] == ("cannot close the match while the match is bowing: only "
                                  "possible when finished")
    r = client.post("/api/channels/main/match", json={"colors": ["pink"]}, headers=OP)
    assert r.status_code == 409 and "abort it first" in r.json()["detail"]
    r = client.post("/api/channels/main/match/abort", json={"reason": "test"}, headers=OP)
    assert r.json()["match"]["phase"] == "aborted"
    log = client.get("/api/channels/main/match/log", headers=OP).json()
    assert log["header"]["deck"]["seed"] == 42
    assert [r["event"]["type"] for r in log["records"]][:1] == ["start"]
    csv = client.get("/api/channels/main/match/log?format=csv", headers=OP)
    assert csv.headers["content-type"].startswith("text/csv")
    assert csv.text.splitlines()[0] == ("kind,label,card,poem,verse,start_s,end_s,cut,held_by,"
                                        "clip")
    # the next match can be prepared after an abort
    r = client.post("/api/channels/main/match", json={"poems": [1, 2, 3], "seed": 1}, headers=OP)
    assert r.status_code == 200 and r.json()["match"]["phase"] == "ready"


def test_bad_requests_say_what_to_do(client):
    r = client.post("/api/channels/main/match", json={"colors": ["purple"]}, headers=OP)
    assert r.status_code == 422 and "unknown colour 'purple'" in r.json()["detail"]
    r = client.post("/api/channels/main/match", json={"poems": [101]}, headers=OP)
    assert r.status_code == 422 and r.json()["error"] == "invalid_request"
    assert "poems.0" in r.json()["detail"]
    r = client.post("/api/channels/main/match", json={"overrides": {"cards": 0}}, headers=OP)
    assert r.status_code == 422 and "overrides: cards" in r.json()["detail"]
    r = client.post("/api/channels/main/match", json={"colours": ["blue"]}, headers=OP)
    assert r.status_code == 422 and "colours" in r.json()["detail"]
    r = client.post("/api/channels/main/match", content=b"{not json", headers=OP)
    assert r.status_code == 422 and r.json()["hint"]
    r = client.post("/api/channels/main/match/start", headers=OP)
    assert r.status_code == 409 and "prepare a match first" in r.json()["detail"]


def test_referee_joins_with_pin_and_holds_only_its_own_hand(client):
    client.post("/api/channels/main/match", json={"seed": 1}, headers=OP)
    client.post("/api/channels/main/match/start", headers=OP)
    me, ref = join(client)
    other, ref2 = join(client, name="mat 2")
    r = client.put(f"/api/channels/main/holds/{me}", headers=ref)
    assert r.status_code == 200
    m = r.json()["match"]
    assert m["paused"] and m["holds"] == [{"referee": me, "name": "mat 1",
                                           "since_s": m["holds"][0]["since_s"]}]
    assert "pin" not in r.json()
    r = client.put(f"/api/channels/main/holds/{me}", headers=ref)  # idempotent
    assert r.status_code == 200 and len(r.json()["match"]["holds"]) == 1
    assert client.delete(f"/api/channels/main/holds/{other}", headers=ref).status_code == 403
    assert client.put("/api/channels/main/holds/@operator", headers=ref).status_code == 403
    client.put(f"/api/channels/main/holds/{other}", headers=ref2)
    r = client.delete(f"/api/channels/main/holds/{me}", headers=ref)
    assert r.json()["match"]["paused"], "mat 2 still holds"
    r = client.post("/api/channels/main/match/resume", headers=OP)
    assert r.json()["match"]["holds"] == [] and r.json()["match"]["resumes_at_s"] is not None
    # a referee of channel main cannot hold on channel pink
    assert client.put(f"/api/channels/pink/holds/{me}", headers=ref).status_code == 403


def test_wrong_pin_and_rate_limit(client):
    bad = client.post("/api/channels/main/referees", json={"pin": "9999999", "name": "x"})
    assert bad.status_code == 403 and bad.json()["error"] == "wrong_pin"
    # a typo is typed again at once; a second wrong PIN makes this client wait 2 s
    codes = [client.post("/api/channels/main/referees", json={"pin": "9999999", "name": "x"})
             .status_code for _ in range(3)]
    assert codes == [403, 429, 429]
    r = client.post("/api/channels/main/referees", json={"pin": "9999999", "name": "x"})
    assert r.headers["retry-after"] == "2" and r.json()["params"]["why"] == "pin_own"


# every endpoint x every role: what a viewer or referee may not do is 401/403
ENDPOINTS = [
    ("GET", "/api/health", None, "viewer"),
    ("GET", "/api/poems", None, "viewer"),
    ("GET", "/api/poems/5", None, "viewer"),
    ("GET", "/api/voices", None, "viewer"),
    ("GET", "/api/session", None, "viewer"),
    ("GET", "/api/channels", None, "viewer"),
    ("GET", "/api/channels/main", None, "viewer"),
    ("GET", "/api/devices", None, "operator"),
    ("POST", "/api/channels/main/match", {"seed": 5}, "operator"),
    ("POST", "/api/channels/main/match/start", None, "operator"),
    ("POST", "/api/channels/main/match/bow", None, "operator"),
    ("POST", "/api/channels/main/match/extra-card", None, "operator"),
    ("POST", "/api/channels/main/match/close", None, "operator"),
    ("POST", "/api/channels/main/match/abort", None, "operator"),
    ("POST", "/api/channels/main/match/resume", None, "operator"),
    ("GET", "/api/channels/main/pin", None, "operator"),
    ("GET", "/api/channels/main/qr.svg", None, "operator"),
    ("GET", "/api/channels/main/match/log", None, "operator"),
    ("GET", "/api/channels/main/voice/preview", None, "operator"),
    ("PUT", "/api/channels/main/holds/@operator", None, "operator"),
    ("DELETE", "/api/channels/main/holds/@operator", None, "operator"),
    ("PUT", "/api/channels/main/holds/{me}", None, "referee"),
    ("DELETE", "/api/channels/main/holds/{me}", None, "referee"),
]
RANK = {"viewer": 0, "referee": 1, "operator": 2}


@pytest.mark.parametrize(("method", "path", "body", "needs"), ENDPOINTS)
def test_roles_for_every_endpoint(client, method, path, body, needs):
    client.post("/api/channels/main/match", json={"seed": 5}, headers=OP)
    me, ref = join(client)
    url = path.replace("{me}", me)
    for role, headers in (("viewer", {}), ("referee", ref), ("operator", OP),
                          ("bad token", {"Authorization": "Bearer not-a-token"})):
        r = client.request(method, url, json=body, headers=headers)
        if role == "bad token":
            # an expired token is refused where a role is needed (public reads ignore it)
            if needs != "viewer":
                assert r.status_code == 401 and r.json()["error"] == "unauthorized"
            continue
        if RANK[role] >= RANK[needs]:
            assert r.status_code < 400 or r.status_code == 409, (role, url, r.text)
        else:
            expected = 401 if role == "viewer" else 403
            assert r.status_code == expected, (role, url, r.status_code, r.text)
            assert r.json()["hint"] or r.json()["detail"]


def test_public_state_hides_the_poem_being_read(client):
    client.post("/api/channels/main/match", json={"seed": 5,
                                                  "overrides": {"memorise_s": 0,
                                                                "prelude": {"enabled": False}}},
                headers=OP)
    client.post("/api/channels/main/match/start", headers=OP)
    import time

    def during_an_upper_verse(headers: dict[str, str] | None) -> dict:
        """The state as `headers` see it, read during an upper verse (the estimate voice's
        call lasts ~2 s of wall time; a verse missed on a busy machine is the next card's)."""
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline:
            m = client.get("/api/channels/main", headers=headers).json()["match"]
            if m["segment"] and m["segment"]["label"] == "card_kami":
                return m
            time.sleep(0.05)
        raise AssertionError(f"no upper verse in 60 s: {m}")

    op = during_an_upper_verse(OP)
    assert op["segment"]["poem"] is not None
    pub = during_an_upper_verse(None)
    assert pub["segment"]["poem"] is None
    # the card being read is hidden, as is any not read to its end
    assert pub["cards"] and pub["cards"][-1]["poem"] is None
    assert all(c["poem"] is None for c in pub["cards"] if c["finished_s"] is None)


def test_websocket_snapshots_rise_and_referee_can_hold(client):
    client.post("/api/channels/main/match", json={"seed": 9}, headers=OP)
    me, ref = join(client)
    token = ref["Authorization"].split()[1]
    with client.websocket_connect(f"/ws/channels/main?token={token}") as ws:
        hello = ws.receive_json()
        assert hello == {"type": "hello", "role": "referee", "referee": me, "channel": "main",
                         "press_max_age_s": 2.0}
        first = ws.receive_json()
        assert first["type"] == "state" and first["match"]["phase"] == "ready"
        client.post("/api/channels/main/match/start", headers=OP)
        ws.send_json({"type": "hold"})
        seqs, held = [first["seq"]], None
        for _ in range(200):  # the states the match publishes before the hold is applied
            m = ws.receive_json()
            seqs.append(m["seq"])
            if m["match"] and m["match"]["holds"]:
                held = m
                break
        assert held and held["match"]["holds"][0]["referee"] == me
        assert seqs == sorted(seqs) and len(set(seqs)) == len(seqs)
        ws.send_text("nonsense")
        err = ws.receive_json()
        while err["type"] != "error":
            err = ws.receive_json()
        assert err["error"] == "bad_message"
        ws.send_text("x" * 5000)
        err = ws.receive_json()
        while err["type"] != "error":
            err = ws.receive_json()
        assert err["error"] == "too_large"


def test_viewer_websocket_cannot_hold(client):
    client.post("/api/channels/main/match", json={"seed": 9}, headers=OP)
    with client.websocket_connect("/ws/channels/main") as ws:
        assert ws.receive_json()["role"] == "viewer"
        ws.receive_json()
        ws.send_json({"type": "hold"})
        msg = ws.receive_json()
        while msg["type"] == "state":  # a state may come at any time (the render's progress)
            msg = ws.receive_json()
        assert msg == {"type": "error", "error": "forbidden",
                       "detail": "only a referee of this channel may hold"}


def test_websocket_checks_origin(client):
    from starlette.websockets import WebSocketDisconnect

    with pytest.raises(WebSocketDisconnect) as e, client.websocket_connect(
        "/ws/channels/main", headers={"origin": "http://evil.example"}
    ) as ws:
        ws.receive_json()
    assert e.value.code == 1008


def test_pages_are_served(client):
    for path in ("/console", "/referee/main", "/display/main"):
        r = client.get(path)
        assert r.status_code == 200 and r.headers["content-type"].startswith("text/html")
    assert client.get("/static/../app.py").status_code == 404
    qr = client.get("/api/channels/main/qr.svg", headers=OP)
    assert qr.headers["content-type"] == "image/svg+xml" and b"<svg" in qr.content


def test_two_channels_read_independently(client):
    for ch, color in (("main", "blue"), ("pink", "pink")):
        r = client.post(f"/api/channels/{ch}/match", json={"colors": [color], "seed": 3},
                        headers=OP)
        assert r.status_code == 200
    client.post("/api/channels/main/match/start", headers=OP)
    client.post("/api/channels/pink/match/start", headers=OP)
    me, ref = join(client, "pink", "pink mat")
    client.put(f"/api/channels/pink/holds/{me}", headers=ref)
    main = client.get("/api/channels/main", headers=OP).json()["match"]
    pink = client.get("/api/channels/pink", headers=OP).json()["match"]
    assert pink["paused"] and not main["paused"]
    assert main["colors"] == ["blue"] and pink["colors"] == ["pink"]
    r = client.post("/api/channels/main/match/abort", headers=OP)
    assert r.json()["match"]["phase"] == "aborted"
    assert client.get("/api/channels/pink", headers=OP).json()["match"]["phase"] != "aborted"


def test_a_dropped_phone_keeps_its_hand_up_and_lowers_it_on_return(client):
    client.post("/api/channels/main/match", json={"seed": 2}, headers=OP)
    client.post("/api/channels/main/match/start", headers=OP)
    me, ref = join(client, name="mat 5")
    token = ref["Authorization"].split()[1]
    with client.websocket_connect(f"/ws/channels/main?token={token}") as ws:
        ws.receive_json()
        ws.send_json({"type": "hold"})
        while True:
            m = ws.receive_json()
            if m["type"] == "state" and m["match"]["holds"]:
                break
        st = client.get("/api/channels/main", headers=OP).json()
        assert [r["connected"] for r in st["referees"] if r["id"] == me] == [True]
    # the phone is gone: its hand stays up, the console sees it disconnected
    st = client.get("/api/channels/main", headers=OP).json()
    assert [h["referee"] for h in st["match"]["holds"]] == [me]
    assert [(r["connected"], r["holding"]) for r in st["referees"] if r["id"] == me] == [
        (False, True)]
    # the same phone comes back and lowers its own hand
    with client.websocket_connect(f"/ws/channels/main?token={token}") as ws:
        assert ws.receive_json()["referee"] == me
        state = ws.receive_json()
        assert [h["referee"] for h in state["match"]["holds"]] == [me]
        ws.send_json({"type": "release"})
        while True:
            m = ws.receive_json()
            if m["type"] == "state" and not m["match"]["holds"]:
                break


def test_a_version_1_journal_is_not_recovered_and_says_why(tmp_path, monkeypatch):
    """A journal from before the hall calls (version 1) cannot be replayed: the channel starts
    with no match, and the state says which journal was refused and why."""
    import json

    monkeypatch.chdir(tmp_path)
    folder = tmp_path / "var" / "journal" / "main"
    folder.mkdir(parents=True)
    old = {"type": "header", "version": 1, "rate": 48000, "t": 0.0, "cards": 3,
           "match": {}, "deck": {"poems": [1, 2, 3], "colors": [], "seed": 1,
                                 "order": [1, 2, 3]}}
    (folder / "20250101T000000.000000-seed1.jsonl").write_text(json.dumps(old) + "\n", "utf-8")
    with TestClient(create_app(make_config(), operator_token=TOKEN)) as c:
        st = c.get("/api/channels/main", headers=OP).json()
        assert st["match"] is None
        assert "journal version 1 was written by an earlier yomite" in st["recovered"]["error"]
        assert st["recovered"]["journal"].endswith("seed1.jsonl")
        r = c.post("/api/channels/main/match", json={"seed": 2}, headers=OP)
        assert r.status_code == 200 and r.json()["match"]["phase"] == "ready"


def test_a_channels_own_colours_are_its_default_deck(tmp_path, monkeypatch):
    """Item 6: `server.channels[].colors` is the channel's deck when a match names none (a
    pink channel read blue before); the match's cards are checked against that deck."""
    from reader.poems import poem

    monkeypatch.chdir(tmp_path)
    cfg = parse_config({
        "match": {"memorise_s": 1, "cards": 3}, "voice": {"engine": "estimate"},
        "audio": {"output": "null"},
        "server": {"channels": [{"name": "main"}, {"name": "pink", "colors": ["桃"]},
                                {"name": "two", "colors": ["yellow", "緑"]}]},
    })
    with TestClient(create_app(cfg, operator_token=TOKEN)) as c:
        m = c.post("/api/channels/pink/match", json={"seed": 4}, headers=OP).json()["match"]
        assert m["colors"] == ["pink"]
        log = c.get("/api/channels/pink/match/log", headers=OP).json()
        assert {poem(n).color.value for n in log["header"]["deck"]["order"]} == {"pink"}
        m = c.post("/api/channels/two/match", json={"overrides": {"cards": 30}},
                   headers=OP).json()["match"]
        assert m["colors"] == ["yellow", "green"] and m["cards_planned"] == 30
        m = c.post("/api/channels/main/match", json={}, headers=OP).json()["match"]
        assert m["colors"] == ["blue"]
        # colours named by the match win over the channel's
        m = c.post("/api/channels/pink/match", json={"colors": ["orange"]},
                   headers=OP).json()["match"]
        assert m["colors"] == ["orange"]
    from reader.errors import ConfigError

    with pytest.raises(ConfigError, match=r"server\.channels\.0\.colors: unknown colour"):
        parse_config({"server": {"channels": [{"name": "x", "colors": ["purple"]}]}})


@pytest.mark.parametrize("ending", ["abort", "close", "old finish", "fresh finish"])
def test_after_a_restart_a_match_that_is_over_is_not_shown(tmp_path, monkeypatch, ending):
    """Item 9: yesterday's aborted (or closed, or long finished) match is not what the
    projector shows the next morning: the channel starts with no match; a match finished just
    before the restart comes back (its extra card or closing calls may still follow)."""
    import os
    import time

    from reader.events import Abort, Close, Start
    from reader.journal import JournalWriter

    from .fakes import make_run, short_match

    monkeypatch.chdir(tmp_path)
    run = make_run(short_match(cards=1))
    run.send(Start())
    if ending == "abort":
        run.at(48000, Abort("fire drill"))
    else:
        run.run_until()
        if ending == "close":
            run.send(Close())
            run.run_until()
    path = tmp_path / "var" / "journal" / "main" / "20260101T090000.000000-seed7.jsonl"
    w = JournalWriter(path)
    w.append(run.engine.header())
    for r in run.records:
        w.append(r)
    w.close()
    if ending == "old finish":
        yesterday = time.time() - 20 * 3600
        os.utime(path, (yesterday, yesterday))
    with TestClient(create_app(make_config(), operator_token=TOKEN)) as c:
        st = c.get("/api/channels/main").json()
        if ending == "fresh finish":
            assert st["match"]["phase"] == "finished" and not st["match"]["paused"]
            assert c.post("/api/channels/main/match/close", headers=OP).status_code == 200
        else:
            assert st["match"] is None
            assert st["recovered"]["ended"] == {"abort": "aborted", "close": "closed",
                                                "old finish": "finished"}[ending]
            assert st["recovered"]["journal"].endswith("seed7.jsonl")


def test_the_history_lists_every_match_and_reads_each_log(tmp_path, monkeypatch):
    """Item 15: past matches per channel (newest first, with the wall-clock start), each one's
    log and CSV, whose hold rows say who held; a journal of an earlier version is listed and
    readable too."""
    import csv
    import io
    import json
    from datetime import datetime

    from reader.events import Hold, Release, Start
    from reader.journal import JournalWriter

    from .fakes import RATE, make_run, short_match

    monkeypatch.chdir(tmp_path)
    folder = tmp_path / "var" / "journal" / "main"

    def journal(name, version=2, who=("mat 1",)):
        run = make_run(short_match(cards=1), seed=int(name[-1]))
        run.send(Start())
        for i, n in enumerate(who):
            run.at(RATE * (2 + i), Hold(f"r{i}", n))
        for i in range(len(who)):
            run.at(RATE * (5 + i), Release(f"r{i}"))
        run.run_until()
        w = JournalWriter(folder / f"{name}.jsonl")
        w.append({**run.engine.header(), "version": version, "wall": "2026-11-30T09:00:00+00:00"})
        for r in run.records:
            w.append(r)
        w.close()

    journal("20261130T090000.000000-seed1", version=1)
    journal("20261130T100000.000000-seed2", who=("mat 1", "mat 2"))
    with TestClient(create_app(make_config(), operator_token=TOKEN)) as c:
        assert c.get("/api/channels/main/matches").status_code == 401
        c.post("/api/channels/main/match", json={"seed": 3}, headers=OP)
        rows = c.get("/api/channels/main/matches", headers=OP).json()
        assert [r["seed"] for r in rows] == [3, 2, 1]
        assert rows[0]["current"] and rows[0]["phase"] == "ready"
        assert rows[1]["phase"] == "finished" and rows[1]["cards_read"] == 1
        assert rows[2]["version"] == 1
        start = datetime.fromisoformat(rows[1]["started_at"])
        assert start == datetime.fromisoformat("2026-11-30T09:00:00+00:00")  # started at once
        log = c.get(f"/api/channels/main/matches/{rows[1]['id']}/log", headers=OP).json()
        holds = [e for e in log["timeline"] if e["kind"] == "hold"]
        assert [h["held_by"] for h in holds] == [["mat 1", "mat 2"]]
        text = c.get(f"/api/channels/main/matches/{rows[1]['id']}/log?format=csv",
                     headers=OP).text
        held = [r for r in csv.DictReader(io.StringIO(text)) if r["kind"] == "hold"]
        assert [r["held_by"] for r in held] == ["mat 1; mat 2"]
        old = c.get(f"/api/channels/main/matches/{rows[2]['id']}/log", headers=OP)
        assert old.status_code == 200 and old.json()["header"]["version"] == 1
        r = c.get("/api/channels/main/matches/nope/log", headers=OP)
        assert r.status_code == 422
        r = c.get("/api/channels/main/matches/20990101T000000.000000-seed9/log", headers=OP)
        assert r.status_code == 404 and r.json()["error"] == "no_match"
        assert json.loads(json.dumps(rows))  # plain JSON
        # prepared and replaced twice without a start (a class's usual false starts): the
        # history of played matches leaves them out, the full one keeps them
        c.post("/api/channels/main/match", json={"seed": 4}, headers=OP)
        c.post("/api/channels/main/match", json={"seed": 5}, headers=OP)
        everything = c.get("/api/channels/main/matches", headers=OP).json()
        assert [r["seed"] for r in everything] == [5, 4, 3, 2, 1]
        played = c.get("/api/channels/main/matches?started=true&limit=2", headers=OP).json()
        assert [(r["seed"], r["current"]) for r in played] == [(5, True), (2, False)]


def test_the_openapi_is_typed_and_the_websocket_protocol_documented(client):
    """Item 17: responses are models (the channel state, the log, errors), the bearer scheme
    is declared, the docs' assets are served here, and every message of a real WebSocket
    session, both ways, fits the documented protocol."""
    from api.protocol import CLIENT, SERVER

    spec = client.get("/openapi.json").json()
    assert spec["components"]["securitySchemes"]["token"]["scheme"] == "bearer"
    state = spec["paths"]["/api/channels/{ch}"]["get"]["responses"]
    assert state["200"]["content"]["application/json"]["schema"]["$ref"].endswith(
        "/ChannelState")
    start = spec["paths"]["/api/channels/{ch}/match/start"]["post"]
    assert start["description"] and {"401", "409"} <= set(start["responses"])
    assert start["responses"]["409"]["content"]["application/json"]["schema"]["$ref"].endswith(
        "/ErrorBody")
    log = spec["paths"]["/api/channels/{ch}/match/log"]["get"]["responses"]["200"]["content"]
    assert log["application/json"]["schema"]["$ref"].endswith("/MatchLog") and "text/csv" in log
    phase = spec["components"]["schemas"]["MatchState"]["properties"]["phase"]
    # the phase is the engine's enum, every value named in the schema
    ref = phase.get("$ref") or phase["allOf"][0]["$ref"]
    values = spec["components"]["schemas"][ref.rsplit("/", 1)[-1]]["enum"]
    assert set(values) == {p.value for p in Phase} and "closing" in values
    docs = client.get("/docs").text
    assert "cdn" not in docs.lower() and "/static-offline-docs/swagger-ui-bundle.js" in docs
    js = client.get("/static-offline-docs/swagger-ui-bundle.js")
    assert js.status_code == 200 and len(js.content) > 100_000
    assert client.get("/redoc").status_code == 404  # its bundle fetches from a CDN
    proto = client.get("/api/ws-protocol.json").json()
    assert {"server_to_client", "client_to_server"} <= set(proto)

    client.post("/api/channels/main/match", json={"seed": 9}, headers=OP)
    _me, ref = join(client)
    token = ref["Authorization"].split()[1]
    sent = [{"type": "ping"}, {"type": "hold"}, {"type": "release"}]
    for m in sent:
        CLIENT.validate_python(m)
    got = []
    with client.websocket_connect(f"/ws/channels/main?token={token}") as ws:
        got += [ws.receive_json(), ws.receive_json()]
        for m in sent:
            ws.send_json(m)
        ws.send_json({"type": "dance"})
        while not any(g["type"] == "error" for g in got):
            got.append(ws.receive_json())
    kinds = [SERVER.validate_python(g).type for g in got]
    assert kinds[:2] == ["hello", "state"] and {"pong", "error"} <= set(kinds)


def test_a_request_is_answered_on_the_event_loop_alone(client, monkeypatch):
    """Who is asking and which channel: worked out on the loop's own thread. FastAPI runs a
    plain-`def` dependency in a worker thread, and a hold paid four such hops (a wake-up on
    the other core and a GIL hand-over each) before it reached the engine."""
    import threading

    from hall.auth import Auth
    from hall.channel import ChannelService

    threads: dict[str, set[int]] = {"identify": set(), "view": set()}
    identify, operator_view = Auth.identify, ChannelService.operator_view

    def spy_identify(self, token):
        threads["identify"].add(threading.get_ident())
        return identify(self, token)

    def spy_view(self):
        threads["view"].add(threading.get_ident())
        return operator_view(self)

    monkeypatch.setattr(Auth, "identify", spy_identify)
    monkeypatch.setattr(ChannelService, "operator_view", spy_view)
    rid, ref = join(client)
    assert client.post("/api/channels/main/match", json={
        "seed": 1, "overrides": {"gaps": {"after_bow_s": 30}}}, headers=OP).status_code == 200
    assert client.post("/api/channels/main/match/start", headers=OP).status_code == 200
    for _ in range(3):
        assert client.get("/api/channels/main", headers=OP).status_code == 200
        assert client.put(f"/api/channels/main/holds/{rid}", headers=ref).status_code == 200
        assert client.delete(f"/api/channels/main/holds/{rid}", headers=ref).status_code == 200
    assert threads["view"] and threads["identify"] == threads["view"], threads


def test_no_route_has_a_dependency_for_the_thread_pool():
    """Every dependency of every route is a coroutine (see the test above): a new plain `def`
    one would quietly bring the hops back."""
    import inspect

    from fastapi.routing import APIRoute, APIWebSocketRoute

    seen, sync = 0, []

    def walk(dependant):
        nonlocal seen
        for d in dependant.dependencies:
            call = d.call
            seen += 1
            method = call.__call__ if callable(call) and not inspect.isfunction(call) else None
            if not (inspect.iscoroutinefunction(call) or inspect.iscoroutinefunction(method)):
                sync.append(getattr(call, "__qualname__", repr(call)))
            walk(d)

    import importlib
    import pkgutil

    import api.desk
    import api.routes

    # the hall's routers and the desk's own (api.desk.routes only gathers the desk's)
    routers = [getattr(importlib.import_module(f"{pkg.__name__}.{m.name}"), "router", None)
               for pkg in (api.routes, api.desk) for m in pkgutil.iter_modules(pkg.__path__)]
    routes = 0
    for router in routers:
        for r in getattr(router, "routes", []):
            if isinstance(r, APIRoute | APIWebSocketRoute):
                routes += 1
                walk(r.dependant)
    assert routes > 50 and seen > 50 and not sync, (routes, seen, sorted(set(sync)))
