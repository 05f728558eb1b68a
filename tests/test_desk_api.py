"""The desk's API in-process (one small app, null audio, the estimate voice): roles, limits,
errors, the tie to the channels (a round starts the block's match in its colour), live
waiting, files and printouts. A tied final's extra card is tested against a real server
(tests/test_desk_server.py)."""

from __future__ import annotations

import json
import time

import pytest
from fastapi.testclient import TestClient

from api.app import create_app
from hall.config import parse_config

TOKEN = "operator-token-for-desk-tests-0123456789"
OP = {"Authorization": f"Bearer {TOKEN}"}
FAST_MATCH = {"memorise_s": 0, "cards": 2, "prelude": {"enabled": False},
              "gaps": {"between_cards_s": 0.05, "between_verses_s": 0.05, "after_call_s": 0.05,
                       "after_bow_s": 0.05, "before_move_s": 0.05},
              "resume": {"lead_in_s": 0.05}}


def make_config(tmp_path, **desk):
    return parse_config({
        "match": FAST_MATCH,
        "voice": {"engine": "estimate", "speed": 3.0},
        "audio": {"output": "null"},
        "server": {"channels": [{"name": "a", "colors": ["green"]}, {"name": "b"}]},
        "journal_dir": str(tmp_path / "journal"),
        "desk": {"database_url": f"sqlite:///{tmp_path / 'desk.sqlite3'}", "long_poll_s": 1,
                 "max_upload_kb": 8, **desk},
    })


@pytest.fixture
def client(tmp_path):
    with TestClient(create_app(make_config(tmp_path), operator_token=TOKEN)) as c:
        yield c


def csv_of(n: int) -> bytes:
    lines = ["氏名,ふりがな,所属,学年"] + [f"選手{i},せんしゅ{i},学校{i % 5},{4 + i % 3}"
                                         for i in range(1, n + 1)]
    return ("\n".join(lines) + "\n").encode()


def setup_tournament(c, n=10, blocks=2, cards=2):
    r = c.post("/api/tournaments", json={"id": "t1", "name": "テスト大会", "cards": cards,
                                         "rounds": 2}, headers=OP)
    assert r.status_code == 200, r.text
    r = c.post("/api/tournaments/t1/entries.csv", content=csv_of(n),
               headers={**OP, "Content-Type": "text/csv"})
    assert r.status_code == 200, r.text
    r = c.post("/api/tournaments/t1/blocks/draw", json={"blocks": blocks, "seed": 3},
               headers=OP)
    assert r.status_code == 200, r.text
    return r.json()


def join(c, ch, name):
    pin = c.get(f"/api/channels/{ch}/pin", headers=OP).json()["pin"]
    body = c.post(f"/api/channels/{ch}/referees", json={"pin": pin, "name": name}).json()
    return body["referee"], {"Authorization": f"Bearer {body['token']}"}


def matches(c, number):
    return {m["mat"]: m for r in c.get(f"/api/tournaments/t1/rounds/{number}",
                                       headers=OP).json() for m in r["matches"]}


def wait_phase(c, ch, phase, timeout=60):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        m = c.get(f"/api/channels/{ch}", headers=OP).json()["match"]
        if m and m["phase"] == phase:
            return m
        time.sleep(0.05)
    raise AssertionError(f"channel {ch} never reached {phase}: {m}")


def memorise(c, number: int, channels: list[str]) -> None:
    """Round `number`'s channels have read 礼 alone (rule 2): once the bow is over, say the
    mats are ready; each goes on with 札を覚えてください."""
    for ch in channels:
        m = wait_phase(c, ch, "ready")
        assert m["bowed"], m
    r = c.post(f"/api/tournaments/t1/rounds/{number}/memorise", headers=OP)
    assert r.status_code == 200 and sorted(r.json()["memorising"]) == channels, r.text
    for ch in channels:
        assert c.get(f"/api/channels/{ch}", headers=OP).json()["match"]["phase"] != "ready"


