"""Card secrecy (issue 25, items 1, 2, 3, 5): no client but the operator and the speakers it
admitted learns anything about a card before its upper verse begins: not its identity, the
order, the seed, a clip's URL, length or timing. Against a real `yomite serve`, a client with
no login (and a referee) tries every way the red team used:

- the seed and colours in the public state, then the open shuffle (`Deck.build(colors, seed)`);
- every state a viewer's and a referee's socket get during a whole match;
- the speaker audience (the schedule names the next card's clip ahead) without the speaker key;
- a clip's URL fetched without the key, with a referee's token, with another channel's key;
- a verse's length from the public state (`segment.ends_s - started_s`);
- the same verse at the same URL in another match;
- a seed typed by a teacher: the order it gives is this server's alone.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import httpx2
import pytest
from websockets.exceptions import ConnectionClosed
from websockets.sync.client import connect

from reader.deck import Deck

from .serverproc import Server

pytestmark = pytest.mark.server

TOKEN = "secrecy-operator-token-0123456789abcdef"
CONFIG: dict[str, Any] = {
    "match": {"memorise_s": 1, "cards": 3, "prelude": {"enabled": False},
              "gaps": {"between_verses_s": 0.2, "between_cards_s": 0.2}},
    "voice": {"engine": "estimate", "speed": 3.0},
    "audio": {"output": "null"},
    "server": {"channels": [{"name": "main", "output": "browser"},
                            {"name": "other", "output": "browser"}]},
}


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Any:
    s = Server(tmp_path_factory.mktemp("secrecy"), CONFIG, TOKEN).start()
    try:
        yield s
    finally:
        s.stop()


def op(server: Server) -> httpx2.Client:
    return httpx2.Client(base_url=server.base, headers=server.op, timeout=30)


def speaker_key(server: Server, ch: str) -> str:
    with op(server) as c:
        return str(c.get(f"/api/channels/{ch}/speakers").json()["url"].split("#key=")[1])


def referee_token(server: Server) -> str:
    with op(server) as c:
        pin = c.get("/api/channels/main/pin").json()["pin"]
    r = httpx2.post(f"{server.base}/api/channels/main/referees",
                    json={"pin": pin, "name": "mat 1"}, timeout=30)
    return str(r.json()["token"])


def check_public(state: dict[str, Any], seen: dict[str, Any]) -> None:
    """What a state for someone other than the operator may hold."""
    assert "pin" not in state and "output_stats" not in state
    m = state.get("match")
    if not m:
        return
    over = m["phase"] in ("finished", "closed", "aborted")
    assert m["seed"] is None or over, f"the seed during the match: {m['phase']}"
    for c in m["cards"]:
        assert c["finished_s"] is not None or c["poem"] is None, c
    for part in ("segment", "cut"):
        if m.get(part):
            assert m[part]["poem"] is None, m[part]
    seg = m.get("segment")
    if seg and seg["kind"] == "verse":
        assert seg["ends_s"] is None, f"a verse's end (its length names the poem): {seg}"
        seen["verses"] += 1
    assert "left" not in (m.get("kimariji") or {})
    seen["states"] += 1


def watch_match(url: str, stop_phase: str = "finished") -> dict[str, Any]:
    """Read a socket's messages until the match reaches `stop_phase`; check each state."""
    seen: dict[str, Any] = {"states": 0, "verses": 0, "types": set()}
    with connect(url, max_size=None) as ws:
        while True:
            msg = json.loads(ws.recv(timeout=60))
            seen["types"].add(msg["type"])
            if msg["type"] == "state":
                check_public(msg, seen)
                if (msg.get("match") or {}).get("phase") == stop_phase:
                    return seen


