"""The `yomite` command: serve the hall, play or render a match, list devices and voices."""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import logging
import os
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from audio.config import VoiceEngine
from audio.errors import AudioError
from hall.config import Config, load_config
from reader.errors import ReaderError
from yomite import clustercmd, https, offline
from yomite.startup import StartupError


def _config(args: argparse.Namespace) -> Config:
    cfg = load_config(args.config)
    audio_over: dict[str, Any] = {}
    voice_over: dict[str, Any] = {}
    if getattr(args, "device", None) is not None:
        dev = args.device
        audio_over["device"] = int(dev) if str(dev).isdigit() else dev
    if getattr(args, "voice", None):
        voice_over["engine"] = args.voice
    if getattr(args, "pack", None):
        voice_over["pack"] = args.pack
    if getattr(args, "pack_fallback", False):
        voice_over["pack_fallback"] = True
    if audio_over or voice_over:
        data = cfg.model_dump(mode="json")
        data["audio"].update(audio_over)
        data["voice"].update(voice_over)
        from hall.config import parse_config

        cfg = parse_config(data, "command line")
    return cfg


def _match_args(p: argparse.ArgumentParser) -> None:
    p.add_argument("--color", "--colour", action="append", dest="colors", default=[],
                   help="deck colour (blue pink yellow green orange, or 青 桃 赤 黄 緑 橙); repeat")
    p.add_argument("--poems", default="", help="explicit poem numbers, e.g. 1,2,3")
    p.add_argument("--seed", type=int, default=None, help="shuffle seed (random if omitted)")
    p.add_argument("--cards", type=int, default=None, help="number of cards (default 17)")
    p.add_argument("--memorise", type=float, default=None, help="memorisation seconds")
    p.add_argument("--no-close", action="store_true",
                   help="end when the cards are read, without the end and move calls (rule "
                        "18); by default they follow at once when no one is at the keys")


def _overrides(args: argparse.Namespace) -> dict[str, Any]:
    over: dict[str, Any] = {}
    if args.cards is not None:
        over["cards"] = args.cards
    if args.memorise is not None:
        over["memorise_s"] = args.memorise
    if args.colors:
        over["colors"] = args.colors
    return over


def _poems(args: argparse.Namespace) -> tuple[int, ...]:
    try:
        return tuple(int(x) for x in args.poems.replace(" ", "").split(",") if x)
    except ValueError:
        raise ReaderError(
            f"--poems takes numbers separated by commas, not {args.poems!r}"
        ) from None


@contextlib.contextmanager
def _cbreak() -> Iterator[bool]:
    """Single-key input on a terminal; does nothing when stdin is not a terminal."""
    if not sys.stdin.isatty():
        yield False
        return
    import termios
    import tty

    fd = sys.stdin.fileno()
    old = termios.tcgetattr(fd)
    try:
        tty.setcbreak(fd)
        yield True
    finally:
        termios.tcsetattr(fd, termios.TCSADRAIN, old)