NEVER_USED = """
import sys
from pathlib import Path
from fastapi.testclient import TestClient
from api.app import create_app
from tests.test_desk_api import OP, TOKEN, make_config

tmp = Path(sys.argv[1])
with TestClient(create_app(make_config(tmp), operator_token=TOKEN)) as c:
    assert c.get("/api/tournaments", headers=OP).json() == [], "no tournament yet"
    print("before", "sqlalchemy" in sys.modules, (tmp / "desk.sqlite3").exists())
    r = c.post("/api/tournaments", json={"id": "t1", "name": "n"}, headers=OP)
    assert r.status_code == 200, r.text
    print("after", "sqlalchemy" in sys.modules, (tmp / "desk.sqlite3").exists())
"""


def test_a_hall_that_never_used_the_desk_starts_without_its_database(tmp_path):
    # SQLAlchemy and Alembic are 0.4 s of the CPU of a start: loaded at the first tournament,
    # not by a hall that only reads (a fresh interpreter, so that nothing loaded them before)
    import subprocess
    import sys
    from pathlib import Path

    root = Path(__file__).resolve().parent.parent
    out = subprocess.run([sys.executable, "-c", NEVER_USED, str(tmp_path)], cwd=root,
                         capture_output=True, text=True, timeout=300)
    assert out.returncode == 0, out.stderr
    assert out.stdout.split() == ["before", "False", "False", "after", "True", "True"]
    with TestClient(create_app(make_config(tmp_path), operator_token=TOKEN)) as c:
        assert [t["id"] for t in c.get("/api/tournaments", headers=OP).json()] == ["t1"]


def test_a_database_that_cannot_be_made_is_a_503_naming_it_and_the_next_try_makes_it(tmp_path):
    blocker = tmp_path / "var"
    blocker.write_text("a file where the database's folder should be")
    cfg = make_config(tmp_path)
    cfg = cfg.model_copy(update={"desk": cfg.desk.model_copy(
        update={"database_url": f"sqlite:///{blocker / 'desk.sqlite3'}"})})
    with TestClient(create_app(cfg, operator_token=TOKEN)) as c:
        assert c.get("/api/health").status_code == 200  # the hall reads on
        r = c.post("/api/tournaments", json={"id": "t1", "name": "n"}, headers=OP)
        assert r.status_code == 503, r.text
        assert r.json()["error"] == "storage_unavailable", r.json()
        assert "desk.sqlite3" in r.json()["detail"] and r.json()["hint"], r.json()
        blocker.unlink()
        r = c.post("/api/tournaments", json={"id": "t1", "name": "n"}, headers=OP)
        assert r.status_code == 200, r.text
        assert c.get("/api/tournaments/t1", headers=OP).status_code == 200


def test_roles_the_desk_is_the_operators_and_the_standings_are_the_links(client):
    setup_tournament(client)
    _rid, ref = join(client, "a", "審判1")
    for headers, status in ((None, 401), (ref, 403)):
        r = client.post("/api/tournaments", json={"name": "x"}, headers=headers)
        assert r.status_code == status and r.json()["error"] in ("unauthorized", "forbidden")
        assert client.get("/api/tournaments/t1", headers=headers).status_code == status
        assert client.get("/api/tournaments/t1/export", headers=headers).status_code == status
    # the standings are the desk's and the public link's holders' (issue 47, item 6)
    for tid in ("t1", "nope"):  # the same answer, whether the tournament exists or not
        r = client.get(f"/api/tournaments/{tid}/public")
        assert r.status_code == 401 and r.json()["error"] == "link_needed" and r.json()["hint"]
    pub = client.get("/api/tournaments/t1/public", headers=OP)
    assert pub.status_code == 200
    assert '"grade"' not in pub.text and '"club"' not in pub.text, "published by nobody"
    key = client.post("/api/tournaments/t1/public-link", headers=OP).json()["public_link"]
    by_link = client.get(f"/api/tournaments/t1/public?view={key}").json()
    assert by_link["blocks"] == pub.json()["blocks"]
    assert client.get("/api/tournaments").status_code == 401
    assert client.get("/api/tournaments", headers=OP).json()[0]["id"] == "t1"
    for tid in ("t1", "nope"):
        r = client.get(f"/api/tournaments/{tid}/public?view={key[::-1]}")
        assert r.status_code == 404 and r.json()["error"] == "no_such_link"
    r = client.get(f"/api/tournaments/nope/public?view={key}")
    assert r.status_code == 404 and r.json()["error"] == "no_such_link"
    r = client.get("/api/tournaments/nope/public", headers=OP)
    assert r.status_code == 404 and r.json()["error"] == "not_found" and r.json()["hint"]
    assert client.get("/api/tournaments/assigned").status_code == 401


