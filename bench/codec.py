"""What encoding and decoding a verse costs, in CPU seconds (this process and any program it
runs), the median of N runs on a 7 s clip at 48 kHz. Prints figures; passes or fails nothing.

    .venv/bin/python bench/codec.py [--runs N] [--codec FILE]   # FILE: another codec.py to time

`--codec` loads a copy of `audio/codec.py` (say the one before PyAV, from `git show`) in place of
the current one, so the two can be compared on the same machine.
"""

import argparse
import importlib.util
import resource
import statistics
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from types import ModuleType

import numpy as np

RATE = 48000


def cpu_s() -> float:
    """CPU seconds used so far by this process and the children it waited for."""
    kids = resource.getrusage(resource.RUSAGE_CHILDREN)
    return time.process_time() + kids.ru_utime + kids.ru_stime


def median_cpu(runs: int, work: Callable[[], object]) -> float:
    times = []
    for _ in range(runs):
        start = cpu_s()
        work()
        times.append(cpu_s() - start)
    return statistics.median(times)


def load(path: str | None) -> ModuleType:
    if path is None:
        from audio import codec

        return codec
    spec = importlib.util.spec_from_file_location("codec_under_test", path)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def verse(seconds: float) -> np.ndarray:
    """Something like a voice: a few harmonics under a syllable-rate envelope, with breath."""
    t = np.arange(round(seconds * RATE)) / RATE
    f0 = 180 + 30 * np.sin(2 * np.pi * 0.3 * t)
    phase = 2 * np.pi * np.cumsum(f0) / RATE
    voiced = sum(np.sin(k * phase) / k for k in range(1, 8))
    env = 0.5 + 0.5 * np.sin(2 * np.pi * 4 * t) ** 2
    noise = np.random.default_rng(0).standard_normal(t.size) * 0.01
    return (0.2 * env * voiced + noise).astype(np.float32)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--runs", type=int, default=20)
    ap.add_argument("--codec", help="a codec.py to time instead of audio/codec.py")
    args = ap.parse_args()
    codec = load(args.codec)
    x = verse(7.0)
    print(f"codec: {args.codec or 'audio/codec.py'}; a 7 s verse at {RATE} Hz; "
          f"CPU s, median of {args.runs}")
    with tempfile.TemporaryDirectory() as tmp:
        for fmt in ("flac", "mp3", "ogg"):
            path = Path(tmp) / f"v.{fmt}"
            enc = median_cpu(args.runs, lambda p=path, f=fmt: codec.encode(x, RATE, p, f))
            dec = median_cpu(args.runs, lambda p=path: codec.decode(p, RATE))
            print(f"  {fmt:5}  encode {enc:.4f}   decode {dec:.4f}")
        clip = Path(tmp) / "clip.ogg"
        enc = median_cpu(args.runs, lambda: clip.write_bytes(codec.encode_opus(x, RATE)))
        dec = median_cpu(args.runs, lambda: codec.decode(clip, RATE))
        print(f"  opus   encode {enc:.4f}   decode {dec:.4f}   (the speakers' clips)")


if __name__ == "__main__":
    main()
