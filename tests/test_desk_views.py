"""The live pages' views (api/desk.py, api/desk_views.py): built once per version of the
tournament and shared by every page that waits for it, off the event loop for a large
tournament, and equal to the view built afresh. Run on the Desk itself (no HTTP, no hall): the
count of builds is what the server's load depends on (tests/test_desk_load.py measures that
load against a real server)."""

from __future__ import annotations

import asyncio
import json
import threading

import pytest

from desk import tournament as ops
from desk.views import desk_view, public_view
from hall import desk as desk_mod
from hall import deskviews as views_mod
from hall.config import parse_config
from hall.desk import Desk

from .desk_load import big_tournament

PAGES = 50


@pytest.fixture
async def desk(tmp_path):
    d = Desk(parse_config({
        "journal_dir": str(tmp_path / "journal"),
        "desk": {"database_url": f"sqlite:///{tmp_path / 'desk.sqlite3'}", "long_poll_s": 30},
    }), None)
    await d.start()
    yield d
    await d.stop()


async def parked(tasks: list[asyncio.Task[bytes]]) -> None:
    """Let every task run to its first wait (the long poll); none may have finished."""
    for _ in range(3):
        await asyncio.sleep(0)
    assert not any(t.done() for t in tasks)


def result(t, k: int):
    n = max(r.number for r in t.rounds)
    m = [m for r in t.rounds if r.number == n for m in r.matches][k]
    return ops.record_result(t, n, m.mat, {p: 1 + i + k % 3 for i, p in enumerate(m.players)},
                             None, "operator", f"at {k}")


async def test_fifty_pages_share_one_build_per_version(desk, monkeypatch):
    threads: set[str] = set()
    build = desk_mod.build_view

    def watched(kind, t):
        threads.add(threading.current_thread().name)
        return build(kind, t)

    monkeypatch.setattr(desk_mod, "build_view", watched)
    t = await desk.store(big_tournament(players=160, blocks=4, played=2))
    assert len(t.players) > views_mod.LARGE_VIEW

    bodies = await asyncio.gather(*(desk.view_json(t.id, "public", -1) for _ in range(PAGES)))
    assert desk.views.count["public"] == 1 and len({id(b) for b in bodies}) == 1
    assert threads == {"desk-views_0"}, "a large view is built off the event loop"
    want = public_view(desk.get(t.id))
    for b in want["blocks"]:  # no hall here: every round's channel is unknown
        b["reading"] = {"state": "no_channel", "phase": None, "paused": None, "card": None,
                        "cards_total": None}
    assert json.loads(bodies[0]) == want

    # every result wakes the fifty pages once, and they share one build of it
    for k in range(5):
        version = desk.get(t.id).version
        pages = [asyncio.create_task(desk.view_json(t.id, "public", version))
                 for _ in range(PAGES)]
        await parked(pages)
        await desk.change(t.id, lambda t, k=k: result(t, k))
        bodies = await asyncio.gather(*pages)
        assert {json.loads(b)["version"] for b in bodies} == {version + 1}
        assert desk.views.count["public"] == 2 + k
    # the desk's own view: the same, and equal to the view built afresh
    body = await desk.view_json(t.id, "desk")
    v = desk_view(desk.get(t.id))
    for r in v["rounds"]:
        r["live"] = {"state": "no_channel", "channel": "a"} if r["reading"] else None
    assert json.loads(body) == v and desk.views.count["desk"] == 1


async def test_a_burst_of_results_is_built_at_most_once_per_version(desk):
    t = await desk.store(big_tournament(players=160, blocks=4, played=2))
    first = t.version
    pages = [asyncio.create_task(desk.view_json(t.id, "public", first)) for _ in range(PAGES)]
    await parked(pages)
    changes = [asyncio.create_task(desk.change(t.id, lambda t, k=k: result(t, k)))
               for k in range(8)]
    await asyncio.gather(*changes)
    bodies = await asyncio.gather(*pages)
    last = desk.get(t.id).version
    assert last == first + 8
    assert all(json.loads(b)["version"] > first for b in bodies)
    assert desk.views.count["public"] <= 8
    # a page asking now is answered with the latest, built once more at most
    assert json.loads(await desk.view_json(t.id, "public"))["version"] == last
    assert desk.views.count["public"] <= 9


async def test_a_tournament_imported_again_is_not_answered_with_the_old_view(desk):
    t = await desk.store(big_tournament(players=20, blocks=2, played=1))
    await desk.change(t.id, lambda t: result(t, 0))
    old = json.loads(await desk.view_json(t.id, "public"))
    again = big_tournament(players=20, blocks=2, played=1)  # its version starts again
    again = again.__class__(**{**{f: getattr(again, f) for f in again.__slots__},
                               "name": "別の大会", "version": old["version"]})
    await desk.store(again, replace_existing=True)
    new = json.loads(await desk.view_json(t.id, "public"))
    assert new["name"] == "別の大会" and new["version"] == old["version"]
