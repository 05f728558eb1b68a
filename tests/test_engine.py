"""The timing engine with a fake clock and a fake voice of known durations."""

import itertools

import pytest

from reader.commands import PlayClip, Publish, Record, StopAudio
from reader.config import MatchConfig
from reader.errors import BadDeck, IllegalMove
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
    Tick,
)
from reader.programme import Phase

from .fakes import RATE, make_run, short_match


def sec(s: float) -> int:
    return round(s * RATE)


def clip_frames(run, key: str) -> int:
    clips = [*run.engine.programme_clips(), *run.engine.closing_clips()]
    return run.voice.frames(next(c for c in clips if c.key == key))


def expected_timeline(run, match: MatchConfig, cards: int) -> list[tuple[str, int]]:
    """(clip key, start frame) for the whole default programme, summed by hand."""
    g = match.gaps
    order = run.engine.deck.order
    out: list[tuple[str, int]] = []
    t = 0

    def say(key: str) -> None:
        nonlocal t
        out.append((key, t))
        t += clip_frames(run, key)

    say("call:bow_call:" + match.bow_call.yomi)
    t += sec(g.after_bow_s)
    say("call:memorise_call:" + match.memorise_call.yomi)
    t += sec(match.memorise_s)
    say("call:prelude_intro:" + match.prelude.intro.yomi)
    t += sec(g.after_call_s)
    say("prelude:000:kami")
    t += sec(g.between_verses_s)
    say("prelude:000:shimo")
    t += sec(g.between_cards_s)
    for n in range(cards):
        say(f"verse:{order[n]:03d}:kami")
        t += sec(g.between_verses_s)
        say(f"verse:{order[n]:03d}:shimo")
        t += sec(g.between_cards_s)
    return out


def memorise_call_end(run) -> int:
    """The frame the memorisation call ends at, in an uninterrupted start at frame 0."""
    m = run.engine.match
    t = 0
    if m.bow_call.enabled:
        t += clip_frames(run, "call:bow_call:" + m.bow_call.yomi) + sec(m.gaps.after_bow_s)
    return t + clip_frames(run, "call:memorise_call:" + m.memorise_call.yomi)


def test_full_default_match_is_exact_to_the_sample():
    run = make_run()
    assert run.engine.phase is Phase.READY
    run.send(Start())
    run.run_until()
    plays = [(c.clip.key, c.at_frame) for c in run.commands if isinstance(c, PlayClip)]
    match = MatchConfig()
    assert plays == expected_timeline(run, match, 17)
    assert match.cards == 17 and match.memorise_s == 30
    # rule 16: after the 17th card the players count their cards; no end call yet
    assert run.engine.phase is Phase.FINISHED
    finished = next(f["frame"] for r in run.records for f in r["facts"]
                    if f["fact"] == "finished")
    assert finished == plays[-1][1] + clip_frames(run, plays[-1][0]) + sec(1.5)
    snap = run.engine.snapshot()
    assert [c.poem for c in snap.cards] == list(run.engine.deck.order[:17])
    assert all(c.finished_s is not None for c in snap.cards)
    # nothing was ever stopped, and what was scheduled is what was heard
    assert not any(isinstance(c, StopAudio) for c in run.commands)
    assert [p.key for p in run.tape.pieces] == [k for k, _ in plays]

    # rule 18: minutes later, when the mats are ready, the operator closes the match
    close_at = finished + sec(95)
    run.at(close_at, Close())
    assert run.engine.phase is Phase.CLOSING
    run.run_until()
    assert run.engine.phase is Phase.CLOSED and run.engine.next_deadline() is None
    end = "call:end_call:" + match.end_call.yomi
    move = "call:move_call:" + match.move_call.yomi
    closing = [(c.clip.key, c.at_frame) for c in run.commands if isinstance(c, PlayClip)]
    assert closing[len(plays):] == [
        (end, close_at), (move, close_at + clip_frames(run, end) + sec(2.0))]
    closed = next(f["frame"] for f in run.records[-1]["facts"] if f["fact"] == "closed")
    assert closed == close_at + clip_frames(run, end) + sec(2.0) + clip_frames(run, move)


