"""The pages' shared head (api/static/head.html): a real `yomite serve` puts it once into each of
the eight pages, before the page's own style sheet and scripts, with the pages' headers as
before; no page file on disk repeats any of its lines."""

import re
from collections.abc import Iterator
from pathlib import Path

import httpx2
import pytest

from api.guards import PAGE_CSP
from api.routes.pages import HEAD_MARK

from .serverproc import Server

pytestmark = pytest.mark.server

STATIC = Path(__file__).resolve().parent.parent / "api" / "static"
TOKEN = "head-test-operator-token-0123456789abc"

# each page's file and a path that serves it
PAGES = {"console": "/console", "desk": "/desk", "display": "/display/main",
         "record": "/record", "referee": "/referee/main", "results": "/results/main",
         "speaker": "/speaker/main", "standings": "/standings/t1"}


def shared_lines() -> list[str]:
    return [line for line in (STATIC / "head.html").read_text("utf-8").splitlines() if line]


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Server]:
    s = Server(tmp_path_factory.mktemp("head"), {
        "voice": {"engine": "estimate"}, "audio": {"output": "null"},
    }, TOKEN).start()
    try:
        yield s
    finally:
        s.stop()


def test_the_page_files_hold_the_mark_and_none_of_the_shared_head():
    lines = shared_lines()
    assert '<meta charset="utf-8">' in lines and any("common.js" in x for x in lines)
    for name in PAGES:
        html = (STATIC / f"{name}.html").read_text("utf-8")
        assert html.count(HEAD_MARK) == 1, name
        assert html.index("<head>") < html.index(HEAD_MARK) < html.index("</head>"), name
        repeated = [x for x in lines if x in html]
        assert not repeated, f"{name}.html repeats the shared head's {repeated}"


@pytest.mark.parametrize("name", sorted(PAGES))
def test_each_page_is_served_with_the_shared_head_once(server: Server, name: str):
    r = httpx2.get(server.base + PAGES[name])
    assert r.status_code == 200
    assert r.headers["content-type"] == "text/html; charset=utf-8"
    assert r.headers["cache-control"] == "no-cache"
    assert r.headers["content-security-policy"] == PAGE_CSP
    assert "etag" not in r.headers
    html = r.text
    assert HEAD_MARK not in html
    head = html[html.index("<head>"):html.index("</head>")]
    for line in shared_lines():
        assert html.count(line) == 1, (name, line)
        assert line in head, (name, line)
    assert head.index('<meta charset="utf-8">') < head.index("<title>")
    # the shared style sheet and scripts come before the page's own (the cascade; defer runs
    # the scripts in the order they stand)
    own_css = head.index(f'href="/static/{name}.css"')
    own_js = head.index(f'src="/static/{name}.js"')
    assert head.index("/static/common.css") < own_css
    assert head.index("/static/strings.js") < head.index("/static/common.js") < own_js
    assert re.search(r"<title>yomite \S+</title>", head), name
