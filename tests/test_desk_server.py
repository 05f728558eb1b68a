"""A whole tournament day through the API of a real `yomite serve`: 40 entries from a CSV, four
blocks read on four channels (one block odd after a withdrawal), six rounds paired and read
(after round 3 is paired, a withdrawal and a late entry: the round is refused its start until
it is paired again, then the withdrawn player plays no more and the late one every round left),
results from the referees' own tokens, standings checked against an independent computation of
the rules, and the finals, one of them tied and decided by the channel's extra card."""

from __future__ import annotations

import random

import pytest

from .desk_sim import (
    CARDS,
    CHANNELS,
    Desk,
    config,
    entries_csv,
    expected_standings,
    lottery,
    no_rematches,
    random_result,
)
from .serverproc import Server

pytestmark = pytest.mark.server

TOKEN = "desk-server-operator-token-0123456789"
ROUNDS = 6
LATE_ROUND = 3


@pytest.fixture(scope="module")
def server(tmp_path_factory):
    s = Server(tmp_path_factory.mktemp("desk"), config(), TOKEN).start()
    try:
        yield s
    finally:
        s.stop()


def test_a_forty_player_tournament_day_end_to_end(server):
    d = Desk(server.base, server.op)
    try:
        tournament_day(d, server)
    finally:
        d.close()


