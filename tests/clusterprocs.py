"""The cluster's processes for tests: a real broker (tests/natsbroker.py) and several
`yomite serve --bus` processes on loopback, each with its own journal folder and the same
config; how a test asks them who owns what, and what state a channel is in."""

import asyncio
import json
import os
import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import httpx2
import pytest

from tests.natsbroker import Broker
from tests.serverproc import Server, wait_rendered

TOKEN = "cluster-tests-operator-token-0123456789abc"
TTL = 2.0
# the tests' cluster key (cluster.secret_key_file): a constant, so that a test may open what the
# processes sealed on the broker (journal_lines)
KEY = "5eb1c0de" * 8


def key_file(folder: Path) -> Path:
    """The tests' cluster key in `folder/cluster.key`, readable by this user only."""
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / "cluster.key"
    path.write_text(KEY + "\n", "utf-8")
    path.chmod(0o600)
    return path


def access(broker: Broker, folder: Path) -> dict[str, Any]:
    """A process's `cluster` keys for `broker`: its credentials (cluster.user and
    password_file), the cluster key, and, on a broker anyone may use, `insecure`. (A broker
    of another kind without `cluster_config`, tests/natscluster.py's, is taken as one anyone
    may use until it has accounts.)"""
    out = {**getattr(broker, "cluster_config", dict)(),
           "secret_key_file": str(key_file(folder))}
    if getattr(broker, "anonymous", not hasattr(broker, "cluster_config")):
        out["insecure"] = True
    return out


def config(url: str, prefix: str, channels: tuple[str, ...], ttl: float = TTL,
           match: dict[str, Any] | None = None,
           channel: dict[str, Any] | None = None,
           voice: dict[str, Any] | None = None,
           server: dict[str, Any] | None = None,
           rooms: dict[str, Any] | None = None,
           desk: dict[str, Any] | None = None,
           cluster: dict[str, Any] | None = None,
           access: dict[str, Any] | None = None) -> dict[str, Any]:
    """`access`: the credentials and key (`access()`), under `cluster` (which overrides)."""
    return {
        **({"rooms": rooms} if rooms else {}),
        **({"desk": desk} if desk else {}),
        "match": match or {"memorise_s": 1, "cards": 4, "prelude": {"enabled": False},
                           "gaps": {"between_verses_s": 0.5, "between_cards_s": 0.5}},
        "voice": voice or {"engine": "estimate", "speed": 1.0},
        "audio": {"output": "null"},
        "server": {"channels": [{"name": c, **(channel or {})} for c in channels],
                   **(server or {})},
        "cluster": {"bus": url, "lease_ttl_s": ttl, "prefix": prefix, **(access or {}),
                    **(cluster or {})},
    }


class Cluster:
    def __init__(self, tmp: Path, broker: Broker, n: int, channels: tuple[str, ...],
                 ttl: float = TTL, match: dict[str, Any] | None = None,
                 channel: dict[str, Any] | None = None,
                 voice: dict[str, Any] | None = None,
                 server: dict[str, Any] | None = None,
                 rooms: dict[str, Any] | None = None,
                 desk: dict[str, Any] | None = None,
                 cluster: dict[str, Any] | None = None) -> None:
        self.broker = broker
        self.prefix = f"t{os.getpid()}{int(time.monotonic() * 1000) % 100000}"
        keys = access(broker, tmp)
        self.servers = [Server(_mk(tmp / f"p{i}"),
                               config(getattr(broker, "address", broker.url), self.prefix,
                                      channels, ttl, match, channel, voice, server, rooms,
                                      desk, cluster, keys),
                               TOKEN)
                        for i in range(n)]

    def start(self) -> "Cluster":
        for s in self.servers:
            s.start()
        return self

    def stop(self) -> None:
        for s in self.servers:
            s.stop()

    def live(self) -> list[Server]:
        return [s for s in self.servers if s.proc is not None and s.proc.poll() is None]

    def describe(self, s: Server) -> dict[str, Any]:
        r = httpx2.get(s.base + "/api/cluster", headers=s.op, timeout=10)
        assert r.status_code == 200, r.text
        out: dict[str, Any] = r.json()
        return out

    def owner(self, ch: str, timeout: float = 30.0,
              among: list[Server] | None = None) -> Server:
        """The live process that owns `ch` (waiting until one does)."""
        def find() -> Server | None:
            for s in among or self.live():
                if ch in self.describe(s)["owned"]:
                    return s
            return None
        found: Server = wait_for(find, timeout, f"an owner of {ch}")
        return found

    def others(self, s: Server) -> list[Server]:
        return [x for x in self.live() if x is not s]


