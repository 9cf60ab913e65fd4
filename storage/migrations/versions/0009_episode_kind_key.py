"""episodes are told apart by their kind, not by a backend marker: every job episode (backend "throughput")
has kind "job", and the kind leads the unique key, so two kinds of one cluster never share a key

Revision ID: 0009
Revises: 0008
Create Date: 2026-12-02 04:10:00
"""

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0009"
down_revision: str | None = "0008"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

OLD_KEY = ["org_id", "backend", "cluster_name", "node_key", "generation"]
NEW_KEY = ["org_id", "kind", "backend", "cluster_name", "node_key", "generation"]


def upgrade() -> None:
    # Rows written before the monitors named every kind: a job's episode was known by its backend alone.
    op.execute(sa.text("UPDATE episodes SET kind = 'job' WHERE backend = 'throughput' AND kind <> 'job'"))
    with op.batch_alter_table("episodes", schema=None) as batch_op:
        batch_op.drop_constraint("uq_episode_key", type_="unique")
        batch_op.create_unique_constraint("uq_episode_key", NEW_KEY)


def downgrade() -> None:
    with op.batch_alter_table("episodes", schema=None) as batch_op:
        batch_op.drop_constraint("uq_episode_key", type_="unique")
        batch_op.create_unique_constraint("uq_episode_key", OLD_KEY)
