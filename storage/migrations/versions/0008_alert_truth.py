"""episodes keep their group's membership and target (successors), and a link to the message they follow;
silences can be ended early (Unsilence) and keep their own message

Revision ID: 0008
Revises: 0007
Create Date: 2026-12-01 21:20:00
"""

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0008"
down_revision: str | None = "0007"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    with op.batch_alter_table("episodes", schema=None) as batch_op:
        batch_op.add_column(sa.Column("group_nodes", sa.JSON(), nullable=True))
        batch_op.add_column(sa.Column("group_target", sa.Integer(), nullable=True))
        batch_op.add_column(sa.Column("follows", sa.String(length=500), nullable=True))
    with op.batch_alter_table("silences", schema=None) as batch_op:
        batch_op.add_column(sa.Column("message_ts", sa.String(length=32), nullable=True))
        batch_op.add_column(sa.Column("ended_at", sa.DateTime(timezone=True), nullable=True))
        batch_op.add_column(sa.Column("ended_by", sa.String(length=24), nullable=True))


def downgrade() -> None:
    with op.batch_alter_table("silences", schema=None) as batch_op:
        batch_op.drop_column("ended_by")
        batch_op.drop_column("ended_at")
        batch_op.drop_column("message_ts")
    with op.batch_alter_table("episodes", schema=None) as batch_op:
        batch_op.drop_column("follows")
        batch_op.drop_column("group_target")
        batch_op.drop_column("group_nodes")
