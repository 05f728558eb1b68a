"""The timing engine: the match programme as an exact, pausable timeline.

Contract:
- `handle(event)` reads the injected clock once, catches up with it (segments whose end has
  passed are left, in order, at their exact planned frames), applies the event and returns the
  commands to carry out, in order: `Record` (journal) first, then audio, then `Publish`.
- Time is planned in output frames (see `reader.schedule`): every gap is exact to the sample
  however late the runtime wakes up, and clips are sent one clip ahead.
- `next_deadline()` is the clock time at which the engine next has something to do; the runtime
  sends `Tick` then (waking late is harmless, waking early is a no-op).
- A hold (`reader.holds`) cuts the programme at the clock's frame (`StopAudio`); when the last
  hold is lowered a lead-in silence runs, then reading resumes by the resume policy. Silent
  segments (memorisation, gaps) always resume their remainder; speech follows the policy.
- An illegal event raises IllegalMove naming the move and the phase (the table of moves is in
  `reader.moves`). Anything the catch-up had already produced is kept and returned by the next
  call.
- Any other exception (a voice that cannot tell a clip's length) leaves the engine exactly as
  it was before the call: nothing half-applied, so the runtime can still pause or abort it.
"""

from dataclasses import replace
from typing import Any, assert_never

from .commands import Command, Publish, Record, StopAudio
from .errors import IllegalMove
from .events import (
    Abort,
    Bow,
    ClearHolds,
    Close,
    Event,
    ExtraCard,
    Hold,
    ReadAgain,
    Release,
    Skip,
    Start,
    Tick,
    event_to_dict,
)
from .holds import Holds
from .moves import MOVE_WORDS, phase_words, require
from .programme import Phase, SegmentKind, closing, extra_card, read_again
from .snapshot import CardView, CutView, HoldView, SegmentView, Snapshot

# 2: the bow call and Bow, the extra card's call, Close with the end and move calls (the end
# call is no longer read by itself after the last card)
JOURNAL_VERSION = 2