async def _live(cfg: Config, args: argparse.Namespace, *, speakers: bool) -> int:
    from audio.output.sink import NullSink, WallClock
    from audio.voices.factory import make_voice
    from hall.inbox import PrepareMatch
    from hall.matchplan import as_read_by
    from hall.runtime import ChannelRuntime
    from hall.states import ChannelState
    from reader.events import OPERATOR, Abort, Close, ExtraCard, Hold, Release, Start
    from reader.programme import Phase
    from yomite.terminal import TerminalView

    voice_cfg = cfg.voice
    if not speakers and voice_cfg.engine is not VoiceEngine.ESTIMATE and not args.voiced:
        voice_cfg = voice_cfg.model_copy(update={"engine": VoiceEngine.ESTIMATE})
    voice = make_voice(voice_cfg, cfg.audio.rate)
    if speakers:
        from hall.sinks import device_sink

        sink, description = device_sink(cfg, cfg.audio.device)
        print(f"audio: {description}")
    else:
        clock = _ScaledClock(args.speed) if args.speed != 1 else WallClock()
        sink = NullSink(cfg.audio.rate, clock)
        print(f"dry run: no sound, {voice.name} durations, x{args.speed:g} speed")
    m = as_read_by(cfg.match, voice_cfg)  # a pack's own jokā shows its own text
    texts = {"bow_call": m.bow_call.text, "memorise_call": m.memorise_call.text,
             "prelude_intro": m.prelude.intro.text, "prelude_kami": m.prelude.kami.text,
             "prelude_shimo": m.prelude.shimo.text, "extra_call": m.extra_call.text,
             "again_call": m.again_call.text,
             "end_call": m.end_call.text, "move_call": m.move_call.text}
    view = TerminalView(texts, cfg.audio.rate)
    done = asyncio.Event()
    interactive = sys.stdin.isatty()
    said = False

    def on_publish(state: ChannelState) -> None:
        nonlocal said
        view.on_state(state)
        if view.closed:  # the reader of our output left: so do we
            done.set()
            return
        mm = state.match.snapshot if state.match is not None else None
        phase = mm.phase if mm is not None else None
        if phase in (Phase.CLOSED, Phase.ABORTED):
            done.set()
        elif phase is Phase.FINISHED and mm is not None and not mm.paused:
            # rule 16: the players count their cards; rule 18 waits for the hall
            if interactive:
                if not said:
                    said = True
                    print("finished: x = one more card (a tie), c = close (thanks, move), "
                          "q = quit")
            elif args.no_close:
                done.set()
            elif not said:
                said = True
                runtime.post(Close())  # no one at the keys: close at once
        else:
            said = False

    def on_record(entry: dict[str, Any]) -> None:
        view.on_record(entry)
        if view.closed:
            done.set()

    runtime = ChannelRuntime("cli", cfg, voice, sink, on_publish=on_publish,
                             on_record=on_record, journal_dir=Path(cfg.journal_dir),
                             clock_speed=args.speed)
    runtime.start()
    try:
        await runtime.submit(PrepareMatch(colors=tuple(args.colors), poems=_poems(args),
                                          seed=args.seed, overrides=_overrides(args)))
        assert runtime.engine is not None
        deck = ", ".join(args.colors) or ", ".join(m.colors)
        print(f"deck: {deck}; seed {runtime.engine.deck.seed}; journal {runtime.journal_path}")
        if interactive:
            print("keys: space = hold/release; after the cards: x = one more card, "
                  "c = close (thanks and move); q = abort or quit")
        await runtime.submit(Start())
        held = False
        loop = asyncio.get_running_loop()
        with _cbreak() as keys:
            if keys:
                def on_key() -> None:
                    nonlocal held
                    ch = sys.stdin.read(1)
                    if ch == " ":
                        runtime.post(Release(OPERATOR) if held else Hold(OPERATOR, "console"))
                        held = not held
                    elif ch in "xX":
                        runtime.post(ExtraCard())
                    elif ch in "cC":
                        runtime.post(Close())
                    elif ch in "qQ":
                        phase = runtime.engine.phase if runtime.engine else None
                        if phase not in (Phase.FINISHED, Phase.CLOSED):
                            runtime.post(Abort("aborted from the terminal"))
                        loop.call_later(0.3, done.set)

                loop.add_reader(sys.stdin.fileno(), on_key)
            try:
                await done.wait()
            finally:
                if keys:
                    loop.remove_reader(sys.stdin.fileno())
        await asyncio.sleep(0.2)  # let the last call's tail leave the speakers
        args.output_closed = view.closed
    finally:
        await runtime.stop()
        sink.close()
    return 0


class _ScaledClock:
    """Monotonic time running `speed` times faster: dry runs of a whole match in seconds."""

    def __init__(self, speed: float) -> None:
        self.speed = speed
        self._t0 = time.monotonic()

    def now(self) -> float:
        return (time.monotonic() - self._t0) * self.speed


def cmd_dry_run(args: argparse.Namespace) -> int:
    return asyncio.run(_live(_config(args), args, speakers=False))


def cmd_play(args: argparse.Namespace) -> int:
    return asyncio.run(_live(_config(args), args, speakers=True))


