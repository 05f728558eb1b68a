"""A bus only yomite can use (cluster.access, cluster.seal, docs/nats/): real nats-servers, real
`yomite serve --bus` processes reading a match, and clients of the broker that are not yomite.

- On the broker the docs ship (docs/nats/accounts.conf), a client without credentials is
  refused; a stranger of another account reads no card, token, PIN or key, hears nothing of
  the match, and its lease, journal line, hold as @operator and purge reach nothing of
  yomite's; the broker's store on disk holds none of the secrets or the order of the cards.
- On a broker anyone may use, joined with --bus-insecure and the cluster's key, what sealing
  alone protects: every value and journal line a stranger reads is sealed bytes holding none of
  the secrets, and a PIN or referee it puts is not taken. (Leases and commands it can still
  write there: why such a broker is refused without --bus-insecure, meant for one machine.)
- `yomite serve --bus` refuses, with exit 2 and what to configure: a broker anyone may use, a
  process without the cluster's key, with another key, or with wrong credentials.
- TLS with docs/nats/yomite.conf itself (its paths replaced), an NKey user, and a tls:// URL to
  a broker that does not speak TLS.
"""

import asyncio
import json
import os
import re
import subprocess
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx2
import nats
import pytest
import yaml
from nats.js.errors import NoKeysError

from cluster.access import BusAccess, open_client
from cluster.bus import Bus
from cluster.messages import item_request
from cluster.preflight import check_broker
from cluster.seal import Sealer, is_sealed
from hall.clusterconfig import ClusterConfig
from reader.events import OPERATOR, Hold
from tests import tlsfiles
from tests.clusterprocs import (
    KEY,
    TOKEN,
    Cluster,
    access,
    call,
    config,
    holders,
    journal_lines,
    key_file,
    start_reading,
    state,
    wait_for,
)
from tests.natsbroker import NATS_SERVER, ROOT, Broker, accounts_conf
from tests.serverproc import YOMITE, Server, free_port

pytestmark = pytest.mark.server

MATCH = {"memorise_s": 1, "cards": 8, "prelude": {"enabled": False},
         "gaps": {"between_verses_s": 0.5, "between_cards_s": 0.5}}
STRANGER = b"stranger-was-here"


@pytest.fixture(name="broker")
def broker_fixture(tmp_path: Path) -> Iterator[Broker]:
    b = Broker(tmp_path / "broker").start()
    try:
        yield b
    finally:
        b.stop()


# ------------------------------------------------------------------ what the cluster keeps secret
def secrets_of(c: Cluster, broker: Broker, org_code: str, tokens: list[str]) -> dict[str, bytes]:
    """Every secret of the running cluster, in clear, by name: as its operator knows them (the
    processes' own files and pages, and the shared bucket opened with the tests' key)."""
    a = c.servers[0]
    journal = Path(yaml.safe_load(a.config_path.read_text())["journal_dir"])
    r = call(a, "GET", "/api/channels/main/speakers")
    assert r.status_code == 200, r.text
    out = {
        "deck key": (journal / "deck.key").read_text().strip().encode(),
        "speakers' key": (journal / "speakers.key").read_text().strip().encode(),
        "PIN": state(a, "main")["pin"].encode(),
        "speaker key": str(r.json()["url"]).split("#key=", 1)[1].encode(),
        "operator token": asyncio.run(shared_value(broker.url, c.prefix, "operator-token")),
        "invite code": org_code.encode(),
    }
    for i, t in enumerate(tokens):
        out[f"token {i}"] = t.encode()
    header = next(line for line in journal_lines(broker.url, c.prefix, "main")
                  if line.get("type") == "header")
    order = header["deck"]["order"]
    assert len(order) >= 8
    out["the cards' order"] = json.dumps(order, separators=(",", ":")).encode()
    out["a journal header"] = b'"type":"header"'
    return out


async def shared_value(url: str, prefix: str, key: str) -> bytes:
    nc = await nats.connect(url)
    try:
        kv = await nc.jetstream().key_value(f"{prefix}_shared")
        data = (await kv.get(key)).value or b""
    finally:
        await nc.close()
    if not is_sealed(data):  # a cluster without a key (how a mutant is tried)
        return data
    return Sealer([bytes.fromhex(KEY)], "KEY").open(f"{prefix}_shared/{key}", data)