def test_csv_uploads_have_a_size_limit_and_bad_lines_add_nobody(client):
    client.post("/api/tournaments", json={"id": "t1", "name": "x"}, headers=OP)
    big = csv_of(400)
    assert len(big) > 8192
    r = client.post("/api/tournaments/t1/entries.csv", content=big,
                    headers={**OP, "Content-Type": "text/csv"})
    # refused at the door (desk.max_upload_kb is its cap for this route), or by the route
    assert r.status_code == 413 and r.json()["error"] in ("too_large", "body_too_large")
    r = client.post("/api/tournaments/t1/entries.csv",
                    content="氏名,所属\n山田,東\n,西\n".encode("cp932"),
                    headers={**OP, "Content-Type": "text/csv"})
    assert r.status_code == 422 and "line 3: name is empty" in r.json()["detail"]
    assert client.get("/api/tournaments/t1", headers=OP).json()["players"] == []
    r = client.post("/api/tournaments/t1/entries", json={"players": [{"name": "a", "x": 1}]},
                    headers=OP)
    assert r.status_code == 422 and "x" in r.json()["detail"]


def test_a_round_is_read_on_its_blocks_channel_and_referees_enter_their_mats(client):
    view = setup_tournament(client)
    blocks = {b["name"]: b for b in view["blocks"]}
    assert blocks["A"]["channel"] == "a" and blocks["A"]["colours"] == ["green"]
    assert blocks["B"]["channel"] == "b" and blocks["B"]["colours"] == ["pink"]
    rid, ref = join(client, "a", "審判1")
    _other, ref_b = join(client, "b", "審判2")
    lo, _hi = blocks["A"]["mats"]
    r = client.put(f"/api/tournaments/t1/referees/{rid}", json={"mats": [lo, lo + 1]},
                   headers=OP)
    assert r.status_code == 200, r.text
    r = client.put(f"/api/tournaments/t1/referees/{_other}", json={"mats": [lo]},
                   headers=OP)
    assert r.status_code == 422 and "joined channel b" in r.json()["detail"]

    assert client.post("/api/tournaments/t1/rounds", headers=OP).status_code == 200
    r = client.post("/api/tournaments/t1/rounds/1/start", headers=OP)
    assert r.status_code == 200, r.text
    started = {s["channel"]: s for s in r.json()["started"]}
    assert set(started) == {"a", "b"}
    state = client.get("/api/channels/a", headers=OP).json()["match"]
    assert state["colors"] == ["green"] and state["cards_planned"] == 2
    assert state["seed"] == started["a"]["seed"]
    live = {x["block"]: x["live"] for x in client.get("/api/tournaments/t1",
                                                       headers=OP).json()["rounds"]}
    assert live["A"]["state"] == "live"
    # rule 2: round 1 reads 礼 alone, then waits while the players shuffle and choose
    assert all(s["waits_after_bow"] for s in started.values())
    memorise(client, 1, ["a", "b"])
    # starting again while it is read is refused, naming the channel
    r = client.post("/api/tournaments/t1/rounds/1/start", json={"blocks": ["A"]}, headers=OP)
    assert r.status_code == 409 and "already being read on channel a" in r.json()["detail"]

    mats = matches(client, 1)
    m = mats[lo]
    a = m["players"][0]["no"]
    cards = {str(p["no"]): 0 for p in m["players"]}
    cards[str(a)] = 2
    r = client.put(f"/api/tournaments/t1/rounds/1/mats/{lo}", json={"cards": cards}, headers=ref)
    assert r.status_code == 200, r.text
    assert r.json()["result"]["by"].startswith(f"referee {rid}")
    r = client.put(f"/api/tournaments/t1/rounds/1/mats/{lo + 2}", json={"cards": cards},
                   headers=ref)
    assert r.status_code == 403 and "not one of this referee's mats" in r.json()["detail"]
    r = client.put(f"/api/tournaments/t1/rounds/1/mats/{lo}", json={"cards": cards},
                   headers=ref_b)
    assert r.status_code == 403
    assert client.put(f"/api/tournaments/t1/rounds/1/mats/{lo}", json={"cards": cards}
                      ).status_code == 401
    mine = client.get("/api/tournaments/assigned", headers=ref).json()
    assert [x["mat"] for x in mine[0]["matches"]] == [lo, lo + 1]
    assert mine[0]["matches"][0]["result"]["cards"][0] == 2
    # more cards than were read: refused (issue 25), nothing stored, the round stays open
    cards2 = {str(p["no"]): 2 for p in mats[lo + 1]["players"]}
    r = client.put(f"/api/tournaments/t1/rounds/1/mats/{lo + 1}", json={"cards": cards2},
                   headers=ref)
    assert r.status_code == 422 and r.json()["error"] == "cards_over_read"
    cards2 = {k: int(i == 1) for i, k in enumerate(cards2)}
    r = client.put(f"/api/tournaments/t1/rounds/1/mats/{lo + 1}", json={"cards": cards2},
                   headers=ref)
    assert r.status_code == 200 and r.json()["flags"] == []
    # the desk corrects it; both changes are kept with who and when
    cards2 = {k: 2 if i == 0 else 0 for i, k in enumerate(cards2)}
    r = client.put(f"/api/tournaments/t1/rounds/1/mats/{lo + 1}", json={"cards": cards2},
                   headers=OP)
    assert r.status_code == 200 and r.json()["flags"] == []
    hist = client.get("/api/tournaments/t1/history", headers=OP).json()
    assert [h["by"].split()[0] for h in hist] == ["referee", "referee", "operator"]
    assert hist[2]["before"]["cards"][:2] == [0, 1] and hist[2]["at"]


