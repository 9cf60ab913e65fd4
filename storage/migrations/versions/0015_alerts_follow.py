"""episodes follow their subject to the end: the escalation's message (edited with the alert), when the alert
was posted (a failure a silence held back is posted when the silence ends, and escalates from then), what
failed (status and message when it failed, kept while later statuses replace `status`) and, once closed,
what it is now

Revision ID: 0015
Revises: 0014
Create Date: 2026-12-05 12:00:00
"""

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0015"
down_revision: str | None = "0014"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    with op.batch_alter_table("episodes", schema=None) as batch_op:
        batch_op.add_column(sa.Column("escalation_ts", sa.String(length=32), nullable=True))
        batch_op.add_column(sa.Column("posted_at", sa.DateTime(timezone=True), nullable=True))
        batch_op.add_column(sa.Column("failed_status", sa.String(length=32), nullable=False, server_default=""))
        batch_op.add_column(sa.Column("failed_message", sa.String(length=1000), nullable=False, server_default=""))
        batch_op.add_column(sa.Column("outcome", sa.String(length=500), nullable=False, server_default=""))
    # What failed, for the failures stored before: their status then is the best there is.
    op.execute(
        "UPDATE episodes SET failed_status = status, failed_message = message WHERE kind IN ('node', 'cluster')"
    )


def downgrade() -> None:
    with op.batch_alter_table("episodes", schema=None) as batch_op:
        batch_op.drop_column("outcome")
        batch_op.drop_column("failed_message")
        batch_op.drop_column("failed_status")
        batch_op.drop_column("posted_at")
        batch_op.drop_column("escalation_ts")
