"""throughput samples unique by (org, cluster, job, ts): a retried ingest batch is stored once

Revision ID: 0007
Revises: 0006
Create Date: 2026-12-01 21:00:00.000000
"""

from collections.abc import Sequence

from alembic import op


revision: str = '0007'
down_revision: str | None = '0006'
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    # Samples stored twice by retries before this revision: keep the first stored (lowest id). The rollups
    # those retries doubled are left as they are (the raw samples are pruned after a few days anyway).
    op.execute(
        "DELETE FROM throughput_samples WHERE id NOT IN ("
        "SELECT min(id) FROM throughput_samples GROUP BY org_id, cluster, job, ts)"
    )
    # The lookup index on the same columns becomes the unique one (same name, so nothing else changes).
    with op.batch_alter_table('throughput_samples', schema=None) as batch_op:
        batch_op.drop_index('ix_throughput_samples_key_ts')
        batch_op.create_index('ix_throughput_samples_key_ts', ['org_id', 'cluster', 'job', 'ts'], unique=True)


def downgrade() -> None:
    with op.batch_alter_table('throughput_samples', schema=None) as batch_op:
        batch_op.drop_index('ix_throughput_samples_key_ts')
        batch_op.create_index('ix_throughput_samples_key_ts', ['org_id', 'cluster', 'job', 'ts'], unique=False)
