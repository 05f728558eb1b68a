"""The load a full hall puts on its reader's machine, for the benches that measure under it
(bench/full_hall.py, bench/speaker_sync.py --load): viewer WebSockets, a console and a projector
reloaded in headless Chromium, CPU burners."""

from __future__ import annotations

import asyncio
import contextlib
import json
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import websockets

from tests.chromium import CHROMIUM, CHROMIUM_ARGS


async def viewers(port: int, n: int, stop: asyncio.Event, channel: str = "main") -> int:
    """`n` viewer WebSockets on a channel until `stop`; the states they received."""
    async def one() -> int:
        got = 0
        async with websockets.connect(f"ws://127.0.0.1:{port}/ws/channels/{channel}",
                                      max_size=None, open_timeout=60) as ws:
            while not stop.is_set():
                try:
                    async with asyncio.timeout(0.5):
                        await ws.recv()
                        got += 1
                except TimeoutError:
                    continue
        return got

    tasks = []
    for i in range(n):
        tasks.append(asyncio.create_task(one()))
        if i % 50 == 49:
            await asyncio.sleep(0.05)
    res = await asyncio.gather(*tasks, return_exceptions=True)
    return sum(r for r in res if isinstance(r, int))


async def pages(base: str, token: str, stop: asyncio.Event, every_s: float,
                channel: str = "main") -> int:
    """The console and the projector open in one headless Chromium, each reloaded every
    `every_s` seconds until `stop`; the reloads done."""
    from playwright.async_api import async_playwright

    reloads = 0
    async with async_playwright() as p:
        b = await p.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_ARGS)
        try:
            ctx = await b.new_context(viewport={"width": 1280, "height": 800})
            console = await ctx.new_page()
            await console.goto(f"{base}/console#token={token}")
            display = await ctx.new_page()
            await display.goto(f"{base}/display/{channel}")
            while not stop.is_set():
                for page in (console, display):
                    await asyncio.sleep(every_s / 2)
                    if stop.is_set():
                        break
                    await page.reload()
                    reloads += 1
        finally:
            await b.close()
    return reloads


@contextlib.contextmanager
def burners(n: int) -> Iterator[None]:
    """`n` processes spinning a core each while inside."""
    procs = [subprocess.Popen([sys.executable, "-c", "while True: pass"]) for _ in range(n)]
    try:
        yield
    finally:
        for p in procs:
            p.kill()
            p.wait()


class HallLoad:
    """Viewers and page reloads in a process of their own (so that a bench's own timing, e.g.
    the moment it sends a hold, never waits on their Python), with CPU burners:
    `with HallLoad(...) as load: ...`, then `load.figures`."""

    def __init__(self, base: str, port: int, token: str, *, viewers: int = 200,
                 burners: int = 2, reload_s: float = 4.0) -> None:
        self.base, self.port, self.token = base, port, token
        self.n_viewers, self.n_burners, self.reload_s = viewers, burners, reload_s
        self.figures: dict[str, int] = {}
        self._proc: subprocess.Popen[str] | None = None
        self._burn = contextlib.ExitStack()

    def __enter__(self) -> HallLoad:
        self._burn.enter_context(burners(self.n_burners))
        root = str(Path(__file__).resolve().parent.parent)
        self._proc = subprocess.Popen(
            [sys.executable, "-m", "bench.hallload", self.base, str(self.port), self.token,
             str(self.n_viewers), str(self.reload_s)],
            cwd=root, stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
        assert self._proc.stdout is not None
        line = self._proc.stdout.readline()  # "up": the sockets and pages are up
        if line.strip() != "up":
            raise RuntimeError(f"the hall's load did not start: {line!r}")
        return self

    def __exit__(self, *exc: object) -> None:
        if self._proc is not None:
            out, _ = self._proc.communicate("", timeout=120)  # stdin closed: stop
            last = (out.strip().splitlines() or ["{}"])[-1]
            self.figures = json.loads(last)
        self._burn.close()


async def _child(base: str, port: int, token: str, n_viewers: int, reload_s: float) -> None:
    stop = asyncio.Event()
    v = asyncio.create_task(viewers(port, n_viewers, stop))
    p = asyncio.create_task(pages(base, token, stop, reload_s))
    await asyncio.sleep(3.0)  # the sockets and pages are up
    print("up", flush=True)
    await asyncio.get_running_loop().run_in_executor(None, sys.stdin.read)  # until EOF
    stop.set()
    got, reloads = await asyncio.gather(v, p)
    print(json.dumps({"viewer_states": got, "reloads": reloads}), flush=True)


if __name__ == "__main__":
    base_, port_, token_, n_, reload_ = sys.argv[1:6]
    asyncio.run(_child(base_, int(port_), token_, int(n_), float(reload_)))
