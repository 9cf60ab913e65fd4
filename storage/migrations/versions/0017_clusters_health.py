"""clusters (as last seen) keep what one health rule needs (bot.clusters.health): the unhealthy nodes (the rest of
those not healthy are in transition) and a ParallelCluster compute fleet's status, so the Home and the tracking
document show a stopped fleet as stopped and colour a cluster as `/cluster list` does

Revision ID: 0017
Revises: 0016
Create Date: 2026-12-06 14:00:00
"""

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0017"
down_revision: str | None = "0016"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    with op.batch_alter_table("clusters", schema=None) as batch_op:
        batch_op.add_column(sa.Column("nodes_unhealthy", sa.Integer(), nullable=False, server_default="0"))
        batch_op.add_column(sa.Column("compute_fleet", sa.String(length=24), nullable=False, server_default=""))
    # Until the next sweep sees them again: every node not healthy counted as unhealthy, as the Home did.
    op.execute("UPDATE clusters SET nodes_unhealthy = nodes_total - nodes_healthy")


def downgrade() -> None:
    with op.batch_alter_table("clusters", schema=None) as batch_op:
        batch_op.drop_column("compute_fleet")
        batch_op.drop_column("nodes_unhealthy")
