"""The desk's storage against real SQLite files: the Alembic schema is the models' schema, every
change read back equals the tournament in memory, a stale change is refused, the pragmas that
make a commit durable are on."""

from __future__ import annotations

import sqlite3

import pytest
from alembic.autogenerate import compare_metadata
from alembic.migration import MigrationContext
from alembic.script import ScriptDirectory
from sqlalchemy import text

from desk import tournament as ops
from desk.entries import Entry
from desk.errors import Conflict
from desk.model import Method, Settings, Tournament
from desk.repository import MIGRATIONS, Base, StorageError, migrate, open_repository

from .test_desk_rules import play


@pytest.fixture
def repo(tmp_path):
    r = open_repository(f"sqlite:///{tmp_path / 'var' / 'desk.sqlite3'}")
    yield r
    r.close()


def test_the_migrations_build_exactly_the_models_schema(repo):
    with repo.engine.connect() as conn:
        diff = compare_metadata(MigrationContext.configure(conn), Base.metadata)
        assert diff == []
        from alembic.config import Config

        cfg = Config()
        cfg.set_main_option("script_location", str(MIGRATIONS))
        head = ScriptDirectory.from_config(cfg).get_current_head()
        assert conn.execute(text("select version_num from alembic_version")).scalar() == head


def test_sqlite_commits_are_durable(repo):
    with repo.engine.connect() as conn:
        assert conn.execute(text("pragma journal_mode")).scalar() == "wal"
        assert conn.execute(text("pragma synchronous")).scalar() == 2  # FULL
        assert conn.execute(text("pragma foreign_keys")).scalar() == 1


def test_every_change_read_back_equals_the_tournament_in_memory(repo):
    t = Tournament("t1", "大会", "2025-11-03", Settings(rounds=2, cards=17), "2025",
                   lottery_seed=11, pairing_seed=12)
    repo.create(t)

    def step(change):
        nonlocal t
        repo.apply(t.id, t.version, change)
        t = ops.apply(t, change)
        assert repo.load(t.id) == t, type(change).__name__

    step(ops.add_players(t, [Entry(f"選手{i}", f"せんしゅ{i}", f"c{i % 3}", "5")
                             for i in range(1, 12)]))
    step(ops.edit_player(t, 3, Entry("訂正", "ていせい", "c0", "6")))
    step(ops.edit_player(t, 4, Entry("選手4", "せんしゅ4", "c1", "5", "B")))  # given a block
    assert t.player(4).block_fixed
    step(ops.change_settings(t, name="広島大会", cards=15, finalists=1))
    step(ops.draw_blocks(t, 2, Method.CLUBS, 4, ["a", "b"]))
    step(ops.change_block(t, "B", colours=["pink", "green"], first_mat=11))
    step(ops.withdraw(t, 5))
    step(ops.pair_next(t, "A", "2025-11-03T09:00:00"))
    step(ops.unpair(t, "A", 1))
    step(ops.pair_next(t, "A", "2025-11-03T09:01:00"))
    step(ops.start_reading(t, "A", 1, "a", "2025-11-03T09:02:00"))
    step(ops.confirm_reading(t, "A", 1, 4242, "20251103T090200.000000-seed4242.jsonl"))
    step(ops.extra_card(t, "A", 1))
    step(ops.assign_referee(t, "r9", "審判9", "b", [11]))
    step(ops.assign_referee(t, "r1", "審判", "a", [1, 2]))
    m = t.rounds_of("A")[0].matches[0]
    step(ops.record_result(t, 1, m.mat, dict.fromkeys(m.players, 3), None, "referee r1", "x"))
    step(ops.confirm_by_players(t, 1, m.mat, dict.fromkeys(m.players, 3), None, "players",
                                "x2", referee="r1"))
    step(ops.record_result(t, 1, m.mat, {m.players[0]: 4, m.players[1]: 3}, None, "operator",
                           "y"))
    for other in t.rounds_of("A")[0].matches[1:]:
        step(ops.record_result(t, 1, other.mat, dict.fromkeys(other.players, 5), None,
                               "operator", "z"))
    step(ops.confirm_round(t, "A", 1, "operator", "2025-11-03T10:00:00"))
    assert t.rounds_of("A")[0].confirmed is not None
    step(ops.assign_referee(t, "r1", "審判", "a", []))
    step(ops.pair_next(t, "B", "now"))
    step(ops.add_players(t, [Entry("遅刻")], late=True))
    assert len(t.history) == 3 + 2 * len(t.rounds_of("A")[0].matches) - 1
    assert t.history[1].before == t.history[0].after and t.history[-1].confirmed
    assert t.history[1].after.players_at == "x2" and t.history[2].after.players_at == ""
    assert [s.id for s in repo.summaries()] == ["t1"]

    # a change computed from an old version is refused and writes nothing
    old = t.version - 1
    with pytest.raises(Conflict, match="changed meanwhile"):
        repo.apply(t.id, old, ops.withdraw(t, 1))
    assert repo.load(t.id) == t