def test_a_bow_said_from_the_console_is_the_rounds_not_read_again(client):
    """Issue 22 item 4: the console prepared the round's match and said 礼; the players are
    shuffling. The desk's start reads the round on that match (its seed, its one 礼) and
    waits; 札を覚えてください follows from the desk."""
    setup_tournament(client, n=4, blocks=1)
    rd = client.post("/api/tournaments/t1/rounds", headers=OP).json()["rounds"][0]
    r = client.post("/api/channels/a/match", headers=OP, json={
        "colors": [rd["colour"]], "overrides": {"cards": 2}})
    assert r.status_code == 200, r.text
    assert client.post("/api/channels/a/match/bow", headers=OP).status_code == 200
    bowed = wait_phase(client, "a", "ready")
    assert bowed["bowed"]
    before = client.get("/api/channels/a/matches", headers=OP).json()
    r = client.post("/api/tournaments/t1/rounds/1/start", headers=OP)
    assert r.status_code == 200, r.text
    assert r.json()["started"][0]["seed"] == bowed["seed"], "the console's match, kept"
    assert r.json()["started"][0]["waits_after_bow"]
    m = client.get("/api/channels/a", headers=OP).json()["match"]
    assert (m["phase"], m["bowed"], m["seed"]) == ("ready", True, bowed["seed"])
    memorise(client, 1, ["a"])
    # no new match was prepared (it would have said 礼 again): the console's is the round's
    after = client.get("/api/channels/a/matches", headers=OP).json()
    assert [x["id"] for x in after] == [x["id"] for x in before]
    assert after[0]["current"] and after[0]["seed"] == bowed["seed"]


def test_a_channel_that_is_busy_refuses_the_round_and_the_round_can_start_later(client):
    setup_tournament(client, n=4, blocks=1)
    client.post("/api/channels/a/match", json={"colors": ["blue"]}, headers=OP)
    client.post("/api/channels/a/match/start", headers=OP)
    client.post("/api/tournaments/t1/rounds", headers=OP)
    r = client.post("/api/tournaments/t1/rounds/1/start", headers=OP)
    assert r.status_code == 409 and "channel a cannot read round 1" in r.json()["detail"]
    rd = client.get("/api/tournaments/t1", headers=OP).json()["rounds"][0]
    assert rd["reading"] is None, "the refused start is undone"
    client.post("/api/channels/a/match/abort", headers=OP)
    assert client.post("/api/tournaments/t1/rounds/1/start", headers=OP).status_code == 200


