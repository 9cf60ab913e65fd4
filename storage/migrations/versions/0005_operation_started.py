"""operations.started_at (when AWS accepted the change), one running operation per cluster (a partial
unique index), episodes.node_key as long as a job name (128)

Revision ID: 0005
Revises: 0004
Create Date: 2026-11-29 23:00:00
"""

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0005"
down_revision: str | None = "0004"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    with op.batch_alter_table("operations", schema=None) as batch_op:
        batch_op.add_column(sa.Column("started_at", sa.DateTime(timezone=True), nullable=True))
    with op.batch_alter_table("episodes", schema=None) as batch_op:
        batch_op.alter_column("node_key", existing_type=sa.String(length=64), type_=sa.String(length=128))
    running = sa.text("status = 'running'")
    op.create_index(
        "uq_operations_one_running",
        "operations",
        ["org_id", "backend", "cluster_name"],
        unique=True,
        sqlite_where=running,
        postgresql_where=running,
    )


def downgrade() -> None:
    op.drop_index("uq_operations_one_running", table_name="operations")
    with op.batch_alter_table("episodes", schema=None) as batch_op:
        batch_op.alter_column("node_key", existing_type=sa.String(length=128), type_=sa.String(length=64))
    with op.batch_alter_table("operations", schema=None) as batch_op:
        batch_op.drop_column("started_at")
