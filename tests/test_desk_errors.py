"""The desk's errors say what to fix, in the page's language (issue 22 item 2), in real
headless Chromium against a real `yomite serve`: a bad CSV names its line, column and reason
and the file stays chosen; a wrong mat assignment names the mat and why and keeps what was
typed; a step out of order and the flags' details are said in Japanese from codes and figures,
with no English sentence."""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from playwright.sync_api import Browser, Page, expect

from .chromium import english_in, launched, watch_errors
from .desk_sim import Desk, desk_server, entries_csv
from .serverproc import Server

pytestmark = [pytest.mark.browser, pytest.mark.server]

TOKEN = "desk-errors-operator-token-0123456789"


@pytest.fixture(scope="module")
def server(tmp_path_factory) -> Iterator[Server]:
    yield from desk_server(tmp_path_factory, "desk-errors", TOKEN, ["a", "b"])


@pytest.fixture(scope="module")
def browser(server) -> Iterator[Browser]:
    yield from launched(timeout_ms=15_000)


def desk_page(browser: Browser, server: Server, tid: str, errors: list[str]) -> Page:
    ctx = browser.new_context(viewport={"width": 1280, "height": 800}, locale="ja-JP")
    page = ctx.new_page()
    watch_errors(page, errors, "desk: ")
    page.goto(f"{server.base}/desk#token={TOKEN}")
    expect(page.locator("#t-title")).to_be_visible()
    page.select_option("#tournament", tid)
    expect(page.locator("#t-title")).to_contain_text(tid)
    return page


def toast(page: Page, having: str = "") -> str:
    box = page.locator("#toasts .toast", has_text=having).last
    expect(box).to_be_visible()
    return box.inner_text()


@pytest.fixture
def desks(server) -> Iterator[list[Desk]]:
    """The tests' API clients, closed however the test ends."""
    made: list[Desk] = []
    yield made
    for d in made:
        d.close()


def drawn(server: Server, tid: str, desks: list[Desk], players: int = 12) -> Desk:
    """A tournament of `players` in two blocks (A read on channel a, B on b)."""
    d = Desk(server.base, server.op, tid)
    desks.append(d)
    d.call("POST", "/api/tournaments", json={"id": tid, "name": tid, "cards": 1})
    d.call("POST", d.t("/entries.csv"), content=entries_csv(players),
           headers={**server.op, "Content-Type": "text/csv"})
    d.call("POST", d.t("/blocks/draw"), json={"blocks": 2, "method": "random", "seed": 3})
    return d


def test_a_bad_csv_names_its_line_and_reason_in_japanese_and_the_file_stays(
        server, browser, tmp_path, desks):
    d = Desk(server.base, server.op, "csv")
    desks.append(d)
    d.call("POST", "/api/tournaments", json={"id": "csv", "name": "csv"})
    errors: list[str] = []
    page = desk_page(browser, server, "csv", errors)
    page.click("#tabs [data-tab=entries]")
    bad = tmp_path / "entries.csv"
    bad.write_bytes("氏名,所属,学年\n山田 太郎,東小,5\n,西小,6\n鈴木 花子,南小,4\n".encode("cp932"))
    page.set_input_files("#csv-file", str(bad))  # read as soon as it is chosen
    said = toast(page)
    assert "3 行目" in said and "氏名" in said and "空です" in said, said
    assert english_in(said) == [], said
    # the file stays chosen, to import again once corrected; nobody was added
    assert page.eval_on_selector("#csv-file", "e => e.files.length") == 1
    assert d.view()["players"] == []
    page.eval_on_selector("#toasts", "e => e.replaceChildren()")
    page.click("#csv-import")  # 読み込む reads the chosen file again
    expect(page.locator("#toasts .toast", has_text="3 行目")).to_have_count(1)

    # a name entered twice: the warning names the lines, in Japanese
    twice = tmp_path / "twice.csv"
    twice.write_text("氏名,所属\n山田 太郎,東小\n山田 太郎,東小\n", "utf-8")
    page.set_input_files("#csv-file", str(twice))
    said = toast(page, "山田 太郎")
    assert "山田 太郎" in said and "2, 3 行目" in said and english_in(said) == [], said
    expect(page.locator("#players tbody tr")).to_have_count(2)
    assert errors == []
    page.context.close()


