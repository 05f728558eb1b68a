import math

import numpy as np
import pytest

from audio.pcm import (
    k_weighting,
    limit_peaks,
    loudness_lufs,
    master,
    normalise_loudness,
    peak,
    resample,
    silence,
    trim_silence,
)


def sine(freq: float, dbfs: float, seconds: float, rate: int) -> np.ndarray:
    """A sine whose *peak* is at `dbfs` (BS.1770's convention for its test signals)."""
    t = np.arange(round(seconds * rate)) / rate
    return 10 ** (dbfs / 20) * np.sin(2 * np.pi * freq * t)


def test_k_weighting_reproduces_the_bs1770_table_at_48k() -> None:
    (b1, a1), (b2, a2) = k_weighting(48000)
    np.testing.assert_allclose(b1, [1.53512485958697, -2.69169618940638, 1.19839281085285],
                               atol=1e-9)
    np.testing.assert_allclose(a1, [1.0, -1.69065929318241, 0.73248077421585], atol=1e-9)
    np.testing.assert_allclose(b2, [1.0, -2.0, 1.0])
    np.testing.assert_allclose(a2, [1.0, -1.99004745483398, 0.99007225036621], atol=1e-9)


@pytest.mark.parametrize("rate", [16000, 22050, 44100, 48000])
def test_full_scale_997_hz_sine_reads_minus_3_01(rate: int) -> None:
    # BS.1770-4: a 0 dBFS 997 Hz sine in one channel reads -3.01 LKFS
    assert loudness_lufs(sine(997, 0.0, 2.0, rate), rate) == pytest.approx(-3.01, abs=0.05)


def test_minus_20_dbfs_sine_reads_minus_23() -> None:
    assert loudness_lufs(sine(997, -20.0, 2.0, 48000), 48000) == pytest.approx(-23.01, abs=0.02)


def test_relative_gate_drops_quiet_passages() -> None:
    # EBU Tech 3341 case 3, mono, at its durations (blocks straddling the changes count):
    # passages 13 LU quieter around the programme do not count
    rate = 48000
    x = np.concatenate([sine(1000, -33, 10, rate), sine(1000, -20, 60, rate),
                        sine(1000, -33, 10, rate)])
    assert loudness_lufs(x, rate) == pytest.approx(-23.0, abs=0.1)
    ungated = -0.691 + 10 * math.log10(np.mean(x**2) * 10 ** (0.691 / 10))
    assert ungated < -23.5  # so the gate really did something


def test_absolute_gate_drops_near_silence() -> None:
    # EBU Tech 3341 case 4: passages at -72 LUFS are below the -70 LUFS absolute gate
    rate = 48000
    x = np.concatenate([sine(1000, -69, 10, rate), sine(1000, -33, 10, rate),
                        sine(1000, -20, 60, rate), sine(1000, -33, 10, rate),
                        sine(1000, -69, 10, rate)])
    assert loudness_lufs(x, rate) == pytest.approx(-23.0, abs=0.1)


def test_short_clip_is_one_block_and_silence_is_minus_infinity() -> None:
    assert loudness_lufs(sine(997, -20, 0.2, 48000), 48000) == pytest.approx(-23.0, abs=0.1)
    assert loudness_lufs(silence(48000), 48000) == -math.inf
    assert loudness_lufs(silence(0), 48000) == -math.inf


def test_normalise_reaches_the_target() -> None:
    rng = np.random.default_rng(0)
    x = 0.01 * rng.standard_normal(48000 * 2)
    y = normalise_loudness(x, 48000, -20.0)
    assert y.dtype == np.float32
    assert loudness_lufs(y, 48000) == pytest.approx(-20.0, abs=0.1)