def test_no_one_but_the_operator_and_admitted_speakers_learns_a_card_early(
        server: Server) -> None:
    import threading

    ws = f"ws://127.0.0.1:{server.port}/ws/channels/main"
    with op(server) as c:
        assert c.post("/api/channels/main/match", json={"colors": ["blue"]}).status_code == 200
        prepared = c.get("/api/channels/main").json()["match"]
    assert prepared["seed"] is not None  # the operator sees it
    ref = referee_token(server)
    public = httpx2.get(f"{server.base}/api/channels/main", timeout=30).json()
    assert public["match"]["seed"] is None
    check_public(public, {"states": 0, "verses": 0})
    for auth in ({}, {"Authorization": f"Bearer {ref}"}):
        for path in ("/api/channels/main/match/log", "/api/channels/main/matches"):
            assert httpx2.get(server.base + path, headers=auth, timeout=30).status_code in (
                401, 403), path

    # the speaker audience without the key (no token, a referee's): refused, nothing sent
    for url in (f"{ws}?audience=speaker", f"{ws}?audience=speaker&token={ref}",
                f"{ws}?audience=speaker&token=not-a-key"):
        got: list[str] = []
        with connect(url) as s:
            try:
                while True:
                    got.append(json.loads(s.recv(timeout=10))["type"])
            except ConnectionClosed as e:
                assert e.rcvd is not None and e.rcvd.code == 1008, e
                assert e.rcvd.reason == "speaker_key_needed", e.rcvd.reason
        assert "speaker" not in got, got

    # a whole match watched by a viewer and a referee, while an admitted speaker takes notes
    results: dict[str, Any] = {}

    def watch(name: str, url: str) -> None:
        results[name] = watch_match(url)

    watchers = [threading.Thread(target=watch, args=(n, u)) for n, u in
                (("viewer", ws), ("referee", f"{ws}?token={ref}"))]
    for t in watchers:
        t.start()
    key = speaker_key(server, "main")
    urls: set[str] = set()
    with connect(f"{ws}?audience=speaker&token={key}", max_size=None) as spk:
        with op(server) as c:
            assert c.post("/api/channels/main/match/start").status_code == 200
        while True:
            msg = json.loads(spk.recv(timeout=60))
            if msg["type"] == "speaker":
                urls |= {x["url"] for x in msg["clips"]} | set(msg["prefetch"])
            if msg["type"] == "state" and msg["match"]["phase"] == "finished":
                break
    for t in watchers:
        t.join(90)
    for name in ("viewer", "referee"):
        assert results[name]["verses"] > 0 and "speaker" not in results[name]["types"], (
            name, results[name])
    assert urls, "the admitted speaker got no clip"

    # the clips: to this channel's speakers and the operator only
    other = speaker_key(server, "other")
    url = sorted(urls)[0]
    for auth, status in (({}, 401), ({"Authorization": f"Bearer {ref}"}, 401),
                         ({"Authorization": f"Bearer {other}"}, 404),
                         ({"Authorization": f"Bearer {key}"}, 200),
                         (server.op, 200)):
        r = httpx2.get(server.base + url, headers=auth, timeout=30)
        assert r.status_code == status, (auth, r.status_code, r.text[:200])

    # after the match: the seed is public (感想戦), and it does not give the order
    with op(server) as c:
        header = c.get("/api/channels/main/match/log").json()["header"]
    done = httpx2.get(f"{server.base}/api/channels/main", timeout=30).json()["match"]
    assert done["seed"] == header["deck"]["seed"]
    order = header["deck"]["order"]
    assert list(Deck.build(colors=["blue"], seed=done["seed"]).order) != order

    # the next match of the same deck: the same poems have new clip URLs
    with op(server) as c:
        assert c.post("/api/channels/main/match/replay").status_code == 200
        assert c.post("/api/channels/main/match/start").status_code == 200
    with connect(f"{ws}?audience=speaker&token={key}", max_size=None) as spk:
        again: set[str] = set()
        while not again:
            msg = json.loads(spk.recv(timeout=60))
            if msg["type"] == "speaker":
                again |= {x["url"] for x in msg["clips"]} | set(msg["prefetch"])
    assert not again & urls, "a clip URL of the last match named the same clip again"
    with op(server) as c:
        c.post("/api/channels/main/match/abort")


def test_a_typed_seed_gives_this_servers_order_only(server: Server, tmp_path: Path) -> None:
    """A teacher's seed replays an order on this server; it is not the open shuffle's, nor
    another server's (each keys its orders with its own secret: no one can try seeds)."""
    def order_on(s: Server, seed: int) -> list[int]:
        with httpx2.Client(base_url=s.base, headers=s.op, timeout=30) as c:
            c.post("/api/channels/main/match/abort")
            r = c.post("/api/channels/main/match", json={"colors": ["blue"], "seed": seed})
            assert r.status_code == 200, r.text
            return list(c.get("/api/channels/main/match/log").json()["header"]["deck"]["order"])

    first = order_on(server, 77)
    assert order_on(server, 77) == first  # the same seed, the same order, on this server
    assert first != list(Deck.build(colors=["blue"], seed=77).order)
    elsewhere = Server(tmp_path, CONFIG, TOKEN).start()
    try:
        assert order_on(elsewhere, 77) != first
    finally:
        elsewhere.stop()
