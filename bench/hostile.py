"""What hostile clients cost a real `yomite serve` now: memory under oversized requests, a
referee's flood, a mass join, PIN guessing, idle and half-sent sockets, a crowd of referees
flooding together, anonymous viewer sockets from many addresses and one IPv6 /64, a room's
anonymous viewers. Prints figures; never passes or fails.

    make bench   (or: .venv/bin/python bench/hostile.py [door room flood idle])

The door's part opens about 5,000 sockets: it raises this process's open-files limit (and
the attacker's) to 8,192, the hard limit too when run as root.
"""

import asyncio
import contextlib
import heapq
import json
import os
import re
import socket
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

import httpx2
import websockets

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
from tests.serverproc import Server

TOKEN = "hostile-bench-operator-token-0123456789"


def rss_mib(pid: int) -> float:
    status = Path(f"/proc/{pid}/status").read_text()
    return int(re.search(r"VmRSS:\s+(\d+)", status).group(1)) / 1024


def send(port: int, head: bytes, chunks) -> float:
    t0 = time.perf_counter()
    with socket.create_connection(("127.0.0.1", port), timeout=30) as s:
        with contextlib.suppress(BrokenPipeError, ConnectionResetError):
            s.sendall(head)  # the server answers and closes before the rest is sent
            for c in chunks:
                s.sendall(c)
        with contextlib.suppress(ConnectionResetError, TimeoutError):
            s.recv(4096)
    return time.perf_counter() - t0


def sizes(s: Server) -> None:
    mib = b"x" * (1 << 20)
    pid = s.proc.pid
    start = rss_mib(pid)
    took = [send(s.port, b"POST /api/channels/main/referees HTTP/1.1\r\nHost: 127.0.0.1\r\n"
                 b"Content-Type: application/json\r\nContent-Length: 52428800\r\n\r\n",
                 [mib] * 50) for _ in range(10)]
    after_declared = rss_mib(pid)
    chunk = b"%x\r\n%s\r\n" % (len(mib), mib)
    for _ in range(10):
        send(s.port, b"POST /api/channels/main/referees HTTP/1.1\r\nHost: 127.0.0.1\r\n"
             b"Content-Type: application/json\r\nTransfer-Encoding: chunked\r\n\r\n",
             [chunk] * 50)
    after_chunked = rss_mib(pid)
    for _ in range(10):
        send(s.port, b"GET /api/health HTTP/1.1\r\nHost: 127.0.0.1\r\nX-Big: ",
             [mib] * 50 + [b"\r\n\r\n"])
    after_headers = rss_mib(pid)
    print(f"server RSS {start:.1f} MiB; after ten 50 MB bodies (declared) {after_declared:.1f}; "
          f"ten chunked {after_chunked:.1f}; ten 50 MB headers {after_headers:.1f} MiB")
    print(f"  a declared 50 MB body is refused (413) in {sorted(took)[5] * 1000:.1f} ms "
          "(median), before it is read")


def mass_join(s: Server, cap: int) -> None:
    pin = httpx2.get(f"{s.base}/api/channels/main/pin", headers=s.op).json()["pin"]
    codes: dict[int, int] = {}
    t0 = time.perf_counter()
    with httpx2.Client(base_url=s.base) as c:
        for i in range(3000):
            r = c.post("/api/channels/main/referees", json={"pin": pin, "name": f"mat {i}"},
                       headers={"X-Forwarded-For": f"10.0.{i // 250}.{i % 250}"})
            codes[r.status_code] = codes.get(r.status_code, 0) + 1
    took = time.perf_counter() - t0
    op = len(httpx2.get(f"{s.base}/api/channels/main", headers=s.op).content)
    viewer = len(httpx2.get(f"{s.base}/api/channels/main").content)
    store = s.tmp / "journal" / "referees.jsonl"
    print(f"3,000 joins in {took:.1f} s: {codes.get(200, 0)} joined, {codes.get(409, 0)} refused "
          f"as the channel is full (cap {cap}), {codes.get(429, 0)} by the per-address limit "
          "(raised to 1,000 a minute for this run)")
    print(f"  state: operator {op / 1024:.1f} KiB, viewer {viewer / 1024:.1f} KiB; "
          f"store {len(store.read_text().splitlines())} lines, {store.stat().st_size} bytes")


