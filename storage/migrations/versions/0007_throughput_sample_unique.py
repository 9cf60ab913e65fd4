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
    # EXISTS on the (org, cluster, job, ts) index that 0004 made: one index probe per row on SQLite and
    # Postgres alike (NOT IN over a GROUP BY of two weeks of samples outgrows Postgres' work_mem).
    op.execute(
        "DELETE FROM throughput_samples WHERE EXISTS ("
        "SELECT 1 FROM throughput_samples AS kept WHERE kept.org_id = throughput_samples.org_id "
        "AND kept.cluster = throughput_samples.cluster AND kept.job = throughput_samples.job "
        "AND kept.ts = throughput_samples.ts AND kept.id < throughput_samples.id)"
    )
    # The lookup index on the same columns becomes the unique one (same name, so nothing else changes).
    with op.batch_alter_table('throughput_samples', schema=None) as batch_op:
        batch_op.drop_index('ix_throughput_samples_key_ts')
        batch_op.create_index('ix_throughput_samples_key_ts', ['org_id', 'cluster', 'job', 'ts'], unique=True)


def downgrade() -> None:
    with op.batch_alter_table('throughput_samples', schema=None) as batch_op:
        batch_op.drop_index('ix_throughput_samples_key_ts')
        batch_op.create_index('ix_throughput_samples_key_ts', ['org_id', 'cluster', 'job', 'ts'], unique=False)
