"""Install and test hygiene (issue 8 item 18): no setuptools warnings about data folders, and
the tests never write into tracked files."""

import tomllib
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


def test_every_data_folder_is_a_listed_package():
    """setuptools warns (once a folder, ~80 lines in all) when package data lives in a folder
    that `packages` does not list: api/static, reader/data."""
    cfg = tomllib.loads((ROOT / "pyproject.toml").read_text("utf-8"))["tool"]["setuptools"]
    packages = set(cfg["packages"])
    for pkg, globs in cfg["package-data"].items():
        for g in globs:
            if "/" in g:
                sub = f"{pkg}.{g.split('/')[0]}"
                assert sub in packages, f"{sub} holds package data but is not in packages"
    for folder in ("api/static", "reader/data"):
        assert folder.replace("/", ".") in packages and (ROOT / folder).is_dir()


def test_page_tests_write_their_screenshots_outside_the_repository():
    from .test_pages import shots_dir

    shots = shots_dir({}).resolve()
    assert ROOT not in shots.parents, f"make test would rewrite files under {shots}"
    wanted = ROOT / "docs" / "screenshots"
    assert shots_dir({"YOMITE_SCREENSHOTS": str(wanted)}) == wanted  # make screenshots
    makefile = (ROOT / "Makefile").read_text("utf-8")
    assert "YOMITE_SCREENSHOTS=docs/screenshots" in makefile.split("screenshots:", 1)[1]
