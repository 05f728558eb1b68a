"""The channel runtime in-process (a null sink on wall time, a voice of estimated lengths that
can be told to fail): whatever an item raises the task lives on and the channel says why it
paused; no request waits for ever; the journal's order puts silence first."""

import asyncio

import pytest

from audio.output.sink import NullSink
from audio.voices.voice import EstimateVoice, RenderedVoice
from hall.config import parse_config
from hall.errors import ChannelFault, ChannelStopped
from hall.inbox import PrepareMatch
from hall.playout import carry_out
from hall.runtime import ChannelRuntime
from hall.states import ChannelState
from hall.wire import to_wire
from reader.clip import Clip
from reader.commands import PlayClip, Publish, Record, StopAudio
from reader.events import ClearHolds, Hold, Start
from reader.programme import Phase

RATE = 16000


class FailingVoice(RenderedVoice):
    """Estimated lengths; `frames` and `pcm` raise for clips whose key holds `broken`."""

    def __init__(self) -> None:
        super().__init__(EstimateVoice(RATE))
        self.broken: str | None = None

    def frames(self, clip: Clip) -> int:
        if self.broken and self.broken in clip.key:
            raise RuntimeError(f"cannot say {clip.key}")
        return super().frames(clip)

    def pcm(self, clip: Clip):
        if self.broken and self.broken in clip.key:
            raise RuntimeError(f"cannot say {clip.key}")
        return super().pcm(clip)


def runtime(tmp_path, **match) -> tuple[ChannelRuntime, FailingVoice]:
    cfg = parse_config({"match": {"memorise_s": 0.2, "cards": 2, "prelude": {"enabled": False},
                                  "bow_call": {"enabled": False},
                                  "resume": {"lead_in_s": 0.1},
                                  "gaps": {"between_verses_s": 0.1, "between_cards_s": 0.1},
                                  **match},
                        "voice": {"engine": "estimate", "speed": 3.0},
                        "audio": {"output": "null", "rate": RATE},
                        "journal_dir": str(tmp_path)})
    voice = FailingVoice()
    rt = ChannelRuntime("main", cfg, voice, NullSink(RATE, fade_ms=0))
    return rt, voice


async def until(what, timeout: float = 60.0) -> None:
    async with asyncio.timeout(timeout):
        while not what():
            await asyncio.sleep(0.01)


async def test_a_voice_that_fails_mid_match_pauses_the_channel_and_the_task_lives(tmp_path):
    rt, voice = runtime(tmp_path)
    rt.start()
    try:
        await rt.submit(PrepareMatch(seed=3))
        voice.broken = "shimo"  # every lower verse: reached after the first upper verse
        await rt.submit(Start())
        def holds() -> list[str]:
            m = rt.state().match
            return [h.referee for h in m.snapshot.holds] if m is not None else []

        await until(lambda: "@fault" in holds())
        fault = rt.state().fault
        assert rt.running and fault and "shimo" in fault
        assert to_wire(rt.state())["match"]["paused"]
        # the channel answers: a hold, and a request that meets the broken clip again
        await rt.submit(Hold("r1", "mat 1"))
        assert set(holds()) == {"@fault", "r1"}
        voice.broken = None
        await rt.submit(ClearHolds())  # the voice answers again: the reading goes past it
        # card 1's lower verse is read to its end (a state that stays, where its segment is
        # a moment a busy machine can let pass between two looks)
        await until(lambda: to_wire(rt.state())["match"]["cards"][0]["finished_s"] is not None)
        assert "@fault" not in holds()
    finally:
        await rt.stop()


async def test_an_engine_that_cannot_plan_never_ends_the_task(tmp_path):
    rt, _voice = runtime(tmp_path)
    rt.start()
    try:
        await rt.submit(PrepareMatch(seed=3))
        await rt.submit(Start())
        assert rt.engine is not None
        rt.engine.next_deadline = lambda: 1 / 0  # type: ignore[method-assign]
        rt.post(Hold("r1", "mat 1"))  # wakes the task, which asks for the deadline again
        await until(lambda: rt.fault is not None)
        assert "ZeroDivisionError" in rt.fault
        assert "@fault" in [h["referee"] for h in to_wire(rt.state())["match"]["holds"]]
        # a match that cannot even plan is left behind: a new one may be prepared at once
        # (answered by the task: had the fault ended it, this would raise ChannelStopped)
        state = await rt.submit(PrepareMatch(seed=4))
        assert rt.running
        assert state.match is not None and state.match.snapshot.phase is Phase.READY
        assert state.fault is None
        await rt.submit(Start())
        # it runs: the call, then the memorisation (or later: 0.2 s is soon over)
        await until(lambda: to_wire(rt.state())["match"]["phase"] in (
            "memorising", "reading", "finished"))
    finally:
        await rt.stop()


