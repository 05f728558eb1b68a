"""Property tests.

1. Any sequence of holds and releases at any times: the test keeps its own model of where the
   programme is (it advances 1:1 with time while reading, stands still while held or in a
   lead-in, and jumps back by what a resume policy reads again) and checks the engine against
   it, together with what a sample-exact sink heard.
2. Any sequence of operator moves (bow, start, extra card, close, abort) and hands at any
   times: each move is accepted exactly when the phase table allows it, the phases follow the
   allowed transitions, what was heard never overlaps, the closing calls come after every card,
   and the journal replays to the exact state after every record.
"""

import itertools
import json

import pytest
from hypothesis import event, given, settings
from hypothesis import strategies as st

from reader.commands import PlayClip
from reader.config import ResumePolicy
from reader.errors import IllegalMove
from reader.events import (
    Abort,
    Bow,
    ClearHolds,
    Close,
    ExtraCard,
    Hold,
    ReadAgain,
    Release,
    Skip,
    Start,
)
from reader.journal import parse_lines, replay_steps

from .fakes import RATE, make_run, short_match

REFEREES = ("a", "b", "c")

actions = st.one_of(
    st.tuples(st.just("hold"), st.sampled_from(REFEREES)),
    st.tuples(st.just("release"), st.sampled_from(REFEREES)),
    st.tuples(st.just("clear"), st.just("")),
)
steps = st.lists(st.tuples(st.integers(0, round(1.4 * RATE)), actions), max_size=20)


def planned_timeline(m):
    probe = make_run(m, seed=11)
    probe.send(Start())
    probe.run_until()
    segs, t = [], 0
    for s in probe.engine.segments:
        n = probe.voice.frames(s.clip) if s.clip else round(s.silence_s * RATE)
        segs.append((t, n, s))
        t += n
    return segs, t


def lost_at(segs, pos, policy):
    """Programme frames read again when a cut at programme position `pos` resumes."""
    for start, n, s in segs:
        if start <= pos < start + n:
            if policy is ResumePolicy.RESTART_CARD and s.in_card:
                return pos - segs[s.card_start][0]
            if s.clip is not None and policy is not ResumePolicy.CONTINUE:
                return pos - start
            return 0
    raise AssertionError(f"position {pos} outside the programme")


@settings(max_examples=150, deadline=None)
@given(
    policy=st.sampled_from(list(ResumePolicy)),
    lead_in=st.sampled_from([0.0, 0.3, 1.0]),
    plan=steps,
)
def test_any_holds_and_releases(policy, lead_in, plan):
    m = short_match(bow_call={"enabled": True},
                    resume={"policy": policy.value, "lead_in_s": lead_in})
    segs, planned = planned_timeline(m)
    lead = round(lead_in * RATE)
    run = make_run(m, seed=11)
    run.send(Start())

    # the model
    pos, t_model = 0, 0
    up: set[str] = set()
    mode = "reading"  # reading | held | lead_in
    lead_end = 0
    rewind = 0
    held = lead_total = lost_total = 0

    def advance_model(to):
        nonlocal pos, t_model, mode, lead_total, held
        if mode == "reading":
            pos += to - t_model
        elif mode == "held":
            held += to - t_model
        elif mode == "lead_in":
            if to >= lead_end:
                lead_total += lead_end - t_model
                pos_resume(to - lead_end)
            else:
                lead_total += to - t_model
        t_model = to

    def pos_resume(extra):
        nonlocal pos, mode, rewind
        pos -= rewind
        rewind = 0
        mode = "reading"
        pos += extra

    t = 0
    for dt, (kind, who) in plan:
        t += dt
        assert t < planned, "the plan must stay inside the match"
        advance_model(t)
        if kind == "hold":
            run.at(t, Hold(who))
            if who not in up:
                up.add(who)
                if mode == "reading":
                    lost = lost_at(segs, pos, policy)
                    rewind = lost
                    lost_total += lost
                mode = "held"
        else:
            run.at(t, Release(who) if kind == "release" else ClearHolds())
            before = bool(up)
            up.discard(who) if kind == "release" else up.clear()
            if before and not up:
                mode, lead_end = "lead_in", t + lead
                if lead == 0:
                    pos_resume(0)
    if up:
        run.at(t, ClearHolds())
        up.clear()
        mode, lead_end = "lead_in", t + lead
        if lead == 0:
            pos_resume(0)
    run.run_until()

    finish = next(f["frame"] for r in run.records for f in r["facts"] if f["fact"] == "finished")
    # the model's end: finish the lead-in, then read what is left of the programme
    if mode == "lead_in":
        lead_total += lead_end - t_model
        t_model = lead_end
        pos_resume(0)
    assert finish == t_model + (planned - pos)
    assert finish == planned + held + lead_total + lost_total

    # the cards read are exactly the first N of the order
    snap = run.engine.snapshot()
    assert [c.poem for c in snap.cards] == list(run.engine.deck.order[: m.cards])
    assert [c.n for c in snap.cards] == list(range(1, m.cards + 1))

    # no two clips overlap in what the sink played
    pieces = sorted(run.tape.pieces, key=lambda p: p.start)
    for a, b in itertools.pairwise(pieces):
        assert a.end <= b.start, (a, b)

    # every clip of the programme is heard whole after its last cut
    for i, (_, n, s) in enumerate(segs):
        if s.clip is None:
            continue
        mine = [p for p in pieces if p.segment == i]
        assert mine, f"segment {i} ({s.label}) never played"
        last_whole = max(k for k, p in enumerate(mine) if p.offset == 0)
        chain = mine[last_whole:]
        assert chain[-1].end_offset == n
        for a, b in itertools.pairwise(chain):
            assert a.end_offset == b.offset
    # every PlayClip was for a frame not in the past
    for c in run.commands:
        if isinstance(c, PlayClip):
            assert c.offset >= 0


