"""A PIN or speaker link changed at a console of one process of a cluster holds on every
process (cluster.rotations): the old one stops working everywhere, the new one works through
any process. A real nats-server and two `yomite serve --bus` processes (tests/clusterprocs.py).
"""

from pathlib import Path

import httpx2

from tests.clusterprocs import (  # noqa: F401 (broker_fixture: the fixture `broker`)
    Cluster,
    broker_fixture,
    call,
    state,
    wait_for,
)
from tests.natsbroker import Broker
from tests.serverproc import Server


def join(base: str, pin: str) -> int:
    return httpx2.post(f"{base}/api/channels/main/referees",
                       json={"pin": pin, "name": "mat 1"}, timeout=10).status_code


def speaker_key(s: Server, ch: str = "main") -> str:
    r = call(s, "GET", f"/api/channels/{ch}/speakers")
    assert r.status_code == 200, r.text
    return str(r.json()["url"]).split("#key=", 1)[1]


def test_a_new_pin_and_speaker_link_made_through_one_process_hold_on_every_process(
        tmp_path: Path, broker: Broker) -> None:
    c = Cluster(tmp_path, broker, 2, ("main",)).start()
    try:
        a, b = c.servers
        old_pin = state(a, "main")["pin"]
        assert state(b, "main")["pin"] == old_pin
        old_key = speaker_key(a)
        assert speaker_key(b) == old_key
        r = call(a, "POST", "/api/channels/main/pin")
        assert r.status_code == 200, r.text
        new_pin = r.json()["pin"]
        assert new_pin != old_pin
        wait_for(lambda: state(b, "main")["pin"] == new_pin, 10,
                 "the new PIN on the other process")
        assert join(b.base, old_pin) == 403, "the old PIN still lets a referee in"
        assert join(b.base, new_pin) == 200
        r = call(b, "POST", "/api/channels/main/speakers/link")
        assert r.status_code == 200, r.text
        new_key = speaker_key(b)
        assert new_key != old_key
        wait_for(lambda: speaker_key(a) == new_key, 10,
                 "the new speaker link on the other process")
        # the clips and the speaker socket of each process take the new key, not the old
        for s in (a, b):
            for key, ok in ((old_key, False), (new_key, True)):
                r = httpx2.get(f"{s.base}/api/session",
                               headers={"Authorization": f"Bearer {key}"}, timeout=10)
                assert (r.status_code == 200) is ok, (s.base, ok, r.status_code, r.text)
    finally:
        c.stop()