def peaky(rate: int = 48000) -> np.ndarray:
    """Speech-like for the guard: a steady tone with a few sharp spikes 20 dB over it."""
    x = sine(220, -20, 3.0, rate)
    x[rate // 2 :: rate // 2] = 0.99
    return x


def test_limiter_guard_reaches_the_target_without_crossing_the_ceiling() -> None:
    y = normalise_loudness(peaky(), 48000, -12.0, peak_dbfs=-1.0)
    assert loudness_lufs(y, 48000) == pytest.approx(-12.0, abs=0.1)
    assert peak(y) <= 10 ** (-1 / 20)


def test_scale_guard_turns_the_whole_clip_down() -> None:
    y = normalise_loudness(peaky(), 48000, -12.0, peak_dbfs=-1.0, guard="scale")
    assert 20 * math.log10(peak(y)) == pytest.approx(-1.0, abs=1e-4)
    assert loudness_lufs(y, 48000) < -15.0  # quieter than asked: the spikes decided


def test_a_pulse_train_is_never_clipped_even_when_the_target_is_out_of_reach() -> None:
    x = np.zeros(48000 * 2)
    x[::400] = 0.9  # the peaks are the loudness here
    y = normalise_loudness(x, 48000, -6.0)
    assert peak(y) <= 10 ** (-1 / 20)


def test_limit_peaks_touches_only_the_neighbourhood_of_a_peak() -> None:
    rate = 48000
    x = sine(100, -12, 1.0, rate)
    x[rate // 2] = 1.5
    y = limit_peaks(x, rate, ceiling=0.5, ramp_ms=5.0)
    assert peak(y) <= 0.5
    far = np.r_[0 : rate // 2 - 600, rate // 2 + 600 : rate]  # beyond two ramps of 240 frames
    np.testing.assert_allclose(y[far], x[far], rtol=1e-12)
    assert np.all(np.abs(y) <= np.abs(x) + 1e-12)  # a limiter never adds gain


def test_trim_keeps_a_margin_and_is_relative_to_the_peak() -> None:
    rate = 16000
    body = sine(440, -6, 0.5, rate)
    x = np.concatenate([np.zeros(rate), 1e-4 * np.ones(800), body, np.zeros(rate)])
    y = trim_silence(x, rate, threshold_db=-45, margin_ms=5)
    margin = round(0.005 * rate)
    assert y.size == pytest.approx(body.size + 2 * margin, abs=2 * margin)
    assert np.max(np.abs(y[: 2 * margin])) > 0.01  # the verse starts within the first 10 ms
    quiet = trim_silence(x * 1e-3, rate, threshold_db=-45, margin_ms=5)
    assert quiet.size == y.size  # same cut at any level


def test_trim_of_silence_is_empty() -> None:
    assert trim_silence(silence(1000), 16000).size == 0


@pytest.mark.parametrize(("src", "dst"), [(48000, 44100), (22050, 48000), (44100, 48000),
                                          (48000, 16000)])
def test_resample_keeps_a_tone_and_the_length(src: int, dst: int) -> None:
    x = sine(1000, -6, 1.5, src)
    y = resample(x, src, dst)
    assert y.dtype == np.float32
    assert y.size == round(x.size * dst / src)
    ref = sine(1000, -6, 1.5, dst)[: y.size]
    mid = slice(dst // 10, -dst // 10)
    assert np.max(np.abs(y[mid] - ref[mid])) < 1e-3


def test_downsampling_removes_what_the_new_rate_cannot_hold() -> None:
    y = resample(sine(10000, 0, 1.0, 48000), 48000, 16000)  # 10 kHz > 8 kHz Nyquist
    steady = y[160:-160]  # the tone's abrupt start and end are broadband: leave 10 ms out
    assert 20 * math.log10(np.sqrt(np.mean(steady**2)) + 1e-12) < -100


def test_resample_same_rate_is_a_copy_and_bad_rates_are_refused() -> None:
    x = sine(440, -6, 0.1, 16000).astype(np.float32)
    y = resample(x, 16000, 16000)
    np.testing.assert_array_equal(x, y)
    assert y is not x
    with pytest.raises(ValueError, match="positive"):
        resample(x, 0, 16000)


def test_master_trims_then_normalises() -> None:
    rate = 16000
    x = np.concatenate([np.zeros(rate), sine(440, -30, 1.0, rate), np.zeros(rate)])
    y = master(x, rate, -20.0)
    assert y.size < rate * 1.1
    assert loudness_lufs(y, rate) == pytest.approx(-20.0, abs=0.1)
