"""Privacy on a shared server (issue 47, item 6), against a real `yomite serve`: an association's
server holds every school's children, so the tournaments' list, their printed pages, their
public views and files are the desk's (its token, or its print pass for the tabs the printed
pages open in) or the holders of a tournament's public link, which the desk makes and revokes;
the players' schools and grades appear only where the organiser publishes them, in the public
views and on paper alike. The new columns come to an older database by a migration, on SQLite
and on PostgreSQL (both run the desk)."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import httpx2
import pytest
from sqlalchemy import text

from api.routes.referees import qr_svg
from desk import tournament as ops
from desk.repository import migrate, open_repository

from .desk_sim import Desk, desk_server
from .pgserver import Postgres
from .serverproc import Server

TOKEN = "desk-privacy-operator-token-0123456789"
SCHOOL = "東小学校"
GRADE = "5年"
# what a stranger tries: every page and file that names the children
PUBLIC = ("/api/tournaments/{t}/public", "/print/{t}/rounds/1", "/print/{t}/standings",
          "/api/tournaments/{t}/rounds/1", "/api/tournaments/{t}/rounds/1.csv",
          "/api/tournaments/{t}/standings.csv", "/api/tournaments/{t}/qr.svg")
DESK_ONLY = ("/print/{t}/names", "/print/{t}/slips/1", "/print/{t}/mats",
             "/print/{t}/certificates")


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Server]:
    yield from desk_server(tmp_path_factory, "desk-privacy", TOKEN, ["a"], chromium=False)


def school_day(server: Server, tid: str) -> Desk:
    """A tournament of six children of one school, drawn and round 1 paired."""
    d = Desk(server.base, server.op, tid)
    d.call("POST", "/api/tournaments", json={"id": tid, "name": "市の大会"})
    d.call("POST", d.t("/entries"), json={"players": [
        {"name": f"児童{i}", "club": SCHOOL, "grade": GRADE} for i in range(1, 7)]})
    d.call("POST", d.t("/blocks/draw"), json={"blocks": 1, "seed": 1, "channels": []})
    d.call("POST", d.t("/rounds"))
    return d


def get(server: Server, path: str, params: dict[str, str] | None = None,
        cookies: dict[str, str] | None = None) -> httpx2.Response:
    """A stranger's GET (no token), with a link's `params` or a browser's `cookies`."""
    with httpx2.Client(base_url=server.base, timeout=20, cookies=cookies) as c:
        return c.get(path, params=params)


@pytest.mark.server
def test_a_stranger_gets_words_and_nothing_else_the_desk_gets_everything(server):
    d = school_day(server, "city")
    try:
        r = get(server, "/api/tournaments")
        assert r.status_code == 401 and r.json()["error"] == "unauthorized", r.text
        assert "city" not in r.text
        for path in PUBLIC + DESK_ONLY:
            # the same answer whether the tournament exists or not: nothing is learnt
            answers = [get(server, path.format(t=t)) for t in ("city", "nosuch")]
            for a in answers:
                assert a.status_code == 401, (path, a.status_code, a.text)
                body = a.json()
                assert body["error"] == "link_needed" and "the desk's sign-in" in body["detail"]
                assert "ask the organiser" in body["hint"] and "児童" not in a.text
            assert answers[0].json() == answers[1].json(), path

        # the desk's token: the list and every page
        assert [t["id"] for t in d.call("GET", "/api/tournaments")] == ["city"]
        cards = d.call("GET", "/print/city/names")
        assert cards.count('class="card"') == 6 and "児童1" in cards
        # nobody published the school and the grades: not on paper, not in the public view
        assert SCHOOL not in cards and GRADE not in cards
        pub = d.call("GET", d.t("/public"))
        assert "児童1" in str(pub) and SCHOOL not in str(pub) and GRADE not in str(pub)
        for path in ("/print/city/standings", "/print/city/rounds/1"):
            assert SCHOOL not in d.call("GET", path)
        assert SCHOOL not in d.call("GET", d.t("/standings.csv"))
        # ... while the desk's own view keeps them (it enters and corrects them)
        assert {(p["club"], p["grade"]) for p in d.view()["players"]} == {(SCHOOL, GRADE)}

        # the desk's print pass: the printed pages open in a tab that cannot send the token
        r = httpx2.post(f"{server.base}/api/tournaments/print-pass", headers=server.op)
        assert r.status_code == 200 and r.json()["seconds"] == 12 * 3600
        cookie = r.headers["set-cookie"]
        assert cookie.startswith("yomite_desk_print=") and "Path=/print/" in cookie
        assert "HttpOnly" in cookie and "samesite=strict" in cookie.lower()
        value = r.cookies["yomite_desk_print"]
        jar = {"yomite_desk_print": value}
        assert get(server, "/print/city/names", cookies=jar).status_code == 200
        assert get(server, "/print/city/slips/1", cookies=jar).status_code == 200
        forged = value[:-1] + ("0" if value[-1] != "0" else "1")
        r = get(server, "/print/city/names", cookies={"yomite_desk_print": forged})
        assert r.status_code == 401 and r.json()["error"] == "link_needed"
        # it opens the paper, nothing else of the desk's
        assert get(server, "/api/tournaments", cookies=jar).status_code == 401
        assert httpx2.post(f"{server.base}/api/tournaments/print-pass").status_code == 401

        # the organiser publishes the school and the grades: the paper and the public view
        v = d.call("PATCH", d.t(), json={"publish_details": True})
        assert v["settings"]["publish_details"] is True
        cards = d.call("GET", "/print/city/names")
        assert SCHOOL in cards and GRADE in cards
        pub = d.call("GET", d.t("/public"))
        assert {(s["club"], s["grade"]) for s in pub["blocks"][0]["standings"]} == {
            (SCHOOL, GRADE)}
        assert SCHOOL in d.call("GET", "/print/city/standings")
    finally:
        d.close()