def leaks(data: bytes, secrets: dict[str, bytes]) -> list[str]:
    """The secrets found in `data`. A PIN (a few digits) where it stands alone, or in the bytes
    after its own key's name (a store's record: the key, then the value, then binary that may
    hold a digit): digits inside a store's own numbers (times, sequences) are not a PIN."""
    found = []
    for name, s in secrets.items():
        if name == "PIN":
            pin = re.escape(s)
            if (re.search(rb"(?<![0-9])" + pin + rb"(?![0-9])", data)
                    or re.search(rb"pin\.main.{0,160}?" + pin, data, re.DOTALL)):
                found.append(name)
        elif s in data:
            found.append(name)
    return found


def store_bytes(broker: Broker) -> bytes:
    out = bytearray()
    for root, _dirs, files in os.walk(broker.store):
        for f in files:
            out += Path(root, f).read_bytes()
    assert out, "the broker's store is empty"
    return bytes(out)


def org_and_people(c: Cluster) -> tuple[str, list[str]]:
    """An organisation with a teacher, and a referee: their invite code and tokens."""
    a, b = c.servers
    org = httpx2.post(f"{a.base}/api/orgs", headers=a.op, timeout=20,
                      json={"name": "stranger test", "max_open_rooms": 2})
    assert org.status_code == 201, org.text
    code = org.json()["code"]
    r = httpx2.post(f"{b.base}/api/orgs/join", timeout=20,
                    json={"code": code, "name": "先生"})
    assert r.status_code == 200, r.text
    teacher = r.json()["token"]
    r = httpx2.post(f"{b.base}/api/channels/main/referees", timeout=20,
                    json={"pin": state(b, "main")["pin"], "name": "mat 1"})
    assert r.status_code == 200, r.text
    return code, [teacher, r.json()["token"]]


# ------------------------------------------------------------------ a client that is not yomite
async def read_everything(url: str, prefix: str, listen_s: float) -> tuple[list[str], bytes]:
    """What a client of `url` reads of cluster `prefix`: the journal stream, every bucket's
    values, and every message on its account's subjects for `listen_s` while the match reads
    (0: none; on a broker anyone may use they are not sealed). (What it was refused,
    everything it got.)"""
    nc = await nats.connect(url, connect_timeout=5, allow_reconnect=False,
                            max_reconnect_attempts=0)
    refused: list[str] = []
    got = bytearray()
    heard: list[bytes] = []

    async def on_msg(msg: Any) -> None:
        heard.append(msg.subject.encode() + b" " + msg.data)

    try:
        if listen_s:
            await nc.subscribe(">", cb=on_msg)
        js = nc.jetstream(timeout=5)
        stream = f"{prefix.upper()}_JOURNAL"
        try:
            info = await js.stream_info(stream)
            for seq in range(info.state.first_seq, info.state.last_seq + 1):
                got += (await js.get_msg(stream, seq)).data or b""
        except Exception as e:
            refused.append(f"journal: {type(e).__name__}")
        for bucket in ("shared", "records", "leases", "pages"):
            try:
                kv = await js.key_value(f"{prefix}_{bucket}")
                try:
                    keys = await kv.keys()
                except NoKeysError:  # an empty bucket (pages: no room here)
                    keys = []
                for key in keys:
                    got += key.encode() + b"=" + ((await kv.get(key)).value or b"")
            except Exception as e:
                refused.append(f"{bucket}: {type(e).__name__}")
        if listen_s:
            await asyncio.sleep(listen_s)
    finally:
        await nc.close()
    mine = [h for h in heard if h.startswith(prefix.encode())]
    return refused, bytes(got) + b"".join(mine)


async def write_everything(url: str, prefix: str) -> list[str]:
    """A client of `url` tries to take channel main's lease, add a journal line, hold the
    reading as @operator and purge the journal; what it was refused."""
    nc = await nats.connect(url, connect_timeout=5, allow_reconnect=False,
                            max_reconnect_attempts=0)
    refused = []
    js = nc.jetstream(timeout=5)
    line = json.dumps({"file": "x.jsonl", "line": {"type": "event", "by": STRANGER.decode()}})
    attempts = {
        "lease": lambda: _put(js, f"{prefix}_leases", "ch.main", STRANGER),
        "journal line": lambda: js.publish(f"{prefix}.journal.main", line.encode()),
        "hold as @operator": lambda: nc.request(
            f"{prefix}.cmd.main", item_request(Hold(OPERATOR, "stranger")), timeout=3),
        "purge": lambda: js.purge_stream(f"{prefix.upper()}_JOURNAL"),
    }
    try:
        for what, attempt in attempts.items():
            try:
                await attempt()
            except Exception as e:
                refused.append(f"{what}: {type(e).__name__}")
        # and the same without JetStream's API: straight onto the subjects
        await nc.publish(f"$KV.{prefix}_leases.ch.main", STRANGER)
        await nc.publish(f"{prefix}.journal.main", line.encode())
        await nc.flush()
    finally:
        await nc.close()
    return refused


