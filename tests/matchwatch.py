"""A channel watched from outside while something breaks: its state as one process shows it,
read every 0.2 s by a thread of its own (`Timeline`), and a referee's hands raised and lowered
through one process, each answer kept (`Referee`). tests/test_cluster_brokers.py and
bench/broker_failover.py's `--hall` use them."""

import threading
import time
from dataclasses import dataclass, field
from typing import Any

import httpx2

from tests.clusterprocs import hold, release
from tests.serverproc import Server


@dataclass
class Timeline:
    """A channel's state as one process shows it, read every 0.2 s by a thread of its own."""

    server: Server
    channel: str
    samples: list[tuple[float, dict[str, Any]]] = field(default_factory=list)
    failures: list[str] = field(default_factory=list)
    _stop: threading.Event = field(default_factory=threading.Event)
    _thread: threading.Thread | None = None

    def start(self) -> "Timeline":
        self._thread = threading.Thread(target=self._run, daemon=True)
        self._thread.start()
        return self

    def stop(self) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join(30)

    def _run(self) -> None:
        url = f"{self.server.base}/api/channels/{self.channel}"
        with httpx2.Client(headers=self.server.op, timeout=10) as client:
            while not self._stop.wait(0.2):
                try:
                    r = client.get(url)
                except httpx2.HTTPError as e:
                    self.failures.append(f"{type(e).__name__}: {e}")
                    continue
                if r.status_code != 200:
                    self.failures.append(f"{r.status_code} {r.text[:200]}")
                    continue
                self.samples.append((time.monotonic(), r.json().get("match") or {}))

    def pauses(self) -> list[tuple[float, Any, Any]]:
        """Every sample paused or with a hand up: (when, paused, holds)."""
        return [(t, m.get("paused"), m.get("holds")) for t, m in self.samples
                if m.get("paused") or m.get("holds")]

    def card_at(self, t: float) -> int:
        return max((int(m.get("card") or 0) for at, m in self.samples if at <= t), default=0)

    def last_card(self) -> int:
        return max((int(m.get("card") or 0) for _t, m in self.samples), default=0)


@dataclass
class Referee:
    """Hands raised and lowered on a channel through one process, one after another, each
    answer kept: (id, status, when sent, seconds it took); and each refusal's `error`."""

    server: Server
    channel: str
    answers: list[tuple[str, int, float, float]] = field(default_factory=list)
    errors: dict[str, str] = field(default_factory=dict)
    _stop: threading.Event = field(default_factory=threading.Event)
    _thread: threading.Thread | None = None

    def start(self) -> "Referee":
        self._thread = threading.Thread(target=self._run, daemon=True)
        self._thread.start()
        return self

    def stop(self) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join(60)

    def _run(self) -> None:
        i = 0
        while not self._stop.wait(0.5):
            i += 1
            rid = f"ref-{i}"
            t0 = time.monotonic()
            try:
                r = hold(self.server, self.channel, rid)
                code = r.status_code
                if code != 200:
                    self.errors[rid] = str(r.json().get("error"))
            except (httpx2.HTTPError, ValueError) as e:
                code = 0
                self.errors[rid] = repr(e)
            self.answers.append((rid, code, t0, time.monotonic() - t0))
            for _ in range(20):  # lowered whatever the answer (a hand applied late too)
                try:
                    if release(self.server, self.channel, rid).status_code in (200, 404, 409):
                        break
                except httpx2.HTTPError:
                    pass
                time.sleep(0.2)

    def acknowledged(self) -> list[str]:
        return [rid for rid, code, _t, _s in self.answers if code == 200]

    def between(self, t0: float, t1: float) -> str:
        """The answers to hands sent from t0 to t1, said for the report."""
        got = [(code, took) for _r, code, t, took in self.answers if t0 <= t < t1]
        if not got:
            return "none sent"
        codes = sorted({code for code, _s in got})
        return (f"{sum(code == 200 for code, _s in got)} of {len(got)} acknowledged (answers "
                f"{codes}), slowest {max(took for _c, took in got):.2f} s")
