"""The schedule every sink keeps: clips placed at exact output frames, mixed block by block.

One class serves all three sinks, so the file sink (tested offline, sample by sample) renders
exactly what the device sink's audio callback plays. Because the device calls `render` from its
real-time callback, the rendering path follows python-sounddevice's rules for callbacks: it
works only on memory prepared beforehand (fixed-size slot lists, a precomputed fade ramp, a
scratch buffer the length of the fade), uses in-place numpy operations on views (no temporary
arrays), takes no lock, does no I/O and never raises on ordinary input. The Python interpreter
itself still allocates small objects (ints, slices); that is cheap and bounded.

Threading: a `Mixer` belongs to exactly one thread at a time. The file and null sinks use it
from the caller's thread; the device sink hands commands to its audio thread, which alone
calls `play`, `stop` and `render` (see `audio.output.device`).
"""

from __future__ import annotations

from collections.abc import Callable

import numpy as np

from audio.output.events import ClipDone, Pcm, SinkEvent, Stopped, fade_frames, fade_ramp

NEVER = 1 << 62  # "no cut": an output frame no match reaches (3e9 years at 48 kHz)


class Mixer:
    """Clips on the output timeline, rendered from frame `pos` onwards.

    `pos` is the first frame not yet rendered; everything before it is final. `play` and
    `stop` apply at `pos`: a clip due earlier is cut at the head, a stop due earlier takes
    effect at `pos`. Events (`ClipDone`, `Stopped`) are passed to `emit` from `render` /
    `advance`, once the frame they name has been rendered.
    """

    def __init__(
        self,
        rate: int,
        *,
        fade_ms: float = 5.0,
        capacity: int = 32,
        emit: Callable[[SinkEvent], None] | None = None,
    ) -> None:
        self.rate = rate
        self.capacity = capacity
        self.emit: Callable[[SinkEvent], None] = emit or (lambda _ev: None)
        self.fade = fade_frames(rate, fade_ms)
        self._ramp = fade_ramp(self.fade)
        # the fade is the only part not copied straight from a clip: its product goes here
        self._scratch = np.zeros(max(1, self.fade), dtype=np.float32)
        self.pos = 0
        # Fixed-size slots, so that scheduling from the audio thread never grows a container.
        self._pcm: list[Pcm | None] = [None] * capacity
        self._tag = [0] * capacity
        self._base = [0] * capacity  # output frame at which pcm[0] would sound
        self._start = [0] * capacity  # first output frame actually played (after a head cut)
        self._end = [0] * capacity  # output frame after the clip's last sample
        self._cut = [NEVER] * capacity  # output frame where the fade-out starts
        self._used = 0
        self._stops = [0] * capacity  # pending Stopped frames
        self._nstops = 0
        self.late_clips = 0
        self.late_frames = 0
        self.dropped_clips = 0

    # ------------------------------------------------------------------ scheduling
    def play(self, pcm: Pcm, at_frame: int, offset: int, tag: int) -> None:
        """Schedule `pcm[offset:]` to start at output frame `at_frame` (validated by the sink)."""
        base = at_frame - offset
        end = base + pcm.shape[0]
        start = at_frame
        if start < self.pos:
            self.late_clips += 1
            self.late_frames += min(self.pos, end) - start
            start = self.pos
        if end <= start:  # wholly in the past (or empty): it is over already
            self.emit(ClipDone(tag, end))
            return
        for i in range(self.capacity):
            if self._pcm[i] is None:
                self._pcm[i] = pcm
                self._tag[i] = tag
                self._base[i] = base
                self._start[i] = start
                self._end[i] = end
                self._cut[i] = NEVER
                self._used += 1
                return
        self.dropped_clips += 1

    def stop(self, at_frame: int) -> None:
        """Fade out every scheduled clip from max(at_frame, pos) and forget it."""
        cut = max(at_frame, self.pos)
        silent = cut  # first frame at which every clip this stop touches is silent
        if self._used:
            for i in range(self.capacity):
                if self._pcm[i] is None:
                    continue
                if self._start[i] >= cut:  # scheduled, never heard: forget it
                    self._free(i)
                    continue
                if self._end[i] <= cut:
                    continue  # ends before the stop takes effect: plays out normally
                c = min(self._cut[i], cut)  # an earlier stop's fade keeps going
                self._cut[i] = c
                silent = max(silent, min(self._end[i], c + self.fade))
        # an earlier stop's clips are all covered by this one, so they are silent by then too
        for j in range(self._nstops):
            self._stops[j] = min(self._stops[j], silent)
        if silent <= self.pos:
            self.emit(Stopped(silent))
        elif self._nstops < self.capacity:
            self._stops[self._nstops] = silent
            self._nstops += 1
        # else: a full list of pending stops means a caller stops in a loop; the next fade
        # reports the same silence

    def drop_queued(self) -> None:
        """The output threw away the audio it had queued (a flush: `DeviceSink`), so the fades
        of the stops already applied were never heard and must not sound now: every clip whose
        cut has come ends at `pos`, and the stops waiting for those fades report silence
        there. A stop still in the future is kept."""
        if self._used:
            for i in range(self.capacity):
                if self._pcm[i] is not None and self._cut[i] <= self.pos:
                    self._free(i)
        j = 0
        while j < self._nstops:
            if self._stops[j] <= self.pos + self.fade:
                self.emit(Stopped(self.pos))
                self._nstops -= 1
                self._stops[j] = self._stops[self._nstops]
            else:
                j += 1

    # ------------------------------------------------------------------ rendering
    def render(self, out: Pcm) -> None:
        """Write the next `len(out)` frames into `out` (mono float32, may be a strided view)
        and move `pos` on. Overlapping clips are summed; nothing is clipped here."""
        self._step(out.shape[0], out)

    def advance(self, frames: int) -> None:
        """Move `pos` on by `frames` without producing audio (the null sink)."""
        self._step(frames, None)

    def next_event_frame(self) -> int | None:
        """The earliest frame at which a scheduled clip or a stop will end, if any."""
        ends = [min(self._end[i], self._cut[i] + self.fade)
                for i in range(self.capacity) if self._pcm[i] is not None]
        ends += self._stops[: self._nstops]
        return min(ends) if ends else None

    def horizon(self) -> int:
        """The frame after which nothing scheduled sounds (at least `pos`)."""
        h = self.pos
        for i in range(self.capacity):
            if self._pcm[i] is not None:
                h = max(h, min(self._end[i], self._cut[i] + self.fade))
        return h

    def _step(self, n: int, out: Pcm | None) -> None:
        p = self.pos
        q = p + n
        if out is not None:
            out.fill(0.0)
        if self._used:
            fade = self.fade
            for i in range(self.capacity):
                pcm = self._pcm[i]
                if pcm is None:
                    continue
                end, cut = self._end[i], self._cut[i]
                last = min(end, cut + fade)  # frame after the last audible sample
                if out is not None:
                    a = max(self._start[i], p)
                    b = min(last, q)
                    if a < b:
                        base = self._base[i]
                        u = min(b, cut)
                        if a < u:  # before the cut: copied as is
                            seg = out[a - p : u - p]
                            np.add(seg, pcm[a - base : u - base], out=seg)
                        f = max(a, cut)
                        if f < b:  # inside the fade: pcm times the ramp, via the scratch
                            tmp = self._scratch[: b - f]
                            np.multiply(pcm[f - base : b - base], self._ramp[f - cut : b - cut],
                                        out=tmp)
                            seg = out[f - p : b - p]
                            np.add(seg, tmp, out=seg)
                if last <= q:
                    self._free(i)
                    if end <= cut:  # it ran to its end: done (a cancelled clip is not)
                        self.emit(ClipDone(self._tag[i], end))
        j = 0
        while j < self._nstops:
            if self._stops[j] <= q:
                self.emit(Stopped(self._stops[j]))
                self._nstops -= 1
                self._stops[j] = self._stops[self._nstops]
            else:
                j += 1
        self.pos = q

    def _free(self, i: int) -> None:
        self._pcm[i] = None
        self._used -= 1
