"""Rubber Band's time-stretch: the exact length asked for, the pitch kept, clear errors."""

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
    assert version().startswith("3.")


def test_without_rubberband_the_error_says_what_to_install(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    monkeypatch.setenv("PATH", str(tmp_path))
    with pytest.raises(VoiceError, match="apt-get install rubberband-cli"):
        stretch(tone(0.1, RATE), RATE, 1.25)
