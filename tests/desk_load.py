"""A big tournament's standings under load, for tests/test_desk_load.py and bench/hostile.py.

The red team's case (issue 25, item 6): 400 players in 8 blocks, five rounds played and the
sixth being read, imported into a real `yomite serve`; N standings pages (the projector's, no
login) long-polling `/public?after=version` as standings.js does; the desk entering one
result a second; and meanwhile a referee of another channel of the same server raising and
lowering its hand. What is measured is the hand's round trip (PUT/DELETE …/holds/{referee}:
the reply comes once the hold is applied and journalled)."""

from __future__ import annotations

import asyncio
import contextlib
import multiprocessing
import random
import re
import time
from dataclasses import dataclass, field
from typing import Any

import httpx2

from desk import tournament as ops
from desk.entries import Entry
from desk.export import to_document
from desk.model import Method, Settings, Tournament

VERSION = re.compile(rb'"version":\s*(\d+)')


LINK = "load-test-public-link-0123"  # the pages' public link (standings.js's ?view=)


def big_tournament(tid: str = "big", players: int = 400, blocks: int = 8, played: int = 5,
                   channel: str = "a", seed: int = 2025) -> Tournament:
    """`played` rounds of every block played and entered, the next one paired and read on
    `channel` (no result yet). Built with the desk's own steps, in memory."""
    rng = random.Random(seed)
    t = Tournament(tid, "五色百人一首 県大会", "2025-11-03", Settings(rounds=played + 1, cards=17),
                   "2025-11-03T08:00:00+00:00", lottery_seed=rng.randrange(10**6),
                   pairing_seed=rng.randrange(10**6), public_link=LINK)
    t = ops.apply(t, ops.add_players(t, [
        Entry(f"選手{i:03d}", f"せんしゅ{i:03d}", f"第{i % 23 + 1}小学校", f"{4 + i % 3}年")
        for i in range(1, players + 1)]))
    t = ops.apply(t, ops.draw_blocks(t, blocks, Method.CLUBS, rng.randrange(10**6), [channel]))
    for n in range(1, played + 2):
        for b in t.blocks:
            t = ops.apply(t, ops.pair_next(t, b.name, f"2025-11-03T09:{n:02d}:00+00:00"))
            t = ops.apply(t, ops.start_reading(t, b.name, n, channel, "now"))
            t = ops.apply(t, ops.confirm_reading(t, b.name, n, n, f"{b.name}{n}.jsonl"))
            if n > played:
                continue
            r = t.round_of(b.name, n)
            assert r is not None
            for m in r.matches:
                left, cards = 17, {}
                for p in m.players:
                    cards[p] = rng.randint(0, left // 2 + 1)
                    left -= cards[p]
                ch = ops.record_result(t, n, m.mat, cards, None, "operator", "now")
                assert ch is not None
                t = ops.apply(t, ch)
    return t


def document(t: Tournament) -> dict[str, Any]:
    return to_document(t)


@dataclass
class Load:
    holds_ms: list[float] = field(default_factory=list)  # each raise's and lower's round trip
    results: int = 0  # results the desk entered meanwhile
    responses: int = 0  # public views the pages received
    stale: int = 0  # responses a page had already seen (a long poll that timed out)

    def quantile(self, q: float) -> float:
        xs = sorted(self.holds_ms)
        return xs[min(len(xs) - 1, int(q * len(xs)))]


async def _page(c: httpx2.AsyncClient, tid: str, stop: asyncio.Event, load: Load) -> None:
    """standings.js's loop: the public view, then wait for the next version."""
    after = -1
    while not stop.is_set():
        r = await c.get(f"/api/tournaments/{tid}/public", params={"after": after, "view": LINK})
        r.raise_for_status()
        m = VERSION.search(r.content[:4096]) or VERSION.search(r.content)
        assert m is not None
        v = int(m.group(1))
        load.responses += 1
        load.stale += v <= after
        after = v


async def _desk(c: httpx2.AsyncClient, tid: str, t: Tournament, op: dict[str, str],
                stop: asyncio.Event, load: Load, every_s: float) -> None:
    """One result a second at the last round's mats, round and round (corrections after the
    first pass), as the operator; each one a change (never the result the mat already has)."""
    r_number = max(r.number for r in t.rounds)
    now = await c.get(f"/api/tournaments/{tid}/rounds/{r_number}", headers=op)
    now.raise_for_status()
    mats = [(m["mat"], [p["no"] for p in m["players"]],
             tuple(m["result"]["cards"]) if m["result"] else None)
            for block in now.json() for m in block["matches"]]
    k = 0
    while not stop.is_set():
        mat, players, before = mats[k % len(mats)]
        cards = tuple(1 + i + (k // len(mats)) % 3 for i in range(len(players)))
        if cards == before:
            cards = tuple(c + 1 for c in cards)
        r = await c.put(f"/api/tournaments/{tid}/rounds/{r_number}/mats/{mat}",
                        json={"cards": dict(zip(map(str, players), cards, strict=True))},
                        headers=op)
        assert r.status_code == 200, r.text
        mats[k % len(mats)] = (mat, players, cards)
        load.results += 1
        k += 1
        with contextlib.suppress(TimeoutError):  # the pace: a result every `every_s`
            await asyncio.wait_for(stop.wait(), every_s)


async def _hands(base: str, path: str, headers: dict[str, str], stop: asyncio.Event,
                 load: Load, every_s: float) -> None:
    """The referee's hand up, then down, then up..., one every `every_s` whether or not the
    last one was answered (a hand is raised when the card is disputed, not when the server is
    ready): the round trips sample the run evenly in time, so a loop that is kept busy most of
    the time shows in the median, not only in the tail."""
    async def one(c: httpx2.AsyncClient, method: str) -> None:
        t0 = time.perf_counter()
        r = await c.request(method, path, headers=headers)
        load.holds_ms.append((time.perf_counter() - t0) * 1000)
        assert r.status_code == 200, r.text

    async with httpx2.AsyncClient(base_url=base, timeout=60) as c:
        probes = []
        k = 0
        while not stop.is_set():
            probes.append(asyncio.create_task(one(c, "PUT" if k % 2 == 0 else "DELETE")))
            k += 1
            await asyncio.sleep(every_s)
        await asyncio.gather(*probes)
        await c.delete(path, headers=headers)  # the hand down at the end


def prepare_channel(base: str, op: dict[str, str], channel: str) -> tuple[str, dict[str, str]]:
    """A match prepared and started on `channel` (its memorisation long enough to outlast the
    run), and a referee joined to it: the hold's path and the referee's headers."""
    with httpx2.Client(base_url=base, timeout=30) as c:
        c.post(f"/api/channels/{channel}/match", json={"seed": 1}, headers=op).raise_for_status()
        c.post(f"/api/channels/{channel}/match/start", headers=op).raise_for_status()
        pin = c.get(f"/api/channels/{channel}/pin", headers=op).json()["pin"]
        r = c.post(f"/api/channels/{channel}/referees", json={"pin": pin, "name": "審判 hold"})
        r.raise_for_status()
        ref = r.json()
    return (f"/api/channels/{channel}/holds/{ref['referee']}",
            {"Authorization": f"Bearer {ref['token']}"})


def _pages_main(base: str, tid: str, pages: int, stop: Any, counts: Any) -> None:
    """The pages' process: `pages` long polls until `stop` is set; what they got in `counts`
    (responses, stale)."""

    async def main() -> None:
        load = Load()
        done = asyncio.Event()
        limits = httpx2.Limits(max_connections=pages, max_keepalive_connections=pages)
        async with httpx2.AsyncClient(base_url=base, timeout=60, limits=limits) as c:
            tasks = [asyncio.create_task(_page(c, tid, done, load)) for _ in range(pages)]
            while not stop.is_set():
                await asyncio.sleep(0.05)
                counts[0], counts[1] = load.responses, load.stale
            # a page's last long poll ends with the next result or its timeout: not waited for
            for task in tasks:
                task.cancel()
            await asyncio.gather(*tasks, return_exceptions=True)
        counts[0], counts[1] = load.responses, load.stale

    asyncio.run(main())


async def run(base: str, op: dict[str, str], t: Tournament, hold: tuple[str, dict[str, str]],
              pages: int, seconds: float, result_every_s: float = 1.0,
              hold_every_s: float = 0.05, min_results: int = 0,
              max_s: float = 180.0) -> Load:
    """`pages` standings pages polling and the desk entering results for `seconds`, the
    referee's hand going up and down all the while. The pages run in a process of their own
    (as the projectors are other machines): reading fifty views at once must not delay this
    process's reading of the hold's reply, which is what is measured. `min_results`: the run
    goes on past `seconds` until the desk has entered that many (a busy machine enters them
    more slowly: the load is the results, not the seconds), up to `max_s`."""
    load = Load()
    stop = asyncio.Event()
    ctx = multiprocessing.get_context("spawn")
    page_stop, counts = ctx.Event(), ctx.Array("q", 2)
    proc = None
    if pages:
        proc = ctx.Process(target=_pages_main, args=(base, t.id, pages, page_stop, counts),
                           daemon=True)
        proc.start()
    try:
        async with httpx2.AsyncClient(base_url=base, timeout=60) as c:
            tasks = [asyncio.create_task(_desk(c, t.id, t, op, stop, load, result_every_s)),
                     asyncio.create_task(_hands(base, hold[0], hold[1], stop, load,
                                                hold_every_s))]
            loop = asyncio.get_running_loop()
            until, deadline = loop.time() + seconds, loop.time() + max_s
            while loop.time() < until or (load.results < min_results
                                          and loop.time() < deadline):
                await asyncio.sleep(0.05)
            stop.set()
            await asyncio.gather(*tasks)
    finally:
        if proc is not None:
            page_stop.set()
            await asyncio.to_thread(proc.join, 30)
            if proc.is_alive():
                proc.kill()
                proc.join()
            load.responses, load.stale = counts[0], counts[1]
    return load
