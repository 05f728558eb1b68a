"""The pages of a channel on every process of a cluster (cluster.census): a speaker page
connected to one process is counted, and its report shown, on the console of another; the
speaker quota counts every process's pages; a closed page, or a killed process's pages, stop
counting. A real nats-server and two `yomite serve --bus` processes."""

import json
import time
from pathlib import Path
from typing import Any

import websockets.sync.client as wsc
from websockets.exceptions import ConnectionClosed

from tests.clusterprocs import (  # noqa: F401 (broker_fixture: the fixture `broker`)
    Cluster,
    broker_fixture,
    state,
    wait_for,
)
from tests.natsbroker import Broker
from tests.serverproc import Server
from tests.speakers import speaker_link

REPORT = {"type": "report", "placed": 7, "late": 0, "missed": 2, "resyncs": 0, "epochs": 0,
          "steps": 0, "rtt_ms": 1.5, "latency_ms": 20.0, "page": "chromebook-1"}


def speaker_ws(s: Server, key: str) -> str:
    return s.base.replace("http://", "ws://") + f"/ws/channels/main?audience=speaker&token={key}"


def pages(s: Server) -> tuple[int, list[dict[str, Any]]]:
    st = state(s, "main")
    return st["speakers"]["pages"], st["speaker_health"]


def refusal(url: str) -> tuple[int, str] | None:
    """How a socket is closed at once ((code, reason)), or None if it is let in."""
    with wsc.connect(url, open_timeout=10) as ws:
        try:
            while True:
                msg = json.loads(ws.recv(timeout=3))
                if msg.get("type") == "hello":
                    return None
        except ConnectionClosed as e:
            assert e.rcvd is not None
            return e.rcvd.code, e.rcvd.reason
        except TimeoutError:
            return None


def test_a_speaker_page_on_one_process_is_on_every_processs_console(
        tmp_path: Path, broker: Broker) -> None:
    c = Cluster(tmp_path, broker, 2, ("main",), channel={"output": "browser"},
                server={"speakers": {"max_per_channel": 1}}).start()
    try:
        owner = c.owner("main")
        other = c.others(owner)[0]
        _, key = speaker_link(owner.base, owner.op)
        assert pages(owner)[0] == 0 and pages(other)[0] == 0
        where = other.base.removeprefix("http://")
        with wsc.connect(speaker_ws(other, key), open_timeout=10) as ws:
            assert json.loads(ws.recv(timeout=10))["type"] == "hello"
            ws.send(json.dumps(REPORT))
            t0 = time.monotonic()

            def counted() -> list[dict[str, Any]] | None:
                n, health = pages(owner)
                return health if n == 1 and health else None
            health = wait_for(counted, 10, "the other process's speaker on the owner's console")
            print(f"counted on the owner's console {time.monotonic() - t0:.2f} s after it "
                  "reported")
            assert len(health) == 1
            h = health[0]
            assert (h["missed"], h["placed"], h["rtt_ms"]) == (2, 7, 1.5)
            assert h["where"] == where, h  # the process it is connected to, by its address
            assert pages(other) == (1, [{**h, "where": None}])  # its own process: here
            # the quota of speakers (1) counts the page on the other process
            assert refusal(speaker_ws(owner, key)) == (1013, "too_many_speakers")
        # the page closed: counted nowhere
        wait_for(lambda: pages(owner) == (0, []), 10, "the closed page no longer counted")
        assert refusal(speaker_ws(owner, key)) is None  # the quota free again
        # a page on the other process, which is then killed: forgotten within the census's
        # expiry (its process says nothing more). First the quota's page just let in on the
        # owner and closed is no longer counted on the other process (the owner's census says
        # so within half a second): else the other refuses the new page, rightly
        wait_for(lambda: pages(other) == (0, []) and pages(owner) == (0, []), 10,
                 "the quota's page closed, on both processes")
        with wsc.connect(speaker_ws(other, key), open_timeout=10) as ws:
            assert json.loads(ws.recv(timeout=10))["type"] == "hello"
            wait_for(lambda: pages(owner)[0] == 1, 10, "the page counted again")
            other.kill()
            t0 = time.monotonic()
            wait_for(lambda: pages(owner) == (0, []), 30, "a killed process's page forgotten")
            print(f"a killed process's page forgotten after {time.monotonic() - t0:.1f} s")
    finally:
        c.stop()