def _mk(p: Path) -> Path:
    p.mkdir(parents=True, exist_ok=True)
    return p


def wait_for(probe: Callable[[], Any], timeout: float, what: str) -> Any:
    deadline = time.monotonic() + timeout
    while True:
        v = probe()
        if v:
            return v
        if time.monotonic() > deadline:
            raise AssertionError(f"waited {timeout:.0f} s for {what}")
        time.sleep(0.05)


def at_once(servers: list[Server], headers: Callable[[Server], dict[str, str]], warm: str,
            act: Callable[[httpx2.Client, int], httpx2.Response],
            timeout: float = 120) -> list[httpx2.Response]:
    """`act(client, i)` through each of `servers` (a client each, its connection made by a GET
    of `warm` first), all let go at the same instant; their answers in order."""
    gate = threading.Barrier(len(servers))
    out: list[Any] = [None] * len(servers)

    def one(i: int, s: Server) -> None:
        with httpx2.Client(base_url=s.base, headers=headers(s), timeout=timeout / 2) as c:
            c.get(warm)
            gate.wait()
            out[i] = act(c, i)

    threads = [threading.Thread(target=one, args=(i, s)) for i, s in enumerate(servers)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout)
    assert all(r is not None for r in out), "a request was never answered"
    return out


def state(s: Server, ch: str) -> dict[str, Any]:
    r = httpx2.get(f"{s.base}/api/channels/{ch}", headers=s.op, timeout=10)
    assert r.status_code == 200, r.text
    out: dict[str, Any] = r.json()
    return out


def call(s: Server, method: str, path: str, **kw: Any) -> httpx2.Response:
    return httpx2.request(method, s.base + path, headers=s.op, timeout=20, **kw)


def hold(s: Server, ch: str, referee: str) -> httpx2.Response:
    return call(s, "PUT", f"/api/channels/{ch}/holds/{referee}")


def release(s: Server, ch: str, referee: str) -> httpx2.Response:
    return call(s, "DELETE", f"/api/channels/{ch}/holds/{referee}")


def holders(st: dict[str, Any]) -> list[str]:
    m = st.get("match") or {}
    return sorted(h["referee"] for h in m.get("holds", []))


def reading_a_verse(s: Server, ch: str) -> bool:
    m = state(s, ch).get("match") or {}
    seg = m.get("segment") or {}
    return bool(not m.get("paused") and seg.get("verse") in ("kami", "shimo")
                and m.get("phase") == "reading")


def start_match(s: Server, ch: str) -> None:
    r = call(s, "POST", f"/api/channels/{ch}/match", json={})
    assert r.status_code == 200, r.text
    wait_rendered(s, ch)  # (a cold Open JTalk cache; the estimate voice is ready at once)
    r = call(s, "POST", f"/api/channels/{ch}/match/start")
    assert r.status_code == 200, r.text


def start_reading(through: Server, owner: Server, ch: str) -> None:
    """A match prepared and started through `through`, until `owner` reads its first verse."""
    start_match(through, ch)
    wait_for(lambda: reading_a_verse(owner, ch), 30, "a verse being read")


def journal_lines(url: str, prefix: str, ch: str) -> list[dict[str, Any]]:
    """Every line the broker's stream holds for the channel (what a new owner replays), opened
    with the tests' key (`url`: the broker's, with yomite's user: `Broker.url`)."""
    import nats

    from cluster.seal import Sealer, is_sealed

    sealer = Sealer([bytes.fromhex(KEY)], "tests/clusterprocs.KEY")
    subject = f"{prefix}.journal.{ch}"

    async def read() -> list[dict[str, Any]]:
        nc = await nats.connect(url)
        try:
            js = nc.jetstream()
            sub = await js.pull_subscribe(f"{prefix}.journal.{ch}",
                                          stream=f"{prefix.upper()}_JOURNAL")
            out: list[dict[str, Any]] = []
            while True:
                try:
                    msgs = await sub.fetch(200, timeout=1)
                except Exception:  # nats' TimeoutError: none left
                    break
                for m in msgs:
                    data = sealer.open(subject, m.data) if is_sealed(m.data) else m.data
                    out.append(json.loads(data)["line"])
                    await m.ack()
            return out
        finally:
            await nc.close()

    return asyncio.run(read())


@pytest.fixture(name="broker")
def broker_fixture(tmp_path: Path) -> Iterator[Broker]:
    """A broker of the test's own (import `broker_fixture` to use `broker`)."""
    b = Broker(tmp_path / "broker")
    b.tmp.mkdir(parents=True, exist_ok=True)
    b.start()
    try:
        yield b
    finally:
        b.stop()
