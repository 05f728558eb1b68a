"""The reading schedule: the match programme laid out in output frames, cut by a hold and resumed.

A segment's start frame is the previous segment's end, so every gap is exact to the sample
however late the runtime wakes up. Clips are sent (`PlayClip`) one clip ahead, so a sink that
keeps a schedule plays them on time. `Schedule` holds every field of the engine's state (the
Engine adds the moves on top of it), so one level of copying is a complete snapshot of it.
"""

from collections.abc import Iterator
from dataclasses import dataclass, replace
from typing import Any

from .clip import Clip, ClipDurations, Verse
from .clock import Clock
from .commands import Command, PlayClip, StopAudio
from .config import MatchConfig, ResumePolicy
from .deck import Deck
from .errors import BadDeck, TooManyCards
from .programme import Phase, Segment, SegmentKind, build_programme, closing, extra_card


@dataclass(frozen=True, slots=True)
class Cut:
    segment: int
    offset: int  # frames into the segment
    frame: int  # output frame of the cut


@dataclass(frozen=True, slots=True)
class RaisedHold:
    referee: str
    name: str
    since: int


@dataclass(frozen=True, slots=True)
class CardRead:
    n: int
    poem: int
    started: int
    finished: int | None = None


class Schedule:
    """The engine's state and its timeline; `Holds` adds the referees' hands, `Engine` the moves
    and the output."""

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
        if self.cards_planned > len(deck.order):
            raise TooManyCards(self.cards_planned, len(deck.order))
        if self.cards_planned < 1:
            raise BadDeck(f"cards is {self.cards_planned}; choose 1..{len(deck.order)} cards")
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
        self._holds: dict[str, RaisedHold] = {}
        self._scheduled: set[int] = set()
        self._cards: dict[int, CardRead] = {}
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
                self._cards[s.card] = replace(card, finished=frame)
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
            self._cards[s.card] = CardRead(s.card, s.poem, frame)

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

    def _closed(self, frame: int) -> None:
        self._cur = len(self._segs) - 1
        self._terminal = Phase.CLOSED
        self._cut = None
        self._resume_at = None
        self._holds.clear()
        self._facts.append({"fact": "closed", "frame": frame})

    def _insert(self, at: int, segs: list[Segment]) -> None:
        """Put segments into the programme before segment `at` (built for that place): the
        segments after them move on by their number (their cards' starts too). Only ahead of
        the current segment, with nothing scheduled after it (the caller stopped the audio)."""
        assert at > self._cur and not any(j >= at for j in self._scheduled)
        k = len(segs)
        later = [s if s.card_start is None or s.card_start < at
                 else replace(s, card_start=s.card_start + k) for s in self._segs[at:]]
        self._segs[at:] = segs + later
        self._silence[at:at] = [round(s.silence_s * self.rate) for s in segs]

    def _extend(self, segs: list[Segment]) -> int:
        """Append segments to the programme; the index of the first."""
        start = len(self._segs)
        self._segs += segs
        self._silence += [round(s.silence_s * self.rate) for s in segs]
        return start
