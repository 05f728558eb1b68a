"""Entries as CSV: read the organisers' list (UTF-8, with or without a BOM, or Shift_JIS as
Japanese Excel saves it), write players, pairings and standings back.

Entries: a header line, then one player a line. Columns, in any order (English or Japanese
names): name/氏名 (required), furigana/ふりがな, club/所属 (school or club), grade/学年,
block/ブロック (pre-assigned; empty = drawn). Every line is checked; a file with a bad line adds
no one and the error names every bad line.
"""

from __future__ import annotations

import csv
import io
import re
import unicodedata
from dataclasses import dataclass

from .errors import Invalid

MAX_PLAYERS = 2000
LIMITS = {"name": 40, "furigana": 60, "club": 60, "grade": 20, "block": 4}
HEADERS = {
    "name": ("name", "氏名", "名前", "選手名"),
    "furigana": ("furigana", "ふりがな", "フリガナ", "よみがな", "kana"),
    "club": ("club", "school", "所属", "学校", "学校名", "チーム", "クラブ"),
    "grade": ("grade", "学年"),
    "block": ("block", "ブロック"),
}
BLOCK_NAME = re.compile(r"^[A-Z0-9]{1,4}$")
# what makes a spreadsheet read a cell as a formula (OWASP's CSV injection list, and the
# full-width forms Japanese Excel also takes): such a cell is written with a ' before it,
# which the spreadsheet shows as text and does not run
FORMULA_START = tuple("=+-@\t\r") + tuple("＝＋－＠")
_CONTROL = re.compile(r"[\x00-\x1f\x7f-\x9f\u200b-\u200f\u2028-\u202e\u2066-\u2069\ufeff]")


class BadField(ValueError):
    """A field that cannot be right: which (`column`), why (`reason`: empty, too_long,
    bad_block) and its figures."""

    def __init__(self, message: str, column: str, reason: str, **params: int | str) -> None:
        super().__init__(message)
        self.column, self.reason, self.params = column, reason, params


@dataclass(frozen=True, slots=True)
class Notice:
    """A warning about a file that was read all the same (a name entered twice), as a code
    and its figures for the pages' words, and in English."""

    code: str
    detail: str
    params: dict[str, int | str]


@dataclass(frozen=True, slots=True)
class Entry:
    name: str
    furigana: str = ""
    club: str = ""
    grade: str = ""
    block: str | None = None


def clean(value: str, field: str) -> str:
    """A text as it enters: outer spaces gone (the ideographic space too), inner runs of
    spaces one, no control or invisible characters; furigana, grade and block in their
    standard width (NFKC: half-width katakana becomes full-width)."""
    v = _CONTROL.sub("", value).replace("\u3000", " ")
    v = " ".join(v.split())
    if field in ("furigana", "grade", "block"):
        v = unicodedata.normalize("NFKC", v)
    if field == "block":
        v = v.upper().removesuffix("ブロック").strip()
    limit = LIMITS[field]
    if len(v) > limit:
        raise BadField(f"{field} is {len(v)} characters (at most {limit})", field, "too_long",
                       length=len(v), limit=limit)
    return v


def entry(name: str, furigana: str = "", club: str = "", grade: str = "",
          block: str | None = None) -> Entry:
    """A checked entry (raises ValueError saying which field is wrong)."""
    n = clean(name, "name")
    if not n:
        raise BadField("name is empty", "name", "empty")
    b = clean(block or "", "block") or None
    if b is not None and not BLOCK_NAME.match(b):
        raise BadField(f"block {b!r} is not a block name (letters A-Z or digits, e.g. A)",
                       "block", "bad_block", value=b)
    return Entry(n, clean(furigana, "furigana"), clean(club, "club"), clean(grade, "grade"), b)


def decode(data: bytes) -> str:
    for enc in ("utf-8-sig", "cp932"):
        try:
            return data.decode(enc)
        except UnicodeDecodeError:
            continue
    raise Invalid("the file is neither UTF-8 nor Shift_JIS text",
                  "save the list as CSV (UTF-8) from the spreadsheet", code="csv_encoding")