def cmd_render(args: argparse.Namespace) -> int:
    cfg = _config(args)
    result = offline.render_match(
        cfg,
        colors=tuple(args.colors),
        poems=_poems(args),
        seed=args.seed,
        overrides=_overrides(args),
        out=Path(args.out),
        timeline=Path(args.timeline) if args.timeline else None,
        progress=_progress_bar if sys.stderr.isatty() else None,
        close=not args.no_close,
    )
    print(json.dumps(result, ensure_ascii=False, indent=2))
    return 0


def _progress_bar(done: int, total: int, clip: Any) -> None:
    width = 30
    filled = width * done // max(total, 1)
    sys.stderr.write(f"\rrendering [{'#' * filled}{'.' * (width - filled)}] {done}/{total}")
    if done == total:
        sys.stderr.write("\n")
    sys.stderr.flush()


def cmd_devices(args: argparse.Namespace) -> int:
    from audio.output.portaudio import list_devices

    devices = list_devices()
    if not devices:
        print("no output devices (is a sound server running? see README)")
        return 1
    for d in devices:
        print(f"{d.index:3d}  {d.name}{'  (default)' if d.default else ''}"
              f"  {d.channels} ch  {d.default_rate:g} Hz")
    return 0


def cmd_voices(args: argparse.Namespace) -> int:
    from audio.voices.catalogue import list_voices

    cfg = _config(args)
    if args.action == "list":
        for v in list_voices(cfg.voice):
            mark = "yes" if v["available"] else "no "
            sel = "*" if v.get("selected") else " "
            print(f"{sel} {v['engine']:<10} {mark}  {v['detail']}")
        return 0
    if args.action == "render":
        return offline.render_voices(cfg, colors=tuple(args.colors), progress=_progress_bar)
    if args.action == "import":
        if not args.path:
            raise ReaderError("yomite voices import needs the pack's folder")
        return offline.import_pack(cfg, Path(args.path))
    raise AssertionError(args.action)


def cmd_serve(args: argparse.Namespace) -> int:
    from yomite.server import serve

    cfg = _config(args)
    overrides: dict[str, object] = {}
    if getattr(args, "journal_dir", None):
        overrides["journal_dir"] = Path(args.journal_dir)
    overrides.update(clustercmd.overrides(cfg, args))  # --bus, --bus-insecure
    cfg = https.with_arguments(cfg, args)  # --tls-cert, --tls-key, --insecure-http
    if overrides:
        cfg = cfg.model_copy(update=overrides)
    clustercmd.check(cfg)  # a broker anyone may use, a missing or wrong key: exit 2
    return serve(cfg, host=args.host, port=args.port,
                 open_console=getattr(args, "open", False))


CONFIG_HELP = "config file (default: $YOMITE_CONFIG, else ./config.yaml, else the defaults)"


