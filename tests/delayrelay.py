"""A TCP relay that delays: each chunk it reads is written on `delay_ms` later, both ways, in
order. The partition tests' slow link (tests/netns.py: this kernel has no netem).

    python -m tests.delayrelay --listen IP:PORT --to IP:PORT --delay-ms N [--jitter-ms J]

With `--jitter-ms J` each chunk's delay is drawn anew, uniformly in [N - J, N + J] (a Wi-Fi's
jitter), but a chunk is never written before the one read before it, as TCP keeps order within
a connection: a chunk drawn short behind one drawn long waits for it (so delays are correlated,
as on a real queue). `--seed S` makes the draws repeatable.

It prints one line once it listens, `delayrelay listening on IP:PORT` (the port it got, for
`--listen IP:0`), and exits 0 on SIGTERM or SIGINT, closing every connection. Each accepted
connection gets its own connection to `--to`; a failed one closes the accepted one. The delay
is a hold from the moment a chunk is read, so throughput is not cut by it (a chunk read while
another waits waits alongside it). Memory is bounded: each direction holds at most
`QUEUE_CHUNKS` chunks of at most `CHUNK` bytes; past that it stops reading and TCP's own window
pushes back on the sender. A half-close (EOF) is passed on after the delay too. A reset or an
error on one side closes both once what was read before it is written on (the other direction's
held chunks are dropped).

Run it inside a namespace with `Host.popen`, or here with `Relay(...).start()` (the test
process waits for its line)."""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import os
import random
import select
import signal
import subprocess
import sys
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

CHUNK = 64 * 1024
QUEUE_CHUNKS = 64  # so at most 4 MiB held a direction
ROOT = Path(__file__).resolve().parent.parent


def _address(text: str) -> tuple[str, int]:
    host, _, port = text.rpartition(":")
    if not host or not port.isdigit():
        raise argparse.ArgumentTypeError(f"IP:PORT, not {text!r}")
    return host, int(port)


Delay = Callable[[], float]  # the next chunk's delay (s)


def fixed(delay_s: float) -> Delay:
    return lambda: delay_s


def jittered(delay_s: float, jitter_s: float, rng: random.Random) -> Delay:
    return lambda: max(0.0, rng.uniform(delay_s - jitter_s, delay_s + jitter_s))


async def _pump(reader: asyncio.StreamReader, writer: asyncio.StreamWriter,
                delay: Delay | float) -> None:
    """One direction: a reader task stamps each chunk on arrival, plus its delay, into a bounded
    queue; this task writes each at its stamp, in order. `None` in the queue is the sender's
    EOF."""
    queue: asyncio.Queue[tuple[float, bytes | None]] = asyncio.Queue(QUEUE_CHUNKS)
    draw = fixed(delay) if isinstance(delay, int | float) else delay

    async def read() -> None:
        while True:
            data = await reader.read(CHUNK)
            await queue.put((time.monotonic() + draw(), data or None))
            if not data:
                return

    reading = asyncio.create_task(read())
    try:
        while True:
            due, data = await _next(queue, reading)
            wait = due - time.monotonic()
            if wait > 0:
                await asyncio.sleep(wait)
            if data is None:
                if writer.can_write_eof():
                    writer.write_eof()
                return
            writer.write(data)
            await writer.drain()
    finally:
        reading.cancel()
        with contextlib.suppress(asyncio.CancelledError, OSError, ConnectionError):
            await reading


async def _next(queue: asyncio.Queue[tuple[float, bytes | None]],
                reading: asyncio.Task[None]) -> tuple[float, bytes | None]:
    """The next chunk, or the reader's error as soon as it fails with nothing left to write."""
    getting = asyncio.ensure_future(queue.get())
    done, _ = await asyncio.wait({getting, reading}, return_when=asyncio.FIRST_COMPLETED)
    if getting in done:
        return getting.result()
    getting.cancel()
    with contextlib.suppress(asyncio.CancelledError):
        await getting
    if not queue.empty():
        return queue.get_nowait()
    reading.result()  # raises the reader's error
    raise ConnectionError("the reader ended without EOF")


async def _connection(client_r: asyncio.StreamReader, client_w: asyncio.StreamWriter,
                      to: tuple[str, int], up: Delay, down: Delay) -> None:
    try:
        server_r, server_w = await asyncio.wait_for(asyncio.open_connection(*to), 30)
    except (TimeoutError, OSError) as e:
        print(f"delayrelay: cannot reach {to[0]}:{to[1]}: {e}", file=sys.stderr, flush=True)
        client_w.close()
        return
    pumps = [asyncio.create_task(_pump(client_r, server_w, up)),
             asyncio.create_task(_pump(server_r, client_w, down))]
    try:
        # both directions to their EOF; the first error ends both
        for done in asyncio.as_completed(pumps):
            await done
    except (OSError, ConnectionError):
        pass
    finally:
        for p in pumps:
            p.cancel()
        for w in (client_w, server_w):
            w.close()
        for p in pumps:
            with contextlib.suppress(asyncio.CancelledError, OSError, ConnectionError):
                await p