async def test_requests_waiting_when_the_task_ends_are_answered(tmp_path):
    rt, _voice = runtime(tmp_path)
    rt.start()
    await rt.submit(PrepareMatch(seed=3))
    waiting = [asyncio.ensure_future(rt.submit(Hold(f"r{i}", "x"))) for i in range(5)]
    await rt.stop()
    results = await asyncio.gather(*waiting, return_exceptions=True)
    assert all(isinstance(r, ChannelStopped | ChannelState) for r in results), results
    assert any(isinstance(r, ChannelStopped) for r in results)
    with pytest.raises(ChannelStopped):
        await rt.submit(Hold("late", "x"))  # refused at once, never queued


class Recorder:
    def __init__(self, fail_record: bool = False) -> None:
        self.calls: list[str] = []
        self.fail_record = fail_record
        self.rate = RATE

    def stop(self, at: int) -> None:
        self.calls.append(f"stop {at}")

    def play(self, pcm, at: int, offset: int, tag: int) -> None:
        self.calls.append(f"play {at}")

    def record(self, entry: dict) -> bool:
        self.calls.append("record")
        return not self.fail_record

    def publish(self, snap) -> None:
        self.calls.append("publish")


class NoVoice:
    def pcm(self, clip):
        return None


def test_silence_first_then_the_record_then_the_news():
    clip = Clip.__new__(Clip)
    cmds = [Record({"a": 1}), PlayClip(clip, 100, 0, 1), Record({"b": 2}), StopAudio(50),
            PlayClip(clip, 200, 0, 2), Publish(None)]  # type: ignore[arg-type]
    r = Recorder()
    carry_out(cmds, NoVoice(), r, r.record, r.publish)  # type: ignore[arg-type]
    # the stop before any fsync; the clip sent before the stop is one it would forget
    assert r.calls == ["stop 50", "record", "record", "play 200", "publish"]
    r = Recorder(fail_record=True)
    carry_out(cmds, NoVoice(), r, r.record, r.publish)  # type: ignore[arg-type]
    # a record that cannot be written: still silence, and nothing new is heard
    assert r.calls == ["stop 50", "record", "record", "publish"]


def test_a_failing_publication_does_not_keep_the_stop_from_the_output():
    r = Recorder()

    def broken(_snap) -> None:
        raise RuntimeError("a hub bug")

    with pytest.raises(RuntimeError, match="a hub bug"):
        carry_out([Record({}), StopAudio(10), Publish(None)], NoVoice(), r,  # type: ignore[arg-type]
                  r.record, broken)
    assert r.calls == ["stop 10", "record"]


def test_channel_fault_is_the_runtimes_word_for_the_unforeseen():
    assert issubclass(ChannelFault, Exception)


async def test_a_hold_reaches_the_speaker_pages_before_the_journal_and_the_viewers(tmp_path):
    """Browser speakers (issue 20 item 3): the stop goes to the speaker feed right after the
    device, before the journal's fsync and the state's fan-out to every page (it went after
    both, so a busy hall's fan-out delayed the pages' silence); clips go only after."""
    rt, _voice = runtime(tmp_path)
    calls: list[str] = []

    class Feed:
        def carry_out(self, commands, engine, voice) -> None:
            calls.extend(f"speakers {type(c).__name__}" for c in commands
                         if isinstance(c, StopAudio | PlayClip))

        def refresh(self, engine, voice) -> None:
            pass

    rt.speakers = Feed()
    journal = rt.reading.journal
    record = journal.record

    def recording(entry):
        calls.append("journal")
        return record(entry)

    journal.record = recording  # type: ignore[method-assign]
    rt.start()
    try:
        await rt.submit(PrepareMatch(seed=3))
        await rt.submit(Start())
        await until(lambda: rt.state().match is not None
                    and rt.state().match.snapshot.phase == "reading")
        del calls[:]
        await rt.submit(Hold("r1", "mat 1"))
        assert calls[:2] == ["speakers StopAudio", "journal"], calls
        del calls[:]
        await rt.submit(ClearHolds())  # the lead-in's clip: sent once journalled
        assert calls.index("journal") < calls.index("speakers PlayClip"), calls
    finally:
        await rt.stop()
