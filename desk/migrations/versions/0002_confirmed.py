"""The desk confirms (確定) a round's results: who and when on the round, and the confirmation's
rows in the history of result changes.

Revision ID: 0002
Revises: 0001
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = '0002'
down_revision = '0001'
branch_labels = None
depends_on = None


def upgrade() -> None:
    with op.batch_alter_table('rounds', schema=None) as batch_op:
        batch_op.add_column(sa.Column('confirmed_by', sa.String(length=120), nullable=True))
        batch_op.add_column(sa.Column('confirmed_at', sa.String(length=40), nullable=True))
    with op.batch_alter_table('result_changes', schema=None) as batch_op:
        batch_op.add_column(sa.Column('confirmed', sa.Boolean(), nullable=False,
                                      server_default=sa.false()))


def downgrade() -> None:
    with op.batch_alter_table('result_changes', schema=None) as batch_op:
        batch_op.drop_column('confirmed')
    with op.batch_alter_table('rounds', schema=None) as batch_op:
        batch_op.drop_column('confirmed_at')
        batch_op.drop_column('confirmed_by')
