"""The timing engine: the match programme as an exact, pausable timeline.

Contract:
- `handle(event)` reads the injected clock once, catches up with it (segments whose end has
  passed are left, in order, at their exact planned frames), applies the event and returns the
  commands to carry out, in order: `Record` (journal) first, then audio, then `Publish`.
- Time is planned in output frames. A segment's start frame is the previous segment's end, so
  every gap is exact to the sample however late the runtime wakes up. Clips are sent
  (`PlayClip`) one clip ahead, so a sink that keeps a schedule plays them on time.
- `next_deadline()` is the clock time at which the engine next has something to do; the runtime
  sends `Tick` then (waking late is harmless, waking early is a no-op).
- A hold cuts the programme at the clock's frame (`StopAudio`); when the last hold is lowered a
  lead-in silence runs, then reading resumes by the resume policy. Silent segments (memorisation,
  gaps) always resume their remainder; speech follows the policy.
- An illegal event raises IllegalMove naming the move and the phase. Anything the catch-up had
  already produced is kept and returned by the next call.

The moves each phase allows (the hall calls of rules 1, 16 and 18 are the operator's steps):

  ready      Bow (the bow call alone, back to ready), Start, Abort
  finished   ExtraCard (its call, then one more card; back to finished), Close (the end and
             move calls, then closed)
  running    Abort (bowing, announcing, memorising, prelude, reading, tiebreak)
  any phase  Hold (not aborted or closed), Release, ClearHolds, Tick
"""

from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any, assert_never

from .clip import Clip, ClipDurations, Verse
from .clock import Clock
from .commands import Command, PlayClip, Publish, Record, StopAudio
from .config import MatchConfig, ResumePolicy
from .deck import Deck
from .errors import BadDeck, IllegalMove
from .events import (
    Abort,
    Bow,
    ClearHolds,
    Close,
    Event,
    ExtraCard,
    Hold,
    Release,
    Start,
    Tick,
    event_name,
    event_to_dict,
)
from .programme import Phase, Segment, SegmentKind, build_programme, closing, extra_card
from .snapshot import CardView, CutView, HoldView, SegmentView, Snapshot

# 2: the bow call and Bow, the extra card's call, Close with the end and move calls (the end
# call is no longer read by itself after the last card)
JOURNAL_VERSION = 2

_MOVE_WORDS = {
    Bow: "signal the bow",
    Start: "start",
    Close: "close the match",
    ExtraCard: "read an extra card",
    Abort: "abort",
    Hold: "raise a hold",
}


@dataclass(frozen=True, slots=True)
class Cut:
    segment: int
    offset: int  # frames into the segment
    frame: int  # output frame of the cut


@dataclass(slots=True)
class _Hold:
    referee: str
    name: str
    since: int


@dataclass(slots=True)
class _Card:
    n: int
    poem: int
    started: int
    finished: int | None = None