def flood(s: Server, n: int) -> None:
    httpx2.post(f"{s.base}/api/channels/side/match", json={"seed": 1}, headers=s.op)
    httpx2.post(f"{s.base}/api/channels/side/match/start", headers=s.op)
    pin = httpx2.get(f"{s.base}/api/channels/side/pin", headers=s.op).json()["pin"]
    ref = httpx2.post(f"{s.base}/api/channels/side/referees",
                      json={"pin": pin, "name": "flood"}).json()
    before = rss_mib(s.proc.pid)
    lags: list[float] = []

    async def health_meanwhile(stop: asyncio.Event) -> None:
        async with httpx2.AsyncClient() as c:
            while not stop.is_set():
                t1 = time.perf_counter()
                await c.get(f"{s.base}/api/health")
                lags.append(time.perf_counter() - t1)
                await asyncio.sleep(0.02)

    async def run() -> tuple[float, int, str]:
        stop = asyncio.Event()
        probe = asyncio.create_task(health_meanwhile(stop))
        uri = f"ws://127.0.0.1:{s.port}/ws/channels/side?token={ref['token']}"
        t0 = time.perf_counter()
        sent, how = 0, "all sent"
        async with websockets.connect(uri, max_size=None) as ws:
            try:
                for i in range(n):
                    await ws.send(json.dumps({"type": "hold" if i % 2 == 0 else "release"}))
                    sent += 1
                async with asyncio.timeout(10):
                    while True:
                        await ws.recv()
            except websockets.ConnectionClosed as e:
                how = f"closed by the server ({e.rcvd.code if e.rcvd else '?'})"
        took = time.perf_counter() - t0
        stop.set()
        await probe
        return took, sent, how

    took, sent, how = asyncio.run(run())
    time.sleep(1.0)
    t0 = time.perf_counter()
    log = httpx2.get(f"{s.base}/api/channels/side/match/log", headers=s.op, timeout=30).json()
    log_s = time.perf_counter() - t0
    mine = [r for r in log["records"] if r["event"].get("referee") == ref["referee"]]
    lags.sort()
    print(f"one referee floods hold/release: {sent:,} of {n:,} sent in {took:.1f} s, then "
          f"{how}; {len(mine)} changes applied and journaled (hand: 2/s, burst 8; socket: "
          f"50 messages/s, burst 200); RSS +{rss_mib(s.proc.pid) - before:.1f} MiB")
    print(f"  meanwhile GET /api/health: p50 {lags[len(lags) // 2] * 1000:.1f} ms, max "
          f"{lags[-1] * 1000:.1f} ms ({len(lags)} requests); the match log read in "
          f"{log_s * 1000:.0f} ms (in a worker thread)")


