"""Mono PCM arithmetic in pure numpy: silence, trimming, resampling and loudness (ITU-R BS.1770).

Every function takes and returns mono float32 arrays in [-1, 1] at a stated rate. Nothing here
touches files, devices or voices, so it is safe to call from any thread.
"""

import math
from functools import lru_cache
from typing import Literal

import numpy as np
import numpy.typing as npt

Pcm = npt.NDArray[np.float32]

# BS.1770-4 constants: the -0.691 dB offset makes a 997 Hz sine read its RMS level in dBFS.
_LOUDNESS_OFFSET_DB = -0.691
_BLOCK_S = 0.400  # gating block
_STEP_S = 0.100  # 75 % overlap between blocks
_ABSOLUTE_GATE_LUFS = -70.0
_RELATIVE_GATE_LU = -10.0


def silence(frames: int) -> Pcm:
    return np.zeros(max(0, int(frames)), dtype=np.float32)


def as_pcm(x: npt.ArrayLike) -> Pcm:
    """A contiguous 1-D float32 copy-or-view of `x` (a 2-D input is down-mixed by the mean)."""
    a = np.asarray(x)
    if a.ndim == 2:
        a = a.mean(axis=1)
    if a.ndim != 1:
        raise ValueError(f"expected mono PCM (1-D), got shape {a.shape}")
    return np.ascontiguousarray(a, dtype=np.float32)


def peak(x: npt.NDArray[np.floating]) -> float:
    return float(np.max(np.abs(x))) if x.size else 0.0


def trim_silence(
    x: npt.NDArray[np.floating], rate: int, threshold_db: float = -45.0, margin_ms: float = 5.0
) -> Pcm:
    """`x` without its leading and trailing silence, keeping `margin_ms` either side.

    Silence is any sample more than `threshold_db` below the clip's own peak: relative to the
    peak, so the trim is the same before and after loudness normalisation and works on quiet
    recordings. A silent clip trims to an empty array.
    """
    a = as_pcm(x)
    start, stop = trim_bounds(a, rate, threshold_db, margin_ms)
    return a[start:stop]


def trim_bounds(
    x: npt.NDArray[np.floating], rate: int, threshold_db: float = -45.0, margin_ms: float = 5.0
) -> tuple[int, int]:
    """Where `trim_silence` cuts `x`: (start, stop); (0, 0) for silence."""
    top = float(np.max(np.abs(x))) if x.size else 0.0
    if top == 0.0:
        return 0, 0
    loud = np.flatnonzero(np.abs(x) >= top * 10.0 ** (threshold_db / 20.0))
    margin = round(margin_ms * rate / 1000.0)
    return max(0, int(loud[0]) - margin), min(x.size, int(loud[-1]) + 1 + margin)


