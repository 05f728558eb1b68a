"""The HTS engine driven step by step: durations and pitch targets set between its stages.

pyopenjtalk's `HTSEngine` runs the three stages of HMM synthesis in one call (states and their
durations from the labels, parameters by maximum likelihood, samples by the vocoder). The same
library exports the HTS_Engine API itself; through it (ctypes, no build step) a voice can:
- read each phoneme's duration the models chose (`durations`, in frames of `fperiod` samples),
- impose its own durations (labels with times, phoneme alignment on),
- move each state's log-F0 mean before the parameters are generated (`synthesize`'s `lf0`).

One `Hts` per thread (the engine keeps its state in its struct); each call is independent.
"""

from __future__ import annotations

import contextlib
import ctypes
import io
import threading
from collections.abc import Callable, Sequence
from typing import Any, Final

import numpy as np
import numpy.typing as npt

with contextlib.redirect_stdout(io.StringIO()):
    # pyopenjtalk-plus prints at import that onnxruntime is missing: not on yomite's stdout
    # (the CLI's JSON), as in audio/voices/openjtalk.py
    import pyopenjtalk
    from pyopenjtalk import htsengine

LF0_STREAM: Final = 1  # the voice's streams: 0 spectrum (mel-cepstrum), 1 log F0, 2 aperiodicity
_STRUCT_BYTES: Final = 1 << 16  # more than sizeof(HTS_Engine) (under 1 KiB in HTS_Engine 1.10)
_UNITS_PER_S: Final = 10_000_000  # label times are in 100 ns

_P, _S, _D, _B = ctypes.c_void_p, ctypes.c_size_t, ctypes.c_double, ctypes.c_char
_STRS = ctypes.POINTER(ctypes.c_char_p)


def _library() -> ctypes.CDLL:
    so = ctypes.CDLL(htsengine.__file__)
    sig: dict[str, tuple[Any, tuple[Any, ...]]] = {
        "HTS_Engine_initialize": (None, (_P,)),
        "HTS_Engine_load": (_B, (_P, _STRS, _S)),
        "HTS_Engine_clear": (None, (_P,)),
        "HTS_Engine_refresh": (None, (_P,)),
        "HTS_Engine_get_fperiod": (_S, (_P,)),
        "HTS_Engine_get_sampling_frequency": (_S, (_P,)),
        "HTS_Engine_set_phoneme_alignment_flag": (None, (_P, _B)),
        "HTS_Engine_set_gv_weight": (None, (_P, _S, _D)),
        "HTS_Engine_generate_state_sequence_from_strings": (_B, (_P, _STRS, _S)),
        "HTS_Engine_get_total_state": (_S, (_P,)),
        "HTS_Engine_get_nstate": (_S, (_P,)),
        "HTS_Engine_get_state_duration": (_S, (_P, _S)),
        "HTS_Engine_get_state_mean": (_D, (_P, _S, _S, _S)),
        "HTS_Engine_set_state_mean": (None, (_P, _S, _S, _S, _D)),
        "HTS_Engine_generate_parameter_sequence": (_B, (_P,)),
        "HTS_Engine_generate_sample_sequence": (_B, (_P,)),
        "HTS_Engine_get_nsamples": (_S, (_P,)),
        "HTS_Engine_get_total_frame": (_S, (_P,)),
        "HTS_SStreamSet_set_gv_switch": (None, (_P, _S, _S, _B)),
        "HTS_SStreamSet_get_gv_switch": (_B, (_P, _S, _S)),
        "HTS_SStreamSet_use_gv": (_B, (_P, _S)),
        "HTS_Engine_get_generated_speech": (_D, (_P, _S)),
    }
    for name, (res, args) in sig.items():
        f = getattr(so, name)
        f.restype, f.argtypes = res, list(args)
    return so


_LIB: ctypes.CDLL | None = None
_LIB_LOCK = threading.Lock()


def available() -> bool:
    """Whether this platform's pyopenjtalk exports the HTS_Engine API (Linux and macOS builds
    do; an extension built to export only its module init would not)."""
    global _LIB
    try:
        with _LIB_LOCK:
            if _LIB is None:
                _LIB = _library()
    except (OSError, AttributeError):
        return False
    return True


