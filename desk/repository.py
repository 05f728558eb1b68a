"""The desk's storage: SQLAlchemy 2 over SQLite by default (a file under var/, nothing to
install), or any database SQLAlchemy reaches by URL (PostgreSQL for an association with its
own server). The schema is Alembic's (desk/migrations), brought up to date when the database
is opened.

Every Change is one transaction: the tournament's version is raised only if it is still the
version the change was computed from (another process cannot slip a change in between), and
the change's rows are written with it. SQLite runs in WAL mode with synchronous=FULL: a commit
that returned is on disk, so `kill -9` (or a power cut) loses nothing that was answered.
"""

from __future__ import annotations

import logging
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any, assert_never

from sqlalchemy import (
    JSON,
    BigInteger,
    Boolean,
    Engine,
    ForeignKeyConstraint,
    Integer,
    String,
    create_engine,
    delete,
    event,
    false,
    select,
    update,
)
from sqlalchemy.engine import make_url
from sqlalchemy.exc import ArgumentError, SQLAlchemyError
from sqlalchemy.orm import DeclarativeBase, Mapped, Session, mapped_column

from .errors import Conflict, DeskError
from .model import (
    Block,
    Confirmed,
    Match,
    Method,
    Player,
    Reading,
    ReadingStatus,
    RefereeMats,
    Result,
    ResultChange,
    Round,
    Settings,
    Tournament,
)
from .tournament import (
    BlockChanged,
    BlocksDrawn,
    Change,
    PlayerChanged,
    PlayersAdded,
    ReadingChanged,
    RefereeChanged,
    ResultRecorded,
    RoundConfirmed,
    RoundPaired,
    RoundRemoved,
    SettingsChanged,
)

log = logging.getLogger("yomite.desk")

MIGRATIONS = Path(__file__).resolve().parent / "migrations"


class StorageError(DeskError):
    status = 503
    code = "storage_unavailable"


class Base(DeclarativeBase):
    pass


class TournamentRow(Base):
    __tablename__ = "tournaments"
    id: Mapped[str] = mapped_column(String(40), primary_key=True)
    name: Mapped[str] = mapped_column(String(100))
    day: Mapped[str] = mapped_column(String(40), default="")
    rounds: Mapped[int] = mapped_column(Integer)
    cards: Mapped[int] = mapped_column(Integer)
    created_at: Mapped[str] = mapped_column(String(40))
    draw_seed: Mapped[int | None] = mapped_column(BigInteger)
    draw_method: Mapped[str | None] = mapped_column(String(16))
    lottery_seed: Mapped[int] = mapped_column(BigInteger)
    pairing_seed: Mapped[int] = mapped_column(BigInteger)
    version: Mapped[int] = mapped_column(Integer)


class PlayerRow(Base):
    __tablename__ = "players"
    __table_args__ = (ForeignKeyConstraint(["tournament"], ["tournaments.id"],
                                           ondelete="CASCADE"),)
    tournament: Mapped[str] = mapped_column(String(40), primary_key=True)
    no: Mapped[int] = mapped_column(Integer, primary_key=True)
    name: Mapped[str] = mapped_column(String(40))
    furigana: Mapped[str] = mapped_column(String(60))
    club: Mapped[str] = mapped_column(String(60))
    grade: Mapped[str] = mapped_column(String(20))
    block: Mapped[str | None] = mapped_column(String(4))
    joined_round: Mapped[int] = mapped_column(Integer)
    withdrawn_round: Mapped[int | None] = mapped_column(Integer)


class BlockRow(Base):
    __tablename__ = "blocks"
    __table_args__ = (ForeignKeyConstraint(["tournament"], ["tournaments.id"],
                                           ondelete="CASCADE"),)
    tournament: Mapped[str] = mapped_column(String(40), primary_key=True)
    name: Mapped[str] = mapped_column(String(4), primary_key=True)
    position: Mapped[int] = mapped_column(Integer)
    channel: Mapped[str | None] = mapped_column(String(32))
    colours: Mapped[list[str]] = mapped_column(JSON)
    first_mat: Mapped[int] = mapped_column(Integer)


