"""episodes remember when whoever pressed Watch is to be reminded of an alert still open (remind_at; the reminder is
claimed by one conditional update, so it is posted once)

Revision ID: 0020
Revises: 0019
Create Date: 2026-12-06 23:00:00
"""

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0020"
down_revision: str | None = "0019"  # approvals (issue 24), which went in after this was written
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    with op.batch_alter_table("episodes", schema=None) as batch_op:
        batch_op.add_column(sa.Column("remind_at", sa.DateTime(timezone=True), nullable=True))


def downgrade() -> None:
    with op.batch_alter_table("episodes", schema=None) as batch_op:
        batch_op.drop_column("remind_at")