def tournament_day(d: Desk, server: Server) -> None:
    rng = random.Random(2025_11_03)
    d.call("POST", "/api/tournaments", json={"id": "day", "name": "五色百人一首 秋の大会",
                                              "day": "2025-11-03", "cards": CARDS})
    # the players' and parents' link (issue 47): their pages go through it, with no token
    link = {"view": d.call("POST", d.t("/public-link"))["public_link"]}
    got = d.call("POST", d.t("/entries.csv"), content=entries_csv(40),
                 headers={**server.op, "Content-Type": "text/csv"})
    assert len(got["added"]) == 40 and got["warnings"] == []
    v = d.call("POST", d.t("/blocks/draw"), json={"blocks": 4, "method": "clubs", "seed": 7})
    assert [b["players"] for b in v["blocks"]] == [10, 10, 10, 10]
    assert [b["channel"] for b in v["blocks"]] == CHANNELS
    # schools kept apart: no block holds more than two of one school's five players
    per = {}
    for p in v["players"]:
        per[(p["club"], p["block"])] = per.get((p["club"], p["block"]), 0) + 1
    assert max(per.values()) == 2
    # a withdrawal before round 1 leaves block D odd: one 3-player match every round
    out = next(p["no"] for p in v["players"] if p["block"] == "D")
    v = d.call("PATCH", d.t(f"/players/{out}"), json={"withdrawn": True})
    sizes = {b["name"]: b["players"] for b in v["blocks"]}
    assert sizes == {"A": 10, "B": 10, "C": 10, "D": 9}
    d.join_referees()
    assert len(d.referees) == 3 + 3 + 3 + 2

    played: dict[str, list[tuple[tuple[int, ...], tuple[int, ...]]]] = {b: [] for b in "ABCD"}
    groups: dict[str, list[tuple[int, ...]]] = {b: [] for b in "ABCD"}
    members = {b: [p["no"] for p in v["players"] if p["block"] == b and p["no"] != out]
               for b in "ABCD"}
    quit_b = late_c = 0
    joined: dict[int, int] = {}  # the late entry: the round it was entered before
    for n in range(1, ROUNDS + 1):
        v = d.call("POST", d.t("/rounds"))
        if n == LATE_ROUND:
            # issue 22 item 1: after round 3 is paired, a player of block B withdraws and a
            # late player enters block C: the round cannot start until it is paired again
            quit_b = next(p["no"] for p in v["players"] if p["block"] == "B")
            d.call("PATCH", d.t(f"/players/{quit_b}"), json={"withdrawn": True})
            got = d.call("POST", d.t("/entries"), json={
                "players": [{"name": "遅刻 太郎", "club": "北小", "block": "C"}], "late": True})
            late_c = got["added"][0]
            joined[late_c] = n
            refused = d.c.post(d.t(f"/rounds/{n}/start"), headers=server.op, json={})
            assert refused.status_code == 409, refused.text
            assert refused.json()["params"]["why"] == "pairing_stale"
            v = d.call("POST", d.t(f"/rounds/{n}/pair-again"), json={})
            members["B"].remove(quit_b)
            members["C"].append(late_c)
        rounds = {r["block"]: r for r in v["rounds"] if r["number"] == n}
        assert set(rounds) == set("ABCD")
        for b, r in rounds.items():
            gs = [tuple(p["no"] for p in m["players"]) for m in r["matches"]]
            assert sorted(p for g in gs for p in g) == sorted(members[b]), "everyone, once"
            assert sum(len(g) == 3 for g in gs) == len(members[b]) % 2
            groups[b] += gs
            assert no_rematches(groups[b]), f"a rematch in block {b} round {n}"
        # the projector's next mats: every player of the round, with the mat of its match
        pub = d.call("GET", d.t("/public"), headers={}, params=link)
        for blk in pub["blocks"]:
            seats = {s["no"]: s["mat"] for s in blk["next_mats"]["seats"]}
            for m in rounds[blk["name"]]["matches"]:
                assert all(seats[p["no"]] == m["mat"] for p in m["players"])
        started = d.start_round(n)["started"]
        # rule 2: round 1 waited after 礼 for the shuffle and janken; later rounds did not
        assert all(s["waits_after_bow"] == (n == 1) for s in started), started
        assert sorted(s["channel"] for s in started) == CHANNELS
        seeds = {s["channel"]: s["seed"] for s in started}
        for ch in CHANNELS:
            st = d.call("GET", f"/api/channels/{ch}")["match"]
            assert st["seed"] == seeds[ch] and st["cards_planned"] == CARDS
        live = {r["block"]: r["live"] for r in d.view()["rounds"] if r["number"] == n}
        assert all(x["state"] == "live" for x in live.values()), live
        d.wait_channels(CHANNELS, "finished")
        assert all(r["live"]["phase"] == "finished"
                   for r in d.view()["rounds"] if r["number"] == n)
        if n == 1:  # a referee may not enter another referee's mat
            mat = rounds["A"]["matches"][0]["mat"]
            other = next(r["headers"] for r in d.referees.values() if mat not in r["mats"])
            players = [p["no"] for p in rounds["A"]["matches"][0]["players"]]
            d.call("PUT", d.t(f"/rounds/{n}/mats/{mat}"), headers=other, ok=403,
                   json={"cards": dict.fromkeys(map(str, players), 0)})
        for b, r in rounds.items():
            for m in r["matches"]:
                players = [p["no"] for p in m["players"]]
                cards = random_result(rng, players, CARDS)
                res = d.call("PUT", d.t(f"/rounds/{n}/mats/{m['mat']}"),
                             headers=d.referee_of(m["mat"]),
                             json={"cards": dict(zip(map(str, players), cards, strict=True))})
                assert res["result"]["by"].startswith("referee ")
                played[b].append((tuple(players), tuple(cards)))
        assert not [f for f in d.view()["flags"] if f["level"] == "error"]

    v = d.view()
    lots = lottery(v["lottery_seed"], [p["no"] for p in v["players"]])
    assert {p["no"]: p["lottery"] for p in v["players"]} == lots
    pub = d.call("GET", d.t("/public"), headers={}, params=link)
    for blk in pub["blocks"]:
        b = blk["name"]
        everyone = members[b] + ([quit_b] if b == "B" else [])
        want = [x for x in expected_standings(played[b], everyone, lots) if x[0] != quit_b]
        shown = [(s["no"], s["wins"], s["cards"]) for s in blk["standings"] if not s["withdrawn"]]
        assert shown == want, b
        for s in blk["standings"]:
            n_played = sum(s["no"] in ps for ps, _ in played[b])
            if s["no"] == out:  # withdrawn before round 1
                assert s["withdrawn"] and n_played == 0 == s["played"]
            elif s["no"] == quit_b:  # no match from the round paired again on
                assert s["withdrawn"] and n_played == LATE_ROUND - 1 == s["played"]
            else:  # the late player: every round from the one he joined
                assert s["played"] == n_played == ROUNDS + 1 - joined.get(s["no"], 1), s
    csv = d.call("GET", d.t("/standings.csv"), headers={}, params=link)
    assert len(csv.strip().splitlines()) == 42

    # finals: the top two of each block; block A's final is tied and read one more card
    v = d.call("POST", d.t("/final"))
    finals = {r["block"]: r for r in v["rounds"] if r["final"]}
    for b, r in finals.items():
        top = [s["no"] for s in v["standings"][b] if not s["withdrawn"]][:2]
        assert [p["no"] for p in r["matches"][0]["players"]] == top
    assert all(s["waits_after_bow"] for s in d.start_round(ROUNDS + 1)["started"])
    d.wait_channels(CHANNELS, "finished")
    winners = {}
    for b, r in finals.items():
        m = r["matches"][0]
        a, z = (p["no"] for p in m["players"])
        cards = {str(a): 0, str(z): 0} if b == "A" else {str(a): 1, str(z): 0}
        res = d.call("PUT", d.t(f"/rounds/{ROUNDS + 1}/mats/{m['mat']}"),
                     headers=d.referee_of(m["mat"]), json={"cards": cards})
        if b == "A":
            assert res["extra_card"] == "reading"
            assert [f["code"] for f in res["flags"]] == ["tie_needs_extra_card"]
            assert d.call("GET", "/api/channels/a")["match"]["cards_total"] == CARDS + 1
            d.wait_channels(["a"], "finished")
            res = d.call("PUT", d.t(f"/rounds/{ROUNDS + 1}/mats/{m['mat']}"),
                         headers=d.referee_of(m["mat"]), json={"cards": cards, "tiebreak": z})
            assert res["outcome"] == ["loss", "win"] and res["cards_read"] == CARDS + 1
            winners[b] = z
        else:
            winners[b] = a
    pub = d.call("GET", d.t("/public"), headers={}, params=link)
    for blk in pub["blocks"]:
        places = {s["no"]: s["final_place"] for s in blk["standings"]}
        assert places[winners[blk["name"]]] == 1
        assert sorted(p for p in places.values() if p) == [1, 2]
    assert not [f for f in d.view()["flags"] if f["level"] == "error"]
    page = d.call("GET", f"/print/day/rounds/{ROUNDS + 1}", headers={}, params=link)
    assert "決勝戦" in page and "Aブロック" in page
    paper_and_qr(d, winners, link["view"])
    assert "Traceback" not in server.log()


