"""The load a full hall puts on its reader's machine, for the benches that measure under it
(bench/full_hall.py, bench/speaker_sync.py --load): viewer WebSockets, a console and a projector
reloaded in headless Chromium, CPU burners."""

from __future__ import annotations

import asyncio
import contextlib
import subprocess
import sys
import threading
from collections.abc import Iterator

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
    """Viewers and page reloads on a thread of their own (for a bench whose own code is
    synchronous), with CPU burners: `with HallLoad(...) as load: ...`, then `load.figures`."""

    def __init__(self, base: str, port: int, token: str, *, viewers: int = 200,
                 burners: int = 2, reload_s: float = 4.0) -> None:
        self.base, self.port, self.token = base, port, token
        self.n_viewers, self.n_burners, self.reload_s = viewers, burners, reload_s
        self.figures: dict[str, int] = {}
        self._loop: asyncio.AbstractEventLoop | None = None
        self._stop: asyncio.Event | None = None
        self._thread: threading.Thread | None = None
        self._burn = contextlib.ExitStack()
        self._up = threading.Event()

    def __enter__(self) -> HallLoad:
        self._burn.enter_context(burners(self.n_burners))
        self._thread = threading.Thread(target=lambda: asyncio.run(self._main()), daemon=True)
        self._thread.start()
        self._up.wait(60)
        return self

    async def _main(self) -> None:
        self._loop = asyncio.get_running_loop()
        self._stop = asyncio.Event()
        v = asyncio.create_task(viewers(self.port, self.n_viewers, self._stop))
        p = asyncio.create_task(pages(self.base, self.token, self._stop, self.reload_s))
        await asyncio.sleep(3.0)  # the sockets and pages are up
        self._up.set()
        got, reloads = await asyncio.gather(v, p)
        self.figures = {"viewer_states": got, "reloads": reloads}

    def __exit__(self, *exc: object) -> None:
        if self._loop is not None and self._stop is not None:
            self._loop.call_soon_threadsafe(self._stop.set)
        if self._thread is not None:
            self._thread.join(60)
        self._burn.close()
