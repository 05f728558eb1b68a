"""Property test: any sequence of holds and releases at any times.

The test keeps its own model of where the programme is (it advances 1:1 with time while
reading, stands still while held or in a lead-in, and jumps back by what a resume policy reads
again) and checks the engine against it, together with what a sample-exact sink heard.
"""

import itertools

from hypothesis import given, settings
from hypothesis import strategies as st

from reader.commands import PlayClip
from reader.config import ResumePolicy
from reader.events import ClearHolds, Hold, Release, Start

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
    m = short_match(resume={"policy": policy.value, "lead_in_s": lead_in})
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
