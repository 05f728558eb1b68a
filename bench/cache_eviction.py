"""What the render cache's bound costs (audio.voices.cachefolder, issue 47), in one sitting on
this machine: a write of a 1 MB render (as RenderedVoice writes one) into an unbounded folder
against one kept under its bound by the keeper thread, evicting all the while (the writer's
own time: the eviction runs in the keeper's thread); a read from disk through the folder (held
against eviction, its mtime touched) against np.load alone; and one eviction pass (scan, plan,
delete) over a folder of `--files` files. Prints figures; passes or fails nothing.

    .venv/bin/python bench/cache_eviction.py [--writes 300] [--files 2000]
"""

from __future__ import annotations

import argparse
import os
import statistics
import tempfile
import time
from pathlib import Path

import numpy as np

from audio.voices.cachefolder import MB, CacheFolder, scan

SIZE = 1 * MB  # about one verse as rendered (float32 at 48 kHz: 5.5 s)


def pct(xs: list[float], q: float) -> float:
    s = sorted(xs)
    return s[min(len(s) - 1, round(q / 100 * (len(s) - 1)))]


def line(what: str, xs: list[float]) -> str:
    ms = [x * 1000 for x in xs]
    return (f"{what:<58} median {statistics.median(ms):7.3f} ms   p99 {pct(ms, 99):7.3f} ms"
            f"   (n={len(ms)})")


def writes(folder: CacheFolder, n: int, x: np.ndarray) -> list[float]:
    out = []
    for i in range(n):
        path = folder.root / "openjtalk" / f"verse-{i % 1000:03d}-kami-{i:024x}.npy"
        t0 = time.perf_counter()
        folder.write(path, lambda fh: np.save(fh, x, allow_pickle=False), x.nbytes + 128)
        out.append(time.perf_counter() - t0)
    return out


def reads(folder: CacheFolder, paths: list[Path]) -> tuple[list[float], list[float]]:
    through, plain = [], []
    for p in paths:
        t0 = time.perf_counter()
        np.load(p, allow_pickle=False)
        plain.append(time.perf_counter() - t0)
        t0 = time.perf_counter()
        folder.read(p, lambda q: np.load(q, allow_pickle=False))
        through.append(time.perf_counter() - t0)
    return through, plain


def passes(root: Path, files: int, rounds: int) -> tuple[list[float], int]:
    """One pass over `files` files of 4 KB, each pass deleting the oldest tenth."""
    size = 4096
    folder = CacheFolder(root, max_bytes=files * size * 95 // 100)
    made = 0
    out = []
    blob = b"\0" * size
    for _ in range(rounds):
        for _ in range(files - sum(1 for _ in scan(root))):  # topped up to `files`
            p = root / "opus" / f"{made:040x}.ogg"
            p.parent.mkdir(parents=True, exist_ok=True)
            p.write_bytes(blob)
            os.utime(p, (made, made))
            made += 1
        t0 = time.perf_counter()
        gone = folder.evict()
        out.append(time.perf_counter() - t0)
        assert gone, "nothing was over the bound"
    return out, len(gone)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--writes", type=int, default=300)
    ap.add_argument("--files", type=int, default=2000)
    ap.add_argument("--rounds", type=int, default=20)
    a = ap.parse_args()
    x = np.random.default_rng(1).uniform(-0.5, 0.5, SIZE // 4).astype(np.float32)
    print(f"render cache: {a.writes} writes of {SIZE // MB} MB each, one sitting, "
          f"{os.cpu_count()} CPUs")
    with tempfile.TemporaryDirectory(prefix="yomite-cache-bench-") as tmp:
        free = CacheFolder(Path(tmp) / "unbounded")
        w_free = writes(free, a.writes, x)
        bound_mb = 64
        kept = CacheFolder(Path(tmp) / "bounded", max_bytes=bound_mb * MB)
        kept.start()
        try:
            w_kept = writes(kept, a.writes, x)
            deadline = time.monotonic() + 30
            while sum(f.size for f in scan(kept.root)) > bound_mb * MB and (
                    time.monotonic() < deadline):
                time.sleep(0.05)
        finally:
            kept.close()
        left = sum(f.size for f in scan(kept.root)) / MB
        print(line("write, no bound", w_free))
        print(line(f"write, bound {bound_mb} MB, the keeper evicting", w_kept))
        print(f"  the keeper: {kept.passes} passes, {kept.evicted} files evicted "
              f"({kept.evicted_bytes / MB:.0f} MB); {left:.1f} MB left of {bound_mb} MB")
        paths = sorted(free.root.rglob("*.npy"))[:200]
        through, plain = reads(free, paths)
        print(line("read (disk hit), np.load alone", plain))
        print(line("read (disk hit) through the folder (held, mtime touched)", through))
        p, n = passes(Path(tmp) / "passes", a.files, a.rounds)
        print(line(f"one eviction pass over {a.files} files ({n} deleted)", p))


if __name__ == "__main__":
    main()