def pins(s: Server) -> None:
    codes = []
    for i in range(12):
        r = httpx2.post(f"{s.base}/api/channels/fourth/referees",
                        json={"pin": "00000000", "name": "g"},
                        headers={"X-Forwarded-For": f"10.1.{i}.1"})
        codes.append(r.status_code)
    one = codes.index(429) if 429 in codes else len(codes)
    pin = httpx2.get(f"{s.base}/api/channels/third/pin", headers=s.op).json()["pin"]
    base = f"{s.base}/api/channels/third/referees"

    def post(address: str, p: str, c: httpx2.Client | None = None) -> httpx2.Response:
        if c is not None:
            return c.post(base, json={"pin": p, "name": "g"})
        with httpx2.Client(transport=httpx2.HTTPTransport(local_address=address)) as own:
            return own.post(base, json={"pin": p, "name": "g"})

    # a phone joins before the attack, from the address the attacker will use (its pass)
    phone = httpx2.Client(transport=httpx2.HTTPTransport(local_address="127.0.1.2"))
    post("127.0.1.2", pin, phone).raise_for_status()
    wrong = sum(post(f"127.0.1.{2 + n % 15}", f"{n:08d}").status_code == 403
                for n in range(30))
    guesser = post("127.0.1.2", pin)
    t0 = time.perf_counter()
    again = post("127.0.1.2", pin, phone)
    took = time.perf_counter() - t0
    typo = post("127.0.1.100", "99999999").status_code
    typist = post("127.0.1.100", pin)
    phone.close()
    print(f"PIN guessing: one address (any X-Forwarded-For) sends {one} wrong PINs before it "
          f"must wait (2 s, doubling); {wrong} wrong PINs from 15 addresses lock the channel "
          f"for them ({guesser.status_code} with the right PIN, Retry-After "
          f"{guesser.headers.get('retry-after')} s); meanwhile a phone that joined before, "
          f"from a guesser's address: {again.status_code} in {took * 1000:.1f} ms; a typist "
          f"elsewhere: {typo} then {typist.status_code} with the right PIN at once")
    # the policy's arithmetic: an attacker guessing as fast as it lets it, for 30 days
    from hall.pinlock import PinLock, RateLimited, pin_suspect

    for addresses in (1, 250):
        a = PinLock(b"bench-key", 10)
        end, guesses = 30 * 86400.0, 0
        ready = [(0.0, f"10.0.{n // 250}.{n % 250}") for n in range(addresses)]
        while ready[0][0] < end:
            t, address = heapq.heappop(ready)
            try:
                a.check("main", pin_suspect(address), t)
            except RateLimited as e:
                heapq.heappush(ready, (t + max(e.retry_after_s, 0.001), address))
                continue
            a.failed("main", pin_suspect(address), t)
            guesses += 1
            heapq.heappush(ready, (t + 0.001, address))
        per_day = guesses / 30
        print(f"  {addresses} address(es) guessing as fast as allowed: {per_day:.0f} wrong PINs "
              f"a day: a 6-digit PIN in {500_000 / per_day / 365.25:.1f} years on average")


def _still_open(c: socket.socket) -> bool:
    """Whether the server still holds `c` for a request: it has sent nothing (an answer,
    408 or 503, comes with the connection's end)."""
    try:
        c.recv(1, socket.MSG_PEEK | socket.MSG_DONTWAIT)
    except BlockingIOError:
        return True
    except OSError:
        pass
    return False


def _attack_socket(port: int, i: int) -> socket.socket:
    c = socket.socket()
    c.bind(("127.0.0.1" if i % 4 == 0 else f"127.0.0.{2 + i % 40}", 0))
    c.connect(("127.0.0.1", port))
    if i % 2:  # half a request, never finished
        c.sendall(b"GET /api/health HTTP/1.1\r\nHost: 127.0.0.1\r\nX-Wait: ")
    return c


def _phone_load(s: Server, address: str = "127.0.0.200") -> float:
    """A new phone: the projector page, its script, the state, and its WebSocket's state."""
    from websockets.sync.client import connect

    t0 = time.perf_counter()
    with httpx2.Client(base_url=s.base, timeout=60,
                       transport=httpx2.HTTPTransport(local_address=address)) as c:
        for path in ("/display/main", "/static/common.js", "/api/channels/main"):
            c.get(path).raise_for_status()
    with connect(f"ws://127.0.0.1:{s.port}/ws/channels/main", open_timeout=60,
                 source_address=(address, 0)) as ws:
        ws.recv()
        ws.recv()
    return time.perf_counter() - t0


def _ms(v: list[float]) -> str:
    v = sorted(v)
    return (f"p50 {v[len(v) // 2] * 1000:.1f} ms, p99 "
            f"{v[min(len(v) - 1, int(len(v) * 0.99))] * 1000:.1f} ms")


