"""Build the sdist and the wheel (`make dist`): `python scripts/dist.py OUT_DIR`.

What `python -m build` does, with the setuptools already in the environment (no download, no
new package): the sdist from a copy of the checkout, then the wheel from that sdist unpacked,
so a file the sdist misses is missing from the wheel too and shows. The checkout is only read
(setuptools writes build/ and *.egg-info beside the sources it builds). Prints the two paths.
"""

from __future__ import annotations

import shutil
import subprocess
import sys
import tarfile
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
SKIP = shutil.ignore_patterns(".git", ".venv", "__pycache__", "*.pyc", "*.egg-info", "build",
                              "dist", ".pytest_cache", ".mypy_cache", ".ruff_cache",
                              ".hypothesis", "var", "out", "tests", "bench", "docs")


def _hook(src: Path, hook: str, out: Path) -> Path:
    code = f"from setuptools import build_meta as b; print(b.{hook}({str(out)!r}))"
    r = subprocess.run([sys.executable, "-c", code], cwd=src, capture_output=True, text=True,
                       check=False)
    if r.returncode != 0:
        raise SystemExit(f"{hook} failed:\n{r.stdout}\n{r.stderr}")
    return out / r.stdout.strip().splitlines()[-1]


def _check_setuptools() -> None:
    """bdist_wheel is part of setuptools from 70.1 (before, the `wheel` package supplied it)."""
    from importlib import metadata, util

    version = tuple(int(p) for p in metadata.version("setuptools").split(".")[:2])
    if version < (70, 1) and util.find_spec("wheel") is None:
        raise SystemExit(f"setuptools {metadata.version('setuptools')} cannot build a wheel: "
                         "70.1 or later is needed (make setup-test, or pip install -e '.[dev]')")


def build(out: Path) -> tuple[Path, Path]:
    _check_setuptools()
    out.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(prefix="yomite-dist-") as tmp:
        work = Path(tmp)
        shutil.copytree(ROOT, work / "src", ignore=SKIP)
        sdist = _hook(work / "src", "build_sdist", out)
        with tarfile.open(sdist) as t:
            t.extractall(work / "unpacked", filter="data")
        (unpacked,) = (work / "unpacked").iterdir()
        wheel = _hook(unpacked, "build_wheel", out)
    return sdist, wheel


def main() -> None:
    for p in build(Path(sys.argv[1] if len(sys.argv) > 1 else "dist").resolve()):
        print(p)


if __name__ == "__main__":
    main()