class Engine:
    def __init__(
        self,
        *,
        match: MatchConfig,
        deck: Deck,
        voice: ClipDurations,
        clock: Clock,
        rate: int,
        cards: int | None = None,
        schedule_lead: int = 0,
    ) -> None:
        """`schedule_lead`: frames between an event and the first clip it starts (start, an
        extra card, the end of a lead-in), so that the sink has the clip before its frame."""
        self.match = match
        self.schedule_lead = schedule_lead
        self.deck = deck
        self.rate = rate
        self._voice = voice
        self._clock = clock
        self.cards_planned = match.cards if cards is None else cards
        if not 1 <= self.cards_planned <= len(deck.order):
            raise BadDeck(
                f"cards is {self.cards_planned} but the deck holds {len(deck.order)} poems; "
                f"choose 1..{len(deck.order)} cards or a larger deck"
            )
        self._segs: list[Segment] = build_programme(match, deck.order, self.cards_planned)
        self._silence = [round(s.silence_s * rate) for s in self._segs]
        self._lead_in = round(match.resume.lead_in_s * rate)
        self._clip_frames: dict[str, int] = {}
        self._terminal: Phase | None = Phase.READY
        # the memorisation call's segment: where Start begins once the players have bowed
        self._first_call = 2 if match.bow_call.enabled else 0
        self._bowed = False
        self._stop_at: int | None = None  # Bow reads up to (not including) this segment
        self._closing = False  # Close was asked: the end of the programme is CLOSED
        self._cur = 0
        self._anchor = 0
        self._cut: Cut | None = None
        self._resume_at: int | None = None
        self._holds: dict[str, _Hold] = {}
        self._scheduled: set[int] = set()
        self._cards: dict[int, _Card] = {}
        self._extra = 0
        self._reason = ""
        self._t = self._frame_now()
        self._t0 = self._t
        self._countdown_mark: int | None = None
        self._seq = 0
        self._records = 0
        # committed output not yet returned (kept across an IllegalMove), and the audio
        # commands and journal facts of the record being built
        self._out: list[Command] = []
        self._audio: list[Command] = []
        self._facts: list[dict[str, Any]] = []

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

    def use_voice(self, voice: ClipDurations) -> None:
        """Go on with another voice (a replayed engine has only the journal's clip lengths)."""
        self._voice = voice

    def use_clock(self, clock: Clock) -> None:
        """Go on with another clock (a recovered match continues on the new process's). The
        clock must not read earlier than the engine's last event (see OffsetClock)."""
        self._clock = clock

    @property
    def now_s(self) -> float:
        """The time of the last event applied."""
        return self._t / self.rate

    @property
    def phase(self) -> Phase:
        if self._terminal is not None:
            return self._terminal
        return self._segs[self._cur].phase

    @property
    def paused(self) -> bool:
        return self._cut is not None

    @property
    def segments(self) -> tuple[Segment, ...]:
        return tuple(self._segs)

    def programme_clips(self) -> Iterator[Clip]:
        """Every clip of the programme in reading order (for rendering ahead)."""
        seen: set[str] = set()
        for s in self._segs:
            if s.clip is not None and s.clip.key not in seen:
                seen.add(s.clip.key)
                yield s.clip

    def upcoming_clips(self) -> list[Clip]:
        """Clips not yet reached, in order, plus the next extra card's (so it renders early)."""
        out = [s.clip for s in self._segs[self._cur :] if s.clip is not None]
        nxt = len(self._cards_in_programme())
        if nxt < len(self.deck.order):
            out += [
                s.clip
                for s in extra_card(self.match, 0, nxt + 1, self.deck.order[nxt])
                if s.clip is not None
            ]
        if not self._closing:
            out += self.closing_clips()
        return out

    def closing_clips(self) -> list[Clip]:
        """The clips Close would read (rule 18's calls)."""
        return [s.clip for s in closing(self.match) if s.clip is not None]

    def next_deadline(self) -> float | None:
        """Clock time (seconds) of the engine's next scheduled change, or None."""
        if self._terminal is not None:
            return None
        if self._cut is not None:
            return None if self._resume_at is None else self._resume_at / self.rate
        end = self._anchor + self._frames(self._cur)
        deadline = end
        if self._segs[self._cur].kind is SegmentKind.MEMORISE:
            k = -(-(end - self._t) // self.rate) - 1  # whole seconds left after the next mark
            if k >= 1:
                deadline = min(deadline, end - k * self.rate)
        return deadline / self.rate

    def handle(self, event: Event) -> list[Command]:
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
            frames = self._frames(self._cur)
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
            phase=self.phase.value,
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
            "extra_call": m.extra_call.text if m.extra_call.enabled else None,
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
                self._require(event, Phase.READY)
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
                self._require(event, Phase.READY)
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
                self._require(event, Phase.FINISHED)
                return self._extra_card(t)
            case Close():
                self._require(event, Phase.FINISHED)
                return self._close(t)
            case Abort(reason=reason):
                if self._terminal is Phase.ABORTED:
                    return False
                if self.phase in (Phase.FINISHED, Phase.CLOSING, Phase.CLOSED):
                    raise IllegalMove("abort", self._phase_words(), "the match is already over")
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

    def _require(self, event: Event, *phases: Phase) -> None:
        if self.phase not in phases:
            word = _MOVE_WORDS.get(type(event), event_name(event))
            allowed = " or ".join(p.value for p in phases)
            raise IllegalMove(word, self._phase_words(), f"only possible when {allowed}")

    def _phase_words(self) -> str:
        p = self.phase
        if p is Phase.READY:
            return "ready"
        if p in (Phase.FINISHED, Phase.ABORTED, Phase.CLOSED):
            return f"the match is {p.value}"
        return f"the match is {p.value}" + (" (paused)" if self.paused else "")

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

    def _hold(self, t: int, referee: str, name: str) -> bool:
        if referee in self._holds:
            return False
        self._holds[referee] = _Hold(referee, name, t)
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

    def _resume_point(self) -> tuple[int, int]:
        """The segment and offset reading resumes from, by the resume policy."""
        assert self._cut is not None
        idx, off = self._cut.segment, self._cut.offset
        s = self._segs[idx]
        policy = self.match.resume.policy
        if policy is ResumePolicy.RESTART_CARD and s.in_card and s.card_start is not None:
            return s.card_start, 0
        if s.clip is not None and policy is not ResumePolicy.CONTINUE:
            return idx, 0
        return idx, off

    def _extra_card(self, t: int) -> bool:
        n = len(self._cards_in_programme())
        if n >= len(self.deck.order):
            raise IllegalMove(
                "read an extra card",
                "the match is finished",
                f"all {len(self.deck.order)} poems of the deck have been read",
            )
        start = len(self._segs)
        segs = extra_card(self.match, start, n + 1, self.deck.order[n])
        self._segs += segs
        self._silence += [round(s.silence_s * self.rate) for s in segs]
        self._extra += 1
        self._terminal = None
        self._facts.append({"fact": "extra_card", "card": n + 1, "frame": t})
        self._begin(start, t)
        return True

    def _close(self, t: int) -> bool:
        segs = closing(self.match)
        start = len(self._segs)
        self._segs += segs
        self._silence += [round(s.silence_s * self.rate) for s in segs]
        self._closing = True
        self._facts.append({"fact": "close", "frame": t})
        if not segs:  # every closing call disabled: closed at once
            self._closed(t)
            return True
        self._terminal = None
        self._begin(start, t)
        return True

    def _closed(self, frame: int) -> None:
        self._cur = len(self._segs) - 1
        self._terminal = Phase.CLOSED
        self._cut = None
        self._resume_at = None
        self._holds.clear()
        self._facts.append({"fact": "closed", "frame": frame})

    # ------------------------------------------------------------------ the timeline
    def _frame_now(self) -> int:
        return round(self._clock.now() * self.rate)

    def _frames(self, i: int) -> int:
        clip = self._segs[i].clip
        if clip is None:
            return self._silence[i]
        f = self._clip_frames.get(clip.key)
        if f is None:
            f = max(1, int(self._voice.frames(clip)))
            self._clip_frames[clip.key] = f
            self._facts.append({"fact": "clip", "key": clip.key, "frames": f})
        return f

    def _cards_in_programme(self) -> list[int]:
        return sorted({s.card for s in self._segs if s.card})

    def _begin(self, i: int, t: int) -> None:
        """Start the programme at segment i (after the scheduling lead); if a hand is already
        up, start cut."""
        t += self.schedule_lead
        if self._holds:
            self._cur, self._anchor = i, t
            self._note_segment(i, t)
            self._cut = Cut(i, 0, t)
            self._facts.append(self._cut_fact(self._cut))
        else:
            self._enter(i, t)

    def _advance(self, t: int) -> None:
        if self._terminal is not None or self._cut is not None:
            return
        while self._terminal is None:
            end = self._anchor + self._frames(self._cur)
            if t < end:
                break
            self._leave(self._cur, end)
            self._enter(self._cur + 1, end)

    def _leave(self, i: int, frame: int) -> None:
        s = self._segs[i]
        if s.verse is Verse.SHIMO and s.card and s.reading == self.match.lower_verse_times:
            card = self._cards.get(s.card)
            if card is not None and card.finished is None:
                card.finished = frame
                self._facts.append({"fact": "card_read", "card": s.card, "poem": s.poem,
                                    "frame": frame})

    def _enter(self, i: int, frame: int) -> None:
        self._cur, self._anchor = i, frame
        if self._stop_at is not None and i >= self._stop_at:  # the bow call alone is over
            self._cur = i - 1
            self._stop_at = None
            self._terminal = Phase.READY
            self._bowed = True
            self._facts.append({"fact": "bowed", "frame": frame})
            return
        if i >= len(self._segs):
            if self._closing:
                self._closed(frame)
                return
            self._cur = len(self._segs) - 1
            self._terminal = Phase.FINISHED
            self._facts.append({"fact": "finished", "frame": frame})
            return
        self._note_segment(i, frame)
        clip = self._segs[i].clip
        if clip is not None and i not in self._scheduled:
            self._play(i, clip, frame, 0)
        self._schedule_ahead()

    def _note_segment(self, i: int, frame: int, offset: int = 0) -> None:
        s = self._segs[i]
        fact: dict[str, Any] = {"fact": "segment", "index": i, "label": s.label,
                                "kind": s.kind.value, "frame": frame}
        if offset:
            fact["offset"] = offset
        if s.card is not None:
            fact.update(card=s.card, poem=s.poem)
        if s.verse is not None:
            fact.update(verse=s.verse.value, reading=s.reading)
        if s.clip is not None:
            fact["clip"] = s.clip.key
        self._facts.append(fact)
        if s.verse is Verse.KAMI and s.card and s.card not in self._cards and s.poem:
            self._cards[s.card] = _Card(s.card, s.poem, frame)

    def _play(self, i: int, clip: Clip, at: int, offset: int) -> None:
        self._audio.append(PlayClip(clip, at, offset, i))
        self._scheduled.add(i)

    def _schedule_ahead(self) -> None:
        """Send the next clip after the current segment, at its exact planned frame."""
        start = self._anchor
        end = len(self._segs) if self._stop_at is None else self._stop_at
        for j in range(self._cur, end):
            clip = self._segs[j].clip
            if j > self._cur and clip is not None:
                if j not in self._scheduled:
                    self._play(j, clip, start, 0)
                return
            start += self._frames(j)

    def _cut_at(self, t: int) -> None:
        # a segment may not have begun yet (the scheduling lead): it is cut at its start
        self._cut = Cut(self._cur, max(0, t - self._anchor), t)
        self._audio.append(StopAudio(t))
        self._scheduled.clear()
        self._facts.append(self._cut_fact(self._cut))

    def _cut_fact(self, cut: Cut) -> dict[str, Any]:
        s = self._segs[cut.segment]
        fact: dict[str, Any] = {"fact": "cut", "segment": cut.segment, "label": s.label,
                                "offset": cut.offset, "offset_s": cut.offset / self.rate,
                                "frame": cut.frame}
        if s.card is not None:
            fact.update(card=s.card, poem=s.poem)
        if s.verse is not None:
            fact.update(verse=s.verse.value)
        return fact

    def _resume(self, r: int) -> None:
        idx, off = self._resume_point()
        policy = self.match.resume.policy
        self._cut = None
        self._resume_at = None
        self._cur, self._anchor = idx, r - off
        self._note_segment(idx, r, off)
        self._facts.append({"fact": "resume", "segment": idx, "offset": off, "frame": r,
                            "policy": policy.value})
        clip = self._segs[idx].clip
        if clip is not None and idx not in self._scheduled:
            self._play(idx, clip, r, off)
        self._schedule_ahead()

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