async def _put(js: Any, bucket: str, key: str, value: bytes) -> None:
    kv = await js.key_value(bucket)
    await kv.put(key, value)


async def lease_holder(url: str, prefix: str) -> bytes:
    nc = await nats.connect(url)
    try:
        kv = await nc.jetstream().key_value(f"{prefix}_leases")
        return (await kv.get("ch.main")).value or b""
    finally:
        await nc.close()


async def anonymous_refused(url: str, **kw: Any) -> str:
    """The broker's answer to a client without credentials ("" if it let it in)."""
    async def quiet(_e: Exception) -> None:
        pass

    try:
        nc = await open_client(servers=[url], connect_timeout=5, allow_reconnect=False,
                               max_reconnect_attempts=0, error_cb=quiet, **kw)
    except Exception as e:
        return str(e)
    await nc.close()
    return ""


# ------------------------------------------------------------------ the tests
def test_on_the_docs_broker_a_stranger_reads_and_writes_nothing_of_yomites(
        tmp_path: Path, broker: Broker) -> None:
    c = Cluster(tmp_path, broker, 2, ("main",), match=MATCH).start()
    try:
        code, tokens = org_and_people(c)
        owner = c.owner("main")
        start_reading(c.servers[0], owner, "main")
        secrets = secrets_of(c, broker, code, tokens)

        assert "Authorization Violation" in asyncio.run(anonymous_refused(broker.address))

        refused, got = asyncio.run(read_everything(broker.stranger_url, c.prefix, 2.0))
        assert sorted(refused) == ["journal: NotFoundError", "leases: BucketNotFoundError",
                                   "pages: BucketNotFoundError", "records: BucketNotFoundError",
                                   "shared: BucketNotFoundError"], refused
        assert got == b"", got[:300]  # not one message of the match's, while it was read
        # the broker's store on disk (a stolen backup): sealed, all of it
        assert leaks(store_bytes(broker), secrets) == []

        holder = asyncio.run(lease_holder(broker.url, c.prefix))
        lines = len(journal_lines(broker.url, c.prefix, "main"))
        refused = asyncio.run(write_everything(broker.stranger_url, c.prefix))
        assert sorted(refused) == ["hold as @operator: NoRespondersError",
                                   "journal line: NoStreamResponseError",
                                   "lease: BucketNotFoundError", "purge: NotFoundError"], refused
        assert asyncio.run(lease_holder(broker.url, c.prefix)) == holder != STRANGER
        after = journal_lines(broker.url, c.prefix, "main")
        assert len(after) >= lines, "the journal lost lines"
        assert not [x for x in after if STRANGER.decode() in json.dumps(x)]
        assert OPERATOR not in holders(state(owner, "main"))
        assert c.owner("main") is owner
    finally:
        c.stop()


def test_on_a_broker_anyone_may_use_sealing_alone_keeps_the_secrets_and_the_cards(
        tmp_path: Path) -> None:
    broker = Broker(tmp_path / "broker", anonymous=True).start()
    c = Cluster(tmp_path, broker, 2, ("main",), match=MATCH)
    try:
        c.start()
        code, tokens = org_and_people(c)
        owner = c.owner("main")
        start_reading(c.servers[0], owner, "main")
        secrets = secrets_of(c, broker, code, tokens)

        # an anonymous client reads every value and every journal line: sealed bytes
        refused, got = asyncio.run(read_everything(broker.address, c.prefix, 0))
        assert refused == []
        assert leaks(got, secrets) == []
        assert leaks(store_bytes(broker), secrets) == []

        # and what it puts without the key is not taken: a PIN of its own, a referee of its own
        pin = state(owner, "main")["pin"]

        async def forge() -> None:
            nc = await nats.connect(broker.address)
            kv = await nc.jetstream().key_value(f"{c.prefix}_shared")
            await kv.put("pin.main", b"000000")
            await kv.put("referee.forged", json.dumps({
                "op": "join", "id": "forged", "channel": "main", "name": "x",
                "digest": "00" * 32, "joined": 1.0}).encode())
            await nc.close()

        asyncio.run(forge())
        for s in c.servers:
            wait_for(lambda s=s: "pin.main: not sealed" in s.log()
                     and "referee.forged: not sealed" in s.log(), 30, "the forgeries refused")
            assert state(s, "main")["pin"] == pin
        assert "forged" not in json.dumps(state(owner, "main"))
    finally:
        c.stop()
        broker.stop()