def build_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="yomite", description=__doc__,
                                epilog="With no command, yomite serves and opens the "
                                "operator's console in this computer's browser (yomite serve "
                                "--open).")
    p.add_argument("--config", default=None, help=CONFIG_HELP)
    # every command takes --config too, before or after its name; SUPPRESS keeps a value
    # given before the command when none follows it
    common = argparse.ArgumentParser(add_help=False)
    common.add_argument("--config", default=argparse.SUPPRESS, help=CONFIG_HELP)
    sub = p.add_subparsers(dest="cmd", parser_class=_Sub(common))

    s = sub.add_parser("serve", help="run the hall service (REST, WebSocket, pages)",
                       description="The hall service: the operator's console, the referees' "
                       "phones and the projectors, one reader per channel. Prints the console "
                       "link (with the operator token), each channel's join link and PIN, and "
                       "a QR code.")
    s.add_argument("--host", default=None,
                   help="interface to listen on (default server.host: 0.0.0.0, every one)")
    s.add_argument("--port", type=int, default=None,
                   help="port to listen on (default server.port: 8080)")
    s.add_argument("--open", action="store_true",
                   help="open the operator's console in this computer's browser once serving "
                   "(what `yomite` with no command does)")
    https.add_serve_arguments(s)  # --tls-cert, --tls-key, --insecure-http
    clustercmd.add_serve_arguments(s)  # --bus URL, --bus-insecure
    s.add_argument("--journal-dir", default=None, metavar="DIR",
                   help="this process's own folder for journals and keys (default journal_dir; "
                   "two processes on one machine need one each)")
    s.set_defaults(func=cmd_serve)

    d = sub.add_parser("dry-run", help="a whole match's timeline in the terminal, no sound")
    _match_args(d)
    d.add_argument("--speed", type=float, default=1.0, help="run this many times faster")
    d.add_argument("--voiced", action="store_true", help="use the configured voice's durations")
    d.set_defaults(func=cmd_dry_run)

    pl = sub.add_parser("play", help="read a whole match aloud through the speakers")
    _match_args(pl)
    pl.add_argument("--voice", choices=[e.value for e in VoiceEngine])
    pl.add_argument("--pack", default=None, help="a voice pack folder")
    pl.add_argument("--pack-fallback", action="store_true",
                    help="read poems the pack lacks with Open JTalk")
    pl.add_argument("--device", default=None, help="output device name or index")
    pl.set_defaults(func=cmd_play, speed=1.0, voiced=True)

    r = sub.add_parser("render", help="render a whole match to a file, with its timeline")
    _match_args(r)
    r.add_argument("--voice", choices=[e.value for e in VoiceEngine])
    r.add_argument("--pack", default=None)
    r.add_argument("--pack-fallback", action="store_true",
                   help="read poems the pack lacks with Open JTalk")
    r.add_argument("--out", required=True, help="match.wav / .flac / .mp3")
    r.add_argument("--timeline", default=None, help="match.json: every segment with its times")
    r.set_defaults(func=cmd_render)

    clustercmd.add_commands(sub)  # cluster-key FILE
    dv = sub.add_parser("devices", help="list output devices")
    dv.set_defaults(func=cmd_devices)

    v = sub.add_parser("voices", help="list voices, render a deck ahead, import a pack")
    v.add_argument("action", choices=["list", "render", "import"])
    v.add_argument("path", nargs="?", help="import: the pack folder")
    v.add_argument("--color", "--colour", action="append", dest="colors", default=[])
    v.add_argument("--voice", choices=[e.value for e in VoiceEngine])
    v.add_argument("--pack", default=None)
    v.add_argument("--pack-fallback", action="store_true",
                   help="read poems the pack lacks with Open JTalk")
    v.set_defaults(func=cmd_voices)
    return p


def _Sub(common: argparse.ArgumentParser) -> type[argparse.ArgumentParser]:
    """Subcommand parsers that all inherit the common options (--config)."""

    class Sub(argparse.ArgumentParser):
        def __init__(self, *args: Any, **kwargs: Any) -> None:
            kwargs.setdefault("parents", [common])
            super().__init__(*args, **kwargs)

    return Sub


def main(argv: list[str] | None = None) -> int:
    logging.basicConfig(level=os.environ.get("YOMITE_LOG", "INFO"),
                        format="%(asctime)s %(levelname)s %(name)s: %(message)s")
    parser = build_parser()
    argv = sys.argv[1:] if argv is None else argv
    args = parser.parse_args(argv)
    if args.cmd is None:  # a teacher's double click or `yomite`: serve and open the console
        args = parser.parse_args(["serve", "--open", *argv])
    try:
        rc: int = args.func(args)
        if getattr(args, "output_closed", False):
            return _quiet_stdout(rc)
        return rc
    except (ReaderError, AudioError, StartupError) as e:
        print(f"yomite: {e}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        return 130
    except BrokenPipeError:  # `yomite ... | head`: the reader has what it wanted
        return _quiet_stdout(0)


def _quiet_stdout(rc: int) -> int:
    """Point stdout at /dev/null, so the flush at exit finds no closed pipe to complain of."""
    devnull = os.open(os.devnull, os.O_WRONLY)
    os.dup2(devnull, sys.stdout.fileno())
    return rc


if __name__ == "__main__":
    sys.exit(main())
