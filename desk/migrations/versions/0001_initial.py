"""The desk's first schema: tournaments, players, blocks, rounds, matches with their results,
every change of a result, and the referees' mats.

Revision ID: 0001
Revises: (none)
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = '0001'
down_revision = None
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_table('tournaments',
    sa.Column('id', sa.String(length=40), nullable=False),
    sa.Column('name', sa.String(length=100), nullable=False),
    sa.Column('day', sa.String(length=40), nullable=False),
    sa.Column('rounds', sa.Integer(), nullable=False),
    sa.Column('cards', sa.Integer(), nullable=False),
    sa.Column('created_at', sa.String(length=40), nullable=False),
    sa.Column('draw_seed', sa.BigInteger(), nullable=True),
    sa.Column('draw_method', sa.String(length=16), nullable=True),
    sa.Column('lottery_seed', sa.BigInteger(), nullable=False),
    sa.Column('pairing_seed', sa.BigInteger(), nullable=False),
    sa.Column('version', sa.Integer(), nullable=False),
    sa.PrimaryKeyConstraint('id')
    )
    op.create_table('blocks',
    sa.Column('tournament', sa.String(length=40), nullable=False),
    sa.Column('name', sa.String(length=4), nullable=False),
    sa.Column('position', sa.Integer(), nullable=False),
    sa.Column('channel', sa.String(length=32), nullable=True),
    sa.Column('colours', sa.JSON(), nullable=False),
    sa.Column('first_mat', sa.Integer(), nullable=False),
    sa.ForeignKeyConstraint(['tournament'], ['tournaments.id'], ondelete='CASCADE'),
    sa.PrimaryKeyConstraint('tournament', 'name')
    )
    op.create_table('players',
    sa.Column('tournament', sa.String(length=40), nullable=False),
    sa.Column('no', sa.Integer(), nullable=False),
    sa.Column('name', sa.String(length=40), nullable=False),
    sa.Column('furigana', sa.String(length=60), nullable=False),
    sa.Column('club', sa.String(length=60), nullable=False),
    sa.Column('grade', sa.String(length=20), nullable=False),
    sa.Column('block', sa.String(length=4), nullable=True),
    sa.Column('joined_round', sa.Integer(), nullable=False),
    sa.Column('withdrawn_round', sa.Integer(), nullable=True),
    sa.ForeignKeyConstraint(['tournament'], ['tournaments.id'], ondelete='CASCADE'),
    sa.PrimaryKeyConstraint('tournament', 'no')
    )
    op.create_table('referee_mats',
    sa.Column('tournament', sa.String(length=40), nullable=False),
    sa.Column('referee', sa.String(length=40), nullable=False),
    sa.Column('name', sa.String(length=40), nullable=False),
    sa.Column('channel', sa.String(length=32), nullable=False),
    sa.Column('mats', sa.JSON(), nullable=False),
    sa.ForeignKeyConstraint(['tournament'], ['tournaments.id'], ondelete='CASCADE'),
    sa.PrimaryKeyConstraint('tournament', 'referee')
    )
    op.create_table('result_changes',
    sa.Column('id', sa.Integer(), autoincrement=True, nullable=False),
    sa.Column('tournament', sa.String(length=40), nullable=False),
    sa.Column('number', sa.Integer(), nullable=False),
    sa.Column('mat', sa.Integer(), nullable=False),
    sa.Column('before', sa.JSON(), nullable=True),
    sa.Column('after', sa.JSON(), nullable=False),
    sa.Column('by', sa.String(length=120), nullable=False),
    sa.Column('at', sa.String(length=40), nullable=False),
    sa.ForeignKeyConstraint(['tournament'], ['tournaments.id'], ondelete='CASCADE'),
    sa.PrimaryKeyConstraint('id')
    )
    with op.batch_alter_table('result_changes', schema=None) as batch_op:
        batch_op.create_index(batch_op.f('ix_result_changes_tournament'), ['tournament'],
                              unique=False)
    op.create_table('rounds',
    sa.Column('tournament', sa.String(length=40), nullable=False),
    sa.Column('block', sa.String(length=4), nullable=False),
    sa.Column('number', sa.Integer(), nullable=False),
    sa.Column('final', sa.Boolean(), nullable=False),
    sa.Column('colour', sa.String(length=16), nullable=False),
    sa.Column('paired_at', sa.String(length=40), nullable=False),
    sa.Column('notes', sa.JSON(), nullable=False),
    sa.Column('reading_channel', sa.String(length=32), nullable=True),
    sa.Column('reading_status', sa.String(length=16), nullable=True),
    sa.Column('reading_requested_at', sa.String(length=40), nullable=True),
    sa.Column('reading_seed', sa.BigInteger(), nullable=True),
    sa.Column('reading_journal', sa.String(length=200), nullable=True),
    sa.Column('reading_extra_cards', sa.Integer(), nullable=False),
    sa.ForeignKeyConstraint(['tournament'], ['tournaments.id'], ondelete='CASCADE'),
    sa.PrimaryKeyConstraint('tournament', 'block', 'number')
    )
    op.create_table('matches',
    sa.Column('tournament', sa.String(length=40), nullable=False),
    sa.Column('block', sa.String(length=4), nullable=False),
    sa.Column('number', sa.Integer(), nullable=False),
    sa.Column('mat', sa.Integer(), nullable=False),
    sa.Column('players', sa.JSON(), nullable=False),
    sa.Column('cards', sa.JSON(), nullable=True),
    sa.Column('tiebreak', sa.Integer(), nullable=True),
    sa.Column('result_by', sa.String(length=120), nullable=True),
    sa.Column('result_at', sa.String(length=40), nullable=True),
    sa.ForeignKeyConstraint(['tournament', 'block', 'number'],
                            ['rounds.tournament', 'rounds.block', 'rounds.number'],
                            ondelete='CASCADE'),
    sa.PrimaryKeyConstraint('tournament', 'block', 'number', 'mat')
    )


def downgrade() -> None:
    op.drop_table('matches')
    op.drop_table('rounds')
    with op.batch_alter_table('result_changes', schema=None) as batch_op:
        batch_op.drop_index(batch_op.f('ix_result_changes_tournament'))
    op.drop_table('result_changes')
    op.drop_table('referee_mats')
    op.drop_table('players')
    op.drop_table('blocks')
    op.drop_table('tournaments')
