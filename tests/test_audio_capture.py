"""The capture comparison the audio tests rest on (tests/audio_capture.py `holes`): pure code,
checked on made-up captures. A sound server that ran dry shows as silence where the plan had
sound, pushing the rest later (inserted), skipping it (missing) or both; anything else a sink
could do wrong (a sample moved, cut without silence, altered) is an error naming the frame."""

from __future__ import annotations

import numpy as np
import pytest

from .audio_capture import Hole, dropouts, holes, holes_from_first_sound


def plan(n: int = 4000, seed: int = 1) -> np.ndarray:
    rng = np.random.default_rng(seed)
    x = rng.integers(100, 20000, n) * rng.choice([-1, 1], n)
    x[1500:1800] = 0  # a gap the plan has on purpose
    return x.astype(np.int16)


def test_an_identical_capture_has_no_hole() -> None:
    p = plan()
    assert holes(p, p) == [] and dropouts(p, p) == 0
    # trailing silence after the plan is not a hole
    assert holes(np.concatenate([p, np.zeros(500, np.int16)]), p) == []


def test_inserted_silence_pushes_the_rest_later() -> None:
    p = plan()
    cap = np.concatenate([p[:700], np.zeros(256, np.int16), p[700:]])
    assert holes(cap, p) == [Hole(700, 256, 0)]


def test_silence_in_place_of_sound_is_missing_frames() -> None:
    p = plan()
    cap = p.copy()
    cap[2000:2240] = 0
    assert holes(cap, p) == [Hole(2000, 0, 240)]


def test_both_kinds_at_once_and_a_hole_running_into_a_planned_gap() -> None:
    p = plan()
    # 100 planned frames skipped, 50 more frames of silence than that
    cap = np.concatenate([p[:600], np.zeros(150, np.int16), p[700:]])
    assert holes(cap, p) == [Hole(600, 50, 100)]
    # a hole that ends inside the plan's own gap: only the sound it covered is missing
    cap = p.copy()
    cap[1400:1700] = 0
    assert holes(cap, p) == [Hole(1400, 0, 100)]
    assert dropouts(cap, p) == 100


def test_a_capture_that_ends_inside_a_hole_counts_the_rest_as_missing() -> None:
    p = plan()
    cap = np.concatenate([p[:3000], np.zeros(2000, np.int16)])
    assert holes(cap, p) == [Hole(3000, 0, 1000)]


@pytest.mark.parametrize(("what", "make", "message"), [
    ("an altered sample", lambda p: np.concatenate([p[:900], [p[900] + 1], p[901:]]),
     "frame 900 of the plan: captured"),
    ("samples cut with no silence", lambda p: np.concatenate([p[:900], p[1000:]]),
     "frame 900 of the plan: captured"),
    ("samples moved earlier", lambda p: np.concatenate([p[:1500], p[1800:], p[1500:1800]]),
     "frame 1500 of the plan: captured"),
    ("sound after a hole that is not the plan's", lambda p: np.concatenate(
        [p[:900], np.zeros(100, np.int16), p[2500:]]), "samples the plan does not have"),
    ("a capture cut short", lambda p: p[:3000], "the capture ends 1000 frames early"),
])
def test_anything_but_a_hole_is_an_error(what: str, make, message: str) -> None:
    p = plan()
    with pytest.raises(AssertionError, match=message):
        holes(np.asarray(make(p), dtype=np.int16), p)


def test_a_start_the_sink_never_played_is_a_hole_at_frame_0() -> None:
    """A stream the machine was too slow to start: the sink plays it from the sample due at
    that time, so the capture's first sound is the plan's frame 300, after leading silence."""
    p = plan()
    p[:10] = np.arange(1, 11)  # a fade-in: the plan's first samples are tiny
    cap = np.concatenate([np.zeros(700, np.int16), p[300:]])
    assert holes_from_first_sound(cap, p) == [Hole(0, 0, 300)]
    # heard from its first sample after any leading silence: no hole
    assert holes_from_first_sound(np.concatenate([np.zeros(50, np.int16), p]), p) == []
    # the first sound is nowhere in the plan: an error naming frame 0, as before
    with pytest.raises(AssertionError, match="frame 0 of the plan: captured"):
        holes_from_first_sound(np.concatenate([[1000], p]).astype(np.int16), p)