def test_phases_in_order_and_seq_rises():
    run = make_run()
    run.send(Start())
    run.run_until()
    run.send(Close())
    run.run_until()
    phases = []
    for s in run.snapshots:
        if not phases or phases[-1] != s.phase:
            phases.append(s.phase)
    assert phases == ["bowing", "announcing", "memorising", "prelude", "reading", "finished",
                      "closing", "closed"]
    seqs = [s.seq for s in run.snapshots]
    assert seqs == sorted(seqs) and len(set(seqs)) == len(seqs)


def test_memorisation_counts_from_the_end_of_the_call_and_publishes_each_second():
    run = make_run()
    run.send(Start())
    call = memorise_call_end(run)
    run.run_until(call + sec(30) - 1)
    counts = [s.countdown_s for s in run.snapshots if s.phase == "memorising"]
    assert counts[0] == 30.0
    assert [round(c) for c in counts] == list(range(30, 0, -1))
    assert run.engine.phase is Phase.MEMORISING
    run.run_until(call + sec(30))
    assert run.engine.phase is Phase.PRELUDE


def test_commands_come_in_journal_audio_publish_order():
    run = make_run()
    cmds = run.send(Start())
    kinds = [type(c) for c in cmds]
    assert kinds[0] is Record and kinds[-1] is Publish
    assert all(k is PlayClip for k in kinds[1:-1])


def test_options_lower_verse_twice_no_prelude_no_memorisation():
    m = MatchConfig.model_validate(
        {"cards": 2, "memorise_s": 0, "lower_verse_times": 2, "prelude": {"enabled": False}}
    )
    run = make_run(m)
    run.send(Start())
    run.run_until()
    run.send(Close())
    run.run_until()
    keys = [c.clip.key.split(":")[0] + ":" + c.clip.key.split(":")[-1]
            for c in run.commands if isinstance(c, PlayClip)]
    assert keys == ["call:れい", "call:ふだをおぼえてください", "verse:kami", "verse:shimo",
                    "verse:shimo", "verse:kami", "verse:shimo", "verse:shimo",
                    "call:ありがとうございました", "call:いどうしてください"]
    plays = [c for c in run.commands if isinstance(c, PlayClip)]
    # the repeated lower verse follows the first after exactly repeat_s
    first, second = plays[3], plays[4]
    assert second.at_frame - first.at_frame == run.voice.frames(first.clip) + sec(m.gaps.repeat_s)
    # the card is read (may be shown) only after its second lower verse
    c1 = run.engine.snapshot().cards[0]
    assert c1.finished_s == (second.at_frame + run.voice.frames(second.clip)) / RATE


def play_keys(run):
    return [c.clip.key for c in run.commands if isinstance(c, PlayClip)]


# ---------------------------------------------------------------------------- holds


def test_two_referees_overlapping_resume_only_when_both_are_down():
    m = short_match(resume={"lead_in_s": 1.0})
    run = make_run(m)
    run.send(Start())
    run.at(sec(1.0), Hold("mat1", "mat 1"))
    assert run.engine.paused
    run.at(sec(2.0), Hold("mat2", "mat 2"))
    run.at(sec(3.0), Release("mat1"))
    run.run_until(sec(10))
    assert run.engine.paused, "mat 2 still holds"
    snap = run.engine.snapshot()
    assert [h.referee for h in snap.holds] == ["mat2"]
    run.at(sec(10), Release("mat2"))
    assert run.engine.snapshot().resumes_at_s == 11.0
    run.run_until(sec(11))
    assert not run.engine.paused
    # the call was cut at 1.0 s and read again from its start after the 1 s lead-in
    plays = [c for c in run.commands if isinstance(c, PlayClip)]
    assert (plays[0].at_frame, plays[0].offset) == (0, 0)
    again = [p for p in plays if p.clip.key == plays[0].clip.key]
    assert len(again) == 2 and again[1].at_frame == sec(11) and again[1].offset == 0
    stops = [c for c in run.commands if isinstance(c, StopAudio)]
    assert [s.at_frame for s in stops] == [sec(1.0)]


