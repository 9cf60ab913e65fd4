"""Slack Connect: the audit log records the actor's workspace (team_id) and the transport a command came by
(via). (One mention or DM runs once however often Slack delivers it through events_seen, already there.)

Revision ID: 0013
Revises: 0012
Create Date: 2026-12-04 17:10:00
"""

from collections.abc import Sequence

import sqlalchemy as sa
import sqlmodel
from alembic import op

revision: str = "0013"
down_revision: str | None = "0012"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    with op.batch_alter_table("audit_log", schema=None) as batch_op:
        batch_op.add_column(sa.Column("team_id", sqlmodel.sql.sqltypes.AutoString(length=24), nullable=True))
        batch_op.add_column(
            sa.Column("via", sqlmodel.sql.sqltypes.AutoString(length=16), nullable=False, server_default="")
        )


def downgrade() -> None:
    with op.batch_alter_table("audit_log", schema=None) as batch_op:
        batch_op.drop_column("via")
        batch_op.drop_column("team_id")