class RoundRow(Base):
    __tablename__ = "rounds"
    __table_args__ = (ForeignKeyConstraint(["tournament"], ["tournaments.id"],
                                           ondelete="CASCADE"),)
    tournament: Mapped[str] = mapped_column(String(40), primary_key=True)
    block: Mapped[str] = mapped_column(String(4), primary_key=True)
    number: Mapped[int] = mapped_column(Integer, primary_key=True)
    final: Mapped[bool] = mapped_column(Boolean)
    colour: Mapped[str] = mapped_column(String(16))
    paired_at: Mapped[str] = mapped_column(String(40))
    notes: Mapped[list[str]] = mapped_column(JSON)
    reading_channel: Mapped[str | None] = mapped_column(String(32))
    reading_status: Mapped[str | None] = mapped_column(String(16))
    reading_requested_at: Mapped[str | None] = mapped_column(String(40))
    reading_seed: Mapped[int | None] = mapped_column(BigInteger)
    reading_journal: Mapped[str | None] = mapped_column(String(200))
    reading_extra_cards: Mapped[int] = mapped_column(Integer, default=0)
    confirmed_by: Mapped[str | None] = mapped_column(String(120))  # null: not confirmed
    confirmed_at: Mapped[str | None] = mapped_column(String(40))


class MatchRow(Base):
    __tablename__ = "matches"
    __table_args__ = (ForeignKeyConstraint(["tournament", "block", "number"],
                                           ["rounds.tournament", "rounds.block", "rounds.number"],
                                           ondelete="CASCADE"),)
    tournament: Mapped[str] = mapped_column(String(40), primary_key=True)
    block: Mapped[str] = mapped_column(String(4), primary_key=True)
    number: Mapped[int] = mapped_column(Integer, primary_key=True)
    mat: Mapped[int] = mapped_column(Integer, primary_key=True)
    players: Mapped[list[int]] = mapped_column(JSON)
    cards: Mapped[list[int] | None] = mapped_column(JSON)  # null: no result yet
    tiebreak: Mapped[int | None] = mapped_column(Integer)
    result_by: Mapped[str | None] = mapped_column(String(120))
    result_at: Mapped[str | None] = mapped_column(String(40))


class ResultChangeRow(Base):
    __tablename__ = "result_changes"
    __table_args__ = (ForeignKeyConstraint(["tournament"], ["tournaments.id"],
                                           ondelete="CASCADE"),)
    id: Mapped[int] = mapped_column(Integer, primary_key=True, autoincrement=True)
    tournament: Mapped[str] = mapped_column(String(40), index=True)
    number: Mapped[int] = mapped_column(Integer)
    mat: Mapped[int] = mapped_column(Integer)
    before: Mapped[dict[str, Any] | None] = mapped_column(JSON)
    after: Mapped[dict[str, Any]] = mapped_column(JSON)
    by: Mapped[str] = mapped_column(String(120))
    at: Mapped[str] = mapped_column(String(40))
    confirmed: Mapped[bool] = mapped_column(Boolean, default=False, server_default=false())


class RefereeRow(Base):
    __tablename__ = "referee_mats"
    __table_args__ = (ForeignKeyConstraint(["tournament"], ["tournaments.id"],
                                           ondelete="CASCADE"),)
    tournament: Mapped[str] = mapped_column(String(40), primary_key=True)
    referee: Mapped[str] = mapped_column(String(40), primary_key=True)
    name: Mapped[str] = mapped_column(String(40))
    channel: Mapped[str] = mapped_column(String(32))
    mats: Mapped[list[int]] = mapped_column(JSON)


# ---------------------------------------------------------------------- conversions
def result_to_dict(r: Result) -> dict[str, Any]:
    return {"cards": list(r.cards), "tiebreak": r.tiebreak, "by": r.by, "at": r.at}


def result_from_dict(d: dict[str, Any]) -> Result:
    return Result(tuple(int(c) for c in d["cards"]), d.get("tiebreak"), str(d.get("by", "")),
                  str(d.get("at", "")))


def _player_row(tid: str, p: Player) -> PlayerRow:
    return PlayerRow(tournament=tid, no=p.no, name=p.name, furigana=p.furigana, club=p.club,
                     grade=p.grade, block=p.block, joined_round=p.joined_round,
                     withdrawn_round=p.withdrawn_round)


def _block_row(tid: str, i: int, b: Block) -> BlockRow:
    return BlockRow(tournament=tid, name=b.name, position=i, channel=b.channel,
                    colours=list(b.colours), first_mat=b.first_mat)


def _set_reading(row: RoundRow, reading: Reading | None) -> None:
    row.reading_channel = reading.channel if reading else None
    row.reading_status = reading.status.value if reading else None
    row.reading_requested_at = reading.requested_at if reading else None
    row.reading_seed = reading.seed if reading else None
    row.reading_journal = reading.journal if reading else None
    row.reading_extra_cards = reading.extra_cards if reading else 0