def test_repeated_hold_and_stray_release_change_nothing():
    run = make_run(short_match())
    run.send(Start())
    run.at(sec(0.5), Hold("a"))
    seq = run.engine.snapshot().seq
    assert run.at(sec(0.6), Hold("a")) == []
    assert run.at(sec(0.7), Release("nobody")) == []
    assert run.engine.snapshot().seq == seq
    assert run.at(sec(0.8), Release("a"))
    assert run.at(sec(0.9), Release("a")) == []


def test_operator_clear_all():
    run = make_run(short_match())
    run.send(Start())
    run.at(sec(0.5), Hold("a"))
    run.at(sec(0.6), Hold("b"))
    run.at(sec(2.0), ClearHolds())
    assert run.engine.snapshot().holds == ()
    run.run_until(sec(2.6))
    assert not run.engine.paused


def test_hold_during_memorisation_freezes_the_countdown():
    m = short_match(memorise_s=10.0)
    run = make_run(m)
    run.send(Start())
    call = run.voice.frames(next(run.engine.programme_clips()))
    run.at(call + sec(4.0), Hold("r"))
    run.run_until(call + sec(50))
    assert run.engine.snapshot().countdown_s == 6.0
    run.at(call + sec(50), Release("r"))
    run.run_until(call + sec(50.6) + sec(6.0) - 1)
    assert run.engine.phase is Phase.MEMORISING
    run.run_until(call + sec(50.6) + sec(6.0))
    assert run.engine.phase is Phase.PRELUDE
    intro = [c for c in run.commands if isinstance(c, PlayClip)][-2]
    assert intro.clip.name == "prelude_intro" and intro.at_frame == call + sec(56.6)


def test_hold_before_start_starts_paused():
    run = make_run(short_match())
    run.send(Hold("r"))
    run.send(Start())
    assert run.engine.paused and run.engine.phase is Phase.ANNOUNCING
    assert not any(isinstance(c, PlayClip) for c in run.commands)
    run.at(sec(1), Release("r"))
    run.run_until(sec(1.6))
    plays = [c for c in run.commands if isinstance(c, PlayClip)]
    assert plays[0].at_frame == sec(1.6) and plays[0].offset == 0


def advance(run, frame, moves):
    """Tick at every deadline up to `frame` (None: to the end); each time the match is
    finished on the way, the next operator move of `moves` is sent at once."""
    while True:
        d = run.engine.next_deadline()
        if d is None:
            if moves and run.engine.phase is Phase.FINISHED:
                run.send(moves.pop(0))
                continue
            break
        if frame is not None and round(d * RATE) > frame:
            break
        run.clock.set(max(run.clock.now(), d))
        run.send(Tick())
    if frame is not None and frame / RATE > run.clock.now():
        run.clock.set(frame / RATE)


def whole_match_moves():
    return [ExtraCard(), Close()]


def segments_of(run):
    """(index, segment, start frame, frames) of every segment of an uninterrupted match with
    the bow, the planned cards, one extra card and the closing calls."""
    probe = make_run(run.engine.match, seed=run.engine.deck.seed)
    probe.send(Start())
    advance(probe, None, whole_match_moves())
    assert probe.engine.phase is Phase.CLOSED
    out, t = [], 0
    for i, s in enumerate(probe.engine.segments):
        n = probe.voice.frames(s.clip) if s.clip else sec(s.silence_s)
        out.append((i, s, t, n))
        t += n
    return out


