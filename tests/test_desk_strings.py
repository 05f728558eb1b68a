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
    # the desk page's own (a mat that is not a number, said before anything is sent)
    found |= set(re.findall(r'ApiError\(0,\s*"([a-z_]+)"',
                            (STATIC / "desk.js").read_text("utf-8")))
    # the API's edge for the desk (a single entry's bad field)
    for f in (ROOT / "api" / "desk").rglob("*.py"):
        found |= set(re.findall(r'\bcode\s*=\s*"([a-z_]+)"', f.read_text("utf-8")))
    assert {"mat_not_number", "bad_entry", "csv_bad_line", "mat_other_channel"} <= found
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


def test_every_reason_a_step_or_a_line_or_a_flag_gives_has_words_in_both_languages():
    whys: set[str] = set()
    reasons: set[str] = set()
    flags: set[str] = set()
    for f in [*(ROOT / "desk").rglob("*.py"), *(ROOT / "api" / "desk").rglob("*.py"),
              *(ROOT / "hall").glob("desk*.py")]:
        text = f.read_text("utf-8")
        whys |= set(re.findall(r'"why":\s*"([a-z_]+)"', text))
        reasons |= set(re.findall(r'raise BadField\(.*?,\s*"?\w+"?,\s*"([a-z_]+)"\s*[,)]',
                              text, re.S))
        flags |= set(re.findall(r'flag\("(?:error|warning)",\s*"([a-z_]+)"', text))
        flags |= set(re.findall(r'Flag\("(?:error|warning)",\s*"([a-z_]+)"', text))
    assert {"round_not_complete", "missed_round", "mat_in_use", "channel_busy"} <= whys, whys
    assert {"empty", "too_long", "bad_block"} <= reasons, reasons
    assert {"withdrawn_paired", "not_paired", "no_channel", "too_many_cards"} <= flags, flags
    for lang in ("ja", "en"):
        have = strings(lang)
        missing = sorted([f"why_{w}" for w in whys] + [f"reason_{r}" for r in reasons]
                         + [f"fd_{c}" for c in flags])
        assert not [k for k in missing if k not in have], lang
