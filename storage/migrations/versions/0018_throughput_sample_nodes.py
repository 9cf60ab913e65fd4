"""throughput samples carry the nodes the job runs on, when the sender says (issue 23): a run that starts again
on the same number of nodes at 70 % or less of the last healthy run's rate is a slowdown

Revision ID: 0018
Revises: 0017
Create Date: 2026-12-04 22:00:00
"""

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0018"
down_revision: str | None = "0017"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    with op.batch_alter_table("throughput_samples", schema=None) as batch_op:
        batch_op.add_column(sa.Column("nodes", sa.Integer(), nullable=True))


def downgrade() -> None:
    with op.batch_alter_table("throughput_samples", schema=None) as batch_op:
        batch_op.drop_column("nodes")
