"""The repository: a tournament loaded from its rows, created, deleted, and each Change (or
several computed together) written in one transaction that checks the tournament's version.

A database that fails is a StorageError whose code says what the caller knows: on SQLite
`storage_unavailable` (the disk); on a server, `storage_unreachable` when the transaction did
not reach its commit (nothing was written) and `storage_unsure` when its commit failed (it may
have been written: the same change computed again from the tournament finds its version moved
and is not written twice)."""

from __future__ import annotations

import logging
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from typing import assert_never

from sqlalchemy import (
    Engine,
    delete,
    select,
    update,
)
from sqlalchemy.exc import (
    DBAPIError,
    IntegrityError,
    InterfaceError,
    OperationalError,
    SQLAlchemyError,
)
from sqlalchemy.orm import Session

from ..errors import Conflict, Stale, StorageError
from ..model import (
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
from ..tournament import (
    BlockChanged,
    BlocksDrawn,
    Change,
    PlayerChanged,
    PlayersAdded,
    PublicLinkChanged,
    ReadingChanged,
    RefereeChanged,
    ResultRecorded,
    RoundConfirmed,
    RoundPaired,
    RoundRemoved,
    SettingsChanged,
)
from .tables import (
    BlockRow,
    MatchRow,
    PlayerRow,
    RefereeRow,
    ResultChangeRow,
    RoundRow,
    TournamentRow,
    block_row,
    change_row,
    player_row,
    result_from_dict,
    round_rows,
    set_confirmed,
    set_reading,
)
from .watch import Watch

log = logging.getLogger("yomite.desk")


@dataclass(frozen=True, slots=True)
class Summary:
    id: str
    name: str
    day: str
    version: int
    players: int


class Repository:
    """The desk's tables. Used from one thread at a time (the desk's database thread), whose
    call under way is `watch.attempt`."""

    def __init__(self, engine: Engine, watch: Watch | None = None) -> None:
        self.engine = engine
        self.watch = watch or Watch()

    @contextmanager
    def _session(self, snapshot: bool = False, writes: bool = True) -> Iterator[Session]:
        """One transaction. `snapshot`: every SELECT in it sees the database as at its first
        (PostgreSQL's REPEATABLE READ; SQLite's transactions are snapshots already), so a
        tournament read while another process commits is one version, never a mix. Its
        commit is the call's point of no return (watch.Attempt)."""
        with self.watch.waiting(), Session(self.engine) as s:
            try:
                s.begin()
                if snapshot and self.engine.dialect.name == "postgresql":
                    s.connection(execution_options={"isolation_level": "REPEATABLE READ"})
                yield s
                s.flush()
            except SQLAlchemyError as e:
                raise self._failed(e, committing=False) from e
            self.watch.before_commit(writes)  # (Abandoned: the session's end rolls it back)
            try:
                s.commit()
            except SQLAlchemyError as e:
                raise self._failed(e, committing=writes) from e

    def _failed(self, e: SQLAlchemyError, committing: bool) -> StorageError:
        log.error("desk database: %s", e)
        what = f"{type(e).__name__}: {str(e).splitlines()[0][:200]}"
        if self.engine.dialect.name == "sqlite":
            return StorageError(f"the desk's database failed: {what}",
                                "check the database (desk.database_url) and try again")
        if committing:
            return StorageError(f"the desk's database failed during the commit ({what}): the "
                                "change may or may not have been recorded",
                                "reload the desk to see whether it was; a result sent again "
                                "is recorded once", code="storage_unsure")
        lost = isinstance(e, OperationalError | InterfaceError) or (
            isinstance(e, DBAPIError) and e.connection_invalidated)
        return StorageError(f"the desk's database failed ({what}): nothing was recorded",
                            "send it again in a few seconds; if this goes on, check the "
                            "database server and the network (desk.database_url)",
                            code="storage_unreachable" if lost else None)

    def close(self) -> None:
        self.engine.dispose()

    # ------------------------------------------------------------ reading
    def summaries(self) -> list[Summary]:
        with self._session(snapshot=True, writes=False) as s:
            rows = s.scalars(select(TournamentRow).order_by(TournamentRow.created_at)).all()
            out = []
            for r in rows:
                n = len(s.scalars(select(PlayerRow.no).where(PlayerRow.tournament == r.id)).all())
                out.append(Summary(r.id, r.name, r.day, r.version, n))
            return out

    def load(self, tid: str) -> Tournament | None:
        with self._session(snapshot=True, writes=False) as s:
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
                    res = Result(tuple(m.cards), m.tiebreak, m.result_by or "", m.result_at or "",
                                 m.players_at or "")
                by_round.setdefault((m.block, m.number), []).append(
                    Match(m.mat, tuple(m.players), res))
            return Tournament(
                id=t.id, name=t.name, day=t.day,
                settings=Settings(rounds=t.rounds, cards=t.cards, finalists=t.finalists,
                                  publish_details=bool(t.publish_details)),
                created_at=t.created_at, draw_seed=t.draw_seed,
                draw_method=Method(t.draw_method) if t.draw_method else None,
                lottery_seed=t.lottery_seed, pairing_seed=t.pairing_seed,
                players=tuple(Player(p.no, p.name, p.furigana, p.club, p.grade, p.block,
                                     p.joined_round, p.withdrawn_round, p.block_fixed)
                               for p in players),
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
                version=t.version, public_link=t.public_link,
            )

    # ------------------------------------------------------------ writing
    def create(self, t: Tournament, replace: bool = False) -> None:
        """Store a whole tournament (a new one, or an imported one; `replace`: in place of the
        one of its id, if any) in one transaction."""
        with self._session() as s:
            if replace:
                self._delete(s, t.id)
            elif s.get(TournamentRow, t.id) is not None:
                raise Conflict(f"there is already a tournament {t.id!r}",
                               "choose another id, or replace it",
                               code="tournament_exists")
            s.add(TournamentRow(id=t.id, name=t.name, day=t.day, rounds=t.settings.rounds,
                                cards=t.settings.cards, finalists=t.settings.finalists,
                                created_at=t.created_at,
                                draw_seed=t.draw_seed,
                                draw_method=t.draw_method.value if t.draw_method else None,
                                lottery_seed=t.lottery_seed, pairing_seed=t.pairing_seed,
                                version=t.version,
                                publish_details=t.settings.publish_details,
                                public_link=t.public_link))
            try:
                s.flush()
            except IntegrityError as e:  # made by another process since the look above
                raise Conflict(f"there is already a tournament {t.id!r}",
                               "choose another id, or replace it",
                               code="tournament_exists") from e
            s.add_all([player_row(t.id, p) for p in t.players])
            s.add_all([block_row(t.id, i, b) for i, b in enumerate(t.blocks)])
            s.flush()
            for r in t.rounds:
                rows = round_rows(t.id, r)
                s.add(rows[0])
                s.flush()
                s.add_all(rows[1:])
            s.add_all([RefereeRow(tournament=t.id, referee=x.referee, name=x.name,
                                  channel=x.channel, mats=list(x.mats)) for x in t.referees])
            s.add_all([change_row(t.id, c) for c in t.history])

    def delete(self, tid: str) -> bool:
        with self._session() as s:
            return self._delete(s, tid)

    @staticmethod
    def _delete(s: Session, tid: str) -> bool:
        # children first: not every database enforces ON DELETE CASCADE by default
        for table in (MatchRow, RoundRow, PlayerRow, BlockRow, RefereeRow, ResultChangeRow):
            s.execute(delete(table).where(table.tournament == tid))
        return bool(s.execute(delete(TournamentRow).where(TournamentRow.id == tid))
                    .rowcount)  # type: ignore[attr-defined]

    def apply(self, tid: str, version: int, change: Change) -> None:
        """Write `change`, computed from the tournament at `version`, in one transaction."""
        self.apply_all(tid, version, (change,))

    def apply_all(self, tid: str, version: int, changes: Sequence[Change]) -> None:
        """Write `changes`, computed together from the tournament at `version` (each from the
        tournament after the one before), in one transaction: all or none. The version goes
        up by one a change, as `desk.tournament.apply` counts it."""
        with self._session() as s:
            done = s.execute(update(TournamentRow)
                             .where(TournamentRow.id == tid, TournamentRow.version == version)
                             .values(version=version + len(changes)))
            if done.rowcount != 1:  # type: ignore[attr-defined]
                raise Stale("the tournament was changed meanwhile",
                               "reload the desk and do it again")
            for change in changes:
                self._write(s, tid, change)
                s.flush()  # (a change's rows before the next one's: a round before its mats)

    def _write(self, s: Session, tid: str, change: Change) -> None:
        match change:
            case PlayersAdded(players=ps):
                s.add_all([player_row(tid, p) for p in ps])
            case PlayerChanged(player=p):
                s.merge(player_row(tid, p))
            case BlocksDrawn(blocks=bs, assignment=a, seed=seed, method=method):
                s.execute(delete(BlockRow).where(BlockRow.tournament == tid))
                s.add_all([block_row(tid, i, b) for i, b in enumerate(bs)])
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
                rows = round_rows(tid, r)
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
                set_reading(rr, reading)
            case ResultRecorded(block=block, number=n, mat=mat, result=res, change=ch):
                m = s.get(MatchRow, (tid, block, n, mat))
                assert m is not None
                m.cards, m.tiebreak = list(res.cards), res.tiebreak
                m.result_by, m.result_at = res.by, res.at
                m.players_at = res.players_at or None
                s.add(change_row(tid, ch))
            case RoundConfirmed(block=block, number=n, confirmed=c, changes=chs):
                rc = s.get(RoundRow, (tid, block, n))
                assert rc is not None
                set_confirmed(rc, c)
                s.add_all([change_row(tid, x) for x in chs])
            case RefereeChanged(referee=ref):
                s.execute(delete(RefereeRow).where(RefereeRow.tournament == tid,
                                                   RefereeRow.referee == ref.referee))
                if ref.mats:
                    s.add(RefereeRow(tournament=tid, referee=ref.referee, name=ref.name,
                                     channel=ref.channel, mats=list(ref.mats)))
            case SettingsChanged(settings=st, name=name, day=day):
                s.execute(update(TournamentRow).where(TournamentRow.id == tid)
                          .values(rounds=st.rounds, cards=st.cards, finalists=st.finalists,
                                  publish_details=st.publish_details, name=name, day=day))
            case PublicLinkChanged(link=link):
                s.execute(update(TournamentRow).where(TournamentRow.id == tid)
                          .values(public_link=link))
            case _:
                assert_never(change)