def test_a_wrong_mat_assignment_names_the_mat_and_why_and_keeps_the_typing(server, browser, desks):
    d = drawn(server, "mats", desks)
    b_first = next(b for b in d.view()["blocks"] if b["name"] == "B")["mats"][0]
    pin = d.call("GET", "/api/channels/a/pin")["pin"]
    d.call("POST", "/api/channels/a/referees", headers={},
           json={"pin": pin, "name": "審判 一郎"})
    errors: list[str] = []
    page = desk_page(browser, server, "mats", errors)
    page.click("#tabs [data-tab=referees]")
    box = page.locator("#referees input[data-referee]").first
    # a mat of block B (read on channel b) for a referee of channel a
    box.fill(f"1,{b_first}")
    page.locator("#referees button", has_text="割り当て").first.click()
    said = toast(page)
    assert f"マット {b_first}" in said and "B ブロック" in said and "PIN" in said, said
    assert english_in(said) == [], said
    expect(box).to_have_value(f"1,{b_first}")
    # not a number at all: said before anything is sent, the typing kept
    box.fill("1,x")
    page.locator("#referees button", has_text="割り当て").first.click()
    expect(page.locator("#toasts .toast").last).to_contain_text("「x」はマットの番号ではありません")
    expect(page.locator("#referees input[data-referee]").first).to_have_value("1,x")
    assert errors == []
    page.context.close()


def test_a_flag_and_a_step_out_of_order_are_said_in_japanese(server, browser, desks):
    """Items 1 and 2: a withdrawal after pairing is flagged in Japanese, the round cannot
    start (the refusal says to press 組み直す), 組み直す seats the players active now; another
    block's pairing is undone with two presses of 取り消す; once the round has started,
    putting the player back is a step out of order, said in Japanese."""
    d = drawn(server, "order", desks)
    d.call("POST", d.t("/rounds"), json={})
    r0 = d.view()["rounds"][0]
    block, paired = r0["block"], r0["matches"][0]["players"][0]
    other = next(r["block"] for r in d.view()["rounds"] if r["block"] != block)
    d.call("PATCH", d.t(f"/players/{paired['no']}"), json={"withdrawn": True})
    errors: list[str] = []
    page = desk_page(browser, server, "order", errors)
    page.click("#tabs [data-tab=rounds]")
    flag = page.locator("#flags .flag[data-code=withdrawn_paired]")
    expect(flag).to_be_visible()
    text = flag.inner_text()
    assert paired["name"] in text and "組み合わせを作り直してください" in text, text
    assert english_in(text) == [], text

    # Start is refused while the round seats a withdrawn player, naming the button
    page.click("#start-round")
    said = toast(page, "組み直す")
    assert paired["name"] in said and f"{block} ブロック" in said, said
    assert english_in(said) == [], said
    assert all(r["reading"] is None for r in d.view()["rounds"])
    card = page.locator(f"#rounds .round[data-block={block}]")
    card.locator("button.pair-again").click()
    expect(flag).to_have_count(0)
    seated = {p["no"] for r in d.view()["rounds"] if r["block"] == block
              for m in r["matches"] for p in m["players"]}
    assert paired["no"] not in seated and seated

    # the other block's pairing undone: the first press arms, the second undoes
    undo = page.locator(f"#rounds .round[data-block={other}] button.unpair")
    undo.click()
    expect(undo).to_contain_text("もう一度押すと")
    assert any(r["block"] == other for r in d.view()["rounds"])
    undo.click()
    expect(page.locator(f"#rounds .round[data-block={other}] button.unpair")).to_have_count(0)
    assert [r["block"] for r in d.view()["rounds"]] == [block]

    # the round starts; putting the player back is then a step out of order (409): why, and
    # what to do, in Japanese
    d.call("POST", d.t("/rounds/1/start"), json={})
    page.click("#tabs [data-tab=entries]")
    page.locator(f"#players tr[data-no='{paired['no']}'] button.withdraw-player").click()
    said = toast(page, "途中参加")
    assert paired["name"] in said, said
    assert english_in(said) == [], said
    assert errors == []
    page.context.close()