def idle_sockets(tmp: Path, n: int = 2000, loads: int = 100) -> None:
    """Issue 25, item 4: `n` idle and half-sent sockets, kept up by an attacker that opens
    again whatever the server closes, against a server with Debian's 1,024 open files; what
    the server holds, and how fast a new phone loads meanwhile."""
    import resource

    def debian() -> None:
        resource.setrlimit(resource.RLIMIT_NOFILE, (1024, 1024))

    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    if soft < n + 600:
        resource.setrlimit(resource.RLIMIT_NOFILE, (min(hard, n + 1000), hard))
    s = Server(tmp, {"voice": {"engine": "estimate"}, "audio": {"output": "null"}},
               TOKEN).start(preexec_fn=debian)
    held: list[socket.socket] = []
    stop = threading.Event()
    reopened = [0]

    def attacker() -> None:
        while not stop.wait(0.05):
            for i, c in enumerate(held):
                if not _still_open(c):
                    c.close()
                    with contextlib.suppress(OSError):
                        held[i] = _attack_socket(s.port, i)
                        reopened[0] += 1

    try:
        before = [_phone_load(s) for _ in range(loads)]
        files = [len(os.listdir(f"/proc/{s.proc.pid}/fd"))]
        for i in range(n):
            held.append(_attack_socket(s.port, i))
        files.append(len(os.listdir(f"/proc/{s.proc.pid}/fd")))
        thread = threading.Thread(target=attacker, daemon=True)
        thread.start()
        during: list[float] = []
        failed = 0
        for _ in range(loads):
            try:
                during.append(_phone_load(s))
            except (httpx2.HTTPError, OSError) as e:
                failed += 1
                print("  a load failed:", e)
            files.append(len(os.listdir(f"/proc/{s.proc.pid}/fd")))
        stop.set()
        thread.join()
        holding = sum(_still_open(c) for c in held)
        r = httpx2.post(f"{s.base}/api/channels/main/match", json={"seed": 1}, headers=s.op,
                        timeout=60)
        print(f"idle sockets: {n:,} idle and half-sent sockets (one client and 40 more "
              f"addresses; {reopened[0]:,} opened again as the server closed them) against "
              f"1,024 open files: the server held at most {max(files)} files "
              f"({files[0]} before) and {holding} of the sockets at the end; preparing a "
              f"match {r.status_code} [1,024 files: pages and reconnects failed, prepare "
              "503 journal_unavailable]")
        print(f"  a new phone (page, script, state, WebSocket state), {loads} times: before "
              f"{_ms(before)}; meanwhile {_ms(during)}, {failed} failed")
    finally:
        stop.set()
        for c in held:
            c.close()
        s.stop()
        resource.setrlimit(resource.RLIMIT_NOFILE, (soft, hard))