class Engine(Holds):
    """The façade: events in, commands out (see the module's contract)."""

    # ------------------------------------------------------------------ public interface
    def header(self) -> dict[str, Any]:
        """The journal's first line: everything needed to build this engine again."""
        return {
            "type": "header",
            "version": JOURNAL_VERSION,
            "rate": self.rate,
            "t": self._t0 / self.rate,
            "cards": self.cards_planned,
            "schedule_lead": self.schedule_lead,
            "match": self.match.model_dump(mode="json"),
            "deck": {
                "poems": list(self.deck.poems),
                "colors": [c.value for c in self.deck.colors],
                "seed": self.deck.seed,
                "order": list(self.deck.order),
            },
        }

    def handle(self, event: Event) -> list[Command]:
        # every field is a value or a container of immutable values: one level of copying
        # is a complete snapshot (a few microseconds), restored if anything but an
        # IllegalMove escapes
        saved = {k: v.copy() if isinstance(v, list | dict | set) else v
                 for k, v in vars(self).items()}
        try:
            return self._handle(event)
        except IllegalMove:
            raise
        except BaseException:
            self.__dict__.clear()
            self.__dict__.update(saved)
            raise

    def _handle(self, event: Event) -> list[Command]:
        t = max(self._frame_now(), self._t)
        self._t = t
        self._advance(t)
        if self._facts and not isinstance(event, Tick):
            self._commit(Tick(), t)  # the catch-up is its own journal record
        changed = self._apply(event, t)
        if changed or self._facts or self._audio:
            self._commit(event, t)
        out, self._out = self._out, []
        return out

    def snapshot(self) -> Snapshot:
        t = self._t
        seg_view: SegmentView | None = None
        countdown: float | None = None
        card_no = max(self._cards, default=0)
        if self._terminal is None:
            s = self._segs[self._cur]
            # a cut clip's length is not needed (it has no end yet): a paused match can be
            # shown even when its voice cannot say that clip
            frames = 0 if self._cut and s.clip is not None else self._frames(self._cur)
            seg_view = SegmentView(
                index=self._cur,
                kind=s.kind.value,
                label=s.label,
                card=s.card,
                poem=s.poem if s.card else None,
                verse=s.verse.value if s.verse else None,
                reading=s.reading,
                started_s=self._anchor / self.rate,
                ends_s=None if self._cut else (self._anchor + frames) / self.rate,
            )
            if s.kind is SegmentKind.MEMORISE:
                left = frames - (self._cut.offset if self._cut else t - self._anchor)
                countdown = left / self.rate
        cut_view = None
        if self._cut is not None:
            cs = self._segs[self._cut.segment]
            cut_view = CutView(
                segment=self._cut.segment,
                label=cs.label,
                card=cs.card,
                poem=cs.poem if cs.card else None,
                verse=cs.verse.value if cs.verse else None,
                offset_s=self._cut.offset / self.rate,
                at_s=self._cut.frame / self.rate,
            )
        g = self.match.gaps
        return Snapshot(
            seq=self._seq,
            at_s=t / self.rate,
            phase=self.phase,
            paused=self._cut is not None,
            resumes_at_s=None if self._resume_at is None else self._resume_at / self.rate,
            holds=tuple(
                HoldView(h.referee, h.name, h.since / self.rate) for h in self._holds.values()
            ),
            card=card_no,
            cards_total=self.cards_planned + self._extra,
            cards_planned=self.cards_planned,
            unread_left=len(self.deck.order) - self.cards_planned - self._extra,
            segment=seg_view,
            countdown_s=countdown,
            cut=cut_view,
            cards=tuple(
                CardView(
                    c.n,
                    c.poem,
                    c.started / self.rate,
                    None if c.finished is None else c.finished / self.rate,
                )
                for c in sorted(self._cards.values(), key=lambda c: c.n)
            ),
            seed=self.deck.seed,
            colors=tuple(c.value for c in self.deck.colors),
            policy=self.match.resume.policy.value,
            lead_in_s=self.match.resume.lead_in_s,
            timings={
                "memorise_s": self.match.memorise_s,
                "after_call_s": g.after_call_s,
                "between_verses_s": g.between_verses_s,
                "between_cards_s": g.between_cards_s,
                "repeat_s": g.repeat_s,
                "lower_verse_times": self.match.lower_verse_times,
                "prelude": self.match.prelude.enabled,
            },
            reason=self._reason,
            bowed=self._bowed,
            calls=self._calls(),
        )

    def _calls(self) -> dict[str, str | None]:
        m = self.match
        return {
            "bow_call": m.bow_call.text if m.bow_call.enabled else None,
            "memorise_call": m.memorise_call.text,
            "prelude_intro": m.prelude.intro.text if m.prelude.enabled else None,
            # the jokā's verses by their segments' labels: the pages show what is read
            "prelude_kami": m.prelude.kami.text if m.prelude.enabled else None,
            "prelude_shimo": m.prelude.shimo.text if m.prelude.enabled else None,
            "extra_call": m.extra_call.text if m.extra_call.enabled else None,
            "again_call": m.again_call.text if m.again_call.enabled else None,
            "end_call": m.end_call.text if m.end_call.enabled else None,
            "move_call": m.move_call.text if m.move_call.enabled else None,
        }

    def state(self) -> dict[str, Any]:
        """Everything the engine knows, for comparing a replayed engine with a live one."""
        return {
            "snapshot": self.snapshot().to_dict(),
            "cur": self._cur,
            "anchor": self._anchor,
            "cut": self._cut,
            "resume_at": self._resume_at,
            "holds": {k: (h.name, h.since) for k, h in self._holds.items()},
            "scheduled": sorted(self._scheduled),
            "segments": len(self._segs),
            "clip_frames": dict(self._clip_frames),
            "countdown_mark": self._countdown_mark,
            "records": self._records,
            "bowed": self._bowed,
            "stop_at": self._stop_at,
            "closing": self._closing,
        }

    # ------------------------------------------------------------------ events
    def _apply(self, event: Event, t: int) -> bool:
        match event:
            case Tick():
                return self._tick(t)
            case Bow():
                require(event, self.phase, self.paused, Phase.READY)
                if not self.match.bow_call.enabled:
                    raise IllegalMove("signal the bow", "ready",
                                      "the bow call is disabled (match.bow_call.enabled)")
                if self._bowed:
                    raise IllegalMove("signal the bow", "ready",
                                      "the players have bowed already: start the match")
                self._terminal = None
                self._stop_at = 1  # the call alone: its silence leads to the memorisation call
                self._facts.append({"fact": "bow", "frame": t})
                self._begin(0, t)
                return True
            case Start():
                require(event, self.phase, self.paused, Phase.READY)
                self._terminal = None
                self._begin(self._first_call if self._bowed else 0, t)
                return True
            case Hold(referee=referee, name=name):
                if self._terminal in (Phase.ABORTED, Phase.CLOSED):
                    raise IllegalMove("raise a hold", self._terminal.value, "the match is over")
                return self._hold(t, referee, name)
            case Release(referee=referee):
                return self._release(t, referee)
            case ClearHolds():
                return self._release_all(t)
            case ExtraCard():
                require(event, self.phase, self.paused, Phase.FINISHED)
                return self._extra_card(t)
            case ReadAgain():
                require(event, self.phase, self.paused, Phase.READING, Phase.TIEBREAK,
                        Phase.FINISHED)
                return self._read_again(t)
            case Skip():
                require(event, self.phase, self.paused, Phase.MEMORISING, Phase.PRELUDE,
                        Phase.READING, Phase.TIEBREAK)
                return self._skip(t)
            case Close():
                require(event, self.phase, self.paused, Phase.FINISHED)
                return self._close(t)
            case Abort(reason=reason):
                if self._terminal is Phase.ABORTED:
                    return False
                if self.phase in (Phase.FINISHED, Phase.CLOSING, Phase.CLOSED):
                    raise IllegalMove("abort", phase_words(self.phase, self.paused),
                                      "the match is already over")
                if self._terminal is None:
                    self._audio.append(StopAudio(t))
                    self._scheduled.clear()
                self._terminal = Phase.ABORTED
                self._stop_at = None
                self._cut = None
                self._resume_at = None
                self._holds.clear()
                self._reason = reason
                self._facts.append({"fact": "aborted", "frame": t, "reason": reason})
                return True
            case _:
                assert_never(event)

    def _tick(self, t: int) -> bool:
        changed = False
        if (
            self._terminal is None
            and self._cut is not None
            and self._resume_at is not None
            and t >= self._resume_at
        ):
            self._resume(self._resume_at)
            self._advance(t)
            changed = True
        if self._terminal is None and self._cut is None:
            s = self._segs[self._cur]
            if s.kind is SegmentKind.MEMORISE:
                left = self._anchor + self._frames(self._cur) - t
                mark = -(-left // self.rate)
                if mark != self._countdown_mark:
                    self._countdown_mark = mark
                    changed = True
        return changed

    def _extra_card(self, t: int) -> bool:
        n = len(self._cards_in_programme())
        if n >= len(self.deck.order):
            raise IllegalMove(
                "read an extra card",
                "the match is finished",
                f"all {len(self.deck.order)} poems of the deck have been read",
            )
        start = self._extend(extra_card(self.match, len(self._segs), n + 1, self.deck.order[n]))
        self._extra += 1
        self._terminal = None
        self._facts.append({"fact": "extra_card", "card": n + 1, "frame": t})
        self._begin(start, t)
        return True

    def _read_again(self, t: int) -> bool:
        """The again call and the last card, from now (after the scheduling lead): between
        cards (a hand up or not) or once finished."""
        if self._terminal is Phase.FINISHED:
            n = max(self._cards, default=0)
            at = len(self._segs)
        else:
            s = self._segs[self._cur]
            if s.in_card or not s.card or s.kind is not SegmentKind.GAP:
                raise IllegalMove(MOVE_WORDS[ReadAgain], phase_words(self.phase, self.paused),
                                  "only between cards, once a card's lower verse has been read")
            n, at = s.card, self._cur + 1
        if n not in self._cards:
            raise IllegalMove(MOVE_WORDS[ReadAgain], phase_words(self.phase, self.paused),
                              "no card has been read yet")
        poem = self._cards[n].poem
        # read in the phase the card was (a tied final's card again is still the tiebreak)
        phase = next(s.phase for s in self._segs if s.card == n and s.verse is not None)
        segs = read_again(self.match, at, n, poem, phase)
        self._go_to(t)
        if at == len(self._segs):
            self._extend(segs)
        else:
            self._insert(at, segs)
        self._facts.append({"fact": "read_again", "card": n, "poem": poem, "frame": t})
        self._begin(at, t)
        return True

    def _skip(self, t: int) -> bool:
        """On at once to the next card's upper verse (the end, after the last card)."""
        s = self._segs[self._cur]
        if s.kind is SegmentKind.MEMORISE:
            to = self._cur + 1
        else:
            to = next((j for j in range(self._cur + 1, len(self._segs))
                       if self._segs[j].kind is SegmentKind.VERSE
                       and self._segs[j].card_start == j), len(self._segs))
        card = self._cards.get(s.card) if s.card and s.in_card else None
        self._go_to(t)
        fact: dict[str, object] = {"fact": "skip", "label": s.label, "frame": t}
        if card is not None:
            fact.update(card=card.n, poem=card.poem)
            if card.finished is None:
                self._cards[card.n] = replace(card, finished=t)
        self._facts.append(fact)
        if to >= len(self._segs):
            self._enter(to, t)  # past the last card: finished (a hand up stays up)
        else:
            self._begin(to, t)
        return True

    def _go_to(self, t: int) -> None:
        """Leave the reading where it is, for another place (read again, skip): what sounds or
        is scheduled is stopped; a hand up stays up, a lead-in running is dropped."""
        if self._terminal is None and (self._cut is None or self._scheduled):
            self._audio.append(StopAudio(t))  # (in a lead-in, the resumed clip is sent)
        self._scheduled.clear()
        self._cut = None
        self._resume_at = None
        self._terminal = None

    def _close(self, t: int) -> bool:
        segs = closing(self.match)
        start = self._extend(segs)
        self._closing = True
        self._facts.append({"fact": "close", "frame": t})
        if not segs:  # every closing call disabled: closed at once
            self._closed(t)
            return True
        self._terminal = None
        self._begin(start, t)
        return True

    # ------------------------------------------------------------------ output
    def _commit(self, event: Event, t: int) -> None:
        self._seq += 1
        self._records += 1
        # the snapshot first: it may learn a clip's length (a match started with a hand up has
        # not asked for it yet), and that fact belongs to this record, not to the next one
        snap = self.snapshot()
        entry = {
            "type": "event",
            "seq": self._seq,
            "t": t / self.rate,
            "frame": t,
            "event": event_to_dict(event),
            "phase": self.phase.value,
            "paused": self.paused,
            "facts": self._facts,
        }
        self._facts = []
        self._out += [Record(entry), *self._audio, Publish(snap)]
        self._audio = []

