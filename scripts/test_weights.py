"""Print tests/weights.py's table from a JUnit XML report of the suite (scripts/test.sh writes
one to .pytest_cache/junit.xml): each test file's seconds, longest first, those of 3 s or more."""

from __future__ import annotations

import sys
import xml.etree.ElementTree as ET
from collections import defaultdict


def main() -> None:
    seconds: dict[str, float] = defaultdict(float)
    for case in ET.parse(sys.argv[1]).iter("testcase"):
        module = (case.get("classname") or "").split(".")
        if len(module) >= 2 and module[0] == "tests":
            seconds[f"{module[1]}.py"] += float(case.get("time") or 0)
    for name, s in sorted(seconds.items(), key=lambda kv: -kv[1]):
        if s >= 3:
            print(f'    "{name}": {round(s)},')


if __name__ == "__main__":
    main()
