"""The classroom's API in-process: presets, per-match voice settings (journaled, recovered),
感想戦, the channel's volume, the speaker audience and its clips, kimariji in the state."""

import json
import time
from pathlib import Path

import numpy as np
import pytest
from fastapi.testclient import TestClient

from api.app import create_app
from audio.codec import decode
from audio.voices.voice import MORA_S_AT_SPEED_1
from hall.config import parse_config
from reader.kimariji import kimariji

TOKEN = "operator-token-for-tests-0123456789"
OP = {"Authorization": f"Bearer {TOKEN}"}


def make_config(**server):
    return parse_config({
        "match": {"memorise_s": 0.2, "cards": 2, "prelude": {"enabled": False},
                  "gaps": {"between_verses_s": 0.1, "between_cards_s": 0.1}},
        "voice": {"engine": "estimate", "speed": 3.0},
        "audio": {"output": "null"},
        "server": {"channels": [{"name": "main", "output": "browser"}, {"name": "dev"}],
                   "speakers": {"lead_ms": 50}, **server},
        "presets": {"short": {"label": "短い", "match": {"memorise_s": 0.3, "cards": 1},
                              "voice": {"speed": 2.5}}},
    })


@pytest.fixture
def client(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    with TestClient(create_app(make_config(), operator_token=TOKEN)) as c:
        yield c


def prepare(c, ch="main", **body):
    r = c.post(f"/api/channels/{ch}/match", json=body, headers=OP)
    assert r.status_code == 200, r.text
    return r.json()


def test_presets_list_what_they_set_and_prepare_with_overrides_on_top(client):
    ps = {p["id"]: p for p in client.get("/api/presets").json()}
    assert list(ps)[:3] == ["tournament", "classroom", "beginner"] and "short" in ps
    assert ps["classroom"]["label"] == "授業" and ps["classroom"]["match"]["memorise_s"] == 60
    assert ps["classroom"]["match"]["lower_verse_times"] == 2
    assert ps["beginner"]["voice"]["speed"] < ps["classroom"]["voice"]["speed"] < 1.0
    assert ps["tournament"]["match"]["cards"] == 17 and ps["tournament"]["voice"]["speed"] == 1.0
    s = prepare(client, preset="classroom", overrides={"memorise_s": 5})
    m = s["match"]
    assert m["timings"]["memorise_s"] == 5 and m["timings"]["lower_verse_times"] == 2
    assert s["voice"]["speed"] == 0.85 and s["preset"] == "classroom"
    s = prepare(client, preset="short", voice={"speed": 2.0})
    assert s["match"]["cards_planned"] == 1 and s["voice"]["speed"] == 2.0
    r = client.post("/api/channels/main/match", json={"preset": "nope"}, headers=OP)
    assert r.status_code == 422 and "there is no preset 'nope'" in r.json()["detail"]
    r = client.post("/api/channels/main/match", json={"voice": {"engine": "pack"}}, headers=OP)
    assert r.status_code == 422 and "voice.engine: cannot be changed per match" in r.json()[
        "detail"]
    r = client.post("/api/channels/main/match", json={"voice": {"speed": 9}}, headers=OP)
    assert r.status_code == 422 and "voice.speed" in r.json()["detail"]


def test_the_voice_speed_is_the_matchs_and_the_journal_keeps_it(client, tmp_path):
    def clip_frames(speed):
        prepare(client, seed=5, voice={"speed": speed})
        client.post("/api/channels/main/match/start", headers=OP)
        log = client.get("/api/channels/main/match/log", headers=OP).json()
        client.post("/api/channels/main/match/abort", headers=OP)
        assert log["header"]["voice"]["speed"] == speed
        facts = [f for r in log["records"] for f in r["facts"] if f["fact"] == "clip"]
        return facts[0]["frames"], Path(log["journal"])

    slow, _ = clip_frames(1.5)
    fast, journal = clip_frames(3.0)
    assert slow == pytest.approx(fast * 2, rel=0.01)  # the estimate voice: length / speed
    header = json.loads(journal.read_text("utf-8").splitlines()[0])
    assert header["voice"]["speed"] == 3.0 and header["preset"] is None


def test_a_recovered_match_reads_with_its_own_voice(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    cfg = make_config()
    with TestClient(create_app(cfg, operator_token=TOKEN)) as c:
        prepare(c, seed=5, voice={"speed": 1.5})
        c.post("/api/channels/main/match/start", headers=OP)
    with TestClient(create_app(cfg, operator_token=TOKEN)) as c:
        s = c.get("/api/channels/main", headers=OP).json()
        assert s["recovered"] and s["voice"]["speed"] == 1.5
        hall = c.app.state.hall
        assert hall.channels["main"].runtime.voice.params["mora_s"] == pytest.approx(
            MORA_S_AT_SPEED_1 / 1.5)


def test_replay_prepares_the_last_match_again(client):
    r = client.post("/api/channels/main/match/replay", headers=OP)
    assert r.status_code == 409 and "no match has been read" in r.json()["detail"]
    first = prepare(client, colors=["pink"], preset="short")["match"]
    client.post("/api/channels/main/match/abort", headers=OP)
    again = client.post("/api/channels/main/match/replay", headers=OP).json()
    assert again["match"]["seed"] == first["seed"] and again["preset"] == "short"
    assert again["match"]["colors"] == ["pink"] and again["voice"]["speed"] == 2.5
    assert again["match"]["timings"] == first["timings"]
    h1 = client.get("/api/channels/main/match/log", headers=OP).json()["header"]
    assert h1["deck"]["seed"] == first["seed"]
    nxt = prepare(client, colors=["pink"])["match"]  # 次の試合 sends no seed: a new order
    assert nxt["seed"] != first["seed"]  # (one chance in a million to be drawn again)


def test_the_channels_volume(client):
    r = client.put("/api/channels/main/volume", json={"volume_db": -12}, headers=OP)
    assert r.status_code == 200 and r.json()["volume_db"] == -12
    assert client.put("/api/channels/main/volume", json={"volume_db": 3},
                      headers=OP).status_code == 422
    assert client.put("/api/channels/main/volume", json={"volume_db": -1}).status_code == 401
    rt = client.app.state.hall.channels["main"].runtime
    assert rt.reading.device_voice.gain == pytest.approx(10 ** (-12 / 20))
    with client.websocket_connect(as_speaker(client)) as spk:
        assert speaker_messages(spk, 1)[0]["volume_db"] == -12


def speaker_key(client, ch="main"):
    """The channel's speaker key, as the console gets it: the fragment of its speaker link."""
    r = client.get(f"/api/channels/{ch}/speakers", headers=OP)
    assert r.status_code == 200, r.text
    return r.json()["url"].split("#key=", 1)[1]


def as_speaker(client, ch="main"):
    return f"/ws/channels/{ch}?audience=speaker&token={speaker_key(client, ch)}"


def speaker_messages(ws, n, kind="speaker"):
    out = []
    while len(out) < n:
        m = ws.receive_json()
        if m["type"] == kind:
            out.append(m)
    return out


def test_the_speaker_audience_gets_the_schedule_and_its_clips(client):
    key = speaker_key(client)
    with client.websocket_connect(as_speaker(client)) as spk, \
            client.websocket_connect("/ws/channels/main") as viewer:
        assert [spk.receive_json()["type"] for _ in range(3)] == ["hello", "state", "speaker"]
        spk.send_json({"type": "sync", "id": 7, "c": 1234.5})
        answer = speaker_messages(spk, 1, "sync")[0]
        assert answer["id"] == 7 and answer["c"] == 1234.5 and answer["s"] >= 0
        prepare(client, seed=9)
        ready = speaker_messages(spk, 1)[0]
        assert ready["clips"] == [] and len(ready["prefetch"]) == 2  # the first clips
        client.post("/api/channels/main/match/start", headers=OP)
        sched = speaker_messages(spk, 1)[0]
        first = sched["clips"][0]
        assert first["segment"] == 0 and first["offset_s"] == 0 and sched["stops"] == 0
        assert first["url"] in ready["prefetch"]
        client.put("/api/channels/main/holds/@operator", headers=OP)
        # the schedules the reading sent on before the hold came may come first
        stop = speaker_messages(spk, 1)[0]
        for _ in range(50):
            if stop["stops"]:
                break
            stop = speaker_messages(spk, 1)[0]
        assert stop["stops"] == 1 and stop["stop_s"] is not None
        assert all(c["at_s"] + c["duration_s"] <= stop["stop_s"] for c in stop["clips"])
        viewer.send_json({"type": "ping"})  # answered after everything queued for it
        seen = []
        while not seen or seen[-1] != "pong":
            seen.append(viewer.receive_json()["type"])
        assert "speaker" not in seen and seen.count("state") >= 3  # others pay nothing for it
        hub = client.app.state.hall.channels["main"].hub
        assert len(hub.speakers) == 1 and len(hub.clients) == 2
        sp = client.get("/api/channels/main", headers=OP).json()["speakers"]
        assert sp == {"mode": "browser", "pages": 1}
    assert client.get(first["url"]).status_code == 401  # a clip is for the speakers only
    r = client.get(first["url"], headers={"Authorization": f"Bearer {key}"})
    assert r.status_code == 200 and r.headers["content-type"] == "audio/ogg"
    assert "immutable" in r.headers["cache-control"] and r.content[:4] == b"OggS"
    path = Path("clip.ogg")
    path.write_bytes(r.content)
    x = decode(path, 48000)
    assert len(x) == round(first["duration_s"] * 48000)  # Opus keeps the exact length
    assert np.max(np.abs(x)) < 0.01  # the estimate voice says nothing
    spk_auth = {"Authorization": f"Bearer {key}"}
    assert client.get("/api/clips/" + "0" * 32 + ".ogg", headers=spk_auth).status_code == 404
    assert client.get("/api/clips/nope", headers=spk_auth).status_code == 404


def test_a_device_channel_has_no_speaker_audience(client):
    from starlette.websockets import WebSocketDisconnect

    with pytest.raises(WebSocketDisconnect) as e, \
            client.websocket_connect(as_speaker(client, "dev")) as ws:
        ws.receive_json()
    assert e.value.code == 1008 and e.value.reason == "no_browser_speakers"


def test_kimariji_in_the_state_for_the_operator_and_the_projector(client):
    # one card: what is read stays that card's however late the states below are read (with
    # a second, the operator's and the public state could straddle its start)
    prepare(client, seed=3, overrides={"cards": 1})
    client.post("/api/channels/main/match/start", headers=OP)
    hall = client.app.state.hall
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        m = client.get("/api/channels/main", headers=OP).json()["match"]
        if m["kimariji"]["read"]:
            break
        time.sleep(0.05)
    engine = hall.channels["main"].runtime.engine
    first = m["kimariji"]["read"][0]
    assert first["poem"] == engine.deck.order[0]
    assert first["kimariji"] == kimariji(first["poem"], engine.deck.poems)
    left = {c["poem"]: c for c in m["kimariji"]["left"]}
    assert set(left) == set(engine.deck.poems) - {first["poem"]}
    for no, c in left.items():
        assert c["before"] == kimariji(no, engine.deck.poems)
        assert c["kimariji"] == kimariji(no, set(engine.deck.poems) - {first["poem"]})
    public = client.get("/api/channels/main").json()["match"]
    assert "left" not in public["kimariji"] and public["kimariji"]["read"] == m["kimariji"]["read"]


def test_speaker_pages_per_channel_are_bounded(tmp_path, monkeypatch):
    from starlette.websockets import WebSocketDisconnect

    monkeypatch.chdir(tmp_path)
    cfg = make_config(**{})
    data = cfg.model_dump(mode="json")
    data["server"]["speakers"]["max_per_channel"] = 1
    with TestClient(create_app(parse_config(data), operator_token=TOKEN)) as c, \
            c.websocket_connect(as_speaker(c)) as first:
        assert first.receive_json()["type"] == "hello"
        with pytest.raises(WebSocketDisconnect) as e, \
                c.websocket_connect(as_speaker(c)) as second:
            second.receive_json()
        assert e.value.code == 1013 and e.value.reason == "too_many_speakers"


def test_a_deck_of_the_matchs_own_sets_how_many_cards_it_may_read(client):
    """Issue 20, item 6: the cards of a match that names its own deck are checked against that
    deck, not against the configured colour (one colour: 20 poems). Too many for the deck is
    refused with its figures, for the page's own words, and the match before is kept."""
    picked = list(range(1, 26))
    s = prepare(client, poems=picked, seed=1, overrides={"cards": 25})
    assert s["match"]["cards_planned"] == 25 and s["match"]["unread_left"] == 0
    s = prepare(client, colors=["blue", "pink"], seed=2, overrides={"cards": 30})
    assert s["match"]["cards_planned"] == 30 and s["match"]["unread_left"] == 10
    # one colour, 25 cards: refused, naming both figures; the two-colour match stays prepared
    r = client.post("/api/channels/main/match", json={"colors": ["green"], "overrides": {
        "cards": 25}}, headers=OP)
    assert r.status_code == 422, r.text
    body = r.json()
    assert body["error"] == "too_many_cards" and body["params"] == {"cards": 25, "poems": 20}
    assert "choose 20 cards or fewer" in body["hint"]
    m = client.get("/api/channels/main", headers=OP).json()["match"]
    assert m["cards_planned"] == 30 and m["colors"] == ["blue", "pink"]
    # the configured deck (blue) bounds a match that names none, in the same words
    r = client.post("/api/channels/main/match", json={"overrides": {"cards": 21}}, headers=OP)
    assert r.status_code == 422, r.text
    assert r.json()["error"] == "too_many_cards" and r.json()["params"] == {"cards": 21,
                                                                             "poems": 20}


def test_a_speaker_page_that_reconnects_keeps_its_number(client):
    counts = {"placed": 3, "late": 0, "missed": 0, "resyncs": 0, "epochs": 0, "steps": 0}

    def health():
        return client.get("/api/channels/main", headers=OP).json()["speaker_health"]

    def report(ws, page, **more):
        ws.send_json({"type": "report", "page": page, **counts, **more})
        ws.send_json({"type": "ping"})  # answered after the report was taken
        speaker_messages(ws, 1, "pong")

    with client.websocket_connect(as_speaker(client)) as a:
        report(a, "aaaa")
        with client.websocket_connect(as_speaker(client)) as b:
            report(b, "bbbb")
            assert [r["number"] for r in health()] == [1, 2]
            # A's page lost its link and comes back on a new connection while the old one has
            # not dropped yet: one speaker 1, with the new connection's counters
            with client.websocket_connect(as_speaker(client)) as a2:
                report(a2, "aaaa", missed=2)
                got = health()
                assert [(r["number"], r["missed"]) for r in got] == [(1, 2), (2, 0)], got
    with client.websocket_connect(as_speaker(client)) as c, \
            client.websocket_connect(as_speaker(client)) as a3:
        report(c, "cccc")
        report(a3, "aaaa")
        assert sorted(r["number"] for r in health()) == [1, 4]  # a new page: a new number
        c.send_json({"type": "report", "page": "no spaces", **counts})
        err = speaker_messages(c, 1, "error")[0]
        assert err["error"] == "bad_message" and "page" in err["detail"]
