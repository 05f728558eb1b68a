"""A simulated Goshiki tournament day for the desk's tests against a real `yomite serve`: the
config (one channel per block, null audio, the estimate voice, short timings), the entries CSV,
the referees, and an independent computation of the rules to check the standings with."""

from __future__ import annotations

import hashlib
import itertools
import random
import time
from collections.abc import Iterator
from typing import Any

import httpx2
import pytest

from .chromium import require_chromium
from .serverproc import Server

CHANNELS = ["a", "b", "c", "d"]
CARDS = 1  # cards read a match in these tests (the rules' 17 only lengthen every reading)


def config(channels: list[str] = CHANNELS) -> dict[str, Any]:
    return {
        "match": {"memorise_s": 0, "cards": CARDS, "prelude": {"enabled": False},
                  "gaps": {"after_call_s": 0.05, "between_verses_s": 0.05,
                           "between_cards_s": 0.05, "after_bow_s": 0.05,
                           "before_move_s": 0.05},
                  "resume": {"lead_in_s": 0.05}},
        "voice": {"engine": "estimate", "speed": 3.0},
        "audio": {"output": "null"},
        "server": {"channels": [{"name": c} for c in channels],
                   "security": {"pin_attempts_per_minute": 1000}},
        "desk": {"database_url": "sqlite:///var/desk.sqlite3", "long_poll_s": 2},
    }


SCHOOLS = ["東小", "西小", "南小", "北小", "中央小", "山手小", "川口小", "緑丘小"]


def entries_csv(n: int = 40) -> bytes:
    """Shift_JIS, as Japanese Excel saves a CSV."""
    rows = ["氏名,ふりがな,所属,学年"]
    for i in range(1, n + 1):
        rows.append(f"選手{i:02d},せんしゅ{i:02d},{SCHOOLS[i % len(SCHOOLS)]},{4 + i % 3}年")
    return ("\r\n".join(rows) + "\r\n").encode("cp932")


class Desk:
    """The operator's and the referees' calls, each checked for success."""

    def __init__(self, base: str, op: dict[str, str], tid: str = "day") -> None:
        self.c = httpx2.Client(base_url=base, timeout=20)
        self.op = op
        self.tid = tid
        self.referees: dict[str, dict[str, Any]] = {}  # referee id -> {token, channel, mats}

    def call(self, method: str, path: str, *, headers: dict[str, str] | None = None,
             ok: int = 200, **kw: Any) -> Any:
        r = self.c.request(method, path, headers=self.op if headers is None else headers, **kw)
        assert r.status_code == ok, (method, path, r.status_code, r.text)
        return r.json() if r.headers.get("content-type", "").startswith("application/json") \
            else r.text

    def close(self) -> None:
        self.c.close()

    def t(self, path: str = "") -> str:
        return f"/api/tournaments/{self.tid}{path}"

    def view(self) -> dict[str, Any]:
        return self.call("GET", self.t())

    def join_referees(self) -> None:
        """One referee per two mats of each block, joined with its channel's PIN."""
        v = self.view()
        for b in v["blocks"]:
            ch = b["channel"]
            pin = self.call("GET", f"/api/channels/{ch}/pin")["pin"]
            mats = list(range(b["mats"][0], b["mats"][1] + 1))
            for k in range(0, len(mats), 2):
                mine = mats[k:k + 2]
                body = self.call("POST", f"/api/channels/{ch}/referees", headers={},
                                 json={"pin": pin, "name": f"審判 {b['name']}{k // 2 + 1}"})
                self.call("PUT", self.t(f"/referees/{body['referee']}"), json={"mats": mine})
                self.referees[body["referee"]] = {
                    "headers": {"Authorization": f"Bearer {body['token']}"},
                    "channel": ch, "mats": mine}

    def referee_of(self, mat: int) -> dict[str, str]:
        return next(r["headers"] for r in self.referees.values() if mat in r["mats"])

    def start_round(self, number: int, **body: Any) -> Any:
        """Start round `number`; where its channels read 礼 alone and wait (round 1 and the
        final, rule 2), say the mats are ready once the bow is over (札を覚えてください)."""
        out = self.call("POST", self.t(f"/rounds/{number}/start"), json=body or None)
        waiting = [s["channel"] for s in out["started"] if s["waits_after_bow"]]
        if waiting:
            self.wait_channels(waiting, "ready", bowed=True)
            told = self.call("POST", self.t(f"/rounds/{number}/memorise"), json={})
            assert sorted(told["memorising"]) == sorted(waiting), told
        return out

    def wait_channels(self, channels: list[str], phase: str, timeout: float = 120,
                      bowed: bool = False) -> None:
        deadline = time.monotonic() + timeout
        left = set(channels)
        while left and time.monotonic() < deadline:
            for ch in list(left):
                m = self.call("GET", f"/api/channels/{ch}")["match"]
                if m and m["phase"] == phase and (m["bowed"] or not bowed):
                    left.discard(ch)
            time.sleep(0.1)
        assert not left, f"channels {left} did not reach {phase}"


def lottery(seed: int, nos: list[int]) -> dict[int, int]:
    """The rules' lottery as the desk documents it: players ordered by
    sha256("yomite-lottery:<seed>:<no>"), computed here without the desk's code."""
    order = sorted(nos, key=lambda no: hashlib.sha256(
        f"yomite-lottery:{seed}:{no}".encode()).digest())
    return {no: i for i, no in enumerate(order, 1)}


def expected_standings(matches: list[tuple[tuple[int, ...], tuple[int, ...]]],
                       members: list[int], lots: dict[int, int]) -> list[tuple[int, int, int]]:
    """(no, wins, cards) in the rules' order, from (players, cards) of every match played:
    1-1 more cards wins; 3 players: the top two win unless 2nd and 3rd are equal (then only
    the 1st); then wins, cards, lottery."""
    wins = dict.fromkeys(members, 0)
    cards = dict.fromkeys(members, 0)
    for players, got in matches:
        for p, c in zip(players, got, strict=True):
            cards[p] += c
        if len(players) == 2:
            if got[0] != got[1]:
                wins[players[got.index(max(got))]] += 1
            continue
        ranked = sorted(zip(got, players, strict=True), reverse=True)
        (c1, p1), (c2, p2), (c3, _p3) = ranked
        if c1 == c2 == c3:
            continue
        if c2 == c3:
            wins[p1] += 1
        else:
            wins[p1] += 1
            wins[p2] += 1
    order = sorted(members, key=lambda p: (-wins[p], -cards[p], lots[p]))
    return [(p, wins[p], cards[p]) for p in order]


def random_result(rng: random.Random, players: list[int], read: int) -> list[int]:
    """Cards taken that add up to at most the cards read."""
    left = read
    out = []
    for _ in players:
        c = rng.randint(0, left)
        out.append(c)
        left -= c
    rng.shuffle(out)
    return out


def no_rematches(groups: list[tuple[int, ...]]) -> bool:
    pairs = [frozenset(p) for g in groups for p in itertools.combinations(g, 2)]
    return len(pairs) == len(set(pairs))


def desk_server(tmp_path_factory: pytest.TempPathFactory, name: str, token: str,
                channels: list[str] = CHANNELS, chromium: bool = True) -> Iterator[Server]:
    """A real `yomite serve` with `config(channels)` for a module's desk tests (for pages,
    Chromium is required first), stopped however they end: `yield from` it in a fixture."""
    if chromium:
        require_chromium()
    s = Server(tmp_path_factory.mktemp(name), config(channels), token).start()
    try:
        yield s
    finally:
        s.stop()
