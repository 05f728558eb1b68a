"""The pages' strings: every error code the API (and the pages themselves) can put in front of
a user has a string in both languages, and both files have the same keys."""

import json
import re
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
STATIC = ROOT / "api" / "static"

# where codes are made: ApiError(403, "wrong_pin", ...), body("illegal_move", ...),
# {"error": "bad_message", ...}, code = "bad_deck" / "refused" (the reader's errors), and the
# pages' own ApiError(0, "network", ...)
PATTERNS = [
    r'ApiError\(\s*\d+,\s*"([a-z_]+)"',
    r'body\(\s*"([a-z_]+)"',
    r'"error":\s*"([a-z_]+)"',
    r'"([a-z_]+)" if isinstance\(e, \w+\) else',
    r'else\s*"([a-z_]+)"\)',
    r'RoomRefused\(\s*"([a-z_]+)"',
]


def codes() -> set[str]:
    found: set[str] = set()
    for f in [p for d in ("api", "hall", "yomite") for p in (ROOT / d).rglob("*.py")]:
        text = f.read_text("utf-8")
        for p in PATTERNS:
            found |= set(re.findall(p, text))
    for f in STATIC.glob("*.js"):
        if f.name.startswith("desk"):  # the desk page's: tests/test_desk_strings.py
            continue
        found |= set(re.findall(r'ApiError\(0,\s*"([a-z_]+)"', f.read_text("utf-8")))
    return found


def test_every_error_code_has_words_in_both_languages():
    found = codes()
    # the codes this test must see (a pattern that finds nothing would pass vacuously)
    assert {"wrong_pin", "illegal_move", "rate_limited", "bad_deck", "refused",
            "bad_message", "network", "unauthorized"} <= found, found
    for lang in ("ja", "en"):
        strings = json.loads((STATIC / f"strings.{lang}.json").read_text("utf-8"))
        missing = sorted(c for c in found if f"err_{c}" not in strings)
        assert not missing, f"strings.{lang}.json has no err_ string for {missing}"


def test_both_languages_have_the_same_keys():
    ja = json.loads((STATIC / "strings.ja.json").read_text("utf-8"))
    en = json.loads((STATIC / "strings.en.json").read_text("utf-8"))
    assert sorted(ja) == sorted(en)
    assert not [k for k, v in {**ja, **en}.items() if "`" in v], "no Markdown in page text"
