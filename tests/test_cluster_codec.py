"""What crosses the cluster's bus (cluster.codec, cluster.messages): typed values come back as
the same types, led by the expected type, never by names in the message; errors come back as
the owner's class with its message and figures; anything else is refused."""

import pytest

from cluster.codec import CodecError, from_plain, loads, to_plain
from cluster.messages import (
    Output,
    ProtocolError,
    decode,
    error_from,
    error_reply,
    item_request,
    press_request,
    read_item,
    read_press,
    read_reply,
    reply,
)
from hall.errors import ChannelFault, JournalUnavailable
from hall.inbox import PrepareMatch, RenderGate
from hall.presses import Outcome, Press, Verdict
from hall.recovery import RecoveryReport
from hall.rendering import RenderProgress
from hall.states import ChannelState, MatchState
from reader.errors import IllegalMove, TooManyCards
from reader.events import Abort, Hold, Release, Start
from reader.programme import Phase
from reader.snapshot import HoldView, Snapshot


def snapshot() -> Snapshot:
    return Snapshot(seq=7, at_s=12.5, phase=Phase.READING, paused=True, resumes_at_s=None,
                    holds=(HoldView("r1", "mat 3", 11.0),), card=2, cards_total=17,
                    cards_planned=17, unread_left=15, segment=None, countdown_s=None,
                    cut=None, cards=(), seed=123456, colors=("blue",), policy="restart_verse",
                    lead_in_s=1.0, timings={"memorise_s": 30.0}, reason="", bowed=True,
                    calls={"bow_call": "礼", "prelude_intro": None})


def channel_state() -> ChannelState:
    return ChannelState(channel="main", seq=9, audio="ok", journal="ok", fault=None,
                        no_device=None,
                        recovered=RecoveryReport("x.jsonl", 4, False, Phase.READING, None),
                        render=RenderProgress(3, 13, None), match=MatchState(snapshot(), None),
                        voice={"speed": 1.0}, preset="class")


def test_a_channel_state_comes_back_equal() -> None:
    st = channel_state()
    data = reply(st, Output("null output", {"code": "null"}, "device", -6.0))
    r = read_reply(decode(data))
    assert r.state == st
    assert r.output == Output("null output", {"code": "null"}, "device", -6.0)
    assert isinstance(r.state.match.snapshot.phase, Phase)  # type: ignore[union-attr]


@pytest.mark.parametrize("item", [
    Hold("r1", "mat 3"), Release("r1"), Start(), Abort("a reason"),
    PrepareMatch(colors=("pink",), poems=(1, 2), seed=5, overrides={"cards": 3},
                 preset="class")])
def test_every_command_comes_back_equal(item: object) -> None:
    assert read_item(decode(item_request(item))) == item  # type: ignore[arg-type]


def test_an_item_that_is_not_a_command_is_not_sent_or_read() -> None:
    with pytest.raises(ProtocolError):
        item_request(RenderGate())
    with pytest.raises(ProtocolError, match="unknown item"):
        read_item({"op": "apply", "type": "RenderGate", "item": {}})
    with pytest.raises(ProtocolError, match="unknown item"):
        read_item({"op": "apply", "type": "os.system", "item": {}})


def test_a_message_of_the_wrong_shape_is_refused() -> None:
    with pytest.raises(CodecError):
        read_item({"op": "apply", "type": "Hold", "item": {"name": "no referee"}})
    with pytest.raises(CodecError):
        from_plain(Snapshot, {**to_plain(snapshot()), "phase": "dancing"})
    with pytest.raises(CodecError):
        loads(Hold, b"not json")
    with pytest.raises(ProtocolError):
        decode(b"[1, 2]")
    with pytest.raises(ProtocolError):
        decode(b"x" * (300 * 1024))


def test_the_owners_errors_come_back_as_their_own_class() -> None:
    e = error_from(decode(error_reply(IllegalMove("start", "reading")))["error"])
    assert type(e) is IllegalMove and str(e) == "cannot start while reading"
    assert (e.move, e.phase) == ("start", "reading")
    e = error_from(decode(error_reply(TooManyCards(30, 20)))["error"])
    assert type(e) is TooManyCards and (e.cards, e.poems) == (30, 20)
    e = error_from(decode(error_reply(JournalUnavailable("disk full")))["error"])
    assert type(e) is JournalUnavailable and str(e) == "disk full"
    # anything unforeseen is a fault of the channel, naming what it was
    e = error_from(decode(error_reply(ZeroDivisionError("division by zero")))["error"])
    assert type(e) is ChannelFault and "ZeroDivisionError" in str(e)


def test_a_press_and_its_verdict_come_back_equal() -> None:
    for event, press, trusted in ((Hold("r1", "mat 3"), Press(12, 3, "kami", 41.25), False),
                                  (Release("r1"), Press(13), False),
                                  (Release("@operator"), Press(), True)):
        assert read_press(decode(press_request(event, press, trusted))) == (
            event, press, trusted)
    v = Verdict(Outcome.SUPERSEDED, 12, 13, None, None, 42.0)
    r = read_reply(decode(reply(channel_state(), Output("ok", {}, "device", 0.0), v)))
    assert r.verdict == v and r.state == channel_state()
    assert read_reply(decode(reply(channel_state(), Output("ok", {}, "device", 0.0)))).verdict \
        is None
    with pytest.raises(ProtocolError, match="a press of"):
        read_press({"op": "press", "type": "Start", "item": {}, "press": {}})
