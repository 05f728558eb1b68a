"""A referee's presses in a cluster: the page's socket and its REST fallback may reach two
processes (a proxy that spreads requests, a page that moved to another process), so the moves
are judged by the channel's owner, whatever process a press came through (hall.presses, through
cluster.remote and cluster.owner): a late copy of a hold that reaches another process after its
referee's release is ignored there too. Each process used to judge with its own record, and the
copy raised the hand again. A real nats-server and two `yomite serve --bus` processes."""

from pathlib import Path
from typing import Any

import httpx2

from tests.clusterprocs import (  # noqa: F401 (broker_fixture: the fixture `broker`)
    Cluster,
    broker_fixture,
    call,
    holders,
    state,
    wait_for,
)
from tests.natsbroker import Broker
from tests.serverproc import Server

# no release waits behind a budget: the order of the presses is what is tried here
REFEREES = {"changes_per_s": 100, "changes_burst": 1000, "channel_changes_per_s": 100,
            "channel_changes_burst": 1000}


def press(s: Server, method: str, rid: str, token: str, move: int) -> dict[str, Any]:
    r = httpx2.request(method, f"{s.base}/api/channels/main/holds/{rid}", json={"move": move},
                       headers={"Authorization": f"Bearer {token}"}, timeout=20)
    assert r.status_code == 200, r.text
    out: dict[str, Any] = r.json()["press"]
    return out


def test_a_late_copy_of_a_hold_through_another_process_is_ignored(
        tmp_path: Path, broker: Broker) -> None:
    c = Cluster(tmp_path, broker, 2, ("main",), match={"memorise_s": 3600, "cards": 3},
                server={"referees": REFEREES}).start()
    try:
        owner = c.owner("main")
        other = c.others(owner)[0]
        r = call(other, "POST", "/api/channels/main/match", json={"seed": 7})
        assert r.status_code == 200, r.text
        r = httpx2.post(f"{other.base}/api/channels/main/referees",
                        json={"pin": state(owner, "main")["pin"], "name": "mat 1"}, timeout=10)
        assert r.status_code == 200, r.text
        rid, token = r.json()["referee"], r.json()["token"]
        wait_for(lambda: httpx2.get(f"{owner.base}/api/session", timeout=10, headers={
            "Authorization": f"Bearer {token}"}).status_code == 200, 10,
            "the referee known to the owner")
        move = 100
        # the press and the release through one process, the hold's late copy through the
        # other: both ways round
        for first, late in ((other, owner), (owner, other)):
            assert press(first, "PUT", rid, token, move)["outcome"] == "applied"
            wait_for(lambda: holders(state(owner, "main")) == [rid], 10, "the hand up")
            assert press(first, "DELETE", rid, token, move + 1)["outcome"] == "applied"
            wait_for(lambda: holders(state(owner, "main")) == [], 10, "the hand down")
            copy = press(late, "PUT", rid, token, move)
            assert copy["outcome"] == "superseded", copy
            assert copy["last"] == move + 1, copy
            assert holders(state(owner, "main")) == [], "a late copy raised the hand again"
            move += 2
    finally:
        c.stop()
