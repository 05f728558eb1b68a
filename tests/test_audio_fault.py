"""The sound server dies under a playing match: the channel pauses with the reason on every
page, the server keeps running, and once the sound is back the operator resumes."""

import time

import httpx2
import pytest

from .serverproc import Server
from .test_device import PrivatePulse

pytestmark = [pytest.mark.audio, pytest.mark.server]

TOKEN = "audio-fault-operator-token-0123456789"


def wait_state(c, pred, what, timeout=60.0, headers=None):
    deadline = time.monotonic() + timeout
    st = None
    while time.monotonic() < deadline:
        st = c.get("/api/channels/main", headers=headers).json()
        if pred(st):
            return st
        time.sleep(0.05)
    raise AssertionError(f"never {what}: {st}")


def test_killing_the_sound_server_pauses_and_resume_brings_it_back(tmp_path, monkeypatch):
    pulse = PrivatePulse()
    pulse.start()
    try:
        for k, v in pulse.env.items():
            monkeypatch.setenv(k, v)  # the server process talks to the private PulseAudio
        server = Server(tmp_path, {
            "match": {"memorise_s": 1, "cards": 3, "prelude": {"enabled": False},
                      "gaps": {"after_bow_s": 0.2}},
            "voice": {"engine": "estimate"},
            "audio": {"output": "device", "device": "pulse"},
        }, TOKEN).start()
        try:
            op = server.op
            with httpx2.Client(base_url=server.base, timeout=30) as c:
                assert "device pulse" in c.get("/api/health").json()["channels"]["main"][
                    "output"]
                c.post("/api/channels/main/match", json={"seed": 4}, headers=op)
                c.post("/api/channels/main/match/start", headers=op)
                wait_state(c, lambda s: s["match"]["phase"] == "reading", "reading", headers=op)
                pulse.kill()
                # every page: the public state carries the paused match and the reason
                st = wait_state(c, lambda s: s["match"]["paused"], "paused by the fault")
                holds = {h["referee"]: h["name"] for h in st["match"]["holds"]}
                assert "@audio" in holds and holds["@audio"].startswith("audio device:")
                assert st["audio"].startswith("fault:")
                # still down: resuming says so and changes nothing
                r = c.post("/api/channels/main/match/resume", headers=op)
                assert r.status_code == 503 and r.json()["error"] == "audio_unavailable"
                assert c.get("/api/channels/main").json()["match"]["paused"]
                pulse.start()
                r = c.post("/api/channels/main/match/resume", headers=op)
                assert r.status_code == 200, r.text
                assert r.json()["audio"] == "ok" and r.json()["match"]["holds"] == []
                before = r.json()["match"]["segment"]["index"]
                st = wait_state(c, lambda s: not s["match"]["paused"]
                                and s["match"]["segment"]["index"] > before,
                                "reading again", headers=op)
                assert server.proc.poll() is None, "the server never crashes"
        finally:
            server.stop()
        assert "Traceback" not in server.log()
    finally:
        pulse.close()