def noise_floor_db(x: npt.NDArray[np.floating], rate: int, frame_ms: float = 20.0) -> float:
    """The recording's own noise floor in dBFS (a room's hiss and hum): the RMS of its
    quietest tenth of 20 ms frames, or of its first or last 60 ms if quieter (a long verse
    read without a pause has speech in more than nine frames in ten). -inf for digital
    silence."""
    a = as_pcm(x)
    n = max(1, round(frame_ms * rate / 1000.0))
    if a.size < n:
        return -math.inf
    frames = a[: a.size // n * n].astype(np.float64).reshape(-1, n)
    rms = np.sqrt(np.mean(frames * frames, axis=1))
    edge = max(1, min(3, rms.size // 4))
    quiet = min(float(np.percentile(rms, 10)), float(np.sqrt(np.mean(rms[:edge] ** 2))),
                float(np.sqrt(np.mean(rms[-edge:] ** 2))))
    return 20.0 * math.log10(quiet) if quiet > 0 else -math.inf


def trim_noise(
    x: npt.NDArray[np.floating],
    rate: int,
    above_floor_db: float = 12.0,
    peak_relative_db: float = -45.0,
    frame_ms: float = 10.0,
    margin_ms: float = 20.0,
    tail_db: float = -45.0,
    tail_above_floor_db: float = 6.0,
) -> Pcm:
    """`x` without its leading and trailing silence, where silence is judged on the
    recording's own noise floor: the first and last 10 ms frames whose RMS stands
    `above_floor_db` above the floor (and above `peak_relative_db` from the peak, for clean
    recordings) bound the speech; `margin_ms` is kept either side for soft onsets and decays.
    The last sound's tail is followed further down, while it stays unbroken above both
    `tail_db` below the loudest frame and `tail_above_floor_db` above the floor: a reader's
    voice dying away is kept to -40 dB where the room is quiet enough (issue 48; the sample
    peak's -45 dB is only about -34 dB of a voice's loudest frame).

    `trim_silence` looks at single samples against the peak, which is right for synthetic
    speech (digital silence) but keeps a room's noise tail, up to 180 ms of it in a real pack.
    """
    a = as_pcm(x)
    top = peak(a)
    if top == 0.0:
        return a[:0]
    n = max(1, round(frame_ms * rate / 1000.0))
    pad = (-a.size) % n
    frames = np.concatenate([a, np.zeros(pad, dtype=np.float32)]).astype(np.float64)
    rms = np.sqrt(np.mean(frames.reshape(-1, n) ** 2, axis=1))
    floor = noise_floor_db(a, rate)
    gate = top * 10.0 ** (peak_relative_db / 20.0)
    if math.isfinite(floor):
        gate = max(gate, 10.0 ** ((floor + above_floor_db) / 20.0))
    loud = np.flatnonzero(rms >= gate)
    if loud.size == 0:  # noise as loud as anything in it: judge on the peak alone
        return trim_silence(a, rate)
    last = int(loud[-1])
    tail = float(np.max(rms)) * 10.0 ** (tail_db / 20.0)
    if math.isfinite(floor):
        tail = max(tail, 10.0 ** ((floor + tail_above_floor_db) / 20.0))
    while last + 1 < rms.size and tail <= rms[last + 1] < rms[last] * 1.41:  # still dying away
        last += 1
    margin = round(margin_ms * rate / 1000.0)
    start = max(0, int(loud[0]) * n - margin)
    stop = min(a.size, (last + 1) * n + margin)
    return a[start:stop]


def fade_edges(x: npt.NDArray[np.floating], rate: int, fade_ms: float = 5.0) -> Pcm:
    """`x` faded in and out over `fade_ms` (a raised cosine, from and to exact zero), so a
    clip never starts or ends with a step: no tick on good speakers."""
    a = as_pcm(x).copy()
    n = min(round(fade_ms * rate / 1000.0), a.size // 2)
    if n <= 0:
        return a
    ramp = (0.5 - 0.5 * np.cos(np.pi * np.arange(n) / n)).astype(np.float32)
    a[:n] *= ramp
    a[a.size - n :] *= ramp[::-1]
    return a


def k_weighting(rate: int) -> tuple[tuple[npt.NDArray[np.float64], npt.NDArray[np.float64]], ...]:
    """The two BS.1770 K-weighting biquads as ((b, a), (b, a)), designed for `rate`.

    BS.1770 tabulates the coefficients only for 48 kHz. Like libebur128 we rebuild them from the
    analogue prototypes (a high shelf at 1681.97 Hz, +4 dB, and a 38.13 Hz high-pass) with the
    bilinear transform, which reproduces the 48 kHz table and stays right at other rates.
    """
    f0, gain_db, q = 1681.974450955533, 3.999843853973347, 0.7071752369554196
    k = math.tan(math.pi * f0 / rate)
    vh = 10.0 ** (gain_db / 20.0)
    vb = vh**0.4996667741545416
    d = 1.0 + k / q + k * k
    shelf_b = np.array([vh + vb * k / q + k * k, 2.0 * (k * k - vh), vh - vb * k / q + k * k]) / d
    shelf_a = np.array([d, 2.0 * (k * k - 1.0), 1.0 - k / q + k * k]) / d

    f0, q = 38.13547087602444, 0.5003270373238773
    k = math.tan(math.pi * f0 / rate)
    d = 1.0 + k / q + k * k
    # BS.1770 keeps the high-pass numerator un-normalised (1, -2, 1); the offset allows for it.
    hp_b = np.array([1.0, -2.0, 1.0])
    hp_a = np.array([1.0, 2.0 * (k * k - 1.0) / d, (1.0 - k / q + k * k) / d])
    return (shelf_b, shelf_a), (hp_b, hp_a)


def _smooth_size(n: int) -> int:
    """The smallest 2^a 3^b 5^c not below n: sizes numpy's FFT handles fast."""
    if n <= 1:
        return 1
    best = 1 << max(0, (n - 1).bit_length())
    p5 = 1
    while p5 < best:
        p35 = p5
        while p35 < best:
            p = p35
            while p < n:
                p *= 2
            best = min(best, p)
            p35 *= 3
        p5 *= 5
    return best


@lru_cache(maxsize=32)
def _k_response(rate: int, n_fft: int) -> npt.NDArray[np.complex128]:
    """The K-weighting frequency response on an `n_fft`-point rfft grid (cached: clips of
    similar length share FFT sizes, and the complex exponentials cost more than the FFT)."""
    z1 = np.exp(-2j * np.pi * np.arange(n_fft // 2 + 1) / n_fft)  # z^-1 on the rfft grid
    z2 = z1 * z1
    h = np.ones(z1.size, dtype=np.complex128)
    for b, a in k_weighting(rate):
        h *= (b[0] + b[1] * z1 + b[2] * z2) / (a[0] + a[1] * z1 + a[2] * z2)
    h.flags.writeable = False
    return h


def k_weighted(x: npt.NDArray[np.floating], rate: int) -> npt.NDArray[np.float64]:
    """`x` through the K-weighting filters (zero initial state, like a time-domain filter).

    numpy has no IIR filter and a per-sample Python loop is far too slow, so the filters are
    applied as their exact frequency response on a zero-padded FFT. The padding (half a second:
    the slowest pole, of the 38 Hz high-pass, decays by more than 300 dB in that time) keeps the
    circular wrap-around of the response out of the signal.
    """
    a = np.asarray(x, dtype=np.float64)
    n_fft = _smooth_size(a.size + rate // 2)
    return np.fft.irfft(np.fft.rfft(a, n_fft) * _k_response(rate, n_fft), n_fft)[: a.size]


def loudness_lufs(x: npt.NDArray[np.floating], rate: int) -> float:
    """Integrated loudness of a mono signal in LUFS (ITU-R BS.1770-4); -inf for silence.

    Mean square of the K-weighted signal over 400 ms blocks overlapping by 75 %, gated
    absolutely at -70 LUFS and then relatively at 10 LU below the absolutely-gated level. A clip
    shorter than one block (a short call) is measured as one block over its whole length.
    """
    y = k_weighted(x, rate)
    if y.size == 0:
        return -math.inf
    block = round(_BLOCK_S * rate)
    if y.size < block:
        z = np.array([float(np.mean(y * y))])
    else:
        step = round(_STEP_S * rate)
        starts = np.arange(0, y.size - block + 1, step)
        csum = np.concatenate(([0.0], np.cumsum(y * y)))
        z = (csum[starts + block] - csum[starts]) / block
    z = np.maximum(z, 0.0)  # cumsum differences can dip a hair below zero in silence

    def lufs(ms: npt.NDArray[np.float64]) -> npt.NDArray[np.float64]:
        with np.errstate(divide="ignore"):
            return np.asarray(_LOUDNESS_OFFSET_DB + 10.0 * np.log10(ms), dtype=np.float64)

    z = z[lufs(z) > _ABSOLUTE_GATE_LUFS]
    if z.size == 0:
        return -math.inf
    relative_gate = float(lufs(np.array([z.mean()]))[0]) + _RELATIVE_GATE_LU
    z = z[lufs(z) > relative_gate]
    return float(lufs(np.array([z.mean()]))[0])


PeakGuard = Literal["limit", "scale"]


def _sliding_min(a: npt.NDArray[np.float64], half: int) -> npt.NDArray[np.float64]:
    """min(a[i - half : i + half + 1]) for every i, in O(n) (van Herk / Gil-Werman)."""
    w = 2 * half + 1
    n = a.size
    tail = half + (-(n + 2 * half)) % w
    padded = np.concatenate((np.full(half, np.inf), a, np.full(tail, np.inf))).reshape(-1, w)
    prefix = np.minimum.accumulate(padded, axis=1).ravel()
    suffix = np.minimum.accumulate(padded[:, ::-1], axis=1)[:, ::-1].ravel()
    return np.minimum(suffix[:n], prefix[w - 1 : w - 1 + n])


def _centred_mean(a: npt.NDArray[np.float64], half: int) -> npt.NDArray[np.float64]:
    """mean(a[i - half : i + half + 1]), the ends extended with the end values."""
    padded = np.concatenate((np.full(half, a[0]), a, np.full(half, a[-1])))
    csum = np.concatenate(([0.0], np.cumsum(padded)))
    return np.asarray((csum[2 * half + 1 :] - csum[: -2 * half - 1]) / (2 * half + 1))


def limit_peaks(
    x: npt.NDArray[np.floating], rate: int, ceiling: float, ramp_ms: float = 5.0
) -> npt.NDArray[np.float64]:
    """`x` with a smooth gain dip around every sample above `ceiling`, so none stays above it.

    A look-ahead limiter without recursion: the gain each sample needs is min-filtered over
    +-`ramp_ms`, then averaged over the same window. Every term of that average is at most the
    gain the centre sample needs, so the result never exceeds it (no overshoot, no clipping), and
    the gain glides down and back up over about 2 x `ramp_ms` instead of stepping.
    """
    a = np.asarray(x, dtype=np.float64)
    mag = np.abs(a)
    if a.size == 0 or float(mag.max()) <= ceiling:
        return a.copy()
    safe = ceiling * (1.0 - 1e-6)  # room for float rounding on the way back to float32
    with np.errstate(divide="ignore"):
        need = np.minimum(1.0, safe / mag)
    half = max(1, round(ramp_ms * rate / 1000.0))
    return np.asarray(a * _centred_mean(_sliding_min(need, half), half))


def normalise_loudness(
    x: npt.NDArray[np.floating],
    rate: int,
    target_lufs: float,
    peak_dbfs: float = -1.0,
    guard: PeakGuard = "limit",
) -> Pcm:
    """`x` at `target_lufs`, with no sample above `peak_dbfs`. Nothing is ever clipped.

    The peak guard matters for synthetic speech: Open JTalk verses peak 13-25 dB above their
    loudness, so at -20 LUFS a quarter of them would cross -1 dBFS. With `guard="limit"` (the
    default) a smooth look-ahead limiter lowers just those peaks and the gain is raised again
    until the clip is within 0.1 LU of the target (a few passes at most; a signal whose peaks
    carry its loudness, such as a bare pulse train, can still end quieter). With
    `guard="scale"` the whole clip is turned down instead, as far as its highest peak demands.
    Silence is returned unchanged.
    """
    a = as_pcm(x)
    measured = loudness_lufs(a, rate)
    if not math.isfinite(measured) or peak(a) == 0.0:
        return a.copy()
    ceiling = 10.0 ** (peak_dbfs / 20.0)
    gain = 10.0 ** ((target_lufs - measured) / 20.0)
    if guard == "scale":
        gain = min(gain, ceiling / peak(a))
        return as_pcm(a.astype(np.float64) * gain)
    y = limit_peaks(a * gain, rate, ceiling)
    for _ in range(4):
        shortfall = target_lufs - loudness_lufs(y, rate)
        if abs(shortfall) < 0.1:
            break
        gain *= 10.0 ** (shortfall / 20.0)
        y = limit_peaks(a * gain, rate, ceiling)
    return y.astype(np.float32)


def resample(x: npt.NDArray[np.floating], src: int, dst: int) -> Pcm:
    """`x` band-limited and resampled from `src` to `dst` Hz (round(len * dst / src) frames).

    Done in the frequency domain: the spectrum is cut (downsampling: that is the anti-alias
    filter) or zero-extended (upsampling), with a short raised-cosine taper below the lower
    Nyquist frequency to avoid ringing. The input is zero-padded to a whole number of resampling
    periods and by 20 ms more, so the output length is exact and the FFT's circular wrap falls
    in the padding, not in the clip.
    """
    a = as_pcm(x)
    if src <= 0 or dst <= 0:
        raise ValueError(f"sample rates must be positive, got {src} -> {dst}")
    if src == dst or a.size == 0:
        return a.copy()
    g = math.gcd(src, dst)
    up, down = dst // g, src // g
    n_out = round(a.size * dst / src)
    periods = _smooth_size(-(-(a.size + src // 50) // down))
    n_in = periods * down
    spec = np.fft.rfft(a.astype(np.float64), n_in)
    n_res = periods * up
    bins = min(spec.size, n_res // 2 + 1)
    out_spec = np.zeros(n_res // 2 + 1, dtype=np.complex128)
    out_spec[:bins] = spec[:bins]
    taper = max(1, bins // 20)
    out_spec[bins - taper : bins] *= 0.5 * (1.0 + np.cos(np.linspace(0.0, np.pi, taper)))
    y = np.fft.irfft(out_spec, n_res) * (n_res / n_in)
    return y[:n_out].astype(np.float32)


def master(x: npt.NDArray[np.floating], rate: int, target_lufs: float) -> Pcm:
    """What every voice delivers: trimmed, then normalised to `target_lufs` (peak-guarded)."""
    return normalise_loudness(trim_silence(x, rate), rate, target_lufs)
