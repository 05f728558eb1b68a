"""The desk's schema as SQLAlchemy tables (Alembic's migrations in desk/migrations create
them), and the conversions of the model's values to rows."""

from __future__ import annotations

from typing import Any

from sqlalchemy import (
    JSON,
    BigInteger,
    Boolean,
    ForeignKeyConstraint,
    Integer,
    String,
    false,
)
from sqlalchemy.orm import DeclarativeBase, Mapped, mapped_column

from ..model import (
    Block,
    Confirmed,
    Player,
    Reading,
    Result,
    ResultChange,
    Round,
)


class Base(DeclarativeBase):
    pass


class TournamentRow(Base):
    __tablename__ = "tournaments"
    id: Mapped[str] = mapped_column(String(40), primary_key=True)
    name: Mapped[str] = mapped_column(String(100))
    day: Mapped[str] = mapped_column(String(40), default="")
    rounds: Mapped[int] = mapped_column(Integer)
    cards: Mapped[int] = mapped_column(Integer)
    finalists: Mapped[int] = mapped_column(Integer, default=2, server_default="2")
    created_at: Mapped[str] = mapped_column(String(40))
    draw_seed: Mapped[int | None] = mapped_column(BigInteger)
    draw_method: Mapped[str | None] = mapped_column(String(16))
    lottery_seed: Mapped[int] = mapped_column(BigInteger)
    pairing_seed: Mapped[int] = mapped_column(BigInteger)
    version: Mapped[int] = mapped_column(Integer)
    publish_details: Mapped[bool] = mapped_column(Boolean, default=False,
                                                  server_default=false())
    public_link: Mapped[str | None] = mapped_column(String(64))  # null: none


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
    block_fixed: Mapped[bool] = mapped_column(Boolean, default=False, server_default=false())


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
    players_at: Mapped[str | None] = mapped_column(String(40))  # the players confirmed it


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


def result_from_dict(d: dict[str, Any]) -> Result:
    return Result(tuple(int(c) for c in d["cards"]), d.get("tiebreak"), str(d.get("by", "")),
                  str(d.get("at", "")), str(d.get("players_at") or ""))


def player_row(tid: str, p: Player) -> PlayerRow:
    return PlayerRow(tournament=tid, no=p.no, name=p.name, furigana=p.furigana, club=p.club,
                     grade=p.grade, block=p.block, joined_round=p.joined_round,
                     withdrawn_round=p.withdrawn_round, block_fixed=p.block_fixed)


def block_row(tid: str, i: int, b: Block) -> BlockRow:
    return BlockRow(tournament=tid, name=b.name, position=i, channel=b.channel,
                    colours=list(b.colours), first_mat=b.first_mat)


def set_reading(row: RoundRow, reading: Reading | None) -> None:
    row.reading_channel = reading.channel if reading else None
    row.reading_status = reading.status.value if reading else None
    row.reading_requested_at = reading.requested_at if reading else None
    row.reading_seed = reading.seed if reading else None
    row.reading_journal = reading.journal if reading else None
    row.reading_extra_cards = reading.extra_cards if reading else 0


def set_confirmed(row: RoundRow, c: Confirmed | None) -> None:
    row.confirmed_by = c.by if c else None
    row.confirmed_at = c.at if c else None


def round_rows(tid: str, r: Round) -> list[Base]:
    row = RoundRow(tournament=tid, block=r.block, number=r.number, final=r.final,
                   colour=r.colour, paired_at=r.paired_at, notes=list(r.notes))
    set_reading(row, r.reading)
    set_confirmed(row, r.confirmed)
    out: list[Base] = [row]
    for m in r.matches:
        res = m.result
        out.append(MatchRow(tournament=tid, block=r.block, number=r.number, mat=m.mat,
                            players=list(m.players), cards=list(res.cards) if res else None,
                            tiebreak=res.tiebreak if res else None,
                            result_by=res.by if res else None, result_at=res.at if res else None,
                            players_at=(res.players_at or None) if res else None))
    return out


def change_row(tid: str, c: ResultChange) -> ResultChangeRow:
    return ResultChangeRow(tournament=tid, number=c.round, mat=c.mat,
                           before=c.before.as_dict() if c.before else None,
                           after=c.after.as_dict(), by=c.by, at=c.at,
                           confirmed=c.confirmed)
