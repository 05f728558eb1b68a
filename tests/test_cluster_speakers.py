"""Browser speakers on any process of a cluster (cluster.speakers): a speaker page connected to
a process that does not read the channel gets the owner's schedule, fetches its clips through
that process, and keeps time with the owner's timeline. A real nats-server and two
`yomite serve --bus` processes (tests/clusterprocs.py)."""

from pathlib import Path

import httpx2

from tests.clusterprocs import (  # noqa: F401 (broker_fixture: the fixture `broker`)
    Cluster,
    broker_fixture,
    start_reading,
    wait_for,
)
from tests.natsbroker import Broker
from tests.serverproc import Server
from tests.speakers import ScheduleLog, TimelineMap, speaker_link


def speaker_ws(s: Server, key: str) -> str:
    return s.base.replace("http://", "ws://") + f"/ws/channels/main?audience=speaker&token={key}"


def test_a_speaker_page_on_another_process_plays_the_owners_schedule_on_its_timeline(
        tmp_path: Path, broker: Broker) -> None:
    c = Cluster(tmp_path, broker, 2, ("main",), channel={"output": "browser"}).start()
    logs: list[ScheduleLog] = []
    try:
        owner = c.owner("main")
        other = c.others(owner)[0]
        _, key = speaker_link(other.base, other.op)
        on_owner = ScheduleLog(speaker_ws(owner, key))
        on_other = ScheduleLog(speaker_ws(other, key))
        logs += [on_owner, on_other]
        start_reading(other, owner, "main")
        wait_for(lambda: len(on_owner.clips) >= 2, 30, "two clips in the owner's schedule")
        first = dict(on_owner.clips)
        # every clip the owner's pages were given, the other process's pages were given too,
        # the same URL at the same timeline time
        wait_for(lambda: set(first) <= set(on_other.clips), 10,
                 "the owner's clips in the other process's schedule")
        for cid, clip in first.items():
            got = on_other.clips[cid]
            assert (got["url"], got["at_s"], got["offset_s"]) == (
                clip["url"], clip["at_s"], clip["offset_s"])
        # a clip fetched through the other process is the owner's, byte for byte
        auth = {"Authorization": f"Bearer {key}"}
        for clip in first.values():
            a = httpx2.get(other.base + clip["url"], headers=auth, timeout=30)
            b = httpx2.get(owner.base + clip["url"], headers=auth, timeout=30)
            assert a.status_code == b.status_code == 200, (a.text, b.text)
            assert a.headers["content-type"] == "audio/ogg"
            assert a.content[:4] == b"OggS" and a.content == b.content
        # unknown or without the key: refused there as on the owner
        assert httpx2.get(other.base + "/api/clips/" + "0" * 32 + ".ogg", headers=auth,
                          timeout=10).status_code == 404
        assert httpx2.get(other.base + next(iter(first.values()))["url"],
                          timeout=10).status_code == 401
        # the other process answers a page's clock probe with the owner's timeline
        here, there = TimelineMap.measure(speaker_ws(owner, key)), TimelineMap.measure(
            speaker_ws(other, key))
        apart_ms = abs(here.offset - there.offset) * 1000
        bound_ms = 25 + (here.rtt_ms + there.rtt_ms) / 2
        print(f"timeline through the owner vs the other process: {apart_ms:.1f} ms apart "
              f"(page round trips {here.rtt_ms:.1f} / {there.rtt_ms:.1f} ms)")
        assert apart_ms <= bound_ms
    finally:
        for log in logs:
            log.close()
        c.stop()