def read_entries(data: bytes | str) -> tuple[list[Entry], list[Notice]]:
    """The entries of a CSV file, and warnings (a name entered twice). Raises Invalid naming
    every bad line (code csv_bad_line, its params the first bad line's: line, column, reason
    and its figures, and how many lines are bad)."""
    text = decode(data) if isinstance(data, bytes) else data.removeprefix("\ufeff")
    rows = list(csv.reader(io.StringIO(text, newline="")))
    while rows and not any(c.strip() for c in rows[0]):
        rows.pop(0)
    if not rows:
        raise Invalid("the CSV file is empty", "the first line names the columns: name,furigana,"
                      "club,grade,block (or 氏名,ふりがな,所属,学年,ブロック)", code="csv_empty")
    header = [unicodedata.normalize("NFKC", h).strip().lower() for h in rows[0]]
    columns: dict[str, int] = {}
    for i, h in enumerate(header):
        for key, names in HEADERS.items():
            if h in {unicodedata.normalize("NFKC", n).lower() for n in names}:
                if key in columns:
                    raise Invalid(f"the header names {key} twice", "keep one column per field",
                                  code="csv_column_twice", params={"column": key})
                columns[key] = i
    unknown = [rows[0][i] for i, h in enumerate(header) if h and i not in columns.values()]
    if "name" not in columns:
        raise Invalid(f"the header has no name column (found: {', '.join(rows[0])})",
                      "the first line names the columns: name,furigana,club,grade,block "
                      "(or 氏名,ふりがな,所属,学年,ブロック)", code="csv_no_name_column",
                      params={"found": ", ".join(rows[0])})
    if len(rows) - 1 > MAX_PLAYERS:
        raise Invalid(f"{len(rows) - 1} lines: at most {MAX_PLAYERS} players a file",
                      "split the list", code="csv_too_many",
                      params={"lines": len(rows) - 1, "max": MAX_PLAYERS})
    out: list[Entry] = []
    lines: list[tuple[int, Entry]] = []
    errors: list[str] = []
    first: dict[str, int | str] = {}
    for line_no, row in enumerate(rows[1:], 2):
        if not any(c.strip() for c in row):
            continue
        get = {k: _unquoted(row[i] if i < len(row) else "") for k, i in columns.items()}
        try:
            lines.append((line_no, entry(get["name"], get.get("furigana", ""),
                                         get.get("club", ""), get.get("grade", ""),
                                         get.get("block"))))
        except BadField as e:
            errors.append(f"line {line_no}: {e}")
            first = first or {"line": line_no, "column": e.column, "reason": e.reason,
                              **e.params}
    if errors:
        shown = "; ".join(errors[:10]) + (f"; and {len(errors) - 10} more" if len(errors) > 10
                                          else "")
        raise Invalid(f"{len(errors)} bad line(s), nobody added: {shown}",
                      "correct those lines and import the file again", code="csv_bad_line",
                      params={**first, "count": len(errors)})
    out = [e for _, e in lines]
    if not out:
        raise Invalid("the CSV file has a header but no players", "add one player a line",
                      code="csv_no_players")
    warnings = [Notice("csv_unknown_column", f"unknown column ignored: {u}", {"column": u})
                for u in unknown]
    seen: dict[tuple[str, str], list[int]] = {}
    for line_no, got in lines:
        seen.setdefault((got.name, got.club), []).append(line_no)
    warnings += [Notice("csv_duplicate", f"{n} entered {len(at)} times ({club or 'no club'}) "
                          f"on lines {', '.join(map(str, at))}",
                          {"name": n, "club": club, "times": len(at),
                           "lines": ", ".join(map(str, at))})
                 for (n, club), at in seen.items() if len(at) > 1]
    return out, warnings


def _formula(text: str) -> bool:
    """Would a spreadsheet run it, once the quotes `as_text` adds are taken off?"""
    return text.lstrip("'").startswith(FORMULA_START)


def _unquoted(cell: str) -> str:
    """A cell as `write_csv` neutralised it, back as it was (a players' CSV imported again)."""
    return cell[1:] if cell.startswith("'") and _formula(cell) else cell


def as_text(value: object) -> object:
    """A text a spreadsheet would run as a formula (`=HYPERLINK(...)`, `+81...`, `@SUM`)
    prefixed with a single quote; numbers and every other text as they are. (A text that
    already begins with quotes before such a character gets one more, so that reading the
    file back gives every text exactly.)"""
    if isinstance(value, str) and _formula(value):
        return "'" + value
    return value


def write_csv(header: list[str], rows: list[list[object]]) -> str:
    """CSV with a BOM, so that Excel opens the Japanese as UTF-8. A text that a spreadsheet
    would take for a formula is written as text (`as_text`): a player's name is anyone's."""
    buf = io.StringIO()
    w = csv.writer(buf, lineterminator="\r\n")
    w.writerow(header)
    for r in rows:
        w.writerow(["" if v is None else as_text(v) for v in r])
    return "\ufeff" + buf.getvalue()
