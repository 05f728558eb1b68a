"""A crowd of flooding referees, in a process of its own so that the test measuring an honest
referee beside them has an event loop (and an interpreter) the crowd does not share.

    python -m tests.flood_child PORT CHANNEL TOKEN [TOKEN ...]

Each token's referee connects to the channel's WebSocket and sends hold, release, hold, ... as
fast as the socket takes them, never reading; whenever the server closes the socket it
connects again at once. Prints `FLOODING` once every referee has connected, then runs until
its standard input closes, and prints `SENT <messages> CONNECTS <connections>` at the end.
"""

from __future__ import annotations

import asyncio
import sys

import websockets

HOLD, RELEASE = '{"type":"hold"}', '{"type":"release"}'


async def referee(uri: str, counts: dict[str, int], connected: asyncio.Event,
                  first: list[int], stop: asyncio.Event) -> None:
    while not stop.is_set():
        try:
            async with websockets.connect(uri, max_size=None, open_timeout=30,
                                          ping_interval=None) as ws:
                counts["connects"] += 1
                if first[0] > 0:
                    first[0] -= 1
                    if first[0] == 0:
                        connected.set()
                i = 0
                while not stop.is_set():
                    await ws.send(HOLD if i % 2 == 0 else RELEASE)
                    i += 1
                    counts["sent"] += 1
                    if i % 16 == 0:
                        await asyncio.sleep(0)  # the other referees flood too
        except (websockets.ConnectionClosed, websockets.InvalidHandshake, OSError,
                TimeoutError):
            continue


async def main(port: int, channel: str, tokens: list[str]) -> None:
    loop = asyncio.get_running_loop()
    stop = asyncio.Event()
    connected = asyncio.Event()
    counts = {"sent": 0, "connects": 0}
    first = [len(tokens)]
    # stdin closing (the test ending, or dying) stops the crowd
    loop.add_reader(sys.stdin.fileno(), lambda: sys.stdin.buffer.read1(4096) or stop.set())
    tasks = [asyncio.create_task(referee(f"ws://127.0.0.1:{port}/ws/channels/{channel}"
                                         f"?token={t}", counts, connected, first, stop))
             for t in tokens]
    await connected.wait()
    print("FLOODING", flush=True)
    await stop.wait()
    for t in tasks:
        t.cancel()
    await asyncio.gather(*tasks, return_exceptions=True)
    print(f"SENT {counts['sent']} CONNECTS {counts['connects']}", flush=True)


if __name__ == "__main__":
    asyncio.run(main(int(sys.argv[1]), sys.argv[2], sys.argv[3:]))
