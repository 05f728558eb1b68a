"""A voice that cannot read a match is named as the voice, not blamed on the speakers: a real
server without Rubber Band (pylibrb blocked, no rubberband program on the PATH) asked for the
授業 preset's speed answers 503 `voice_unavailable` with what to install, and the Japanese
console says so in Japanese."""

import os
from pathlib import Path

import httpx2
import pytest

from .serverproc import Server

pytestmark = pytest.mark.server

TOKEN = "voice-unavailable-operator-token-0123"
CONFIG = {"voice": {"engine": "openjtalk"}, "audio": {"output": "null"},
          "match": {"memorise_s": 1, "cards": 1}}
# a Python start-up hook that makes `import pylibrb` fail in the server, as on a machine where
# it has no wheel
BLOCK = "import sys\nsys.modules['pylibrb'] = None\n"


@pytest.fixture(scope="module")
def server(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("voice-unavailable")
    hook = tmp / "hook"
    hook.mkdir()
    (hook / "sitecustomize.py").write_text(BLOCK)
    empty = tmp / "empty-path"
    empty.mkdir()
    saved = {k: os.environ.get(k) for k in ("PYTHONPATH", "PATH")}
    os.environ["PYTHONPATH"] = os.pathsep.join(
        [str(hook), *filter(None, [saved["PYTHONPATH"]])])
    os.environ["PATH"] = str(empty)
    try:
        s = Server(tmp, CONFIG, TOKEN).start()
    finally:
        for k, v in saved.items():
            if v is None:
                os.environ.pop(k, None)
            else:
                os.environ[k] = v
    yield s
    s.stop()


def prepare_and_start(s: Server, body: dict) -> httpx2.Response:
    with httpx2.Client(base_url=s.base, headers=s.op, timeout=30) as c:
        r = c.post("/api/channels/main/match", json=body)
        if r.status_code != 200:
            return r
        return c.post("/api/channels/main/match/start")


def test_a_speed_without_rubber_band_is_the_voices_error_naming_what_to_install(server):
    r = prepare_and_start(server, {"seed": 1, "voice": {"speed": 0.85}})
    assert r.status_code == 503, r.text
    body = r.json()
    assert body["error"] == "voice_unavailable", body
    assert "pip install pylibrb" in body["detail"] and "rubberband" in body["detail"], body
    assert "speaker" not in body["hint"] and "sound server" not in body["hint"], body
    # and at speed 1.0 the same server reads
    r = prepare_and_start(server, {"seed": 1, "voice": {"speed": 1.0}})
    assert r.status_code == 200, r.text


def test_the_pages_have_the_voice_error_in_both_languages():
    import json

    root = Path(__file__).resolve().parent.parent / "api" / "static"
    for lang, word in (("ja", "声"), ("en", "voice")):
        strings = json.loads((root / f"strings.{lang}.json").read_text("utf-8"))
        assert word in strings["err_voice_unavailable"].lower(), strings["err_voice_unavailable"]
