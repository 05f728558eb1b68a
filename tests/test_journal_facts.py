"""The journal's facts as types (reader.facts): every kind the engine writes is read back as its
dataclass and written again key for key, in order (old journals read the same); an unknown kind
or a missing field is a JournalError that says so."""

import json
from typing import get_args

import pytest

from reader.errors import JournalError
from reader.events import (
    Abort,
    Bow,
    ClearHolds,
    Close,
    ExtraCard,
    Hold,
    ReadAgain,
    Release,
    Skip,
    Start,
)
from reader.facts import (
    Cut,
    Fact,
    HandRaised,
    LeadInCut,
    SegmentBegun,
    fact_from_record,
    facts_of,
)
from reader.programme import SegmentKind

from .fakes import RATE, make_run, short_match


def sec(s: float) -> int:
    return round(s * RATE)


def every_kind_of_record() -> list[dict]:
    run = make_run(short_match(bow_call={"enabled": True}))
    run.send(Bow())
    run.run_until()
    run.at(run.frame() + sec(1), Start())
    run.at(run.frame() + sec(4), Hold("a", "mat 1"))
    run.at(run.frame() + sec(1), Hold("b", "mat 2"))
    run.at(run.frame() + sec(1), Release("a"))
    run.at(run.frame() + sec(1), ClearHolds())
    run.at(run.frame() + sec(0.2), Hold("a"))  # in the lead-in: it is cut
    run.at(run.frame() + sec(1), Release("a"))
    run.run_until()
    run.send(ExtraCard())
    run.at(run.frame() + sec(0.5), Skip())  # the extra call, skipped
    run.at(run.frame() + sec(0.5), Skip())  # and its card, half read
    run.send(ReadAgain())
    run.run_until()
    run.send(Close())
    run.run_until()
    aborted = make_run(short_match())
    aborted.send(Start())
    aborted.at(sec(1), Abort("the hall is on fire"))
    return [*run.records, *aborted.records]


def test_every_fact_the_engine_writes_reads_back_and_writes_the_same_bytes():
    records = every_kind_of_record()
    kinds = set()
    for r in records:
        for d in r["facts"]:
            fact = fact_from_record(d)
            kinds.add(type(fact))
            assert json.dumps(fact.to_record()) == json.dumps(d)
    assert kinds == set(get_args(Fact)), "a kind of fact is never written by this script"


def test_a_cut_in_a_verse_keeps_its_verse():
    """The engine writes the verse a hold cut (reader/schedule.py); the typed fact lost it."""
    # resumed where cut, so that the holds walk on into the verses
    run = make_run(short_match(resume={"lead_in_s": 0.6, "policy": "continue"}))
    run.send(Start())
    for _ in range(200):
        run.run_until(run.frame() + sec(0.9))  # past the last resume's lead-in (0.6 s)
        run.send(Hold("v", "mat 9"))
        cuts = [d for r in run.records for d in r["facts"] if d["fact"] == "cut" and "verse" in d]
        if cuts:
            fact = fact_from_record(cuts[0])
            assert isinstance(fact, Cut) and fact.verse is not None
            assert fact.verse.value == cuts[0]["verse"]
            assert json.dumps(fact.to_record()) == json.dumps(cuts[0])
            return
        run.send(Release("v"))
    raise AssertionError("no hold fell in a verse")


def test_a_kind_this_version_does_not_know_is_passed_over_when_reading_a_record():
    record = {"facts": [{"fact": "applause", "frame": 3}, {"fact": "lead_in_cut", "frame": 5}]}
    assert list(facts_of(record)) == [LeadInCut(5)]
    with pytest.raises(JournalError, match="'hold' fact in the journal is malformed"):
        list(facts_of({"facts": [{"fact": "hold", "frame": 0}]}))


def test_facts_are_typed():
    records = every_kind_of_record()
    facts = [f for r in records for f in facts_of(r)]
    holds = [f for f in facts if isinstance(f, HandRaised)]
    assert holds[0] == HandRaised("a", "mat 1", holds[0].frame, 1)
    assert any(isinstance(f, SegmentBegun) and f.kind is SegmentKind.VERSE for f in facts)


def test_an_unknown_kind_or_a_missing_field_is_a_journal_error():
    with pytest.raises(JournalError, match="unknown kind of fact 'applause'"):
        fact_from_record({"fact": "applause", "frame": 0})
    with pytest.raises(JournalError, match="unknown kind of fact None"):
        fact_from_record({"frame": 0})
    with pytest.raises(JournalError, match="'hold' fact in the journal is malformed"):
        fact_from_record({"fact": "hold", "frame": 0})