def _set_confirmed(row: RoundRow, c: Confirmed | None) -> None:
    row.confirmed_by = c.by if c else None
    row.confirmed_at = c.at if c else None


def _round_rows(tid: str, r: Round) -> list[Base]:
    row = RoundRow(tournament=tid, block=r.block, number=r.number, final=r.final,
                   colour=r.colour, paired_at=r.paired_at, notes=list(r.notes))
    _set_reading(row, r.reading)
    _set_confirmed(row, r.confirmed)
    out: list[Base] = [row]
    for m in r.matches:
        res = m.result
        out.append(MatchRow(tournament=tid, block=r.block, number=r.number, mat=m.mat,
                            players=list(m.players), cards=list(res.cards) if res else None,
                            tiebreak=res.tiebreak if res else None,
                            result_by=res.by if res else None, result_at=res.at if res else None))
    return out


def _change_row(tid: str, c: ResultChange) -> ResultChangeRow:
    return ResultChangeRow(tournament=tid, number=c.round, mat=c.mat,
                           before=result_to_dict(c.before) if c.before else None,
                           after=result_to_dict(c.after), by=c.by, at=c.at,
                           confirmed=c.confirmed)


# ---------------------------------------------------------------------- the repository
@dataclass(frozen=True, slots=True)
class Summary:
    id: str
    name: str
    day: str
    version: int
    players: int


