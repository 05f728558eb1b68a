"""Referee presses through a really impaired link (issue 47, item 7): a real `yomite serve` in one
network namespace, three scripted phones that press as referee.js does (tests/press_phones.py)
in another, while a match is read (estimate voice, no sound). The operator watches from the root
namespace on a clean link. Two profiles of the phones' link:
- `lossy`: packets lost (iptables' random drop, 8 % each way) with 3 s outages (everything
  dropped) in between;
- `wifi`: every byte through a relay in the phones' namespace that delays it 80 ± 40 ms
  (tests/delayrelay.py, its jitter drawn per chunk), 2 % loss, and outages of 12 s and 3 s.

Counted, from the phones' answers, the server's verdicts (its log) and the match's journal:
- 0 presses lost silently: each was answered applied, refused or superseded, or the phone said
  it failed (no answer by the age limit);
- 0 applied twice: one journal line per move applied; no move the phone was told was refused or
  superseded was applied; a move the phone gave up on was applied only within the age limit;
- 0 applied on a later card or verse than the one the phone saw, beyond the grace (the journal's
  own timeline says what was read when each hold was applied);
- at the end every hand is down (each phone's last press lowered it).
"""

from __future__ import annotations

import json
import re
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import httpx2
import pytest

from tests import netns
from tests.delayrelay import Relay

from .serverproc import ROOT, Server

pytestmark = pytest.mark.server

TOKEN = "presses-netns-operator-token-0123456789"
SECONDS = 40.0
GRACE_S, MAX_AGE_S = 1.0, 2.0  # server.referees.press_grace_s, press_max_age_s: the defaults
CONFIG: dict[str, Any] = {
    "match": {"memorise_s": 1, "cards": 20, "resume": {"lead_in_s": 0.5},
              "gaps": {"after_bow_s": 0.5, "after_call_s": 0.5, "between_verses_s": 0.5,
                       "between_cards_s": 0.5, "repeat_s": 0.5, "before_move_s": 0.5}},
    "voice": {"engine": "estimate"},
    "audio": {"output": "null"},
}
VERDICT = re.compile(r"channel main: (\S+)'s (hold|release) (?:refused: )?(\w+) \(move (\d+), "
                     r"age ([\d.]+ s|-), moved on ([\d.]+ s|-) before, at ([\d.e+-]+)\)")
RANK = {"kami": 1, "shimo": 2}
GAP_AFTER = {"gap_between_verses": 1, "gap_repeat": 2, "gap_between_cards": 2}


def position(entry: dict[str, Any]) -> tuple[int, int] | None:
    """Where a timeline entry is in the reading: (card, rank), None when nothing is read."""
    if entry.get("card") is None or entry["kind"] not in ("verse", "prelude", "gap"):
        return None
    if entry.get("verse") in RANK:
        return entry["card"], RANK[entry["verse"]]
    return entry["card"], GAP_AFTER.get(entry.get("label", ""), 0)


def past(here: tuple[int, int], seen: tuple[int, int]) -> bool:
    if here[0] != seen[0]:
        return here[0] > seen[0]
    return seen[1] != 0 and here[1] > seen[1]


# a profile: (loss, outages in turn (s), relay delay and jitter (ms), or None: no relay)
PROFILES: dict[str, tuple[float, tuple[float, ...], tuple[float, float] | None]] = {
    "lossy": (0.08, (3.0,), None),
    "wifi": (0.02, (12.0, 3.0), (80.0, 40.0)),
}