def paper_and_qr(d: Desk, winners: dict[str, int], key: str) -> None:
    """Issue 22: the day's paper (the desk prints it) and the projector's QR code of the
    public link for the players' phones."""
    v = d.view()
    names = {p["no"]: p["name"] for p in v["players"]}
    # a results slip per mat of round 1 (rule 17), with its players
    slips = d.call("GET", "/print/day/slips/1")
    for r in (r for r in v["rounds"] if r["number"] == 1):
        for m in r["matches"]:
            assert f'data-mat="{m["mat"]}"' in slips
            assert all(p["name"] in slips for p in m["players"])
    assert slips.count('class="slip"') == sum(
        len(r["matches"]) for r in v["rounds"] if r["number"] == 1)
    # name cards of the players still in; a mat label per mat of every block
    cards = d.call("GET", "/print/day/names")
    still = [p for p in v["players"] if p["withdrawn_round"] is None]
    assert cards.count('class="card"') == len(still) == 39
    labels = d.call("GET", "/print/day/mats")
    assert labels.count('class="card"') == sum(len(b["all_mats"]) for b in v["blocks"])
    # certificates: each block's winner and runner-up
    certs = d.call("GET", "/print/day/certificates")
    assert certs.count('class="cert"') == 2 * len(v["blocks"])
    assert all(f"{names[no]} 殿" in certs for no in winners.values())
    d.call("GET", "/print/day/nothing", ok=404)
    # the desk's own paper is not the public link's
    for what in ("slips/1", "names", "mats", "certificates"):
        d.call("GET", f"/print/day/{what}", headers={}, params={"view": key}, ok=401)
    # the projector's QR: the public link's standings at the address phones use
    from api.routes.referees import qr_svg
    base = d.call("GET", "/api/channels/a/pin")["bases"][0]["base"]
    qr = d.c.get("/api/tournaments/day/qr.svg", params={"view": key})
    assert qr.status_code == 200 and qr.headers["content-type"] == "image/svg+xml"
    assert qr.content == qr_svg(f"{base}/standings/day?view={key}")
