"""episodes record when an unacknowledged alert was escalated (posted again in the coordination channel,
mentioning the org's operators): NULL until then, set once by a conditional UPDATE across replicas

Revision ID: 0011
Revises: 0010
Create Date: 2026-12-02 12:30:00
"""

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0011"
down_revision: str | None = "0010"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    with op.batch_alter_table("episodes", schema=None) as batch_op:
        batch_op.add_column(sa.Column("escalated_at", sa.DateTime(timezone=True), nullable=True))


def downgrade() -> None:
    with op.batch_alter_table("episodes", schema=None) as batch_op:
        batch_op.drop_column("escalated_at")