async def serve(listen: tuple[str, int], to: tuple[str, int], delay_ms: float,
                jitter_ms: float = 0.0, seed: int | None = None) -> None:
    rng = random.Random(seed)

    def delay() -> Delay:
        if jitter_ms <= 0:
            return fixed(delay_ms / 1000)
        return jittered(delay_ms / 1000, jitter_ms / 1000, rng)

    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(sig, stop.set)
    tasks: set[asyncio.Task[None]] = set()

    async def accepted(r: asyncio.StreamReader, w: asyncio.StreamWriter) -> None:
        task = asyncio.current_task()
        assert task is not None
        tasks.add(task)
        try:
            # cancelled only by the shutdown below; ended quietly, since asyncio's streams (3.11)
            # log a connection callback's cancellation as an error
            with contextlib.suppress(asyncio.CancelledError):
                await _connection(r, w, to, delay(), delay())
        finally:
            tasks.discard(task)

    server = await asyncio.start_server(accepted, *listen, limit=CHUNK)
    host, port = server.sockets[0].getsockname()[:2]
    print(f"delayrelay listening on {host}:{port}", flush=True)
    async with server:
        await stop.wait()
        server.close()
        for t in list(tasks):
            t.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)


def main(argv: Sequence[str] | None = None) -> None:
    parser = argparse.ArgumentParser(prog="python -m tests.delayrelay", description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--listen", type=_address, required=True, metavar="IP:PORT")
    parser.add_argument("--to", type=_address, required=True, metavar="IP:PORT")
    parser.add_argument("--delay-ms", type=float, required=True, metavar="N")
    parser.add_argument("--jitter-ms", type=float, default=0.0, metavar="J",
                        help="each chunk's delay uniform in [N - J, N + J] (J <= N)")
    parser.add_argument("--seed", type=int, default=None, metavar="S")
    args = parser.parse_args(argv)
    if args.delay_ms < 0:
        parser.error("--delay-ms: a delay of 0 or more")
    if not 0 <= args.jitter_ms <= args.delay_ms:
        parser.error("--jitter-ms: from 0 to --delay-ms")
    asyncio.run(serve(args.listen, args.to, args.delay_ms, args.jitter_ms, args.seed))


def _text(address: tuple[str, int]) -> str:
    return f"{address[0]}:{address[1]}"


class Relay:
    """The relay as a process a test starts and stops: `popen` is `subprocess.Popen` here or a
    namespace's (`Relay(..., popen=host.popen)`). `port` is the one it listens on, known once
    `start` returns."""

    def __init__(self, listen: tuple[str, int], to: tuple[str, int], delay_ms: float,
                 popen: Callable[..., subprocess.Popen[Any]] = subprocess.Popen,
                 jitter_ms: float = 0.0, seed: int | None = None) -> None:
        self.listen, self.to, self.delay_ms = listen, to, delay_ms
        self.jitter_ms, self.seed = jitter_ms, seed
        self._popen = popen
        self.proc: subprocess.Popen[bytes] | None = None
        self.host, self.port = listen

    def start(self, timeout: float = 20.0) -> Relay:
        self.proc = self._popen(
            [sys.executable, "-m", "tests.delayrelay", "--listen", _text(self.listen),
             "--to", _text(self.to), "--delay-ms", str(self.delay_ms),
             "--jitter-ms", str(self.jitter_ms),
             *([] if self.seed is None else ["--seed", str(self.seed)])],
            stdout=subprocess.PIPE, cwd=ROOT)
        assert self.proc.stdout is not None
        fd, line, deadline = self.proc.stdout.fileno(), b"", time.monotonic() + timeout
        while not line.endswith(b"\n"):
            left = deadline - time.monotonic()
            if left <= 0 or not select.select([fd], [], [], left)[0]:
                self.stop()
                raise RuntimeError(f"the relay did not listen in {timeout} s")
            more = os.read(fd, 256)
            if not more:
                self.stop()
                raise RuntimeError(f"the relay exited {self.proc.returncode}: {line!r}")
            line += more
        self.host, _, port = line.decode().split()[-1].rpartition(":")
        self.port = int(port)
        return self

    def stop(self, timeout: float = 10.0) -> int | None:
        """SIGTERM, SIGKILL if it has not gone in `timeout`; its exit status (0: clean)."""
        if self.proc is None:
            return None
        if self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(timeout)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait(10)
        if self.proc.stdout is not None:
            self.proc.stdout.close()
        return self.proc.returncode

    def __enter__(self) -> Relay:
        return self.start()

    def __exit__(self, *_exc: object) -> None:
        self.stop()


if __name__ == "__main__":
    main()
