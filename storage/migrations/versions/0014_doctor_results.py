"""doctor_results: each org's last `pitcrew doctor` run (whether every check passed, and the failing lines), read by
the Home to show an org whose setup is wrong.

Revision ID: 0014
Revises: 0013
Create Date: 2026-12-05 10:00:00
"""

from collections.abc import Sequence

import sqlalchemy as sa
import sqlmodel
from alembic import op

revision: str = "0014"
down_revision: str | None = "0013"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    op.create_table(
        "doctor_results",
        sa.Column("org_id", sqlmodel.sql.sqltypes.AutoString(length=40), nullable=False),
        sa.Column("ran_at", sa.DateTime(timezone=True), nullable=False),
        sa.Column("ok", sa.Boolean(), nullable=False),
        sa.Column("problems", sqlmodel.sql.sqltypes.AutoString(length=4000), nullable=False, server_default=""),
        sa.PrimaryKeyConstraint("org_id"),
    )


def downgrade() -> None:
    op.drop_table("doctor_results")
