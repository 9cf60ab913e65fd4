"""approvals and approval_votes: a costly or destructive change waiting for a second person (issue 24). One
approval per operation; one vote per approver, so a repeated click counts once

Revision ID: 0019
Revises: 0018
Create Date: 2026-12-07 10:00:00
"""

from collections.abc import Sequence

import sqlalchemy as sa
import sqlmodel
from alembic import op

revision: str = "0019"
down_revision: str | None = "0018"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def _text(length: int) -> sqlmodel.sql.sqltypes.AutoString:
    return sqlmodel.sql.sqltypes.AutoString(length=length)


def upgrade() -> None:
    op.create_table(
        "approvals",
        sa.Column("id", sa.Integer(), nullable=False),
        sa.Column("operation_id", _text(32), nullable=False),
        sa.Column("org_id", _text(40), nullable=False),
        sa.Column("requested_by", _text(24), nullable=False),
        sa.Column("requested_at", sa.DateTime(timezone=True), nullable=False),
        sa.Column("rule", _text(40), nullable=False),
        sa.Column("why", _text(400), nullable=False),
        sa.Column("approvers", _text(16), nullable=False),
        sa.Column("needed", sa.Integer(), nullable=False),
        sa.Column("expires_at", sa.DateTime(timezone=True), nullable=False),
        sa.Column("status", _text(16), nullable=False),
        sa.Column("channel_id", _text(24), nullable=False),
        sa.Column("message_ts", _text(32), nullable=True),
        sa.Column("thread_ts", _text(32), nullable=True),
        sa.Column("decided_by", _text(24), nullable=True),
        sa.Column("decided_at", sa.DateTime(timezone=True), nullable=True),
        sa.Column("reason", _text(1000), nullable=False),
        sa.PrimaryKeyConstraint("id"),
        sa.UniqueConstraint("operation_id", name="uq_approvals_operation"),
    )
    with op.batch_alter_table("approvals", schema=None) as batch_op:
        batch_op.create_index("ix_approvals_status_expires", ["status", "expires_at"], unique=False)
    op.create_table(
        "approval_votes",
        sa.Column("id", sa.Integer(), nullable=False),
        sa.Column("approval_id", sa.Integer(), nullable=False),
        sa.Column("user_id", _text(24), nullable=False),
        sa.Column("vote", _text(16), nullable=False),
        sa.Column("reason", _text(1000), nullable=False),
        sa.Column("at", sa.DateTime(timezone=True), nullable=False),
        sa.PrimaryKeyConstraint("id"),
        sa.UniqueConstraint("approval_id", "user_id", name="uq_approval_votes_user"),
    )
    with op.batch_alter_table("approval_votes", schema=None) as batch_op:
        batch_op.create_index("ix_approval_votes_approval_id", ["approval_id"], unique=False)


def downgrade() -> None:
    op.drop_table("approval_votes")
    op.drop_table("approvals")