class Repository:
    def __init__(self, engine: Engine) -> None:
        self.engine = engine

    @contextmanager
    def _session(self) -> Iterator[Session]:
        try:
            with Session(self.engine) as s, s.begin():
                yield s
        except SQLAlchemyError as e:
            log.error("desk database: %s", e)
            raise StorageError(f"the desk's database failed: {type(e).__name__}: "
                               f"{str(e).splitlines()[0][:200]}",
                               "check the database (desk.database_url) and try again") from e

    def close(self) -> None:
        self.engine.dispose()

    # ------------------------------------------------------------ reading
    def summaries(self) -> list[Summary]:
        with self._session() as s:
            rows = s.scalars(select(TournamentRow).order_by(TournamentRow.created_at)).all()
            out = []
            for r in rows:
                n = len(s.scalars(select(PlayerRow.no).where(PlayerRow.tournament == r.id)).all())
                out.append(Summary(r.id, r.name, r.day, r.version, n))
            return out

    def load(self, tid: str) -> Tournament | None:
        with self._session() as s:
            t = s.get(TournamentRow, tid)
            if t is None:
                return None
            players = s.scalars(select(PlayerRow).where(PlayerRow.tournament == tid)
                                .order_by(PlayerRow.no)).all()
            blocks = s.scalars(select(BlockRow).where(BlockRow.tournament == tid)
                               .order_by(BlockRow.position)).all()
            rounds = s.scalars(select(RoundRow).where(RoundRow.tournament == tid)
                               .order_by(RoundRow.number, RoundRow.block)).all()
            matches = s.scalars(select(MatchRow).where(MatchRow.tournament == tid)
                                .order_by(MatchRow.mat)).all()
            refs = s.scalars(select(RefereeRow).where(RefereeRow.tournament == tid)
                             .order_by(RefereeRow.referee)).all()
            changes = s.scalars(select(ResultChangeRow).where(ResultChangeRow.tournament == tid)
                                .order_by(ResultChangeRow.id)).all()
            by_round: dict[tuple[str, int], list[Match]] = {}
            for m in matches:
                res = None
                if m.cards is not None:
                    res = Result(tuple(m.cards), m.tiebreak, m.result_by or "", m.result_at or "")
                by_round.setdefault((m.block, m.number), []).append(
                    Match(m.mat, tuple(m.players), res))
            return Tournament(
                id=t.id, name=t.name, day=t.day,
                settings=Settings(rounds=t.rounds, cards=t.cards),
                created_at=t.created_at, draw_seed=t.draw_seed,
                draw_method=Method(t.draw_method) if t.draw_method else None,
                lottery_seed=t.lottery_seed, pairing_seed=t.pairing_seed,
                players=tuple(Player(p.no, p.name, p.furigana, p.club, p.grade, p.block,
                                     p.joined_round, p.withdrawn_round) for p in players),
                blocks=tuple(Block(b.name, b.channel, tuple(b.colours), b.first_mat)
                             for b in blocks),
                rounds=tuple(Round(
                    r.block, r.number, r.final, r.colour,
                    tuple(by_round.get((r.block, r.number), [])), r.paired_at,
                    Reading(r.reading_channel, ReadingStatus(r.reading_status),
                            r.reading_requested_at or "", r.reading_seed, r.reading_journal,
                            r.reading_extra_cards)
                    if r.reading_channel is not None and r.reading_status is not None else None,
                    tuple(r.notes),
                    Confirmed(r.confirmed_by, r.confirmed_at or "")
                    if r.confirmed_by is not None else None) for r in rounds),
                referees=tuple(RefereeMats(x.referee, x.name, x.channel, tuple(x.mats))
                               for x in refs),
                history=tuple(ResultChange(c.number, c.mat,
                                           result_from_dict(c.before) if c.before else None,
                                           result_from_dict(c.after), c.by, c.at,
                                           bool(c.confirmed))
                              for c in changes),
                version=t.version,
            )

    # ------------------------------------------------------------ writing
    def create(self, t: Tournament) -> None:
        """Store a whole tournament (a new one, or an imported one) in one transaction."""
        with self._session() as s:
            if s.get(TournamentRow, t.id) is not None:
                raise Conflict(f"there is already a tournament {t.id!r}",
                               "choose another id, or replace it")
            s.add(TournamentRow(id=t.id, name=t.name, day=t.day, rounds=t.settings.rounds,
                                cards=t.settings.cards, created_at=t.created_at,
                                draw_seed=t.draw_seed,
                                draw_method=t.draw_method.value if t.draw_method else None,
                                lottery_seed=t.lottery_seed, pairing_seed=t.pairing_seed,
                                version=t.version))
            s.flush()
            s.add_all([_player_row(t.id, p) for p in t.players])
            s.add_all([_block_row(t.id, i, b) for i, b in enumerate(t.blocks)])
            s.flush()
            for r in t.rounds:
                rows = _round_rows(t.id, r)
                s.add(rows[0])
                s.flush()
                s.add_all(rows[1:])
            s.add_all([RefereeRow(tournament=t.id, referee=x.referee, name=x.name,
                                  channel=x.channel, mats=list(x.mats)) for x in t.referees])
            s.add_all([_change_row(t.id, c) for c in t.history])

    def delete(self, tid: str) -> bool:
        with self._session() as s:
            # children first: not every database enforces ON DELETE CASCADE by default
            for table in (MatchRow, RoundRow, PlayerRow, BlockRow, RefereeRow, ResultChangeRow):
                s.execute(delete(table).where(table.tournament == tid))
            return bool(s.execute(delete(TournamentRow).where(TournamentRow.id == tid))
                        .rowcount)  # type: ignore[attr-defined]

    def apply(self, tid: str, version: int, change: Change) -> None:
        """Write `change`, computed from the tournament at `version`, in one transaction."""
        with self._session() as s:
            done = s.execute(update(TournamentRow)
                             .where(TournamentRow.id == tid, TournamentRow.version == version)
                             .values(version=version + 1))
            if done.rowcount != 1:  # type: ignore[attr-defined]
                raise Conflict("the tournament was changed meanwhile",
                               "reload the desk and do it again")
            self._write(s, tid, change)

    def _write(self, s: Session, tid: str, change: Change) -> None:
        match change:
            case PlayersAdded(players=ps):
                s.add_all([_player_row(tid, p) for p in ps])
            case PlayerChanged(player=p):
                s.merge(_player_row(tid, p))
            case BlocksDrawn(blocks=bs, assignment=a, seed=seed, method=method):
                s.execute(delete(BlockRow).where(BlockRow.tournament == tid))
                s.add_all([_block_row(tid, i, b) for i, b in enumerate(bs)])
                for no, block in a:
                    s.execute(update(PlayerRow)
                              .where(PlayerRow.tournament == tid, PlayerRow.no == no)
                              .values(block=block))
                s.execute(update(TournamentRow).where(TournamentRow.id == tid)
                          .values(draw_seed=seed, draw_method=method.value))
            case BlockChanged(block=b):
                row = s.get(BlockRow, (tid, b.name))
                assert row is not None
                row.channel, row.colours, row.first_mat = b.channel, list(b.colours), b.first_mat
            case RoundPaired(round=r):
                rows = _round_rows(tid, r)
                s.add(rows[0])
                s.flush()
                s.add_all(rows[1:])
            case RoundRemoved(block=block, number=n):
                s.execute(delete(MatchRow).where(MatchRow.tournament == tid,
                                                 MatchRow.block == block, MatchRow.number == n))
                s.execute(delete(RoundRow).where(RoundRow.tournament == tid,
                                                 RoundRow.block == block, RoundRow.number == n))
            case ReadingChanged(block=block, number=n, reading=reading):
                rr = s.get(RoundRow, (tid, block, n))
                assert rr is not None
                _set_reading(rr, reading)
            case ResultRecorded(block=block, number=n, mat=mat, result=res, change=ch):
                m = s.get(MatchRow, (tid, block, n, mat))
                assert m is not None
                m.cards, m.tiebreak = list(res.cards), res.tiebreak
                m.result_by, m.result_at = res.by, res.at
                s.add(_change_row(tid, ch))
            case RoundConfirmed(block=block, number=n, confirmed=c, changes=chs):
                rc = s.get(RoundRow, (tid, block, n))
                assert rc is not None
                _set_confirmed(rc, c)
                s.add_all([_change_row(tid, x) for x in chs])
            case RefereeChanged(referee=ref):
                s.execute(delete(RefereeRow).where(RefereeRow.tournament == tid,
                                                   RefereeRow.referee == ref.referee))
                if ref.mats:
                    s.add(RefereeRow(tournament=tid, referee=ref.referee, name=ref.name,
                                     channel=ref.channel, mats=list(ref.mats)))
            case SettingsChanged(settings=st, name=name, day=day):
                s.execute(update(TournamentRow).where(TournamentRow.id == tid)
                          .values(rounds=st.rounds, cards=st.cards, name=name, day=day))
            case _:
                assert_never(change)