def phoneme(label: str) -> str:
    """A full-context label's own phoneme (`p3`: between `-` and `+`)."""
    return label.split("-", 1)[1].split("+", 1)[0]


# A state's log-F0 target from (phoneme index, state index in it, the model's own mean)
Lf0Plan = Callable[[int, int, float], float]


class Hts:
    """One HTS engine with the default Open JTalk voice (mei), for one thread."""

    def __init__(self, voice: bytes = pyopenjtalk.DEFAULT_HTS_VOICE) -> None:
        global _LIB
        with _LIB_LOCK:
            if _LIB is None:
                _LIB = _library()
        self._so = _LIB
        self._buf = ctypes.create_string_buffer(_STRUCT_BYTES)
        self._e = ctypes.cast(self._buf, _P)
        self._so.HTS_Engine_initialize(self._e)
        voices = (ctypes.c_char_p * 1)(voice)
        if self._so.HTS_Engine_load(self._e, voices, 1) != b"\x01":
            raise RuntimeError(f"HTS engine could not load the voice {voice!r}")
        self.fperiod = int(self._so.HTS_Engine_get_fperiod(self._e))
        self.rate = int(self._so.HTS_Engine_get_sampling_frequency(self._e))
        self.nstate = int(self._so.HTS_Engine_get_nstate(self._e))

    def close(self) -> None:
        self._so.HTS_Engine_clear(self._e)

    def _states(self, labels: Sequence[str], aligned: bool) -> None:
        self._so.HTS_Engine_refresh(self._e)
        self._so.HTS_Engine_set_gv_weight(self._e, 0, 1.0)
        self._so.HTS_Engine_set_phoneme_alignment_flag(self._e, b"\x01" if aligned else b"\x00")
        lines = (ctypes.c_char_p * len(labels))(*[s.encode() for s in labels])
        if self._so.HTS_Engine_generate_state_sequence_from_strings(
                self._e, lines, len(labels)) != b"\x01":
            raise RuntimeError("HTS engine: no state sequence for these labels")

    def durations(self, labels: Sequence[str]) -> list[int]:
        """Each phoneme's duration as the models choose it, in frames."""
        self._states(labels, aligned=False)
        n = self._so.HTS_Engine_get_total_state(self._e)
        d = [int(self._so.HTS_Engine_get_state_duration(self._e, i)) for i in range(n)]
        return [sum(d[i:i + self.nstate]) for i in range(0, n, self.nstate)]

    def lf0_means(self, labels: Sequence[str]) -> npt.NDArray[np.float64]:
        """Each state's log-F0 mean (phonemes x states); meaningless where a state is unvoiced."""
        self._states(labels, aligned=False)
        n = self._so.HTS_Engine_get_total_state(self._e)
        m = [self._so.HTS_Engine_get_state_mean(self._e, LF0_STREAM, i, 0) for i in range(n)]
        return np.array(m, dtype=np.float64).reshape(-1, self.nstate)

    def synthesize(self, labels: Sequence[str], frames: Sequence[int] | None = None,
                   lf0: Lf0Plan | None = None, lf0_gv: bool = True,
                   no_gv: Sequence[int] = ()) -> npt.NDArray[np.float64]:
        """Samples (on the int16 scale, like pyopenjtalk's) for `labels`: with `frames`, each
        phoneme lasts that many frames; with `lf0`, each state's log-F0 mean is replaced by
        what it returns; `lf0_gv` False turns the pitch's global variance off (it would widen
        a flattened contour again); the phonemes in `no_gv` do not count in the spectrum's
        global variance (a vowel held long would make it sharpen the rest until the filter
        is unstable: peaks of 1e24 measured)."""
        if frames is not None:
            unit = self.fperiod * _UNITS_PER_S // self.rate  # one frame in 100 ns
            t, timed = 0, []
            for f, lab in zip(frames, labels, strict=True):
                timed.append(f"{t * unit} {(t + f) * unit} {lab}")
                t += f
            labels = timed
        self._states(labels, aligned=frames is not None)
        self._so.HTS_Engine_set_gv_weight(self._e, LF0_STREAM, 1.0 if lf0_gv else 0.0)
        if no_gv:
            sss = self._sstreams()
            if sss is None:  # not found: a milder variance for the whole phrase instead
                self._so.HTS_Engine_set_gv_weight(self._e, 0, 0.5)
            else:  # (the spectrum's stream; its switches exist where it uses GV)
                for ph in no_gv:
                    for k in range(self.nstate):
                        self._so.HTS_SStreamSet_set_gv_switch(sss, 0, ph * self.nstate + k,
                                                              b"\x00")
        if lf0 is not None:
            n = self._so.HTS_Engine_get_total_state(self._e)
            for i in range(n):
                mean = self._so.HTS_Engine_get_state_mean(self._e, LF0_STREAM, i, 0)
                self._so.HTS_Engine_set_state_mean(
                    self._e, LF0_STREAM, i, 0, lf0(i // self.nstate, i % self.nstate, mean))
        if (self._so.HTS_Engine_generate_parameter_sequence(self._e) != b"\x01"
                or self._so.HTS_Engine_generate_sample_sequence(self._e) != b"\x01"):
            raise RuntimeError("HTS engine: synthesis failed")
        return self._speech()

    def _speech(self) -> npt.NDArray[np.float64]:
        """The generated samples: read at once from the engine's own buffer where it is found
        (and three samples agree with the API's), else one call a sample (~6 µs each)."""
        n = int(self._so.HTS_Engine_get_nsamples(self._e))
        get = self._so.HTS_Engine_get_generated_speech
        if n == 0:
            return np.zeros(0)
        at = self._find_speech(n)
        if at is not None:
            x = np.ctypeslib.as_array(ctypes.cast(at, ctypes.POINTER(ctypes.c_double)),
                                      shape=(n,)).copy()
            if all(x[i] == get(self._e, i) for i in (0, n // 2, n - 1)):
                return x
            self._offset = None
        return np.fromiter((get(self._e, i) for i in range(n)), dtype=np.float64, count=n)

    _offset: int | None = None  # of HTS_GStreamSet.gspeech in the engine's struct, once found
    _sss: int | None = None  # of HTS_SStreamSet in it

    def _sstreams(self) -> int | None:
        """The address of the engine's HTS_SStreamSet {sstream*, nstream, nstate, duration*,
        total_state, total_frame}: found as those counts, and checked through the API (the
        gv switch of state 0 read back)."""
        word = ctypes.sizeof(ctypes.c_size_t)
        states = int(self._so.HTS_Engine_get_total_state(self._e))
        frames = sum(int(self._so.HTS_Engine_get_state_duration(self._e, i))
                     for i in range(states))
        if self._sss is None:
            words = np.frombuffer(self._buf.raw[:4096], dtype=np.uint64 if word == 8
                                  else np.uint32)
            for i in range(1, len(words) - 5):
                if (words[i] == 3 and words[i + 1] == self.nstate and words[i + 3] == states
                        and words[i + 4] == frames):
                    self._sss = (i - 1) * word
                    break
            else:
                return None
        addr = ctypes.addressof(self._buf) + self._sss
        if self._so.HTS_SStreamSet_use_gv(addr, 0) != b"\x01":
            return None
        flag = self._so.HTS_SStreamSet_get_gv_switch(addr, 0, 0)
        return addr if flag in (b"\x00", b"\x01") else None

    def _find_speech(self, n: int) -> int | None:
        """The address of the samples: HTS_GStreamSet (the last member of HTS_Engine) begins
        {total_nsample, total_frame, nstream, gstream*, gspeech*}; it is looked for as those
        three counts in a row."""
        word = ctypes.sizeof(ctypes.c_size_t)
        if self._offset is None:
            frames = int(self._so.HTS_Engine_get_total_frame(self._e))
            words = np.frombuffer(self._buf.raw[:4096], dtype=np.uint64 if word == 8
                                  else np.uint32)
            for i in range(len(words) - 5):
                if words[i] == n and words[i + 1] == frames and words[i + 2] == 3:
                    self._offset = (i + 4) * word
                    break
            else:
                return None
        return ctypes.c_size_t.from_buffer(self._buf, self._offset).value or None
