"""The desk against what the red team did to a real `yomite serve` (issue 25): results that do
not add up (items 15), a referee's result at a mat another channel reads (15), a final
rewritten after the desk has confirmed it (8), the backup and the entries refused at the
general body cap (10), formulas in the CSV files (12). Each test failed on the code before its
fix; what the server does instead is asserted over HTTP.

One server for the module (desk_sim's config: four channels a-d, null audio, one card a
match); each test has its tournament and its channels."""

from __future__ import annotations

import csv
import io
import json
from pathlib import Path

import httpx2
import pytest

from .desk_load import big_tournament, document
from .desk_sim import Desk, config
from .serverproc import Server

pytestmark = pytest.mark.server

TOKEN = "desk-hostile-operator-token-0123456789"
STATIC = Path(__file__).resolve().parent.parent / "api" / "static"


@pytest.fixture(scope="module")
def server(tmp_path_factory):
    s = Server(tmp_path_factory.mktemp("desk-hostile"), config(), TOKEN).start()
    yield s
    s.stop()


@pytest.fixture
def desk(server):
    d = Desk(server.base, server.op)
    yield d
    d.close()


def words(code: str) -> tuple[str, str]:
    """The code's words on the desk's pages, Japanese and English."""
    out = []
    for lang in ("ja", "en"):
        strings = json.loads((STATIC / f"desk-strings.{lang}.json").read_text("utf-8"))
        out.append(strings[f"err_{code}"])
    return out[0], out[1]


def tournament(d: Desk, tid: str, n: int, *, blocks: int = 1, channels: list[str],
               cards: int = 1, rounds: int = 6) -> dict:
    d.tid = tid
    d.call("POST", "/api/tournaments", json={"id": tid, "name": tid, "cards": cards,
                                              "rounds": rounds})
    d.call("POST", d.t("/entries"), json={"players": [{"name": f"選手{i}"}
                                                      for i in range(1, n + 1)]})
    return d.call("POST", d.t("/blocks/draw"), json={"blocks": blocks, "seed": 1,
                                                       "channels": channels})


def put(d: Desk, number: int, mat: int, cards: dict, headers: dict | None = None,
        **extra) -> httpx2.Response:
    return d.c.put(d.t(f"/rounds/{number}/mats/{mat}"), json={"cards": cards, **extra},
                   headers=d.op if headers is None else headers)


# ---------------------------------------------------------------------- item 15
def test_results_that_do_not_add_up_are_refused_and_nothing_is_stored(server, desk):
    d = desk
    tournament(d, "sums", 5, channels=["a"], cards=20)  # odd: one pair, one 3-player match
    d.join_referees()
    rnd = d.call("POST", d.t("/rounds"))["rounds"][0]
    pair = next(m for m in rnd["matches"] if len(m["players"]) == 2)
    three = next(m for m in rnd["matches"] if len(m["players"]) == 3)
    nos2 = [str(p["no"]) for p in pair["players"]]
    nos3 = [str(p["no"]) for p in three["players"]]
    ref = d.referee_of(pair["mat"])
    try:
        # before the round is read: nobody's result is taken
        for who in (ref, d.op):
            r = put(d, 1, pair["mat"], dict(zip(nos2, (11, 9), strict=True)), who)
            assert r.status_code == 409 and r.json()["error"] == "round_not_read", r.text
        d.call("POST", d.t("/rounds/1/start"))
        before = d.call("GET", d.t("/public"))
        for who in (ref, d.op):
            r = put(d, 1, pair["mat"], dict(zip(nos2, (12, 12), strict=True)), who)
            assert r.status_code == 422 and r.json()["error"] == "cards_over_read", r.text
            assert "add up to 24, but 20 were read" in r.json()["detail"]
        r = put(d, 1, three["mat"], dict(zip(nos3, (7, 7, 7), strict=True)),
                d.referee_of(three["mat"]))
        assert r.status_code == 422 and r.json()["error"] == "cards_over_read", r.text
        for bad in (True, 11.0, "11"):  # no count of cards
            r = put(d, 1, pair["mat"], {nos2[0]: bad, nos2[1]: 0}, ref)
            assert r.status_code == 422 and r.json()["error"] == "invalid_request", (bad, r.text)
        r = put(d, 1, pair["mat"], {nos2[0]: 1, nos2[1]: 0}, ref, tiebreak=True)
        assert r.status_code == 422
        # nothing was stored, nothing shown
        after = d.call("GET", d.t("/public"))
        assert after["version"] == before["version"]
        assert after["blocks"][0]["round"]["results"] == 0
        assert d.call("GET", d.t("/history")) == []
        # the pages say it in their language
        assert all(words(c) for c in ("cards_over_read", "round_not_read"))
        # what adds up is taken: cards may stay on the 場, three players share the cards read
        assert put(d, 1, pair["mat"], dict(zip(nos2, (11, 8), strict=True)),
                   ref).status_code == 200
        assert put(d, 1, three["mat"], dict(zip(nos3, (7, 6, 4), strict=True)),
                   d.referee_of(three["mat"])).status_code == 200
    finally:
        d.c.post("/api/channels/a/match/abort", headers=d.op)