# ---------------------------------------------------------------------------- the phase table
TRANSITIONS = {
    ("ready", "bowing"), ("ready", "announcing"), ("ready", "aborted"),
    ("bowing", "ready"), ("bowing", "announcing"), ("bowing", "aborted"),
    ("announcing", "memorising"), ("announcing", "aborted"),
    ("memorising", "prelude"), ("memorising", "aborted"),
    ("prelude", "reading"), ("prelude", "aborted"),
    ("reading", "finished"), ("reading", "aborted"),
    ("finished", "tiebreak"), ("finished", "closing"), ("finished", "closed"),
    ("finished", "reading"),  # the last card read again
    ("tiebreak", "finished"), ("tiebreak", "aborted"),
    ("closing", "closed"),
}
RUNNING = {"bowing", "announcing", "memorising", "prelude", "reading", "tiebreak"}


def allowed(move, snap):
    """The phase table (reader/moves.py's docstring), as the operator's console reads it."""
    phase = snap.phase
    match move:
        case "bow":
            return phase == "ready" and snap.calls["bow_call"] is not None and not snap.bowed
        case "start":
            return phase == "ready"
        case "extra":
            return phase == "finished" and snap.unread_left > 0
        case "close":
            return phase == "finished"
        case "again":
            seg = snap.segment
            return phase == "finished" or (
                phase in ("reading", "tiebreak") and seg is not None and seg.kind == "gap"
                and bool(seg.card) and seg.label == "gap_between_cards")
        case "skip":
            return phase in ("memorising", "prelude", "reading", "tiebreak")
        case "abort":
            return phase == "ready" or phase in RUNNING or phase == "aborted"
        case "hold":
            return phase not in ("aborted", "closed")
    raise AssertionError(move)


EVENTS = {"bow": Bow, "start": Start, "extra": ExtraCard, "close": Close, "abort": Abort,
          "again": ReadAgain, "skip": Skip}
MOVES = ["bow", "start", "extra", "close", "hold", "release", "clear", "again", "skip"] * 3 + [
    "abort"]