def test_the_api_gives_each_error_its_code_and_figures(server, desks):
    d = drawn(server, "api", desks)
    csv = {**server.op, "Content-Type": "text/csv"}

    def refused(method: str, path: str, status: int, **kw: object) -> dict[str, object]:
        r = d.c.request(method, path, headers=kw.pop("headers", server.op), **kw)  # type: ignore[arg-type]
        assert r.status_code == status, (path, r.status_code, r.text)
        return r.json()

    body = refused("POST", d.t("/entries.csv"), 422, headers=csv,
                   content=("氏名,ブロック\n田中,A\n" + "あ" * 41 + ",A\n佐藤,A!\n").encode())
    assert (body["error"], body["params"]) == ("csv_bad_line", {
        "line": 3, "column": "name", "reason": "too_long", "length": 41, "limit": 40,
        "count": 2})
    assert "line 3" in body["detail"] and "line 4" in body["detail"]
    body = refused("POST", d.t("/entries.csv"), 422, headers=csv, content=b"name\n\x81 A\n")
    assert body["error"] == "csv_encoding"
    body = refused("POST", d.t("/entries.csv"), 422, headers=csv, content="who,club\na,b\n")
    assert (body["error"], body["params"]) == ("csv_no_name_column", {"found": "who, club"})
    body = refused("POST", d.t("/entries"), 422,
                   json={"players": [{"name": "\u3000 ", "block": "A"}], "late": True})
    assert (body["error"], body["params"]) == (
        "bad_entry", {"column": "name", "reason": "empty"})

    blocks = {b["name"]: b for b in d.view()["blocks"]}
    pin = d.call("GET", "/api/channels/a/pin")["pin"]
    one = d.call("POST", "/api/channels/a/referees", headers={},
                 json={"pin": pin, "name": "審判 一郎"})["referee"]
    two = d.call("POST", "/api/channels/a/referees", headers={},
                 json={"pin": pin, "name": "審判 二郎"})["referee"]
    b_mat = blocks["B"]["mats"][0]
    body = refused("PUT", d.t(f"/referees/{one}"), 422, json={"mats": [b_mat]})
    assert (body["error"], body["params"]) == ("mat_other_channel", {
        "mat": b_mat, "block": "B", "channel": "b", "joined": "a"})
    body = refused("PUT", d.t(f"/referees/{one}"), 422, json={"mats": [99]})
    assert body["error"] == "mat_no_block" and body["params"]["mat"] == 99
    d.call("PUT", d.t(f"/referees/{one}"), json={"mats": [1]})
    body = refused("PUT", d.t(f"/referees/{two}"), 409, json={"mats": [1]})
    assert (body["error"], body["params"]) == ("mat_taken", {"mat": 1, "referee": "審判 一郎"})

    # a step out of order keeps its code, and says why with the figures
    d.call("POST", d.t("/rounds"), json={})
    body = refused("POST", d.t("/rounds"), 409, json={"blocks": ["A"]})
    mats = len(d.view()["rounds"][0]["matches"])
    assert body["error"] == "out_of_order" and body["params"] == {
        "why": "round_not_complete", "block": "A", "round": 1, "missing": mats,
        "problems": mats}


def test_a_flag_carries_the_players_name_and_number(server, desks):
    d = drawn(server, "flags", desks)
    d.call("POST", d.t("/rounds"), json={})
    p = d.view()["rounds"][0]["matches"][0]["players"][0]
    d.call("PATCH", d.t(f"/players/{p['no']}"), json={"withdrawn": True})
    f = next(f for f in d.view()["flags"] if f["code"] == "withdrawn_paired")
    assert f["params"] == {"player": p["no"], "name": p["name"]}
    # item 1: no start and no result until the round is paired again, by default only the
    # flagged block's (the other keeps its pairing)
    r = d.c.post(d.t("/rounds/1/start"), headers=server.op, json={})
    assert r.status_code == 409 and r.json()["error"] == "out_of_order", r.text
    assert r.json()["params"] == {"why": "pairing_stale", "block": f["block"], "round": 1,
                                  "names": p["name"]}
    before = {x["block"]: x["matches"] for x in d.view()["rounds"]}
    v = d.call("POST", d.t("/rounds/1/pair-again"), json={})
    after = {x["block"]: x["matches"] for x in v["rounds"]}
    assert p["no"] not in {q["no"] for m in after[f["block"]] for q in m["players"]}
    assert all(after[b] == before[b] for b in after if b != f["block"])
    assert not [x for x in v["flags"] if x["code"] == "withdrawn_paired"]
    r = d.c.post(d.t("/rounds/1/pair-again"), headers=server.op, json={})
    assert r.status_code == 409 and r.json()["params"] == {
        "why": "nothing_to_pair_again", "round": 1}, r.text