def test_a_referee_cannot_enter_a_mat_that_another_channel_reads(server, desk):
    """Block A is read on channel b, block B on channel c. The referee of channel b is given
    mats 1 and 2 (block A's); then the desk moves the blocks' mats (A from 11, B from 1)."""
    d = desk
    tournament(d, "mats", 8, blocks=2, channels=["b", "c"])
    pin = d.call("GET", "/api/channels/b/pin")["pin"]
    ref = d.call("POST", "/api/channels/b/referees", headers={},
                 json={"pin": pin, "name": "審判 b"})
    d.call("PUT", d.t(f"/referees/{ref['referee']}"), json={"mats": [1, 2]})
    d.call("PATCH", d.t("/blocks/A"), json={"first_mat": 11})
    d.call("PATCH", d.t("/blocks/B"), json={"first_mat": 1})
    v = d.call("POST", d.t("/rounds"))
    d.start_round(1)
    at1 = next(m for r in v["rounds"] if r["block"] == "B" for m in r["matches"]
               if m["mat"] == 1)
    cards = {str(p["no"]): i for i, p in enumerate(at1["players"])}
    r = put(d, 1, 1, cards, {"Authorization": f"Bearer {ref['token']}"})
    assert r.status_code == 403 and r.json()["error"] == "mat_not_on_channel", r.text
    assert "read on channel c" in r.json()["detail"] and all(words("mat_not_on_channel"))
    assert put(d, 1, 1, cards).status_code == 200  # the desk may
    d.wait_channels(["b", "c"], "finished")


# ---------------------------------------------------------------------- item 8
def test_a_final_is_locked_once_the_desk_confirms_it(server, desk):
    d = desk
    tournament(d, "fin", 4, channels=["d"], rounds=1)
    d.join_referees()
    v = d.call("POST", d.t("/rounds"))
    d.start_round(1)
    d.wait_channels(["d"], "finished")
    for m in v["rounds"][0]["matches"]:
        nos = [str(p["no"]) for p in m["players"]]
        d.call("PUT", d.t(f"/rounds/1/mats/{m['mat']}"), headers=d.referee_of(m["mat"]),
               json={"cards": {nos[0]: 1, nos[1]: 0}})
    final = next(r for r in d.call("POST", d.t("/final"))["rounds"] if r["final"])
    d.start_round(2)
    d.wait_channels(["d"], "finished")
    m = final["matches"][0]
    a, b = (str(p["no"]) for p in m["players"])
    ref = d.referee_of(m["mat"])

    def places() -> dict[str, int]:
        pub = d.call("GET", d.t("/public"))
        return {str(s["no"]): s["final_place"] for s in pub["blocks"][0]["standings"]
                if s["final_place"]}

    # before the desk confirms it, the referee may correct its own entry
    assert put(d, 2, m["mat"], {a: 1, b: 0}, ref).status_code == 200
    assert put(d, 2, m["mat"], {a: 0, b: 1}, ref).status_code == 200
    assert places() == {a: 2, b: 1}
    view = d.call("POST", d.t("/rounds/2/confirm"))
    assert next(r for r in view["rounds"] if r["final"])["confirmed"] is True
    # then it cannot rewrite the final: the winner stays
    for cards in ({a: 1, b: 0}, {a: 0, b: 0}):
        r = put(d, 2, m["mat"], cards, ref)
        assert r.status_code == 409 and r.json()["error"] == "result_locked", r.text
    assert places() == {a: 2, b: 1} and all(words("result_locked"))
    mine = d.call("GET", "/api/tournaments/assigned", headers=ref)
    shown = next(x for t in mine if t["tournament"] == "fin" for x in t["matches"])
    assert shown["final"] and shown["closed"] and shown["confirmed"]
    # the desk still may, and each change is in the history after the confirmation
    assert put(d, 2, m["mat"], {a: 1, b: 0}).status_code == 200
    assert places() == {a: 1, b: 2}
    hist = [h for h in d.call("GET", d.t("/history")) if h["round"] == 2]
    assert [(h["by"].split()[0], h["confirmed"]) for h in hist] == [
        ("referee", False), ("referee", False), ("operator", True), ("operator", False)]
    assert hist[2]["after"]["cards"] == [0, 1]  # what the desk confirmed
    # confirming again changes nothing; a round not complete cannot be confirmed
    r = d.c.post(d.t("/rounds/2/confirm"), headers=d.op)
    assert r.status_code == 409 and r.json()["error"] == "out_of_order"
    assert all(words("out_of_order"))


