"""Privacy on a shared server: whether a tournament publishes its players' clubs (schools) and
grades to anyone but the desk (off: a tournament made before kept them to the desk's view; the
public one showed clubs and hid grades, and its printed name cards showed both), and the key of
its public link (none: only the desk sees it, until the organiser makes one).

Revision ID: 0004
Revises: 0003
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = '0004'
down_revision = '0003'
branch_labels = None
depends_on = None


def upgrade() -> None:
    # ALTER TABLE ... ADD COLUMN, never the batch mode's copy of the table: on SQLite the copy
    # drops the old table, and with foreign keys on, that deletes every player, round and
    # result of every tournament (a default that is an expression, such as sa.false(), makes
    # the batch mode copy it; the string '0' is false on SQLite and on PostgreSQL alike)
    op.add_column('tournaments', sa.Column('publish_details', sa.Boolean(), nullable=False,
                                           server_default='0'))
    op.add_column('tournaments', sa.Column('public_link', sa.String(length=64), nullable=True))


def downgrade() -> None:
    # (ALTER TABLE ... DROP COLUMN: SQLite 3.35 and later; no copy of the table, as above)
    op.drop_column('tournaments', 'public_link')
    op.drop_column('tournaments', 'publish_details')