def test_a_name_is_corrected_a_second_tournament_opened_and_one_deleted(server, browser, desks):
    """Issue 22 item 9: a player's name corrected in place (what was typed survives a change
    the desk receives meanwhile); a second tournament from the bar; a tournament deleted with
    two presses; the history in this computer's time zone (named), by 本部, never "operator";
    the blocks' head says 人数, not an unfilled 「{n} 人」."""
    d = drawn(server, "fix", desks)
    errors: list[str] = []
    page = desk_page(browser, server, "fix", errors)
    page.click("#tabs [data-tab=blocks]")
    expect(page.locator("#blocks thead")).to_contain_text("人数")
    assert "{n}" not in page.locator("#blocks thead").inner_text()

    page.click("#tabs [data-tab=entries]")
    row = page.locator("#players tr[data-no='1']")
    row.locator("button.edit-player").click()
    row.locator("input[data-field=name]").fill("山田 訂正")
    d.call("PATCH", d.t("/players/2"), json={"withdrawn": True})  # the page redraws
    expect(page.locator("#players tr[data-no='2']")).to_have_class("withdrawn")
    expect(row.locator("input[data-field=name]")).to_have_value("山田 訂正")
    row.locator("button.save-player").click()
    expect(row.locator("td").nth(1)).to_have_text("山田 訂正")
    assert next(p for p in d.view()["players"] if p["no"] == 1)["name"] == "山田 訂正"

    # a result the desk entered (a block read by a person): the history says 本部
    block_of_1 = next(p["block"] for p in d.view()["players"] if p["no"] == 1)
    d.call("PATCH", d.t(f"/blocks/{block_of_1}"), json={"unassign_channel": True})
    d.call("POST", d.t("/rounds"), json={"blocks": [block_of_1]})
    m = next(r for r in d.view()["rounds"] if r["block"] == block_of_1)["matches"][0]
    cards = {str(p["no"]): i for i, p in enumerate(m["players"])}
    d.call("PUT", d.t(f"/rounds/1/mats/{m['mat']}"), json={"cards": cards})
    page.click("#tabs [data-tab=files]")
    hist = page.locator("#history")
    expect(hist.locator("tr")).to_have_count(2)
    text = hist.inner_text()
    assert "本部" in text and "operator" not in text, text
    zone = page.evaluate("Intl.DateTimeFormat().resolvedOptions().timeZone")
    assert f"時刻（{zone}）" in text, text

    # a second tournament from the bar
    page.click("#new-toggle")
    page.fill("#new-name", "二つ目の大会")
    page.fill("#new-id", "second")
    page.click("#new-create")
    expect(page.locator("#tournament option[value=second]")).to_have_count(1)
    ids = [x["id"] for x in d.call("GET", "/api/tournaments")]
    assert "second" in ids and "fix" in ids

    # deleted with two presses: the first only asks
    page.select_option("#tournament", "second")
    expect(page.locator("#t-title")).to_contain_text("二つ目の大会")
    page.click("#tabs [data-tab=files]")
    page.click("#delete-tournament")
    expect(page.locator("#delete-tournament")).to_contain_text("もう一度押すと「二つ目の大会」")
    assert "second" in [x["id"] for x in d.call("GET", "/api/tournaments")]
    page.click("#delete-tournament")
    expect(page.locator("#tournament option[value=second]")).to_have_count(0)
    assert "second" not in [x["id"] for x in d.call("GET", "/api/tournaments")]
    assert errors == []
    page.context.close()


def test_an_absent_player_is_entered_with_two_presses(server, browser, desks):
    """不戦勝 from the desk: 欠席 beside a player asks again, naming who wins; the second press
    enters the opponent's desk.walkover_cards (here the one card read) against 0."""
    d = drawn(server, "walk", desks)
    block = d.view()["blocks"][0]["name"]
    d.call("PATCH", d.t(f"/blocks/{block}"), json={"unassign_channel": True})  # read by a person
    d.call("POST", d.t("/rounds"), json={"blocks": [block]})
    m = next(r for r in d.view()["rounds"] if r["block"] == block)["matches"][0]
    gone, other = m["players"]
    errors: list[str] = []
    page = desk_page(browser, server, "walk", errors)
    page.click("#tabs [data-tab=rounds]")
    row = page.locator(f"#rounds .match[data-mat='{m['mat']}']")
    button = row.locator(f".absent-btn[data-no='{gone['no']}']")
    button.click()
    expect(button).to_contain_text(f"{other['name']} 不戦勝")
    first = next(r for r in d.view()["rounds"] if r["block"] == block)["matches"][0]
    assert first["result"] is None
    button.click()
    expect(row.locator(".o.win")).to_have_count(1)
    got = next(r for r in d.view()["rounds"] if r["block"] == block)["matches"][0]
    assert got["result"]["cards"] == [0, 1] and got["outcome"] == ["loss", "win"]
    assert errors == []
    page.context.close()
