"""The speaker feed and its clock, with fakes: what the engine's audio commands become for the
speaker pages, the sounding clock of a device channel, and the order of the hall's own stop and
the speakers'."""


import numpy as np
import pytest

from audio.output.sink import NullSink
from hall.config import parse_config
from hall.inbox import PrepareMatch
from hall.runtime import ChannelRuntime
from hall.speaker import ClipStore, SoundingClock, SpeakerFeed
from reader.clip import Verse
from reader.clock import ManualClock
from reader.commands import PlayClip, StopAudio
from reader.events import Hold, Start
from reader.programme import call_clip, verse_clip

from .fakes import FakeVoice

RATE = 48000


class PcmVoice(FakeVoice):
    def pcm(self, clip):
        return np.zeros(self.frames(clip), dtype=np.float32)

    def prefetch(self, clips, progress=None):
        return len(clips)

    def lacks(self, poems):
        return []


def feed(clock=None, mono=None):
    """A feed on `clock`; its monotonic clock is `mono`, else the same clock (no jump)."""
    sent = []
    store = ClipStore(b"k" * 32, lambda v, c: b"OggS")
    clock = clock or ManualClock()
    f = SpeakerFeed(RATE, store, SoundingClock(clock), sent.append,
                    mono=(mono or clock).now)
    return f, sent


def test_clips_and_stops_become_one_schedule():
    f, sent = feed()
    voice = PcmVoice()
    kami, shimo = verse_clip(1, Verse.KAMI), verse_clip(1, Verse.SHIMO)
    n_kami = voice.frames(kami)
    f.carry_out([PlayClip(kami, 48000, 0, 4), PlayClip(shimo, 48000 + n_kami + 4800, 0, 6)],
                None, voice)
    m = sent[-1]
    assert [c["id"] for c in m["clips"]] == ["4@48000", f"6@{48000 + n_kami + 4800}"]
    assert m["clips"][0]["at_s"] == 1.0 and m["clips"][0]["duration_s"] == n_kami / RATE
    assert m["clips"][0]["url"].startswith("/api/clips/") and m["stops"] == 0
    assert f.store.known(m["clips"][0]["url"].split("/")[-1].removesuffix(".ogg"))
    # a hold in the upper verse: the schedule keeps nothing that sounds after the cut
    f.carry_out([StopAudio(72000)], None, voice)
    m = sent[-1]
    assert m["clips"] == [] and m["stops"] == 1 and m["stop_s"] == 1.5
    # the verse read again after the lead-in is a new clip (a new id)
    f.carry_out([PlayClip(kami, 120000, 0, 4)], None, voice)
    assert [c["id"] for c in sent[-1]["clips"]] == ["4@120000"]
    assert f.sync({"type": "sync", "id": 3, "c": 1.5, "x": "dropped"}) == {
        "type": "sync", "id": 3, "c": 1.5, "s": 0.0, "epoch": 0}


def test_a_jump_of_the_timeline_is_a_new_epoch_for_the_pages():
    """The timeline moving against the monotonic clock (it should not; a stalled sound card,
    a clock adopted from a journal) is said to the pages in every sync answer and schedule,
    so that they start their estimate again instead of playing on a stale one."""
    timeline, mono = ManualClock(), ManualClock()
    f, sent = feed(timeline, mono)
    timeline.advance(10.0)
    mono.advance(10.1)  # 0.1 s apart: a block's jitter, not a jump
    assert f.sync({"id": 1, "c": 0})["epoch"] == 0
    mono.advance(5.0)  # the timeline stood still for 5 s: it fell 5 s behind
    assert f.sync({"id": 2, "c": 0})["epoch"] == 1
    assert f.message()["epoch"] == 1
    f.carry_out([PlayClip(verse_clip(1, Verse.KAMI), 48000 * 6, 0, 4)], None, PcmVoice())
    assert sent[-1]["epoch"] == 1
    assert f.sync({"id": 3, "c": 0})["epoch"] == 1  # steady again: the same epoch


