"""Regional rules and the players' confirmation: a tournament's finalists (2: the final between
the top two; 1: no final), the players' confirmation of a result at the mat (when), and
whether a player's block was given (kept by a draw) or drawn (drawn anew).

Revision ID: 0003
Revises: 0002
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = '0003'
down_revision = '0002'
branch_labels = None
depends_on = None


def upgrade() -> None:
    with op.batch_alter_table('tournaments', schema=None) as batch_op:
        batch_op.add_column(sa.Column('finalists', sa.Integer(), nullable=False,
                                      server_default='2'))
    with op.batch_alter_table('matches', schema=None) as batch_op:
        batch_op.add_column(sa.Column('players_at', sa.String(length=40), nullable=True))
    with op.batch_alter_table('players', schema=None) as batch_op:
        batch_op.add_column(sa.Column('block_fixed', sa.Boolean(), nullable=False,
                                      server_default=sa.false()))
    # before a draw, a player's block can only have come from the entries: it was given
    op.execute("update players set block_fixed = true where block is not null and tournament "
               "in (select id from tournaments where draw_seed is null)")


def downgrade() -> None:
    with op.batch_alter_table('players', schema=None) as batch_op:
        batch_op.drop_column('block_fixed')
    with op.batch_alter_table('matches', schema=None) as batch_op:
        batch_op.drop_column('players_at')
    with op.batch_alter_table('tournaments', schema=None) as batch_op:
        batch_op.drop_column('finalists')
