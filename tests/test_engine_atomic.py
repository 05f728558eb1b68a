"""Engine.handle is atomic: when anything but an illegal move escapes (a voice that cannot tell
a clip's length), the engine is exactly as it was before the call, and it goes on as if the
failed call had never been made."""

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from reader.clip import Clip
from reader.events import Abort, ClearHolds, Hold, Release, Start, Tick

from .fakes import RATE, FakeVoice, make_run, short_match


class Broken(Exception):
    pass


class FlakyVoice(FakeVoice):
    """Fails to tell the length of the clips in `failing` while `broken` is set."""

    def __init__(self) -> None:
        super().__init__()
        self.failing: set[str] = set()
        self.broken = False

    def frames(self, clip: Clip) -> int:
        if self.broken and clip.key in self.failing:
            raise Broken(clip.key)
        return super().frames(clip)


def flaky_run(**over):
    run = make_run(short_match(**over), seed=3)
    voice = FlakyVoice()
    run.engine.use_voice(voice)
    run.voice = voice  # the tape keeps its own FakeVoice: the same lengths, never failing
    return run


events = st.lists(
    st.tuples(st.sampled_from([0, RATE // 3, RATE, 5 * RATE // 2, 4 * RATE]) | st.integers(0, RATE),
              st.sampled_from(["tick", "tick", "hold a", "hold b", "release a", "release b",
                               "clear"])),
    min_size=1, max_size=25,
)


def as_event(name: str):
    kind, _, who = name.partition(" ")
    return {"tick": Tick(), "hold": Hold(who, who), "release": Release(who),
            "clear": ClearHolds()}[kind]


FAILED_CALLS = []


@settings(max_examples=120, deadline=None, derandomize=True)  # the same plans every run
@given(plan=events)
def test_a_failed_call_changes_nothing_and_the_match_goes_on_as_if_it_never_happened(plan):
    run, twin = flaky_run(), flaky_run()
    # every event is first sent while the voice cannot tell any length it has not told yet:
    # the call fails whenever it needs one (it enters a clip not measured before), and is
    # then sent again with the voice answering
    run.voice.failing = {c.key for c in run.engine.programme_clips()}
    for r in (run, twin):
        r.send(Start())
    for dt, name in plan:
        for r in (run, twin):
            r.clock.set(r.clock.now() + dt / RATE)
        ev = as_event(name)
        before = run.engine.state()
        run.voice.broken = True
        try:
            run.send(ev)
        except Broken:
            FAILED_CALLS.append(name)
            assert run.engine.state() == before
            run.voice.broken = False
            run.send(ev)
        run.voice.broken = False
        twin.send(ev)
        assert run.engine.state() == twin.engine.state()
    # what both journaled and heard is the same
    assert run.records == twin.records
    assert run.tape.pieces == twin.tape.pieces


def test_the_property_above_met_failures():
    assert len(FAILED_CALLS) >= 10, FAILED_CALLS


def test_a_voice_failing_at_start_leaves_the_match_ready_and_it_can_be_held_and_aborted():
    run = flaky_run()
    first = next(run.engine.programme_clips()).key
    run.voice.failing = {first}
    run.voice.broken = True
    with pytest.raises(Broken):
        run.send(Start())
    assert run.engine.phase.value == "ready" and run.engine.snapshot().seq == 0
    run.send(Hold("@fault", "reader failed"))
    run.send(Start())  # with the hold up the match starts cut: no length is needed yet
    assert run.engine.paused and run.engine.phase.value == "announcing"
    run.send(Abort("the voice is broken"))
    assert run.engine.phase.value == "aborted"
