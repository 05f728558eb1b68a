"""The referees' holds on the reading schedule: a raised hand cuts the reading at the clock's
frame (or cancels a lead-in under way); when the last hand is lowered, a lead-in silence runs and
reading resumes by the resume policy. Raising a hand twice, or lowering one that is down, is a
no-op.
"""

from .commands import StopAudio
from .schedule import RaisedHold, Schedule


class Holds(Schedule):
    """The schedule with the referees' hands on it; `Engine` adds the moves and the output."""

    def _hold(self, t: int, referee: str, name: str) -> bool:
        if referee in self._holds:
            return False
        self._holds[referee] = RaisedHold(referee, name, t)
        self._facts.append(
            {"fact": "hold", "referee": referee, "name": name, "frame": t,
             "holds": len(self._holds)}
        )
        if self._terminal is None:
            if self._cut is None:
                self._cut_at(t)
            elif self._resume_at is not None:
                self._facts.append({"fact": "lead_in_cut", "frame": t})
                self._resume_at = None
                self._audio.append(StopAudio(t))  # cancel the resumed clip already sent
                self._scheduled.clear()
        return True

    def _release(self, t: int, referee: str) -> bool:
        if referee not in self._holds:
            return False
        del self._holds[referee]
        self._facts.append(
            {"fact": "release", "referee": referee, "frame": t, "holds": len(self._holds)}
        )
        self._after_release(t)
        return True

    def _release_all(self, t: int) -> bool:
        if not self._holds:
            return False
        self._facts.append(
            {"fact": "clear_holds", "referees": list(self._holds), "frame": t, "holds": 0}
        )
        self._holds.clear()
        self._after_release(t)
        return True

    def _after_release(self, t: int) -> None:
        if not self._holds and self._cut is not None and self._terminal is None:
            r = t + max(self._lead_in, self.schedule_lead)
            self._resume_at = r
            self._facts.append({"fact": "lead_in", "frame": t, "resume_frame": r})
            # send the resumed clip now, for the end of the lead-in: it will not be late
            idx, off = self._resume_point()
            clip = self._segs[idx].clip
            if clip is not None:
                self._play(idx, clip, r, off)
            if r <= t:
                self._resume(t)
