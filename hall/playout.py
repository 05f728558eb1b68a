"""Carrying out the engine's commands on a channel's outputs (the device sink, and the speaker
pages through the `SpeakersLike` feed): silence first, then the record, then the clips, then the
news; and the clocks the engine runs on there."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any, Protocol, assert_never

from audio.output.sink import Sink
from hall.voices import VoiceLike
from reader.commands import Command, PlayClip, Publish, Record, StopAudio
from reader.engine import Engine
from reader.snapshot import Snapshot


class SpeakersLike(Protocol):
    """The channel's browser speakers (hall.speaker.SpeakerFeed)."""

    def carry_out(self, commands: list[Command], engine: Engine | None,
                  voice: VoiceLike) -> None: ...
    def refresh(self, engine: Engine | None, voice: VoiceLike) -> None: ...


def carry_out(
    commands: list[Command],
    voice: VoiceLike,
    sink: Sink,
    record: Callable[[dict[str, Any]], bool | None],
    publish: Callable[[Snapshot], None],
    frame_offset: int = 0,
    *,
    stopped: bool = False,
) -> None:
    """Carry out engine commands: silence first, then the record, then the news.

    Every `StopAudio` first (a hold silences the output whatever else fails, and before any
    fsync), then the journal records in order, then the clips, then publication. A clip sent
    before the last stop of the batch is one that stop would forget (`Sink.stop`), so it is
    not sent. If a record cannot be written (`record` returns False or raises), no clip is
    sent: nothing new is heard that the journal does not hold. Every command is attempted;
    the first exception is raised at the end. `frame_offset` is the engine's frame minus the
    sink's (non-zero for a match recovered after a restart). `stopped`: the batch's stops were
    carried out already (`stop_first`)."""
    stops: list[StopAudio] = []
    records: list[Record] = []
    plays: list[PlayClip] = []
    publishes: list[Publish] = []
    for c in commands:
        match c:
            case StopAudio():
                stops.append(c)
                plays.clear()
            case Record():
                records.append(c)
            case PlayClip():
                plays.append(c)
            case Publish():
                publishes.append(c)
            case _:
                assert_never(c)
    errors: list[Exception] = []
    if not stopped:
        try:
            stop_first(stops, sink, frame_offset)
        except Exception as e:
            errors.append(e)
    durable = True
    for r in records:
        try:
            durable = record(r.entry) is not False and durable
        except Exception as e:
            errors.append(e)
            durable = False
    for p in plays if durable else ():
        try:
            sink.play(voice.pcm(p.clip), p.at_frame - frame_offset, p.offset, p.segment)
        except Exception as e:
            errors.append(e)
    for pub in publishes:
        try:
            publish(pub.snapshot)
        except Exception as e:
            errors.append(e)
    if errors:
        raise errors[0]


def stop_first(commands: Sequence[Command], sink: Sink, frame_offset: int = 0) -> None:
    """Carry out every `StopAudio` of a batch on the sink, each attempted; the first exception
    raised at the end."""
    error: Exception | None = None
    for c in commands:
        if isinstance(c, StopAudio):
            try:
                sink.stop(c.at_frame - frame_offset)
            except Exception as e:
                error = error or e
    if error is not None:
        raise error


class SinkClock:
    """The engine's clock on real audio: the output's own frame clock."""

    def __init__(self, sink: Sink) -> None:
        self._sink = sink

    def now(self) -> float:
        return self._sink.now()


class PinnedClock:
    """A clock that stays at one time: a fault hold is raised where the engine last was, so
    raising it never needs what failed (the length of a clip not reached yet)."""

    def __init__(self, t: float) -> None:
        self._t = t

    def now(self) -> float:
        return self._t
