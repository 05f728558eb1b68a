"""The desk's words: every error code the desk's rules can answer (desk/: a class's `code`, or
one given where it is raised, `code="cards_over_read"`) has words in both languages on the
desk's pages (api/static/desk-strings.*.json, or the pages' common strings.*.json), and the
desk's two files have the same keys. tests/test_strings.py does the same for api/'s codes."""

import json
import re
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
STATIC = ROOT / "api" / "static"


def desk_codes() -> set[str]:
    found: set[str] = set()
    for f in (ROOT / "desk").rglob("*.py"):
        found |= set(re.findall(r'\bcode\s*=\s*"([a-z_]+)"', f.read_text("utf-8")))
    return found


def strings(lang: str) -> dict[str, str]:
    return {**json.loads((STATIC / f"strings.{lang}.json").read_text("utf-8")),
            **json.loads((STATIC / f"desk-strings.{lang}.json").read_text("utf-8"))}


def test_every_desk_error_code_has_words_in_both_languages():
    found = desk_codes()
    assert {"invalid", "out_of_order", "cards_over_read", "round_not_read",
            "mat_not_on_channel", "result_locked"} <= found, found
    found.discard("desk_error")  # the base class's: never raised as such
    for lang in ("ja", "en"):
        missing = sorted(c for c in found if f"err_{c}" not in strings(lang))
        assert not missing, f"no err_ words in {lang} for {missing}"


def test_the_desks_two_languages_have_the_same_keys():
    ja = json.loads((STATIC / "desk-strings.ja.json").read_text("utf-8"))
    en = json.loads((STATIC / "desk-strings.en.json").read_text("utf-8"))
    assert sorted(ja) == sorted(en)
