"""Fuzz the HTTP API from its own OpenAPI schema (schemathesis) against a real server: no 5xx,
and the channel's task is still running afterwards."""

import httpx2
import pytest
import schemathesis
from hypothesis import HealthCheck, settings

from api.app import create_app
from reader.config import parse_config

from .serverproc import Server

pytestmark = pytest.mark.server

TOKEN = "fuzz-operator-token-0123456789abcdef"
CONFIG = {
    "match": {"memorise_s": 2, "cards": 2},
    "voice": {"engine": "estimate"},
    "audio": {"output": "null"},
    "server": {"security": {"pin_attempts_per_minute": 1000}},
}
EXAMPLES = 70


def focused_spec():
    """The app's own schema, with the channel and referee path parameters drawn from names
    that exist, so the cases reach the handlers instead of 404s."""
    spec = create_app(parse_config(CONFIG)).openapi()
    # the desk's routes are fuzzed with a tournament to reach (tests/test_desk_fuzz.py)
    spec["paths"] = {k: v for k, v in spec["paths"].items()
                     if not k.startswith("/api/tournaments")}
    for item in spec["paths"].values():
        for op in item.values():
            for p in op.get("parameters", []):
                if p["in"] == "path" and p["name"] == "ch":
                    p["schema"] = {"type": "string", "enum": ["main"]}
                elif p["in"] == "path" and p["name"] == "referee":
                    p["schema"] = {"type": "string", "enum": ["@operator", "@audio", "r1", "x"]}
    return spec


schema = schemathesis.openapi.from_dict(focused_spec())
calls = {"n": 0, "by_status": {}}


@pytest.fixture(scope="module")
def server(tmp_path_factory):
    s = Server(tmp_path_factory.mktemp("fuzz"), CONFIG, TOKEN).start()
    yield s
    s.stop()


@schema.parametrize()
@settings(max_examples=EXAMPLES, deadline=None,
          suppress_health_check=list(HealthCheck))
def test_no_server_errors(case, server):
    # half the cases as the operator (deep paths), half as whoever the schema makes up
    headers = {"Authorization": f"Bearer {TOKEN}"} if calls["n"] % 2 == 0 else None
    response = case.call(base_url=server.base, headers=headers, timeout=10)
    calls["n"] += 1
    calls["by_status"][response.status_code] = calls["by_status"].get(response.status_code, 0) + 1
    assert response.status_code < 500, (case.method, case.formatted_path, response.text)
    if response.status_code >= 400:
        body = response.json()
        assert body["detail"], body


def test_fuzz_ran_enough_cases_and_the_reader_survived(server):
    print("fuzz cases by status:", dict(sorted(calls["by_status"].items())))
    assert calls["n"] >= 1000, calls
    health = httpx2.get(f"{server.base}/api/health").json()
    assert all(ch["runtime"] == "running" for ch in health["channels"].values()), health
    assert server.proc.poll() is None
    assert "Traceback" not in server.log()