@pytest.mark.parametrize("profile", sorted(PROFILES))
def test_presses_through_loss_and_outages_are_applied_once_and_never_late(
        tmp_path: Path, profile: str) -> None:
    netns.require()
    loss, outages, relayed = PROFILES[profile]
    with netns.Net() as net:
        srv, ph = net.host("srv"), net.host("ph")
        s = Server(tmp_path, CONFIG, TOKEN, host=srv.ip, netns=srv.ns).start()
        child = None
        relay: Relay | None = None
        try:
            base = s.base
            if relayed is not None:  # the phones reach the server only through the relay
                relay = Relay(("127.0.0.1", 0), (srv.ip, s.port), relayed[0], popen=ph.popen,
                              jitter_ms=relayed[1], seed=47).start()
                base = f"http://127.0.0.1:{relay.port}"
            with httpx2.Client(base_url=s.base, headers=s.op, timeout=30) as c:
                assert c.post("/api/channels/main/match", json={"seed": 5}).status_code == 200
                assert c.post("/api/channels/main/match/start").status_code == 200
                pin = c.get("/api/channels/main/pin").json()["pin"]
                refs = [c.post("/api/channels/main/referees",
                               json={"pin": pin, "name": f"p{i}"}).json() for i in range(3)]
            child = ph.popen([sys.executable, "-m", "tests.press_phones", base,
                              str(SECONDS), "47", *[r["token"] for r in refs]],
                             cwd=ROOT, stdout=subprocess.PIPE, text=True)
            assert child.stdout is not None
            assert child.stdout.readline().strip() == "PRESSING"
            t0 = time.monotonic()
            cuts: list[float] = []
            while time.monotonic() - t0 < SECONDS - 8:
                ph.drop(srv.ip, loss, port=s.port)
                time.sleep(5)
                ph.heal()
                outage = outages[len(cuts) % len(outages)]
                if time.monotonic() - t0 + outage > SECONDS - 3:
                    continue
                ph.cut(srv.ip, port=s.port)
                cuts.append(outage)
                time.sleep(outage)
                ph.heal()
            out = child.stdout.read()
            assert child.wait(60) == 0
            phones = json.loads(out.strip().splitlines()[-1])
            time.sleep(2)  # the last releases (paced by the referees' budgets) applied
            with httpx2.Client(base_url=s.base, headers=s.op, timeout=30) as c:
                state = c.get("/api/channels/main").json()
                log = c.get("/api/channels/main/match/log").json()
        finally:
            if child is not None and child.poll() is None:
                child.kill()
                child.wait(10)
            if relay is not None:
                relay.stop()
            s.stop()
        server_log = s.log()

    verdicts: dict[tuple[str, int], list[dict[str, Any]]] = {}
    for m in VERDICT.finditer(server_log):
        ref, kind, outcome, move, age, _late, at = m.groups()
        verdicts.setdefault((ref, int(move)), []).append({
            "kind": kind, "outcome": outcome, "at": float(at),
            "age": None if age == "-" else float(age.split()[0])})
    journal_holds: dict[str, int] = {}
    for r in log["records"]:
        ev = r.get("event") or {}
        if ev.get("type") == "hold":
            journal_holds[ev["referee"]] = journal_holds.get(ev["referee"], 0) + 1
    timeline = [e for e in log["timeline"] if "start_s" in e]

    def reading_at(t: float) -> tuple[dict[str, Any] | None, float | None]:
        """What was read at `t`, and since when the reading was past a given position."""
        for e in timeline:
            if e["start_s"] <= t < e.get("end_s", float("inf")):
                return e, None
        return None, None

    counts = {"applied": 0, "refused": 0, "superseded": 0, "gave_up": 0}
    silent, twice, wrongly, late_after_gave_up, later_verse = [], [], [], [], []
    gave_up_applied = within_grace = 0
    for phone in phones:
        rid = phone["referee"]
        applied_holds = 0
        for p in phone["presses"]:
            outcome = p["outcome"]
            if outcome not in counts:
                silent.append(p)
                continue
            counts[outcome] += 1
            done = [v for v in verdicts.get((rid, p["move"]), []) if v["outcome"] == "applied"]
            if len(done) > 1:
                twice.append(p)
            if done and outcome in ("refused", "superseded"):
                wrongly.append(p)
            if done and outcome == "gave_up":
                gave_up_applied += 1
                if p["want"] and (done[0]["age"] is None or done[0]["age"] > MAX_AGE_S):
                    late_after_gave_up.append(p)
            if not (done and p["want"]):
                continue
            applied_holds += 1
            # what the journal says was read when the hold was applied
            at = done[0]["at"]
            entry, _ = reading_at(at)
            here = position(entry) if entry else None
            seen_card = p["seen"]["card"]
            if here is None or seen_card is None:
                continue
            seen = (seen_card, RANK.get(p["seen"]["verse"] or "", 0))
            if past(here, seen):
                # since when the reading had been past what the phone saw
                first = min(e["start_s"] for e in timeline
                            if (q := position(e)) is not None and past(q, seen)
                            and e["start_s"] <= at)
                within_grace += 1
                if at - first > GRACE_S + 0.05:
                    later_verse.append({**p, "applied_at": at, "past_since": first,
                                        "read": entry})
        # one journal line per hold applied: nothing applied twice, nothing extra
        assert journal_holds.get(rid, 0) == applied_holds, (rid, journal_holds, applied_holds)

    presses = sum(counts.values()) + len(silent)
    through = f", through {relayed[0]:.0f} ± {relayed[1]:.0f} ms" if relayed else ""
    print(f"\n{profile}: {presses} presses by {len(phones)} phones over {SECONDS:.0f} s, outages "
          f"of {cuts} s between {loss:.0%} loss{through}: {counts}; given up yet applied within "
          f"the age: "
          f"{gave_up_applied}; applied past what the phone saw, within the grace: "
          f"{within_grace - len(later_verse)}; the server refused "
          f"{len(re.findall('refused: ', server_log))}; "
          f"reconnects {[p['reconnects'] for p in phones]}")
    assert presses >= 20, "too few presses to say anything"
    assert counts["applied"] >= presses / 2, "most presses should get through the loss"
    assert counts["refused"] + counts["gave_up"] >= 1, "the outages refused nothing: no test"
    assert not silent, f"presses never answered: {silent}"
    assert not twice, f"moves applied twice: {twice}"
    assert not wrongly, f"moves applied though the phone was told otherwise: {wrongly}"
    assert not late_after_gave_up, f"holds applied after their age: {late_after_gave_up}"
    assert not later_verse, f"holds applied on a later card or verse: {later_verse}"
    assert not state["match"]["holds"], state["match"]["holds"]
