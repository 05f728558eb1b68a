"""Draining a process for an upgrade (cluster.drain): a cluster's process told to stop (SIGTERM)
while it reads a match hands it over between two cards, and the process that takes it reads on
by itself; a process stopped when no other is alive leaves the match to be recovered paused.

Real broker, real `yomite serve --bus` processes; what is asserted is in the broker's journal
(where the hand cut the programme, who lowered it, which card came next) and in the state the
survivor serves."""

import signal
import time
from pathlib import Path
from typing import Any

from tests.clusterprocs import (  # noqa: F401 (broker_fixture: the fixture `broker`)
    Cluster,
    broker_fixture,
    holders,
    journal_lines,
    start_reading,
    state,
    wait_for,
)
from tests.natsbroker import Broker

# cards long enough that the stop falls in a verse, a gap between cards long enough to be seen
MATCH = {"memorise_s": 1, "cards": 8, "prelude": {"enabled": False},
         "gaps": {"between_verses_s": 0.5, "between_cards_s": 1.5}}


def events(lines: list[dict[str, Any]], kind: str, referee: str) -> list[dict[str, Any]]:
    return [x for x in lines if x.get("type") == "event"
            and x["event"].get("type") == kind and x["event"].get("referee") == referee]


def segments(lines: list[dict[str, Any]]) -> list[dict[str, Any]]:
    return [f for x in lines if x.get("type") == "event" for f in x.get("facts", [])
            if f.get("fact") == "segment"]


def test_a_process_stopped_mid_verse_hands_its_match_over_at_the_cards_end(
        tmp_path: Path, broker: Broker) -> None:
    c = Cluster(tmp_path, broker, 2, ("main",), match=MATCH).start()
    try:
        owner = c.owner("main")
        other = c.others(owner)[0]
        start_reading(other, owner, "main")
        st = state(owner, "main")
        seg = st["match"]["segment"]
        assert seg["verse"] in ("kami", "shimo"), seg  # stopped while a verse is read
        card_then = st["match"]["card"]
        t0 = time.perf_counter()
        assert owner.proc is not None
        owner.proc.send_signal(signal.SIGTERM)

        def reading_on_at_other() -> dict[str, Any] | None:
            s = state(other, "main")
            m = s.get("match") or {}
            seg = m.get("segment") or {}
            return s if (not m.get("paused") and m.get("card", 0) > card_then
                         and seg.get("verse") == "kami") else None

        st = wait_for(reading_on_at_other, 60, "the next card read by the other process")
        took = time.perf_counter() - t0
        owner.proc.wait(30)
        # uvicorn ends by the signal it was stopped with, once shut down
        assert owner.proc.returncode in (0, -signal.SIGTERM), owner.log()[-2000:]
        assert "Application shutdown complete" in owner.log()
        assert "main" in c.describe(other)["owned"]
        assert holders(st) == []
        lines = journal_lines(broker.url, c.prefix, "main")
        # the hand was raised in the silence between two cards, nothing of a verse cut
        raised = events(lines, "hold", "@handover")
        assert len(raised) == 1, raised
        cuts = [f for f in raised[0]["facts"] if f.get("fact") == "cut"]
        assert [f["label"] for f in cuts] == ["gap_between_cards"], raised[0]
        assert cuts[0].get("verse") is None
        # lowered by the process that took the channel, with the recovery's own hand
        assert len(events(lines, "release", "@handover")) == 1
        assert len(events(lines, "release", "@recovered")) == 1
        # and the reading went on with the next card: no card read twice, none left out
        after = lines.index(raised[0])
        kami = [f["card"] for f in segments(lines[after:]) if f.get("label") == "card_kami"]
        before = [f["card"] for f in segments(lines[:after]) if f.get("label") == "card_kami"]
        assert kami and kami[0] == before[-1] + 1, (before, kami)
        assert before == list(range(1, len(before) + 1))
        print(f"stopped at card {card_then} ({seg['label']}); the next card read by the other "
              f"process {took:.2f} s after the SIGTERM")
    finally:
        c.stop()


def test_the_last_process_stopped_leaves_the_match_to_be_recovered_paused(
        tmp_path: Path, broker: Broker) -> None:
    """No one to hand over to: it stops at once, and a process started later recovers the
    match paused by `@recovered` (nobody may be in the hall any more)."""
    c = Cluster(tmp_path, broker, 2, ("main",), match=MATCH).start()
    try:
        owner = c.owner("main")
        other = c.others(owner)[0]
        other.stop()
        wait_for(lambda: len(c.describe(owner)["nodes"]) == 1, 30, "one process left")
        start_reading(owner, owner, "main")
        t0 = time.perf_counter()
        owner.stop()
        stopped = time.perf_counter() - t0
        other.start()
        st = wait_for(lambda: ((s := state(other, "main")).get("match") or {}).get("paused") and s,
                      60, "the match recovered by the process started again")
        assert holders(st) == ["@recovered"]
        assert events(journal_lines(broker.url, c.prefix, "main"), "hold", "@handover") == []
        print(f"the last process stopped in {stopped:.2f} s")
    finally:
        c.stop()