def test_a_player_is_corrected_field_by_field_and_null_changes_nothing(client):
    setup_tournament(client, n=4, blocks=1)
    r = client.patch("/api/tournaments/t1/players/1", json={"club": None, "name": "山田 花子"},
                     headers=OP)
    assert r.status_code == 200, r.text  # was a 500: null reached the text checks
    p = next(p for p in r.json()["players"] if p["no"] == 1)
    assert (p["name"], p["club"]) == ("山田 花子", "学校1")
    r = client.patch("/api/tournaments/t1/players/1", json={"name": "\u200b"}, headers=OP)
    assert r.status_code == 422 and r.json()["detail"] == "name is empty"


def test_live_pages_wait_for_the_next_change(client, tmp_path):
    setup_tournament(client, n=4, blocks=1)
    v = client.get("/api/tournaments/t1/public", headers=OP).json()["version"]
    t0 = time.monotonic()
    same = client.get(f"/api/tournaments/t1/public?after={v}", headers=OP).json()
    assert same["version"] == v and time.monotonic() - t0 >= 0.9  # desk.long_poll_s: 1
    # a page behind the current version is answered at once: with a wait of a minute, so that
    # "at once" (well under the half minute allowed a busy machine) cannot be the wait's end
    (tmp_path / "slow").mkdir()
    with TestClient(create_app(make_config(tmp_path / "slow", long_poll_s=60),
                               operator_token=TOKEN)) as slow:
        setup_tournament(slow, n=4, blocks=1)
        v = slow.get("/api/tournaments/t1/public", headers=OP).json()["version"]
        t0 = time.monotonic()
        newer = slow.get(f"/api/tournaments/t1/public?after={v - 1}", headers=OP).json()
        assert newer["version"] == v and time.monotonic() - t0 < 30


def test_export_import_files_and_printouts(client):
    setup_tournament(client, n=7, blocks=1)
    client.post("/api/tournaments/t1/rounds", headers=OP)
    assert client.post("/api/tournaments/t1/rounds/1/start", headers=OP).status_code == 200
    memorise(client, 1, ["a"])
    wait_phase(client, "a", "finished")
    for mat, m in matches(client, 1).items():
        cards = {str(p["no"]): int(i == 0) for i, p in enumerate(m["players"])}
        r = client.put(f"/api/tournaments/t1/rounds/1/mats/{mat}", json={"cards": cards},
                       headers=OP)
        assert r.status_code == 200, r.text
    doc = client.get("/api/tournaments/t1/export", headers=OP).json()
    r = client.post("/api/tournaments/import", content=json.dumps(doc), headers=OP)
    assert r.status_code == 409
    doc["tournament"]["id"] = "t2"
    r = client.post("/api/tournaments/import", content=json.dumps(doc), headers=OP)
    assert r.status_code == 200, r.text
    a = client.get("/api/tournaments/t1/public", headers=OP).json()
    b = client.get("/api/tournaments/t2/public", headers=OP).json()
    assert a["blocks"] == b["blocks"]
    r = client.post("/api/tournaments/import?replace=true", content=b"{not json", headers=OP)
    assert r.status_code == 422

    csv = client.get("/api/tournaments/t1/rounds/1.csv", headers=OP).text
    assert csv.startswith("\ufeffblock,mat,colour,seat,no,name")
    assert len(csv.strip().splitlines()) == 8  # 7 players + the header
    assert "選手" in client.get("/api/tournaments/t1/standings.csv", headers=OP).text
    players = client.get("/api/tournaments/t1/players.csv", headers=OP).text
    # the players' CSV is an entries file again
    client.post("/api/tournaments", json={"id": "t3", "name": "y"}, headers=OP)
    r = client.post("/api/tournaments/t3/entries.csv", content=players.encode(),
                    headers={**OP, "Content-Type": "text/csv"})
    assert r.status_code == 200 and len(r.json()["added"]) == 7
    page = client.get("/print/t1/rounds/1", headers=OP).text
    assert "size: A4" in page and "第1試合" in page and "マット" in page and "移動" in page
    assert "選手1" in page
    page = client.get("/print/t1/standings", headers=OP).text
    assert "成績" in page and "取り札" in page
    assert client.get("/print/t1/rounds/9", headers=OP).status_code == 404
    for path in ("/desk", "/standings/t1", "/results/a"):
        assert client.get(path).status_code == 200