@pytest.mark.server
def test_a_public_link_opens_the_public_pages_until_it_is_revoked(server):
    d = school_day(server, "town")
    try:
        assert d.view()["public_link"] is None
        key = d.call("POST", d.t("/public-link"))["public_link"]
        assert len(key) >= 32 and d.view()["public_link"] == key
        link = {"view": key}
        pub = get(server, "/api/tournaments/town/public", params=link)
        assert pub.status_code == 200 and "児童1" in pub.text
        assert SCHOOL not in pub.text and GRADE not in pub.text  # not published
        for path in PUBLIC:
            r = get(server, path.format(t="town"), params=link)
            assert r.status_code == 200, (path, r.text)
            assert SCHOOL not in r.text and GRADE not in r.text, path
        # the desk's own paper and the list are not the link's
        for path in DESK_ONLY:
            r = get(server, path.format(t="town"), params=link)
            assert r.status_code == 401 and r.json()["error"] == "link_needed", path
        assert get(server, "/api/tournaments", params=link).status_code == 401
        # the projector's QR code is the link's, at the address phones use
        base = d.call("GET", "/api/channels/a/pin")["bases"][0]["base"]
        r = get(server, "/api/tournaments/town/qr.svg", params=link)
        assert r.content == qr_svg(f"{base}/standings/town?view={key}")

        # a wrong link, or the link with another tournament's name: one answer for both
        wrong = [get(server, f"/api/tournaments/{t}/public", params={"view": k})
                 for t, k in (("town", key[::-1]), ("nosuch", key))]
        for r in wrong:
            assert r.status_code == 404 and r.json()["error"] == "no_such_link"
            assert "ask the organiser for the current link" in r.json()["hint"]
        assert wrong[0].json() == wrong[1].json()

        # published: the link shows the school and the grades
        d.call("PATCH", d.t(), json={"publish_details": True})
        r = get(server, "/api/tournaments/town/public", params=link)
        assert SCHOOL in r.text and GRADE in r.text
        assert SCHOOL in get(server, "/print/town/standings", params=link).text

        # a new link: the old one is dead at once; revoked: so is the new one
        new = d.call("POST", d.t("/public-link"))["public_link"]
        assert new != key
        r = get(server, "/api/tournaments/town/public", params=link)
        assert r.status_code == 404 and r.json()["error"] == "no_such_link"
        assert get(server, "/print/town/standings", params={"view": new}).status_code == 200
        v = d.call("DELETE", d.t("/public-link"))
        assert v["public_link"] is None
        for path in PUBLIC:
            r = get(server, path.format(t="town"), params={"view": new})
            assert r.status_code == 404 and r.json()["error"] == "no_such_link", path
        # the desk still sees it all
        assert d.call("GET", d.t("/public"))["id"] == "town"
    finally:
        d.close()


# ---------------------------------------------------------------------- the migration
def third_schema_day(url: str) -> None:
    """A database at 0003 (before issue 47) with one tournament in it."""
    old = open_repository(url, run_migrations=False)
    migrate(old.engine, "0003")
    with old.engine.begin() as conn:
        conn.execute(text("insert into tournaments (id, name, day, rounds, cards, finalists, "
                          "created_at, draw_seed, draw_method, lottery_seed, pairing_seed, "
                          "version) values ('t1', 'x', '', 6, 17, 2, '', null, null, 1, 2, 1)"))
    old.close()


def brought_up_to_date(url: str) -> None:
    repo = open_repository(url)
    try:
        t = repo.load("t1")
        assert t is not None
        assert t.settings.publish_details is False and t.public_link is None
        change = ops.public_link(t, "k" * 32)
        repo.apply("t1", t.version, change)
        t = ops.apply(t, change)
        change2 = ops.change_settings(t, publish_details=True)
        repo.apply("t1", t.version, change2)
        back = repo.load("t1")
        assert back == ops.apply(t, change2)
        assert back is not None and back.public_link == "k" * 32
        assert back.settings.publish_details is True
    finally:
        repo.close()


def test_an_sqlite_database_of_the_third_schema_publishes_nothing(tmp_path: Path):
    url = f"sqlite:///{tmp_path / 'old.sqlite3'}"
    third_schema_day(url)
    brought_up_to_date(url)


@pytest.mark.server
def test_a_postgresql_database_of_the_third_schema_publishes_nothing():
    pg = Postgres().start()
    try:
        third_schema_day(pg.url)
        brought_up_to_date(pg.url)
    finally:
        pg.stop()
