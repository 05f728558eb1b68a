"""The outputs of the hall's channels, built from the configuration: the speakers (in an audio
process of their own, or in this one), a null output, or none at all (said clearly)."""

from __future__ import annotations

import logging
from collections.abc import Callable
from typing import Any

from audio.errors import AudioError, DeviceError
from audio.output.sink import NullSink, Sink
from hall.config import ChannelConfig, Config

log = logging.getLogger("yomite.hall")

SinkFactory = Callable[[Config, ChannelConfig], tuple[Sink, str]]


def device_sink(cfg: Config, device: str | int | None) -> tuple[Sink, str]:
    """The speakers (raises AudioError if they cannot be opened), and a line saying so: in an
    audio process of their own unless `audio.process` is false."""
    a = cfg.audio
    name = device if device is not None else "default"
    if a.process:
        from audio.output.process import ProcessSink

        proc = ProcessSink(device, a.rate, blocksize=a.blocksize, latency=a.latency,
                           fade_ms=a.fade_ms, cpu_wakeup_us=a.cpu_wakeup_us,
                           flush_on_stop=a.flush_on_stop)
        rt = "real-time" if proc.realtime else "normal priority"
        wake = ("" if proc.cpu_wakeup_us is None
                else f", CPU wake-up held at {proc.cpu_wakeup_us} µs")
        return proc, (f"device {name} ({proc.blocksize} frames/block, "
                      f"{proc.latency * 1000:.1f} ms stream latency, audio process {proc.pid}, "
                      f"{rt}{wake})")
    from audio.output.device import DeviceSink

    sink = DeviceSink(device, a.rate, blocksize=a.blocksize, latency=a.latency,
                      fade_ms=a.fade_ms, flush_on_stop=a.flush_on_stop)
    return sink, (f"device {name} ({sink.blocksize} frames/block, "
                  f"{sink.latency * 1000:.1f} ms stream latency)")


class NoDevice(NullSink):
    """Stands in for speakers that could not be opened: the match runs, no one hears it. The
    channel says so (state `audio: "no_device"`, health, the console asks before starting)."""

    def __init__(self, rate: int, reason: str, *, fade_ms: float,
                 why: dict[str, str] | None = None) -> None:
        super().__init__(rate, fade_ms=fade_ms)
        self.reason = reason
        self.why = dict(why or {"why": "device_error"})


def default_sink(cfg: Config, ch: ChannelConfig) -> tuple[Sink, str]:
    """The channel's speakers, or no sound (said clearly) when there is no usable device.
    A channel read only by browser speakers runs on a wall clock (a null sink)."""
    a = cfg.audio
    if ch.output == "browser":
        return (NullSink(a.rate, fade_ms=a.fade_ms),
                "browser speakers only (server.channels[].output: browser)")
    if a.output == "null":
        return NullSink(a.rate, fade_ms=a.fade_ms), "null output (config audio.output: null)"
    try:
        return device_sink(cfg, ch.device if ch.device is not None else a.device)
    except AudioError as e:
        log.warning("channel %s: no audio device (%s); audio goes nowhere", ch.name, e)
        why = ({"why": e.code, **e.params} if isinstance(e, DeviceError)
               else {"why": "device_error"})
        return (NoDevice(a.rate, str(e), fade_ms=a.fade_ms, why=why),
                f"NO AUDIO DEVICE ({e}): audio goes nowhere")


def output_info(cfg: Config, ch: ChannelConfig, sink: Sink) -> dict[str, Any]:
    """What the channel's output is, as a code and its figures: the console says it in its
    own language (the description beside it is English, for logs and the API's readers).
    `other` is a sink this module did not make (a test's): the console shows the description."""
    if isinstance(sink, NoDevice):
        return {"code": "no_device", **sink.why}
    if type(sink) is NullSink:
        if ch.output == "browser":
            return {"code": "browser"}
        if cfg.audio.output == "null":
            return {"code": "null"}
    blocksize, latency = getattr(sink, "blocksize", None), getattr(sink, "latency", None)
    if not isinstance(blocksize, int) or not isinstance(latency, float):
        return {"code": "other"}
    device = ch.device if ch.device is not None else cfg.audio.device
    return {"code": "device", "device": "default" if device is None else str(device),
            "blocksize": blocksize, "latency_ms": round(latency * 1000, 1),
            "pid": getattr(sink, "pid", None), "realtime": getattr(sink, "realtime", None),
            "wakeup_us": getattr(sink, "cpu_wakeup_us", None)}
