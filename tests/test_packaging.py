"""Install and test hygiene (issue 8 item 18): no setuptools warnings about data folders, and
the tests never write into tracked files."""

import tomllib
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


def test_every_product_folder_is_in_the_wheel():
    """Every folder of the product holding modules or package data is a package of the wheel
    (a moved module in a folder the list missed worked in the editable install and was absent
    from a wheel: audio/voices/), and the data folders are listed (setuptools warns, ~80 lines,
    about package data in a folder that is not a package: api/static, reader/data)."""
    from setuptools import find_namespace_packages

    cfg = tomllib.loads((ROOT / "pyproject.toml").read_text("utf-8"))["tool"]["setuptools"]
    find = cfg["packages"]["find"]
    packages = set(find_namespace_packages(str(ROOT), include=find["include"]))
    roots = {p.split(".")[0] for p in packages}
    assert roots == {"reader", "audio", "hall", "api", "desk", "yomite", "cluster"}
    for root in roots:
        for folder in [ROOT / root, *(ROOT / root).rglob("*")]:
            if folder.is_dir() and folder.name != "__pycache__" and any(
                    f.is_file() for f in folder.iterdir()):
                dotted = ".".join(folder.relative_to(ROOT).parts)
                assert dotted in packages, f"{dotted} is not a package of the wheel"
    for pkg, globs in cfg["package-data"].items():
        for g in globs:
            if "/" in g:
                assert f"{pkg}.{g.split('/')[0]}" in packages
    assert {"api.static", "reader.data", "audio.voices", "audio.output"} <= packages


def test_page_tests_write_their_screenshots_outside_the_repository():
    from .test_pages import shots_dir

    shots = shots_dir({}).resolve()
    assert ROOT not in shots.parents, f"make test would rewrite files under {shots}"
    wanted = ROOT / "docs" / "screenshots"
    assert shots_dir({"YOMITE_SCREENSHOTS": str(wanted)}) == wanted  # make screenshots
    makefile = (ROOT / "Makefile").read_text("utf-8")
    assert "YOMITE_SCREENSHOTS=docs/screenshots" in makefile.split("screenshots:", 1)[1]