def test_a_clip_over_before_a_stop_stays_and_old_clips_are_pruned():
    clock = ManualClock()
    f, sent = feed(clock)
    voice = PcmVoice()
    call = call_clip("memorise_call", parse_config({}).match.memorise_call)
    f.carry_out([PlayClip(call, 0, 0, 0)], None, voice)
    end = voice.frames(call)
    f.carry_out([StopAudio(end + 100)], None, voice)
    assert [c["id"] for c in sent[-1]["clips"]] == ["0@0"]  # it ended before the cut
    clock.set(end / RATE + 14)
    # still listed: a speaker back from an outage counts it as missed (speaker.js)
    assert [c["id"] for c in f.message()["clips"]] == ["0@0"]
    clock.set(end / RATE + 16)
    assert f.message()["clips"] == []  # long over: a page that joins now gets nothing of it


def test_the_sounding_clock_of_a_sound_card():
    # the card's clock moves in 256-frame blocks and lags true time by 0..1 block; what it
    # was handed sounds `latency` later
    t = [0.0]

    class Blocks:
        def now(self):
            return (int(t[0] * RATE) // 256) * 256 / RATE

    c = SoundingClock(Blocks(), stepwise=True, latency_s=0.0107, mono=lambda: t[0])
    rng = np.random.default_rng(1)
    for x in np.sort(rng.uniform(0, 5, 40)):
        t[0] = float(x)
        got = c.now()
    assert got == pytest.approx(t[0] - 0.0107, abs=0.0006)  # within a tenth of a block
    flat = SoundingClock(Blocks(), latency_s=0.0)
    assert flat.now() == Blocks().now()


async def test_the_speakers_get_a_stop_after_the_hall_output(tmp_path):
    order = []

    class Sink(NullSink):
        def stop(self, at_frame):
            order.append("device")
            super().stop(at_frame)

    class Speakers:
        def carry_out(self, commands, engine, voice):
            if any(isinstance(c, StopAudio) for c in commands):
                order.append("speakers")

        def refresh(self, engine, voice):
            order.append("refresh")

    clock = ManualClock()
    cfg = parse_config({"match": {"memorise_s": 1, "cards": 1}, "journal_dir": str(tmp_path)})
    rt = ChannelRuntime("main", cfg, PcmVoice(), Sink(RATE, clock), clock=clock,
                        speakers=Speakers())
    rt.start()
    try:
        await rt.submit(PrepareMatch(seed=1))
        await rt.submit(Start())
        clock.advance(0.5)
        await rt.submit(Hold("r1", "mat 1"))
    finally:
        await rt.stop()
    assert order == ["refresh", "device", "speakers"]
    assert rt.engine is not None and rt.engine.paused


class _Match:
    """A stand-in for a match's engine: the feed only tells one match from the next."""

    def upcoming_clips(self):
        return [verse_clip(7, Verse.KAMI)]


def test_the_same_verse_has_a_new_url_in_every_match():
    """Issue 47 reported two matches of the same order sharing a clip URL: the URL is a keyed
    hash of the match's nonce, so the same clip in the next match (the same seed) has a new one,
    in the schedule and in the prefetch list, and one URL within a match."""
    f, sent = feed()
    voice = PcmVoice()
    kami = verse_clip(7, Verse.KAMI)
    urls = []
    for n in range(2):
        match = _Match()
        f.refresh(match, voice)
        prefetch = sent[-1]["prefetch"]
        at = [480000 * (n + 1), 480000 * (n + 1) + 96000]  # upper verse, read again
        f.carry_out([PlayClip(kami, at[0], 0, 4)], match, voice)
        f.carry_out([PlayClip(kami, at[1], 0, 4)], match, voice)
        mine = [c["url"] for c in sent[-1]["clips"] if c["id"] in (f"4@{at[0]}", f"4@{at[1]}")]
        assert len(mine) == 2 and set(mine) == set(prefetch), (mine, prefetch)
        urls.append(mine[0])
    assert urls[0] != urls[1]
