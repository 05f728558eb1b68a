"""The desk's figures: how long pairing a round takes (block sizes of a real day, six rounds,
several seeds) and whether any rematch was needed; how long one result takes to be durable in
SQLite (WAL, synchronous=FULL: the commit returns once it is on disk)."""

from __future__ import annotations

import statistics
import tempfile
import time

from desk import tournament as ops
from desk.entries import Entry
from desk.model import Method, Settings, Tournament
from desk.pairing import Entrant, pair_round
from desk.repository import open_repository

SEEDS = 5


def pairing() -> None:
    print("pairing a round (6 preliminary rounds, clubs of 3-5; ms per round)")
    print("players  median    max   rematches")
    for n in (9, 10, 11, 12, 20, 40):
        times: list[float] = []
        rematches = 0
        for seed in range(SEEDS):
            ents = [Entrant(i + 1, f"c{i % 4}") for i in range(n)]
            history: list[tuple[int, ...]] = []
            triples: dict[int, int] = {}
            for r in range(6):
                now = [Entrant(e.no, e.club, triples.get(e.no, 0)) for e in ents]
                t0 = time.perf_counter()
                p = pair_round(now, history, 6 - r, seed * 10 + r)
                times.append((time.perf_counter() - t0) * 1000)
                rematches += p.rematches
                for g in p.groups:
                    history.append(g)
                    if len(g) == 3:
                        for x in g:
                            triples[x] = triples.get(x, 0) + 1
        print(f"{n:7d}  {statistics.median(times):6.1f} {max(times):6.0f}   {rematches}")


def commits() -> None:
    with tempfile.TemporaryDirectory() as tmp:
        repo = open_repository(f"sqlite:///{tmp}/desk.sqlite3")
        t = Tournament("b", "bench", settings=Settings(rounds=6, cards=17))
        repo.create(t)
        for ch in (ops.add_players(t, [Entry(f"p{i}", club=f"c{i % 5}") for i in range(40)]),):
            repo.apply(t.id, t.version, ch)
            t = ops.apply(t, ch)
        ch = ops.draw_blocks(t, 4, Method.CLUBS, 1, ["a", "b", "c", "d"])
        repo.apply(t.id, t.version, ch)
        t = ops.apply(t, ch)
        for b in "ABCD":  # paired and read: results are entered once a round is read
            for step in (lambda t, b=b: ops.pair_next(t, b, "now"),
                         lambda t, b=b: ops.start_reading(t, b, 1, b.lower(), "now"),
                         lambda t, b=b: ops.confirm_reading(t, b, 1, 1, "j")):
                ch = step(t)
                repo.apply(t.id, t.version, ch)
                t = ops.apply(t, ch)
        lat: list[float] = []
        matches = [(r.number, m) for r in t.rounds for m in r.matches]
        for k in range(200):
            number, m = matches[k % len(matches)]
            cards = {p: (k + i) % 9 for i, p in enumerate(m.players)}
            ch2 = ops.record_result(t, number, m.mat, cards, None, "operator", "now")
            if ch2 is None:
                continue
            t0 = time.perf_counter()
            repo.apply(t.id, t.version, ch2)
            lat.append((time.perf_counter() - t0) * 1000)
            t = ops.apply(t, ch2)
        lat.sort()
        print(f"a result made durable (SQLite WAL, synchronous=FULL, {len(lat)} commits): "
              f"median {statistics.median(lat):.1f} ms, p99 {lat[int(len(lat) * 0.99) - 1]:.1f} ms")
        repo.close()


if __name__ == "__main__":
    pairing()
    commits()