operator_moves = st.lists(
    # hypothesis favours 0 among integers: a spread of typical steps gets to every phase
    st.tuples(st.one_of(st.sampled_from([RATE // 4, RATE, 2 * RATE, 3 * RATE, 5 * RATE]),
                        st.integers(0, 6 * RATE)),
              st.sampled_from(MOVES), st.sampled_from(REFEREES)),
    max_size=30)


@settings(max_examples=100, deadline=None)
@given(
    plan=operator_moves,
    tail=st.lists(st.sampled_from(["start", "extra", "close", "extra", "close", "hold", "clear",
                                   "again"]),
                  max_size=6),
    bow_first=st.booleans(),
    bow=st.booleans(),
    extra_call=st.booleans(),
    end_call=st.booleans(),
    move_call=st.booleans(),
    policy=st.sampled_from(list(ResumePolicy)),
)
def test_any_operator_moves_follow_the_phase_table(plan, tail, bow_first, bow, extra_call,
                                                   end_call, move_call, policy):
    m = short_match(cards=2, memorise_s=1.0, bow_call={"enabled": bow},
                    extra_call={"enabled": extra_call}, end_call={"enabled": end_call},
                    move_call={"enabled": move_call},
                    resume={"policy": policy.value, "lead_in_s": 0.3})
    run = make_run(m, seed=5)
    states = {}
    orig = run._take

    def take(cmds):
        orig(cmds)
        if any(type(c).__name__ == "Record" for c in cmds):
            states[len(run.records)] = run.engine.state()

    run._take = take
    t = 0
    # the plan, then the tail's moves each once the programme has stopped (finished, mostly)
    steps = [(0, "bow" if bow_first else "start", "a"), *plan, *((None, mv, "b") for mv in tail)]
    for dt, move, who in steps:
        if dt is None:
            run.run_until()
        else:
            t = max(t + dt, run.frame())
            run.run_until(t)
        snap = run.engine.snapshot()
        event(f"step in {snap.phase}")
        # every move the table refuses here is refused, naming the phase, and changes nothing
        for name, cls in EVENTS.items():
            if not allowed(name, snap):
                with pytest.raises(IllegalMove):
                    run.send(cls())
        if not allowed("hold", snap):
            with pytest.raises(IllegalMove, match=snap.phase):
                run.send(Hold(who))
        assert run.engine.snapshot().seq == snap.seq
        if move in ("release", "clear"):
            run.send(Release(who) if move == "release" else ClearHolds())
            continue
        ev = Hold(who) if move == "hold" else EVENTS[move]()
        legal = allowed(move, snap)
        try:
            run.send(ev)
        except IllegalMove as e:
            assert not legal, f"{move} refused in {snap.phase}: {e}"
            assert snap.phase in str(e) or "ready" in str(e) or "poems" in str(e)
        else:
            assert legal, f"{move} accepted in {snap.phase}"
    run.send(ClearHolds())
    run.run_until()
    end = run.engine.snapshot()
    assert end.phase in ("ready", "finished", "closed", "aborted")
    assert run.engine.next_deadline() is None

    phases = [s.phase for s in run.snapshots]
    for a, b in itertools.pairwise(phases):
        assert a == b or (a, b) in TRANSITIONS, (a, b, phases)

    # what a sample-exact sink heard never overlaps; the cards are the order's first ones
    pieces = sorted(run.tape.pieces, key=lambda p: p.start)
    for a, b in itertools.pairwise(pieces):
        assert a.end <= b.start, (a, b)
    assert [c.poem for c in end.cards] == list(run.engine.deck.order[: len(end.cards)])
    # the closing calls are heard after every card, and only once the match was closed
    keys = [p.key for p in pieces]
    closing = [i for i, k in enumerate(keys) if k.startswith(("call:end_call", "call:move_call"))]
    cards = [i for i, k in enumerate(keys) if k.startswith("verse:")]
    if closing:
        assert end.phase == "closed" and (not cards or max(cards) < min(closing))
    if end.phase == "closed":
        segs = run.engine.segments
        for label, on in (("end_call", end_call), ("move_call", move_call)):
            mine = [p for p in pieces if segs[p.segment].label == label]
            if not on:
                assert not mine, label
                continue
            clip = segs[mine[-1].segment].clip
            assert mine[-1].end_offset == run.voice.frames(clip), f"{label} not heard whole"
    # the bow call is heard whole at most once
    bows = [p for p in pieces if p.key.startswith("call:bow_call") and p.offset == 0
            and p.end_offset == run.voice.frames(run.engine.segments[p.segment].clip)]
    assert len(bows) <= 1
    event(f"ended {end.phase}")
    event(f"{len(end.cards) - m.cards} extra cards" if end.cards else "no card")

    # the journal replays to the exact state after every record
    lines = [json.dumps(run.engine.header())] + [json.dumps(x) for x in run.records]
    compared = 0
    for i, engine in enumerate(replay_steps(parse_lines(lines)), start=1):
        if i in states:
            assert engine.state() == states[i], f"record {i} differs"
            compared += 1
    assert compared == len(states)
