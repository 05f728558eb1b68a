"""A start sent through a process that does not read the channel, while its owner still renders
the match's first clips (a cold voice cache, the owner's render processes frozen here so that
the wait is certain): the start waits for them there, as a start made on the owner itself does
(hall.runtime: up to START_RENDER_TIMEOUT_S), and the match is read. It used to expire after
the few seconds any other command has (cluster.remote), and the operator was told to look and
send it again. A real nats-server and two `yomite serve --bus` processes."""

import contextlib
import os
import signal
import threading
import time
from pathlib import Path

import httpx2

from tests.clusterprocs import (  # noqa: F401 (broker_fixture: the fixture `broker`)
    Cluster,
    broker_fixture,
    call,
    reading_a_verse,
    wait_for,
)
from tests.natsbroker import Broker

FROZEN_S = 6.0  # twice what any other forwarded command may take (cluster.remote)


def render_workers(pid: int) -> list[int]:
    """The render processes of the server `pid` (audio.voices.renderpool), its children."""
    out = []
    for proc in Path("/proc").glob("[0-9]*"):
        with contextlib.suppress(OSError, ValueError, IndexError):
            ppid = int((proc / "stat").read_text().rsplit(")", 1)[1].split()[1])
            if ppid == pid and b"audio.voices.renderpool" in (proc / "cmdline").read_bytes():
                out.append(int(proc.name))
    return out


def test_a_start_through_another_process_waits_for_the_owners_first_clips(
        tmp_path: Path, broker: Broker) -> None:
    c = Cluster(tmp_path, broker, 2, ("main",), voice={
        "engine": "openjtalk", "cache_dir": str(tmp_path / "cold-cache"), "speed": 1.0}).start()
    try:
        owner = c.owner("main")
        other = c.others(owner)[0]
        assert owner.proc is not None
        workers = wait_for(lambda: render_workers(owner.proc.pid), 30, "the render processes")
        for pid in workers:
            os.kill(pid, signal.SIGSTOP)
        answer: list[httpx2.Response] = []
        try:
            r = call(other, "POST", "/api/channels/main/match", json={})
            assert r.status_code == 200, r.text
            sent = time.monotonic()
            t = threading.Thread(target=lambda: answer.append(
                call(other, "POST", "/api/channels/main/match/start")))
            t.start()
            time.sleep(FROZEN_S)
            assert t.is_alive(), f"the start was answered while nothing was rendered: {answer}"
        finally:
            for pid in workers:
                with contextlib.suppress(ProcessLookupError):
                    os.kill(pid, signal.SIGCONT)
        t.join(60)
        assert answer, "the start was never answered"
        print(f"\nstart answered {time.monotonic() - sent:.1f} s after it was sent "
              f"(render processes frozen {FROZEN_S} s)")
        assert answer[0].status_code == 200, answer[0].text
        wait_for(lambda: reading_a_verse(owner, "main"), 30, "the owner reading a verse")
    finally:
        c.stop()
