"""episodes carry what per-node metrics said of them: the cause (gpu, gpu_memory, thermal, network, input,
unknown; "" when nothing was read) and the suspects (node ids, most likely first)

Revision ID: 0010
Revises: 0009
Create Date: 2026-12-02 07:00:00
"""

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0010"
down_revision: str | None = "0009"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    with op.batch_alter_table("episodes", schema=None) as batch_op:
        batch_op.add_column(sa.Column("cause", sa.String(length=16), nullable=False, server_default=""))
        batch_op.add_column(sa.Column("suspects", sa.JSON(), nullable=False, server_default="[]"))


def downgrade() -> None:
    with op.batch_alter_table("episodes", schema=None) as batch_op:
        batch_op.drop_column("suspects")
        batch_op.drop_column("cause")
