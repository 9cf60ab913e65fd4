"""job_week_medians: each finished digest week's per-job median throughput (and the hourly count it was
computed from), filled lazily by the digest the first time it reads a week, so nothing is backfilled here:
a week's bounds depend on the program timezone, which only the program file knows, and a digest reads
only the last two weeks. An index of throughput_hourly's key and count, from which the digest reads a
week's count to check the stored medians (built in about 10 s for 5 M hourly rows on SQLite)

Revision ID: 0012
Revises: 0011
Create Date: 2026-12-02 12:45:00
"""

from collections.abc import Sequence

import sqlalchemy as sa
import sqlmodel
from alembic import op

revision: str = "0012"
down_revision: str | None = "0011"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    op.create_table(
        "job_week_medians",
        sa.Column("week_start", sa.DateTime(timezone=True), nullable=False),
        sa.Column("week_end", sa.DateTime(timezone=True), nullable=False),
        sa.Column("org_id", sqlmodel.sql.sqltypes.AutoString(length=40), nullable=False),
        sa.Column("cluster", sqlmodel.sql.sqltypes.AutoString(length=63), nullable=False),
        sa.Column("job", sqlmodel.sql.sqltypes.AutoString(length=128), nullable=False),
        sa.Column("median", sa.Float(), nullable=False),
        sa.Column("hours", sa.Integer(), nullable=False),
        sa.Column("samples", sa.Integer(), nullable=False),
        sa.Column("computed_at", sa.DateTime(timezone=True), nullable=False),
        sa.PrimaryKeyConstraint("week_start", "week_end", "org_id", "cluster", "job"),
    )
    with op.batch_alter_table("throughput_hourly", schema=None) as batch_op:
        batch_op.create_index(
            "ix_throughput_hourly_counts", ["hour", "org_id", "cluster", "job", "count"], unique=False
        )


def downgrade() -> None:
    with op.batch_alter_table("throughput_hourly", schema=None) as batch_op:
        batch_op.drop_index("ix_throughput_hourly_counts")
    op.drop_table("job_week_medians")