def test_a_whole_tournament_is_stored_at_once_and_deleted_with_its_rows(repo, tmp_path):
    from .test_desk_rules import two_block_tournament

    t = two_block_tournament(7)
    t = play(t, lambda ps: [6, 5, 4][:len(ps)])
    repo.create(t)
    assert repo.load(t.id) == t
    with pytest.raises(Conflict, match="already a tournament"):
        repo.create(t)
    assert repo.delete(t.id)
    assert repo.load(t.id) is None
    db = sqlite3.connect(tmp_path / "var" / "desk.sqlite3")
    for table in ("players", "blocks", "rounds", "matches", "result_changes", "referee_mats"):
        assert db.execute(f"select count(*) from {table}").fetchone() == (0,), table


def test_a_bad_database_url_names_the_key(tmp_path):
    with pytest.raises(StorageError, match=r"desk\.database_url is not a database URL"):
        open_repository("not a url")
    for url in ("nosuchdb://user:secret@host/x",
                "postgresql+nosuchdriver://user:secret@127.0.0.1:1/x"):
        with pytest.raises(StorageError, match=r"desk.database_url \S+://user:\*\*\*@") as e:
            open_repository(url)
        assert "secret" not in e.value.detail
        assert "install the database's driver" in e.value.hint


def test_a_database_of_the_first_schema_is_brought_up_to_date(tmp_path):
    """A day's database from before the desk confirmed results: its rounds are not
    confirmed, its history rows are result changes."""
    url = f"sqlite:///{tmp_path / 'old.sqlite3'}"
    old = open_repository(url, run_migrations=False)
    migrate(old.engine, "0001")
    with old.engine.begin() as conn:
        conn.execute(text("insert into tournaments values ('t1', 'x', '', 6, 17, '', null, "
                          "null, 1, 2, 1)"))
        conn.execute(text("insert into result_changes (tournament, number, mat, before, after,"
                          " by, at) values ('t1', 1, 1, null, "
                          "'{\"cards\": [9, 8], \"tiebreak\": null}', 'operator', 'now')"))
    old.close()
    repo = open_repository(url)
    t = repo.load("t1")
    assert t is not None and len(t.history) == 1 and not t.history[0].confirmed
    repo.close()


def test_a_database_of_the_second_schema_gets_finals_of_two_and_keeps_given_blocks(tmp_path):
    """Before regional rules: every tournament has a final of the top two; a block in the
    entries of a tournament not yet drawn was given (a draw keeps it), one after a draw was
    drawn (a new draw draws it anew); no result was confirmed by its players."""
    url = f"sqlite:///{tmp_path / 'old.sqlite3'}"
    old = open_repository(url, run_migrations=False)
    migrate(old.engine, "0002")
    with old.engine.begin() as conn:
        conn.execute(text("insert into tournaments values ('t1', 'x', '', 6, 17, '', null, "
                          "null, 1, 2, 1)"))
        conn.execute(text("insert into tournaments values ('t2', 'y', '', 6, 17, '', 5, "
                          "'clubs', 1, 2, 1)"))
        for tid in ("t1", "t2"):
            conn.execute(text(f"insert into players values ('{tid}', 1, 'a', '', '', '', 'A', "
                              "1, null)"))
    old.close()
    repo = open_repository(url)
    t1, t2 = repo.load("t1"), repo.load("t2")
    assert t1 is not None and t2 is not None
    assert t1.settings.finalists == 2 and t2.settings.finalists == 2
    assert t1.players[0].block_fixed and not t2.players[0].block_fixed
    repo.close()