@pytest.mark.parametrize("policy", ["restart_verse", "restart_card", "continue"])
def test_a_hold_in_every_segment_with_each_policy(policy):
    m = short_match(cards=2, bow_call={"enabled": True},
                    resume={"policy": policy, "lead_in_s": 0.5})
    timeline = segments_of(make_run(m))
    labels = [s.label for _, s, _, _ in timeline]
    assert labels[:3] == ["bow_call", "gap_after_bow", "memorise_call"]
    assert "extra_call" in labels and labels[-3:] == ["end_call", "gap_before_move", "move_call"]
    for i, seg, start, n in timeline:
        if n == 0:
            continue
        run = make_run(m)
        moves = whole_match_moves()
        run.send(Start())
        cut = start + n // 3
        advance(run, cut, moves)
        run.send(Hold("r"))
        snap = run.engine.snapshot()
        assert snap.paused and snap.cut.segment == i and snap.cut.offset_s == (n // 3) / RATE
        advance(run, cut + sec(2), moves)
        run.send(Release("r"))
        resume = cut + sec(2.5)
        advance(run, resume, moves)
        assert not run.engine.paused
        resumed = [c for c in run.commands if isinstance(c, PlayClip) and c.at_frame == resume]
        advance(run, None, moves)
        assert run.engine.phase is Phase.CLOSED and not moves
        if seg.clip is None and not (policy == "restart_card" and seg.in_card):
            # silence resumes its remainder: the next clip is exactly (resume - cut) late
            nxt = next(c for c in run.commands
                       if isinstance(c, PlayClip) and c.at_frame > resume)
            planned = next(st for j, s2, st, _ in timeline if j > i and s2.clip is not None)
            assert nxt.at_frame == planned + (resume - cut)
            assert resumed == []
        elif policy == "continue" and seg.clip is not None:
            assert [(c.segment, c.offset) for c in resumed] == [(i, n // 3)]
        elif policy == "restart_card" and seg.in_card:
            assert [(c.segment, c.offset) for c in resumed] == [(seg.card_start, 0)]
        else:
            assert [(c.segment, c.offset) for c in resumed] == [(i, 0)]
        heard = [p for p in run.tape.pieces]
        assert all(a.end <= b.start for a, b in itertools.pairwise(heard))


def test_lead_in_is_cut_by_a_new_hold_and_starts_again():
    run = make_run(short_match(resume={"lead_in_s": 1.0}))
    run.send(Start())
    run.at(sec(1), Hold("a"))
    run.at(sec(2), Release("a"))
    run.at(sec(2.5), Hold("b"))
    run.run_until(sec(5))
    assert run.engine.paused
    run.at(sec(5), Release("b"))
    run.run_until(sec(6))
    assert not run.engine.paused
    # the resumed call was sent at the release for 3 s, cancelled by the hold at 2.5 s, sent
    # again at the second release for 6 s: what was heard is the cut call, then all of it
    sent = [(c.at_frame, c.offset) for c in run.commands
            if isinstance(c, PlayClip) and c.segment == 0]
    assert sent == [(0, 0), (sec(3), 0), (sec(6), 0)]
    assert [s.at_frame for s in run.commands if isinstance(s, StopAudio)] == [sec(1), sec(2.5)]
    heard = [(p.start, p.offset, p.end_offset) for p in run.tape.pieces if p.segment == 0]
    n = run.voice.frames(next(run.engine.programme_clips()))
    assert heard == [(0, 0, sec(1)), (sec(6), 0, n)]


# ---------------------------------------------------------------------------- extra cards


def test_extra_card_only_after_the_end_and_never_a_card_twice():
    run = make_run(short_match(cards=18), colors=("blue",))
    with pytest.raises(IllegalMove, match="cannot read an extra card while ready"):
        run.send(ExtraCard())
    run.send(Start())
    with pytest.raises(IllegalMove, match="announcing"):
        run.send(ExtraCard())
    run.run_until()
    assert run.engine.phase is Phase.FINISHED
    run.send(ExtraCard())
    assert run.engine.phase is Phase.TIEBREAK
    run.run_until()
    run.send(ExtraCard())
    run.run_until()
    assert run.engine.phase is Phase.FINISHED
    with pytest.raises(IllegalMove, match="all 20 poems of the deck have been read"):
        run.send(ExtraCard())
    poems = [c.poem for c in run.engine.snapshot().cards]
    assert poems == list(run.engine.deck.order)
    assert len(set(poems)) == 20
    snap = run.engine.snapshot()
    assert snap.cards_total == 20 and snap.unread_left == 0


def test_an_extra_card_is_announced_and_read_before_the_end_call():
    """Rule 16 then rule 18: 「もう一枚読みます」, the card, and only when the operator closes,
    「ありがとうございました」 and the move call."""
    m = short_match(cards=2)
    run = make_run(m)
    run.send(Start())
    run.run_until()
    t = run.frame() + sec(20)  # the players counted: a tie in the final
    before = len(run.commands)
    run.at(t, ExtraCard())
    snap = run.engine.snapshot()
    assert snap.phase == "tiebreak" and snap.segment.label == "extra_call"
    assert snap.cards_total == 3 and snap.calls["extra_call"] == "もう一枚読みます"
    run.run_until()
    assert run.engine.phase is Phase.FINISHED
    run.send(Close())
    run.run_until()
    assert run.engine.phase is Phase.CLOSED
    plays = [c for c in run.commands[before:] if isinstance(c, PlayClip)]
    card = run.engine.deck.order[2]
    extra = "call:extra_call:" + m.extra_call.yomi
    assert [p.clip.key for p in plays] == [
        extra, f"verse:{card:03d}:kami", f"verse:{card:03d}:shimo",
        "call:end_call:" + m.end_call.yomi, "call:move_call:" + m.move_call.yomi]
    assert plays[0].at_frame == t
    assert plays[1].at_frame == t + clip_frames(run, extra) + sec(m.gaps.after_call_s)
    assert [c.poem for c in run.engine.snapshot().cards] == list(run.engine.deck.order[:3])
    # several extra cards may follow one another while unread poems remain; none after closing
    with pytest.raises(IllegalMove, match="cannot read an extra card while the match is closed"):
        run.send(ExtraCard())


def test_extra_call_disabled_reads_the_card_alone():
    m = short_match(cards=1, extra_call={"enabled": False})
    run = make_run(m)
    run.send(Start())
    run.run_until()
    t = run.frame()
    before = len(run.commands)
    run.send(ExtraCard())
    first = next(c for c in run.commands[before:] if isinstance(c, PlayClip))
    assert first.clip.key.endswith(":kami") and first.at_frame == t
    assert run.engine.snapshot().calls["extra_call"] is None


def test_close_only_when_finished_then_closed_for_good():
    m = short_match(cards=1)
    run = make_run(m)
    with pytest.raises(IllegalMove, match="cannot close the match while ready: only possible "
                                          "when finished"):
        run.send(Close())
    run.send(Start())
    run.at(sec(4), Tick())
    with pytest.raises(IllegalMove, match="cannot close the match while the match is memorising"):
        run.send(Close())
    run.run_until()
    run.send(Close())
    assert run.engine.phase is Phase.CLOSING
    with pytest.raises(IllegalMove, match="cannot close the match while the match is closing"):
        run.send(Close())
    with pytest.raises(IllegalMove, match="cannot abort while the match is closing: the match "
                                          "is already over"):
        run.send(Abort())
    # a hand raised during the closing calls pauses them like any reading
    run.at(run.frame() + sec(0.5), Hold("r"))
    assert run.engine.paused
    run.at(run.frame() + sec(1), Release("r"))
    run.run_until()
    assert run.engine.phase is Phase.CLOSED and run.engine.next_deadline() is None
    for move, words in ((Close(), "close the match"), (Start(), "start"),
                        (Abort(), "abort"), (Hold("r"), "raise a hold")):
        with pytest.raises(IllegalMove, match=f"cannot {words} while (the match is )?closed"):
            run.send(move)
    assert run.send(Release("nobody")) == []


def test_closing_calls_can_be_disabled():
    m = short_match(cards=1, end_call={"enabled": False})
    run = make_run(m)
    run.send(Start())
    run.run_until()
    t = run.frame()
    before = len(run.commands)
    run.send(Close())
    run.run_until()
    plays = [c for c in run.commands[before:] if isinstance(c, PlayClip)]
    assert [(p.clip.name, p.at_frame) for p in plays] == [("move_call", t)]

    none = short_match(cards=1, end_call={"enabled": False}, move_call={"enabled": False})
    run = make_run(none)
    run.send(Start())
    run.run_until()
    run.send(Hold("r"))
    cmds = run.send(Close())
    assert run.engine.phase is Phase.CLOSED and not run.engine.snapshot().holds
    assert not any(isinstance(c, PlayClip) for c in cmds)
    facts = [f["fact"] for f in run.records[-1]["facts"]]
    assert facts == ["close", "closed"]


def test_bow_alone_then_start_reads_the_memorisation_call_at_once():
    """Rule 1 in game 1 and the final: the bow, then the players shuffle and lay out their
    cards; the operator starts when they are ready (rule 4)."""
    m = short_match(bow_call={"enabled": True})
    run = make_run(m)
    bow = "call:bow_call:" + m.bow_call.yomi
    run.send(Bow())
    snap = run.engine.snapshot()
    assert snap.phase == "bowing" and snap.segment.label == "bow_call" and not snap.bowed
    with pytest.raises(IllegalMove, match="cannot start while the match is bowing"):
        run.send(Start())
    run.run_until()
    assert run.engine.phase is Phase.READY and run.engine.snapshot().bowed
    assert run.frame() == clip_frames(run, bow), "ready again when the call ends, not its gap"
    with pytest.raises(IllegalMove, match="cannot signal the bow while ready: the players have "
                                          "bowed already"):
        run.send(Bow())
    t = sec(120)
    run.at(t, Start())
    plays = [c for c in run.commands if isinstance(c, PlayClip)]
    assert [(p.clip.key, p.at_frame) for p in plays[:2]] == [
        (bow, 0), ("call:memorise_call:" + m.memorise_call.yomi, t)]
    run.run_until()
    assert run.engine.phase is Phase.FINISHED
    assert sum(isinstance(c, PlayClip) and c.clip.key == bow for c in run.commands) == 1


def test_start_without_a_bow_reads_the_bow_then_its_silence_then_the_call():
    m = short_match(bow_call={"enabled": True, "text": "よろしくお願いします",
                              "yomi": "よろしくおねがいします"})
    run = make_run(m)
    run.send(Start())
    assert run.engine.phase is Phase.BOWING
    run.run_until()
    plays = [c for c in run.commands if isinstance(c, PlayClip)]
    bow = "call:bow_call:よろしくおねがいします"
    assert plays[0].clip.key == bow and plays[0].clip.text == "よろしくお願いします"
    assert plays[1].clip.name == "memorise_call"
    assert plays[1].at_frame == clip_frames(run, bow) + sec(m.gaps.after_bow_s)


def test_bow_refused_when_disabled_and_a_hold_pauses_it():
    run = make_run(short_match())
    with pytest.raises(IllegalMove, match="the bow call is disabled"):
        run.send(Bow())
    run = make_run(short_match(bow_call={"enabled": True}))
    run.send(Bow())
    run.at(sec(0.2), Hold("r"))
    assert run.engine.paused and run.engine.phase is Phase.BOWING
    run.at(sec(3), Release("r"))
    run.run_until()
    assert run.engine.phase is Phase.READY and run.engine.snapshot().bowed
    # the bow call was read again whole after the lead-in; nothing after it was sent
    plays = [c for c in run.commands if isinstance(c, PlayClip)]
    assert [(p.segment, p.at_frame) for p in plays] == [(0, 0), (0, sec(3.6))]
    run2 = make_run(short_match(bow_call={"enabled": True}))
    run2.send(Bow())
    run2.at(sec(0.2), Abort("no"))
    assert run2.engine.phase is Phase.ABORTED


def test_start_twice_names_the_phase():
    run = make_run(short_match())
    run.send(Start())
    with pytest.raises(IllegalMove, match="cannot start while the match is announcing"):
        run.send(Start())
    run.at(sec(0.1), Hold("r"))
    with pytest.raises(IllegalMove, match=r"announcing \(paused\)"):
        run.send(Start())


def test_finished_match_cannot_be_aborted_but_can_hold():
    run = make_run(short_match(cards=1))
    run.send(Start())
    run.run_until()
    with pytest.raises(IllegalMove, match="already over"):
        run.send(Abort())
    run.send(Hold("r"))
    run.send(ExtraCard())
    assert run.engine.paused and run.engine.phase is Phase.TIEBREAK
    run.at(run.frame() + sec(1), Release("r"))
    run.run_until()
    run.send(Hold("r"))
    run.send(Close())  # closing with a hand up: the calls wait for it
    assert run.engine.paused and run.engine.phase is Phase.CLOSING


def test_cards_more_than_deck_is_refused():
    with pytest.raises(BadDeck, match="deck holds 20 poems"):
        make_run(short_match(), cards=21)


def test_catch_up_before_an_event_is_its_own_record():
    run = make_run(short_match(cards=1))
    run.send(Start())
    call = run.voice.frames(next(run.engine.programme_clips()))
    run.clock.set((call + sec(1.0)) / RATE)  # no Tick at the call's end
    run.send(Hold("r"))
    kinds = [r["event"]["type"] for r in run.records]
    assert kinds == ["start", "tick", "hold"]
    cut = next(f for f in run.records[-1]["facts"] if f["fact"] == "cut")
    assert cut["label"] == "memorise" and cut["offset"] == sec(1.0)


def test_illegal_move_after_catch_up_keeps_the_catch_up_output():
    run = make_run(short_match(cards=1))
    run.send(Start())
    call = run.voice.frames(next(run.engine.programme_clips()))
    run.clock.set((call + sec(0.5)) / RATE)
    with pytest.raises(IllegalMove):
        run.send(Start())
    cmds = run.send(Tick())
    assert any(isinstance(c, Record) and c.entry["event"]["type"] == "tick" for c in cmds)
    assert run.engine.phase is Phase.MEMORISING


def test_schedule_lead_sends_the_first_clip_ahead_of_its_frame():
    from reader.clock import ManualClock
    from reader.deck import Deck
    from reader.engine import Engine

    from .fakes import FakeVoice

    lead = sec(0.03)
    voice, clock = FakeVoice(), ManualClock(10.0)
    e = Engine(match=short_match(resume={"lead_in_s": 0}), deck=Deck.build(colors=["blue"], seed=1),
               voice=voice, clock=clock, rate=RATE, schedule_lead=lead)
    t0 = sec(10)
    first = next(c for c in e.handle(Start()) if isinstance(c, PlayClip))
    assert first.at_frame == t0 + lead and first.offset == 0
    clock.set(10.01)  # a hold before the call has begun: cut at its start
    e.handle(Hold("r"))
    assert e.snapshot().cut.offset_s == 0.0
    clock.set(11.0)
    cmds = e.handle(Release("r"))  # no lead-in configured: the scheduling lead still applies
    again = [c for c in cmds if isinstance(c, PlayClip)]
    assert [(c.at_frame, c.offset) for c in again] == [(sec(11) + lead, 0)]
    assert e.paused and e.next_deadline() == (sec(11) + lead) / RATE


# ---------------------------------------------------------------- the teacher's controls
def test_read_again_between_cards_announces_the_last_card_then_goes_on():
    """Issue 20 item 11: on request, between cards, 「もう一度読みます」 and the card just read
    (upper and lower verse), then the next card as if nothing had happened; a journal fact."""
    m = short_match(cards=3)
    run = make_run(m)
    run.send(Start())
    order = run.engine.deck.order
    # to the gap after card 1's lower verse
    while not (run.engine.snapshot().segment.label == "gap_between_cards"
               and run.engine.snapshot().card == 1):
        run.run_until(round(run.engine.next_deadline() * RATE))
    t = run.frame() + sec(0.3)
    before = len(run.commands)
    out = run.at(t, ReadAgain())
    assert any(isinstance(c, StopAudio) for c in out)  # card 2's upper verse, sent ahead, is off
    snap = run.engine.snapshot()
    assert snap.segment.label == "again_call" and snap.phase == "reading" and snap.card == 1
    assert snap.calls["again_call"] == "もう一度読みます"
    run.run_until()
    plays = [c for c in run.commands[before:] if isinstance(c, PlayClip)]
    again = "call:again_call:" + m.again_call.yomi
    assert [p.clip.key for p in plays][:5] == [
        again, f"verse:{order[0]:03d}:kami", f"verse:{order[0]:03d}:shimo",
        f"verse:{order[1]:03d}:kami", f"verse:{order[1]:03d}:shimo"]
    assert plays[0].at_frame == t  # at once (the fake engine's scheduling lead is 0)
    assert plays[1].at_frame == t + clip_frames(run, again) + sec(m.gaps.after_call_s)
    # the match still reads its three cards, each once in the list, then finishes
    end = run.engine.snapshot()
    assert end.phase == "finished" and [c.poem for c in end.cards] == list(order[:3])
    facts = [f for r in run.records for f in r["facts"] if f["fact"] == "read_again"]
    assert facts == [{"fact": "read_again", "card": 1, "poem": order[0], "frame": t}]


def test_read_again_once_finished_reads_the_last_card_and_finishes_again():
    m = short_match(cards=2, again_call={"enabled": False})
    run = make_run(m)
    run.send(Start())
    run.run_until()
    before = len(run.commands)
    run.send(ReadAgain())
    assert run.engine.phase is Phase.READING
    run.run_until()
    assert run.engine.phase is Phase.FINISHED
    card = run.engine.deck.order[1]
    assert [c.clip.key for c in run.commands[before:] if isinstance(c, PlayClip)] == [
        f"verse:{card:03d}:kami", f"verse:{card:03d}:shimo"]
    assert run.engine.snapshot().cards_total == 2


def test_read_again_is_refused_while_a_card_is_read_and_before_any_card():
    run = make_run(short_match(cards=2))
    run.send(Start())
    with pytest.raises(IllegalMove, match="only possible when reading or tiebreak or finished"):
        run.send(ReadAgain())
    while run.engine.snapshot().segment.label != "card_kami":
        run.run_until(round(run.engine.next_deadline() * RATE))
    with pytest.raises(IllegalMove, match="only between cards"):
        run.send(ReadAgain())


def test_skip_cuts_the_card_and_reads_the_next_upper_verse_at_once():
    m = short_match(cards=3)
    run = make_run(m)
    run.send(Start())
    order = run.engine.deck.order
    while run.engine.snapshot().segment.label != "card_shimo":
        run.run_until(round(run.engine.next_deadline() * RATE))
    t = run.frame() + sec(0.5)  # half a second into card 1's lower verse
    before = len(run.commands)
    out = run.at(t, Skip())
    assert StopAudio(t) in out
    snap = run.engine.snapshot()
    assert snap.segment.label == "card_kami" and snap.card == 2
    plays = [c for c in run.commands[before:] if isinstance(c, PlayClip)]
    assert plays[0].clip.key == f"verse:{order[1]:03d}:kami" and plays[0].at_frame == t
    # what was heard of card 1's lower verse ends at the skip
    piece = next(p for p in run.tape.pieces if p.key == f"verse:{order[0]:03d}:shimo")
    assert piece.end == t
    fact = next(f for r in run.records for f in r["facts"] if f["fact"] == "skip")
    assert fact == {"fact": "skip", "label": "card_shimo", "frame": t, "card": 1,
                    "poem": order[0]}
    card1 = run.engine.snapshot().cards[0]
    assert card1.finished_s == t / RATE
    run.run_until()
    assert run.engine.phase is Phase.FINISHED and len(run.engine.snapshot().cards) == 3


def test_skip_the_memorisation_and_past_the_last_card():
    m = short_match(cards=1, prelude={"enabled": False})
    run = make_run(m)
    run.send(Start())
    while run.engine.phase is not Phase.MEMORISING:
        run.run_until(round(run.engine.next_deadline() * RATE))
    run.send(Skip())
    assert run.engine.snapshot().segment.label == "card_kami"
    run.send(Skip())
    assert run.engine.phase is Phase.FINISHED
    with pytest.raises(IllegalMove, match="skip to the next card while the match is finished"):
        run.send(Skip())


def test_a_skip_with_a_hand_up_stays_held_and_reads_the_next_card_on_release():
    m = short_match(cards=2)
    run = make_run(m)
    run.send(Start())
    while run.engine.snapshot().segment.label != "card_kami":
        run.run_until(round(run.engine.next_deadline() * RATE))
    run.at(run.frame() + sec(0.4), Hold("a"))
    run.send(Skip())
    snap = run.engine.snapshot()
    assert snap.paused and snap.card == 2 and snap.segment.label == "card_kami"
    assert not [c for c in run.engine.handle(Tick()) if isinstance(c, PlayClip)]
    before = len(run.commands)
    run.at(run.frame() + sec(1), Release("a"))
    run.run_until()
    keys = [c.clip.key for c in run.commands[before:] if isinstance(c, PlayClip)]
    assert keys[0] == f"verse:{run.engine.deck.order[1]:03d}:kami"