def run_serve(tmp: Path, cluster: dict[str, Any], *args: str) -> subprocess.CompletedProcess[str]:
    """`yomite serve` with this cluster config, until it exits (these never come up)."""
    tmp.mkdir(parents=True, exist_ok=True)
    cfg = config(cluster.pop("bus"), "sec", ("main",), cluster=cluster)
    cfg["journal_dir"] = str(tmp / "journal")
    path = tmp / "config.yaml"
    path.write_text(yaml.safe_dump(cfg), "utf-8")
    return subprocess.run([str(YOMITE), "--config", str(path), "serve", "--host", "127.0.0.1",
                           "--port", str(free_port()), *args],
                          capture_output=True, text=True, timeout=120, cwd=tmp)


def test_serve_refuses_an_open_broker_a_missing_or_wrong_key_and_wrong_credentials(
        tmp_path: Path, broker: Broker) -> None:
    right = {"bus": broker.address, **access(broker, tmp_path / "right")}
    # the cluster's key is the first process's: leave its check value on the broker
    assert asyncio.run(check_broker(broker.address, ClusterConfig(prefix="sec", **right))) == []

    open_broker = Broker(tmp_path / "open", anonymous=True).start()
    try:
        run = run_serve(tmp_path / "a", {"bus": open_broker.address,
                                         "secret_key_file": str(key_file(tmp_path / "k"))})
        assert run.returncode == 2, run.stderr[-2000:]
        for words in ("without credentials", "cluster.user", "docs/nats/yomite.conf",
                      "--bus-insecure"):
            assert words in run.stderr, (words, run.stderr[-2000:])
    finally:
        open_broker.stop()

    no_key = {k: v for k, v in right.items() if k != "secret_key_file"}
    run = run_serve(tmp_path / "b", no_key)
    assert run.returncode == 2 and "cluster.secret_key_file is not set" in run.stderr, \
        run.stderr[-2000:]
    assert "yomite cluster-key" in run.stderr

    other = tmp_path / "other.key"
    other.write_text("ab" * 32 + "\n")
    run = run_serve(tmp_path / "c", {**right, "secret_key_file": str(other)})
    assert run.returncode == 2, run.stderr[-2000:]
    assert "sealed with another key" in run.stderr and str(other) in run.stderr

    wrong = tmp_path / "wrong-password"
    wrong.write_text("not it\n")
    run = run_serve(tmp_path / "d", {**right, "password_file": str(wrong)})
    assert run.returncode == 2, run.stderr[-2000:]
    assert "refused this process's credentials" in run.stderr
    assert "not it" not in run.stderr

    run = run_serve(tmp_path / "e", {k: v for k, v in right.items()
                                     if k not in ("user", "password_file")})
    assert run.returncode == 2 and "refused this process's credentials" in run.stderr


