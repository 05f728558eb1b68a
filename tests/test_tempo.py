"""Rubber Band's time-stretch: the exact length asked for, the pitch kept, clear errors."""

import sys
from pathlib import Path

import numpy as np
import pytest

from audio.errors import VoiceError
from audio.voices.tempo import stretch, version

from .packs import dominant_hz
from .voice_fakes import tone

RATE = 48000


@pytest.mark.parametrize("ratio", [1.25, 0.8, 1 / 1.1])
def test_stretch_keeps_the_pitch_and_gives_the_exact_length(ratio: float) -> None:
    x = tone(1.0, RATE, 330.0, amp=0.5)
    y = stretch(x, RATE, ratio)
    assert y.size == round(x.size * ratio) and y.dtype == np.float32
    assert dominant_hz(y, RATE) == pytest.approx(330.0, abs=3)
    mid = y[y.size // 4 : 3 * y.size // 4]
    assert float(np.sqrt(np.mean(mid**2))) == pytest.approx(0.5 / np.sqrt(2), rel=0.1)


def test_a_ratio_of_one_is_the_clip_itself_and_bad_ratios_are_refused() -> None:
    x = tone(0.1, RATE)
    np.testing.assert_array_equal(stretch(x, RATE, 1.0), x)
    with pytest.raises(VoiceError, match=r"outside 0\.05-20\.0"):
        stretch(x, RATE, 25.0)
    assert version().startswith("pylibrb ")


def test_without_the_library_or_the_program_the_error_says_what_to_install(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path,
) -> None:
    monkeypatch.setitem(sys.modules, "pylibrb", None)  # import fails, as if not installed
    monkeypatch.setenv("PATH", str(tmp_path))
    with pytest.raises(VoiceError, match=r"pip install pylibrb.*apt-get install rubberband-cli"):
        stretch(tone(0.1, RATE), RATE, 1.25)
    assert version() == "absent"


def test_no_program_on_the_path_is_needed(monkeypatch: pytest.MonkeyPatch,
                                          tmp_path: Path) -> None:
    # Rubber Band's library is inside the pylibrb wheel: a laptop without rubberband-cli
    # (an empty PATH here) stretches all the same
    monkeypatch.setenv("PATH", str(tmp_path))
    assert stretch(tone(0.2, RATE), RATE, 1.25).size == round(0.2 * RATE * 1.25)
    assert version().startswith("pylibrb ")


@pytest.mark.parametrize("ratio", [1.25, 0.8])
def test_where_pylibrb_has_no_wheel_the_program_stretches_alike(
    monkeypatch: pytest.MonkeyPatch, ratio: float,
) -> None:
    x = tone(1.0, RATE, 330.0, amp=0.5)
    lib = stretch(x, RATE, ratio)
    monkeypatch.setitem(sys.modules, "pylibrb", None)
    assert version().startswith("rubberband 3.")
    prog = stretch(x, RATE, ratio)
    assert prog.size == lib.size == round(x.size * ratio)
    assert dominant_hz(prog, RATE) == pytest.approx(330.0, abs=3)
    mid = slice(prog.size // 4, 3 * prog.size // 4)  # the same engine: the same sound
    assert float(np.corrcoef(prog[mid], lib[mid])[0, 1]) > 0.95
