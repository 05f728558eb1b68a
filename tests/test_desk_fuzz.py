"""Fuzz the desk's API from its OpenAPI schema (schemathesis) against a real server holding a
tournament under way: no 5xx, every error a JSON body with a detail, the server alive."""

import httpx2
import pytest
import schemathesis
from hypothesis import HealthCheck, settings
from schemathesis.config import SchemathesisConfig

from api.app import create_app
from hall.config import parse_config

from .desk_sim import Desk, config, entries_csv
from .serverproc import Server

pytestmark = pytest.mark.server

TOKEN = "desk-fuzz-operator-token-0123456789ab"
CONFIG = config(["a", "b"])
EXAMPLES = 20
PHASES = ["examples", "coverage"]
ENUMS = {"tid": ["day", "nope"], "number": [1, 2, 7], "mat": [1, 2, 4, 99], "no": [1, 5, 999],
         "name": ["A", "Z"], "referee": ["x", "r00000000"], "block": ["A", "Z"]}


def desk_spec():
    spec = create_app(parse_config(CONFIG)).openapi()
    spec["paths"] = {k: v for k, v in spec["paths"].items() if k.startswith("/api/tournaments")}
    spec["paths"]["/api/tournaments/{tid}"].pop("delete")  # keep the tournament to reach
    for item in spec["paths"].values():
        for op in item.values():
            for p in op.get("parameters", []):
                if p["in"] == "path" and p["name"] in ENUMS:
                    p["schema"] = {"enum": ENUMS[p["name"]]}
    return spec


def fuzz_config() -> SchemathesisConfig:
    cfg = SchemathesisConfig()
    cfg.projects.default.phases.update(phases=PHASES)
    # the router answers any other method with a 405 on its own: those cases reach no handler
    cfg.projects.default.phases.coverage.unexpected_methods = set()
    return cfg


@pytest.fixture(scope="module")
def desk_schema():
    return schemathesis.openapi.from_dict(desk_spec(), config=fuzz_config())


# built by the worker that runs the test, not by every worker's collection (tests/test_fuzz.py)
schema = schemathesis.pytest.from_fixture("desk_schema")
calls = {"n": 0, "by_status": {}}


@pytest.fixture(scope="module")
def server(tmp_path_factory):
    cfg = {**CONFIG, "desk": {**CONFIG["desk"], "long_poll_s": 1}}
    s = Server(tmp_path_factory.mktemp("desk-fuzz"), cfg, TOKEN).start()
    d = Desk(s.base, s.op)
    try:
        d.call("POST", "/api/tournaments", json={"id": "day", "name": "大会", "cards": 1})
        d.call("POST", d.t("/entries.csv"), content=entries_csv(12),
               headers={**s.op, "Content-Type": "text/csv"})
        d.call("POST", d.t("/blocks/draw"), json={"blocks": 2, "seed": 1})
        d.join_referees()
        d.call("POST", d.t("/rounds"))
    finally:
        d.close()
    yield s
    s.stop()


@settings(max_examples=EXAMPLES, deadline=None, suppress_health_check=list(HealthCheck))
@schema.parametrize()
def test_no_server_errors(case, server):
    headers = {"Authorization": f"Bearer {TOKEN}"} if calls["n"] % 2 == 0 else None
    response = case.call(base_url=server.base, headers=headers, timeout=10)
    calls["n"] += 1
    calls["by_status"][response.status_code] = calls["by_status"].get(response.status_code, 0) + 1
    assert response.status_code < 500, (case.method, case.formatted_path, response.text)
    if response.status_code >= 400:
        body = response.json()
        assert body["detail"], body


def test_fuzz_reached_the_desk_and_the_server_survived(server):
    print("desk fuzz cases by status:", dict(sorted(calls["by_status"].items())))
    assert calls["n"] >= 500, calls
    assert calls["by_status"].get(200, 0) >= 50, "the cases reached the handlers"
    assert httpx2.get(f"{server.base}/api/tournaments/day/public",
                      headers=server.op).status_code == 200
    assert server.proc.poll() is None
    assert "Traceback" not in server.log()