# ---------------------------------------------------------------------- item 10
def test_the_desks_backup_and_entries_take_their_own_size_limit(server, desk):
    d = desk
    day = big_tournament(tid="day40", players=40, blocks=4, played=6)
    backup = json.dumps(document(day), ensure_ascii=False).encode()
    assert len(backup) > 48 * 1024  # a real 40-player day's export (the report's was 53 KB)
    r = d.c.post("/api/tournaments/import", content=backup, headers=d.op)
    assert r.status_code == 200, r.text[:300]
    assert d.call("GET", "/api/tournaments/day40/public")["blocks"]
    d.tid = "many"
    d.call("POST", "/api/tournaments", json={"id": "many", "name": "多い"})
    rows = ["氏名,ふりがな,所属"] + [f"選手{i:04d},せんしゅ{i:04d},{'学校' * 20}{i % 9}"
                                      for i in range(700)]
    entries = ("\n".join(rows) + "\n").encode()
    assert len(entries) > 64 * 1024
    r = d.c.post(d.t("/entries.csv"), content=entries,
                 headers={**d.op, "Content-Type": "text/csv"})
    assert r.status_code == 200 and len(r.json()["added"]) == 700, r.text[:300]
    # past desk.max_upload_kb (1024 KiB): refused, and said so
    r = d.c.post(d.t("/entries.csv"), content=entries * 16,
                 headers={**d.op, "Content-Type": "text/csv"})
    assert r.status_code == 413 and r.json()["error"] in ("too_large", "body_too_large")
    # every other route keeps the general cap (server.limits.body_bytes, 32 KiB), a
    # tournament named like the import route too
    big_json = {"players": [{"name": f"選手{i}", "club": "学" * 60} for i in range(400)]}
    for path in ("/api/tournaments/many/entries", "/api/tournaments/importx/entries"):
        r = d.c.post(path, json=big_json, headers=d.op)
        assert r.status_code == 413 and r.json()["error"] == "body_too_large", (path, r.text)


# ---------------------------------------------------------------------- item 12
HOSTILE = {
    "name": ['=HYPERLINK("http://evil.example","点数")', "+81 90 1234", "-2+3",
             "@SUM(A1:A9)", "＝1+1"],
    "club": ["=cmd|' /C calc'!A0", "@東小", "+西小", "-南小", "＋北小"],
}
FORMULA = tuple("=+-@\t\r＝＋－＠")


def test_every_csv_the_desk_writes_keeps_formulas_as_text(server, desk):
    d = desk
    d.tid = "csv"
    d.call("POST", "/api/tournaments", json={"id": "csv", "name": "csv"})
    players = [{"name": n, "club": c, "furigana": "＝ふりがな"}
               for n, c in zip(HOSTILE["name"], HOSTILE["club"], strict=True)]
    players.append({"name": "山田", "club": "東小"})
    d.call("POST", d.t("/entries"), json={"players": players})
    d.call("POST", d.t("/blocks/draw"), json={"blocks": 1, "seed": 1, "channels": ["a"]})
    d.call("POST", d.t("/rounds"))
    d.call("PATCH", d.t(), json={"publish_details": True})  # the clubs in every file
    files = {"players.csv": d.call("GET", d.t("/players.csv")),
             "rounds/1.csv": d.call("GET", d.t("/rounds/1.csv")),
             "standings.csv": d.call("GET", d.t("/standings.csv"))}
    for name, text in files.items():
        rows = list(csv.reader(io.StringIO(text.removeprefix("\ufeff"), newline="")))
        cells = [c for row in rows for c in row]
        assert not [c for c in cells if c.startswith(FORMULA)], name
        for hostile in HOSTILE["name"] + HOSTILE["club"]:
            assert "'" + hostile in cells, (name, hostile)
        assert "山田" in cells and "'=ふりがな" in cells  # furigana in its standard width
    # the players' CSV is an entries file again: the names come back as they were entered
    d.tid = "csv2"
    d.call("POST", "/api/tournaments", json={"id": "csv2", "name": "csv2"})
    d.call("POST", d.t("/entries.csv"), content=files["players.csv"].encode(),
           headers={**d.op, "Content-Type": "text/csv"})
    back = d.call("GET", d.t())["players"]
    assert [(p["name"], p["club"]) for p in back] == [(p["name"], p["club"]) for p in players]