def group_flood(tmp: Path, crowd: int = 20, holds: int = 60) -> None:
    """Issue 25, item 7: `crowd` referees flooding hold/release together, each connecting
    again whenever its socket is closed, while an honest referee raises its hand every
    0.3 s (the operator lowers it): the journal lines written, and the honest hold's delay
    (send to the state that shows it) with and without the crowd."""
    from tests.test_referee_flood import hand, honest_holds, journal

    s = Server(tmp, {
        "match": {"memorise_s": 3600, "cards": 2},
        "voice": {"engine": "estimate"}, "audio": {"output": "null"},
        "server": {"security": {"pin_attempts_per_minute": 1000}},
    }, TOKEN).start()
    child = None
    try:
        with httpx2.Client(base_url=s.base, headers=s.op, timeout=60) as c:
            c.post("/api/channels/main/match", json={"seed": 7}).raise_for_status()
            c.post("/api/channels/main/match/start").raise_for_status()
            pin = c.get("/api/channels/main/pin").json()["pin"]
            refs = [c.post("/api/channels/main/referees",
                           json={"pin": pin, "name": f"mat {i}"}).json()
                    for i in range(crowd + 1)]
        me, ids = refs[0], {r["referee"] for r in refs[1:]}
        quiet = asyncio.run(honest_holds(s, me, ids, holds=holds // 3, pace_s=0.3))
        child = subprocess.Popen(
            [sys.executable, "-m", "tests.flood_child", str(s.port), "main",
             *[r["token"] for r in refs[1:]]],
            cwd=Path(__file__).resolve().parent.parent, stdin=subprocess.PIPE,
            stdout=subprocess.PIPE, text=True)
        assert child.stdin is not None and child.stdout is not None
        child.stdout.readline()
        t0 = time.perf_counter()
        start = len(journal(s))
        flooded = asyncio.run(honest_holds(s, me, ids, holds=holds, pace_s=0.3))
        child.stdin.close()
        sent = child.stdout.read().strip()
        child.wait(60)
        took = time.perf_counter() - t0
        time.sleep(2.5)  # what the channel's budget still lets through
        lines = [r for r in journal(s)[start:] if (hand(r) or ("", ""))[1] in ids]
        downs = sum(1 for r in lines if (hand(r) or ("", ""))[0] == "release")
        print(f"group flood: {crowd} referees sending hold/release as fast as their sockets "
              f"take them for {took:.1f} s, connecting again after each close ({sent}): "
              f"{len(lines)} journal lines, {downs} hands down (channel: 4/s, bursts of 8) "
              "[1,668 lines in 25 s]")
        print(f"  the honest referee's hold: quiet {_ms([w for w, _ in quiet])}; in the "
              f"flood {_ms([w for w, _ in flooded])}, max "
              f"{max(w for w, _ in flooded) * 1000:.1f} ms ({holds} holds; crowd's lines "
              f"during its waits: {sum(n for _, n in flooded)}) [p90 745 ms, max 1.2 s]")
    finally:
        if child is not None and child.poll() is None:
            child.kill()
            child.wait(10)
        if child is not None and child.stdout is not None:
            child.stdout.close()
        s.stop()


def standings(tmp: Path, pages: int = 50, seconds: float = 15.0) -> None:
    """Issue 25, item 6: a referee's hold on one channel while `pages` projectors long-poll a
    400-player tournament's standings and the desk enters a result a second; the floor (no
    pages) measured in the same sitting, before and after."""
    from tests import desk_load

    s = Server(tmp, {
        "match": {"memorise_s": 600, "cards": 2},
        "voice": {"engine": "estimate"}, "audio": {"output": "null"},
        "server": {"channels": [{"name": "a"}, {"name": "main"}]},
        "desk": {"database_url": "sqlite:///var/desk.sqlite3", "long_poll_s": 25},
    }, TOKEN).start()
    try:
        t = desk_load.big_tournament()
        body = json.dumps(desk_load.document(t), ensure_ascii=False).encode()
        r = httpx2.post(f"{s.base}/api/tournaments/import", content=body, headers=s.op,
                        timeout=120)
        r.raise_for_status()
        view = len(httpx2.get(f"{s.base}/api/tournaments/{t.id}/public",
                              params={"view": desk_load.LINK}).content)
        hold = desk_load.prepare_channel(s.base, s.op, "main")
        print(f"standings: {len(t.players)} players in {len(t.blocks)} blocks (a public view "
              f"of {view / 1024:.0f} KiB), a result a second, {seconds:.0f} s each; the "
              "hold's round trip (a raise or a lower every 50 ms, applied and journalled):")
        for n in (0, pages, 0):
            load = asyncio.run(desk_load.run(s.base, s.op, t, hold, n, seconds))
            print(f"  {n:3d} pages polling: p50 {load.quantile(0.5):6.1f} ms, p99 "
                  f"{load.quantile(0.99):6.1f} ms, max {max(load.holds_ms):6.1f} ms "
                  f"({len(load.holds_ms)} holds, {load.results} results, "
                  f"{load.responses} views sent)")
    finally:
        s.stop()


# ---------------------------------------------------------------------- issue 47: the door
ATTACK_V4 = [f"127.0.0.{2 + i}" for i in range(24)]  # 24 addresses ...
ATTACK_V4_EACH = 32  # ... 32 sockets each: 768, what filled Debian's 1,024 files before
ATTACK_V6 = 4000  # and one IPv6 /64 (::1) with 4,000


def _open_files(n: int) -> None:
    """This process may hold `n` descriptors: the attack needs about 5,000 and Debian's
    default is 1,024 (raised here, the hard limit too when run as root)."""
    import resource

    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    if soft >= n:
        return
    if hard != resource.RLIM_INFINITY and hard < n:
        with contextlib.suppress(ValueError, OSError):
            resource.setrlimit(resource.RLIMIT_NOFILE, (n, n))
            return
        n = hard
    resource.setrlimit(resource.RLIMIT_NOFILE, (n, hard))


async def _attack(port: int) -> None:
    """The attacker's process (`hostile.py attack PORT`): anonymous viewer WebSockets from 24
    addresses (32 each) and from ::1 (4,000), each answering pings; a socket the server
    closes is opened again after 1 s, a refused one after its Retry-After (5 s). Prints
    READY with the counts after the first pass, and the counts again when stdin closes."""
    import websockets as ws_lib

    counts = {"held": 0, "hello": 0, "refused": 0, "closed": 0, "attempts": 0}
    gate = asyncio.Semaphore(64)
    stop = asyncio.Event()
    first_pass = [len(ATTACK_V4) * ATTACK_V4_EACH + ATTACK_V6]
    ready = asyncio.Event()

    async def slot(url: str, local: tuple[str, int] | None) -> None:
        first = True
        while not stop.is_set():
            wait = 1.0
            try:
                async with gate:
                    counts["attempts"] += 1
                    conn = await ws_lib.connect(url, open_timeout=60, max_size=None,
                                                **({"local_addr": local} if local else {}))
            except ws_lib.InvalidStatus:
                counts["refused"] += 1
                wait = 5.0
                conn = None
            except (OSError, ws_lib.InvalidHandshake, EOFError, TimeoutError):
                counts["refused"] += 1
                wait = 5.0
                conn = None
            if first:
                first = False
                first_pass[0] -= 1
                if first_pass[0] == 0:
                    ready.set()
            if conn is not None:
                counts["held"] += 1
                try:
                    await conn.recv()
                    counts["hello"] += 1
                    while not stop.is_set():
                        await conn.recv()
                except ws_lib.ConnectionClosed:
                    counts["closed"] += 1
                finally:
                    counts["held"] -= 1
                    with contextlib.suppress(Exception):
                        await conn.close()
            with contextlib.suppress(TimeoutError):
                async with asyncio.timeout(wait):
                    await stop.wait()

    v4 = f"ws://127.0.0.1:{port}/ws/channels/side"
    tasks = [asyncio.create_task(slot(v4, (a, 0)))
             for a in ATTACK_V4 for _ in range(ATTACK_V4_EACH)]
    tasks += [asyncio.create_task(slot(f"ws://[::1]:{port}/ws/channels/side", None))
              for _ in range(ATTACK_V6)]
    await ready.wait()
    print("READY", json.dumps(counts), flush=True)
    await asyncio.get_running_loop().run_in_executor(None, sys.stdin.read)
    print("END", json.dumps(counts), flush=True)
    stop.set()
    for t in tasks:
        t.cancel()
    await asyncio.gather(*tasks, return_exceptions=True)


def _prepares(s: Server, n: int = 20) -> list[float]:
    out = []
    with httpx2.Client(base_url=s.base, headers=s.op, timeout=60) as c:
        for i in range(n):
            t0 = time.perf_counter()
            c.post("/api/channels/third/match", json={"seed": i}).raise_for_status()
            out.append(time.perf_counter() - t0)
    return out


def door_classes(tmp: Path, loads: int = 50, holds: int = 40) -> None:
    """Issue 47, items 2 and 3: 768 anonymous viewer sockets from 24 addresses and 4,000 from
    one IPv6 /64 (::1), kept up by an attacker in a process of its own, against a server with
    Debian's 1,024 open files; meanwhile a new phone loads (page, script, state, WebSocket),
    the operator prepares, a referee holds. Then a room's 60 anonymous viewers."""
    import resource

    from tests.test_referee_flood import honest_holds

    def debian() -> None:
        resource.setrlimit(resource.RLIMIT_NOFILE, (1024, 1024))

    _open_files(8192)
    s = Server(tmp, {
        "match": {"memorise_s": 3600, "cards": 2},
        "voice": {"engine": "estimate"}, "audio": {"output": "null"},
        # ::1 stands for another host's /64: only this machine's IPv4 address is exempt
        "server": {"channels": [{"name": "main"}, {"name": "side"}, {"name": "third"}],
                   "limits": {"connections_exempt": ["127.0.0.1"]}},
    }, TOKEN, host="::").start(preexec_fn=debian)
    attacker = None
    try:
        with httpx2.Client(base_url=s.base, headers=s.op, timeout=60) as c:
            c.post("/api/channels/main/match", json={"seed": 7}).raise_for_status()
            c.post("/api/channels/main/match/start").raise_for_status()
            pin = c.get("/api/channels/main/pin").json()["pin"]
            me = c.post("/api/channels/main/referees",
                        json={"pin": pin, "name": "honest"}).json()
        before_loads = [_phone_load(s, f"127.0.1.{1 + i % 200}") for i in range(loads)]
        before_prep = _prepares(s)
        before_holds = [w for w, _ in asyncio.run(honest_holds(s, me, set(), holds=holds,
                                                               pace_s=0.2))]
        t0 = time.perf_counter()
        attacker = subprocess.Popen(
            [sys.executable, str(Path(__file__).resolve()), "attack", str(s.port)],
            stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True,
            preexec_fn=lambda: _open_files(8192))
        assert attacker.stdin is not None and attacker.stdout is not None
        line = attacker.stdout.readline().split(" ", 1)
        opened = json.loads(line[1]) if line[0] == "READY" else {}
        took = time.perf_counter() - t0
        files = len(os.listdir(f"/proc/{s.proc.pid}/fd"))
        during: list[float] = []
        failed = 0
        for i in range(loads):
            try:
                during.append(_phone_load(s, f"127.0.2.{1 + i % 200}"))
            except (httpx2.HTTPError, OSError) as e:
                failed += 1
                print("  a load failed:", e)
        prep = _prepares(s)
        held = [w for w, _ in asyncio.run(honest_holds(s, me, set(), holds=holds,
                                                       pace_s=0.2))]
        files = max(files, len(os.listdir(f"/proc/{s.proc.pid}/fd")))
        attacker.stdin.close()
        end = json.loads(attacker.stdout.readline().split(" ", 1)[1])
        attacker.wait(120)
        print(f"door: {len(ATTACK_V4) * ATTACK_V4_EACH} anonymous viewer sockets from "
              f"{len(ATTACK_V4)} addresses and {ATTACK_V6:,} from one IPv6 /64, against 1,024 "
              f"open files (this process's own limit raised to 8,192 for the attack): first "
              f"pass in {took:.1f} s, {opened.get('held', 0)} held, {opened.get('refused', 0)} "
              f"refused; at the end {end['held']} held, {end['attempts']:,} attempts, "
              f"{end['closed']:,} closed to make room; the server at most {files} files "
              "[768 sockets: every new phone 503, the operator's prepare reset]")
        print(f"  a new phone (page, script, state, WebSocket state), {loads} times: before "
              f"{_ms(before_loads)}; meanwhile {_ms(during)}, {failed} failed")
        print(f"  the operator prepares: before {_ms(before_prep)}; meanwhile {_ms(prep)}")
        print(f"  a referee's hold (send to the state that shows it), {holds} times: before "
              f"{_ms(before_holds)}; meanwhile {_ms(held)}")
    finally:
        if attacker is not None and attacker.poll() is None:
            attacker.kill()
            attacker.wait(30)
        s.stop()


def room_viewers(tmp: Path, viewers: int = 60) -> None:
    """Issue 47: a room's `viewers` anonymous sockets from 2 addresses, then one more than its
    quota with the room's viewer link: its projector, speaker and referees still get in."""
    from tests.orgs import make_org, open_room, redeem

    s = Server(tmp, {"voice": {"engine": "estimate"}, "audio": {"output": "null"}},
               TOKEN).start()
    try:
        teacher = redeem(s, make_org(s, "bench school")["code"])
        room = open_room(s, teacher)
        name, links = room["room"], room["links"]

        def key(link: str) -> str:
            return link.split("#key=", 1)[1]

        pin = httpx2.get(f"{s.base}/api/channels/{name}/pin",
                         headers={"Authorization": f"Bearer {teacher}"}).json()["pin"]
        refs = [httpx2.post(f"{s.base}/api/channels/{name}/referees",
                            json={"pin": pin, "name": f"r{i}"}).json()["token"]
                for i in range(4)]
        url = f"ws://127.0.0.1:{s.port}/ws/channels/{name}"

        async def one(stack: contextlib.AsyncExitStack, u: str, address: str) -> str:
            t0 = time.perf_counter()
            try:
                ws = await stack.enter_async_context(websockets.connect(
                    u, local_addr=(address, 0), open_timeout=60))
                m = json.loads(await ws.recv())
                took.append(time.perf_counter() - t0)
                return str(m["type"])
            except websockets.ConnectionClosed as e:
                return e.rcvd.reason if e.rcvd is not None else "closed"
            except websockets.InvalidStatus as e:
                return str(e.response.status_code)

        took: list[float] = []

        async def run() -> dict[str, dict[str, int]]:
            out: dict[str, dict[str, int]] = {}
            async with contextlib.AsyncExitStack() as stack:
                # as the red team: from 2 addresses, no link
                got = [await one(stack, url, f"127.0.3.{1 + i % 2}") for i in range(viewers)]
                out["anonymous"] = {k: got.count(k) for k in set(got)}
                # with the viewer link, from 10 addresses (the door takes 8 an address): one
                # more than the quota
                u = f"{url}?token={key(links['viewer'])}"
                got = [await one(stack, u, f"127.0.4.{1 + i % 10}") for i in range(viewers + 1)]
                out["with the viewer link"] = {k: got.count(k) for k in set(got)}
                own = [await one(stack, f"{url}?token={key(links['projector'])}", "127.0.3.9"),
                       await one(stack, f"{url}?token={key(links['speaker'])}&audience=speaker",
                                 "127.0.3.9")]
                own += [await one(stack, f"{url}?token={t}", "127.0.3.9") for t in refs]
                out["projector, speaker, 4 referees"] = {k: own.count(k) for k in set(own)}
            return out

        out = asyncio.run(run())
        said = "; ".join(f"{k}: {v}" for k, v in out.items())
        print(f"room (max_clients_per_room {viewers}): {said} [60 anonymous sockets kept the "
              "projector, speaker and referees out]")
        print(f"  a socket's hello: {_ms(took)}")
    finally:
        s.stop()


def main() -> None:
    if sys.argv[1:2] == ["attack"]:
        asyncio.run(_attack(int(sys.argv[2])))
        return
    only = set(sys.argv[1:])  # e.g. `hostile.py door room flood`: those parts only
    if only:
        with tempfile.TemporaryDirectory() as tmp:
            for part, run in (("door", door_classes), ("room", room_viewers),
                              ("flood", group_flood), ("idle", idle_sockets)):
                if part in only:
                    (Path(tmp) / part).mkdir()
                    run(Path(tmp) / part)
        return
    with tempfile.TemporaryDirectory() as tmp:
        cap = 100
        s = Server(Path(tmp), {
            "match": {"memorise_s": 600, "cards": 2},
            "voice": {"engine": "estimate"}, "audio": {"output": "null"},
            "server": {"channels": [{"name": "main"}, {"name": "side"}, {"name": "third"}],
                       "security": {"pin_attempts_per_minute": 1000}},
        }, TOKEN).start()
        try:
            sizes(s)
            mass_join(s, cap)
            flood(s, 10_000)
        finally:
            s.stop()
        (Path(tmp) / "pins").mkdir()
        s2 = Server(Path(tmp) / "pins", {
            "voice": {"engine": "estimate"}, "audio": {"output": "null"},
            "server": {"channels": [{"name": "third"}, {"name": "fourth"}]},
        }, TOKEN).start()
        try:
            pins(s2)
        finally:
            s2.stop()
        (Path(tmp) / "idle").mkdir()
        idle_sockets(Path(tmp) / "idle")
        (Path(tmp) / "flood").mkdir()
        group_flood(Path(tmp) / "flood")
        (Path(tmp) / "standings").mkdir()
        standings(Path(tmp) / "standings")
        (Path(tmp) / "door").mkdir()
        door_classes(Path(tmp) / "door")
        (Path(tmp) / "room").mkdir()
        room_viewers(Path(tmp) / "room")


if __name__ == "__main__":
    main()
