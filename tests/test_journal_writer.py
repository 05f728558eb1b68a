"""JournalWriter when the disk says no: records wait in order and are written when it can,
the file is always a prefix of the records, and memory stays bounded."""

import json

import pytest

from reader import journal as journal_module
from reader.errors import JournalError
from reader.journal import JournalWriter, read_journal


def header() -> dict:
    return {"type": "header", "version": 2}


def event(seq: int) -> dict:
    return {"type": "event", "seq": seq, "t": 0, "frame": 0, "event": {"type": "tick"},
            "facts": []}


def test_records_wait_in_order_while_the_folder_cannot_be_made(tmp_path):
    blocker = tmp_path / "journal"
    blocker.write_text("a file where the folder should be")
    w = JournalWriter(blocker / "main" / "m.jsonl")
    assert w.fault and "main" in w.fault
    for rec in (header(), event(1), event(2)):
        with pytest.raises(JournalError, match="cannot be written"):
            w.append(rec)
    assert [r.get("seq") for r in w.pending] == [None, 1, 2]
    blocker.unlink()  # the disk is back
    w.append(event(3))
    assert w.fault is None and w.pending == []
    contents = read_journal(blocker / "main" / "m.jsonl")
    assert [r["seq"] for r in contents.records] == [1, 2, 3]
    w.close()


def test_opening_cuts_a_torn_last_line(tmp_path):
    path = tmp_path / "m.jsonl"
    path.write_text(json.dumps(header()) + "\n" + json.dumps(event(1)) + "\n" + '{"type": "ev')
    w = JournalWriter(path)
    w.append(event(2))
    w.close()
    assert [r["seq"] for r in read_journal(path).records] == [1, 2]


def test_memory_is_bounded_and_a_journal_with_a_gap_is_never_written_again(
        tmp_path, monkeypatch):
    monkeypatch.setattr(journal_module, "MAX_PENDING", 5)
    blocker = tmp_path / "journal"
    blocker.write_text("x")
    w = JournalWriter(blocker / "m.jsonl")
    for i in range(8):
        with pytest.raises(JournalError):
            w.append(event(i))
    assert len(w.pending) == 5 and w.lost == 3
    blocker.unlink()
    with pytest.raises(JournalError, match="3 records were lost"):
        w.flush()
    assert not (blocker / "m.jsonl").exists()