# ---------------------------------------------------------------------- opening
def _sqlite_pragmas(dbapi_connection: Any, _record: Any) -> None:
    cur = dbapi_connection.cursor()
    cur.execute("PRAGMA journal_mode=WAL")  # readers never wait for the writer
    cur.execute("PRAGMA synchronous=FULL")  # a commit that returned survives a power cut
    cur.execute("PRAGMA foreign_keys=ON")
    cur.execute("PRAGMA busy_timeout=5000")
    cur.close()


def migrate(engine: Engine, revision: str = "head") -> None:
    """Bring the schema to `revision` with the migrations shipped in this package."""
    # alembic says at INFO what it loads and does, a dozen lines at every start: only its
    # warnings belong in the hall's log
    logging.getLogger("alembic").setLevel(logging.WARNING)
    from alembic import command
    from alembic.config import Config as AlembicConfig

    cfg = AlembicConfig()
    cfg.set_main_option("script_location", str(MIGRATIONS))
    with engine.begin() as conn:
        cfg.attributes["connection"] = conn
        command.upgrade(cfg, revision)


def open_repository(url: str, *, run_migrations: bool = True) -> Repository:
    """Open (and create, for SQLite) the database at `url` and migrate it to the latest
    schema. Raises StorageError naming the URL's problem (never its password)."""
    try:
        u = make_url(url)
    except ArgumentError as e:
        raise StorageError(f"desk.database_url is not a database URL ({e})",
                           "e.g. sqlite:///var/desk.sqlite3 or "
                           "postgresql+psycopg://user@host/yomite") from None
    shown = u.render_as_string(hide_password=True)
    if u.get_backend_name() == "sqlite" and u.database and u.database != ":memory:":
        Path(u.database).parent.mkdir(parents=True, exist_ok=True)
    try:
        engine = create_engine(u, pool_pre_ping=True)
    except (ArgumentError, ImportError) as e:
        raise StorageError(f"desk.database_url {shown}: {e}",
                           "install the database's driver, or use sqlite") from None
    if engine.dialect.name == "sqlite":
        event.listen(engine, "connect", _sqlite_pragmas)
    try:
        if run_migrations:
            migrate(engine)
    except SQLAlchemyError as e:
        engine.dispose()
        raise StorageError(f"cannot open the desk's database {shown}: "
                           f"{str(e).splitlines()[0][:200]}",
                           "check desk.database_url and that the database is reachable") from None
    log.info("desk database: %s", shown)
    return Repository(engine)


def database_text(url: str) -> str:
    """The URL as it may be shown (password hidden)."""
    try:
        return make_url(url).render_as_string(hide_password=True)
    except ArgumentError:
        return "(not a URL)"


__all__ = ["Base", "Repository", "StorageError", "Summary", "database_text", "migrate",
           "open_repository"]