def test_a_process_reads_a_match_over_tls_with_the_docs_broker_config(tmp_path: Path) -> None:
    """docs/nats/yomite.conf and accounts.conf as shipped, their paths and port replaced."""
    tls = tlsfiles.make(tmp_path / "tls")
    port = free_port()
    folder = tmp_path / "broker"
    folder.mkdir()
    conf = (ROOT / "docs/nats/yomite.conf").read_text()
    for old, new in (("0.0.0.0:4222", f"127.0.0.1:{port}"), ("/var/lib/nats", str(folder)),
                     ("/etc/nats/broker-cert.pem", str(tls.cert)),
                     ("/etc/nats/broker-key.pem", str(tls.key))):
        assert old in conf
        conf = conf.replace(old, new)
    (folder / "yomite.conf").write_text(conf)
    (folder / "accounts.conf").write_text((ROOT / "docs/nats/accounts.conf").read_text())
    password = "tls-test-password-0123456789"
    env = {**os.environ, "YOMITE_BUS_PASSWORD": password, "OTHER_BUS_PASSWORD": "other-pw"}
    check = subprocess.run([NATS_SERVER, "-t", "-c", str(folder / "yomite.conf")], env=env,
                           capture_output=True, text=True, timeout=60)
    assert check.returncode == 0, check.stderr  # pedantic: every field known
    with open(folder / "nats.log", "ab") as log:
        proc = subprocess.Popen([NATS_SERVER, "-c", str(folder / "yomite.conf")], env=env,
                                stdout=log, stderr=subprocess.STDOUT)
    try:
        url = f"tls://127.0.0.1:{port}"
        ctx = BusAccess(tls_ca=tls.ca).tls_context()
        wait_for(lambda: "Server is ready" in (folder / "nats.log").read_text(), 20,
                 "the broker")
        assert "Authorization Violation" in asyncio.run(anonymous_refused(url, tls=ctx))
        pw = tmp_path / "pw"
        pw.write_text(password)
        cluster = {"user": "yomite", "password_file": str(pw), "tls_ca": str(tls.ca),
                   "secret_key_file": str(key_file(tmp_path))}
        (tmp_path / "p0").mkdir()
        s = Server(tmp_path / "p0", config(url, "tlstest", ("main",), match=MATCH,
                                           cluster=cluster), TOKEN)
        s.start()
        try:
            wait_for(lambda: "main" in call(s, "GET", "/api/cluster").json()["owned"], 30,
                     "the channel owned")
            start_reading(s, s, "main")
        finally:
            s.stop()
    finally:
        proc.terminate()
        proc.wait(20)


def test_an_nkey_user_signs_in_and_a_tls_url_to_a_broker_without_tls_is_refused(
        tmp_path: Path, broker: Broker) -> None:
    import nkeys

    seed = nkeys.encode_seed(os.urandom(32), nkeys.PREFIX_BYTE_USER)
    public = nkeys.from_seed(bytearray(seed)).public_key.decode()
    folder = tmp_path / "nk"
    folder.mkdir()
    (folder / "seed").write_bytes(seed)
    port = free_port()
    conf = accounts_conf("pw", "pw2").replace(
        "{ user: yomite, password: $YOMITE_BUS_PASSWORD }",
        f'{{ user: yomite, password: $YOMITE_BUS_PASSWORD }}\n      {{ nkey: "{public}" }}')
    assert public in conf
    (folder / "nats.conf").write_text(f"listen: 127.0.0.1:{port}\n"
                                      f'jetstream {{ store_dir: "{folder}" }}\n{conf}')
    with open(folder / "nats.log", "ab") as log:
        proc = subprocess.Popen([NATS_SERVER, "-c", str(folder / "nats.conf")], stdout=log,
                                stderr=subprocess.STDOUT)

    async def run() -> None:
        bus = await Bus.connect(f"nats://127.0.0.1:{port}", name="nk", prefix="nk",
                                access=BusAccess(nkey=folder / "seed"), connect_timeout_s=20)
        await bus.close()
        with pytest.raises(ConnectionError, match="did not speak TLS"):
            await Bus.connect(broker.url.replace("nats://", "tls://"), name="t", prefix="t")

    try:
        asyncio.run(run())
        assert "Authorization Violation" in asyncio.run(
            anonymous_refused(f"nats://127.0.0.1:{port}"))
    finally:
        proc.terminate()
        proc.wait(20)


def test_a_sealed_line_of_the_journal_opens_here_and_nowhere_else(broker: Broker) -> None:
    """The journal's encoding (cluster.journalline) with the stream itself: a line sealed for
    channel a does not open as channel b's, and a plain one is refused where the cluster
    seals."""
    from cluster import journalline

    async def run() -> None:
        key = bytes.fromhex(KEY)
        bus = await Bus.connect(broker.url, name="t", prefix="lines")
        bus.seal = Sealer([key], "KEY")
        data = journalline.encode(bus, "lines.journal.a", "m.jsonl", {"type": "header"})
        assert is_sealed(data) and b"header" not in data
        assert journalline.decode(bus, "lines.journal.a", data) == ("m.jsonl",
                                                                     {"type": "header"})
        with pytest.raises(ValueError, match="another name"):
            journalline.decode(bus, "lines.journal.b", data)
        with pytest.raises(ValueError, match="not sealed"):
            journalline.decode(bus, "lines.journal.a", b'{"file":"m.jsonl","line":{}}')
        await bus.close()

    asyncio.run(run())
