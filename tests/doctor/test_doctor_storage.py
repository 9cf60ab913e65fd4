"""Each org's last doctor run is kept, one row per org, replaced by the next run (SQLite, and Postgres when set)."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

from storage import crud
from storage.db import Database
from storage.models import DoctorResult


async def test_the_last_run_replaces_the_one_before(db: Database) -> None:
    first = datetime(2026, 12, 5, 1, 0, tzinfo=UTC)
    async with db.session() as session:
        await crud.put_doctor_results(
            session,
            results=[
                DoctorResult(org_id="kumo-labs", ran_at=first, ok=False, problems="channel: Pitcrew is not in #kumo"),
                DoctorResult(org_id="program", ran_at=first, ok=True),
            ],
        )
        later = first + timedelta(hours=1)
        await crud.put_doctor_results(session, results=[DoctorResult(org_id="kumo-labs", ran_at=later, ok=True)])
        rows = await crud.doctor_results(session)
        assert [(r.org_id, r.ok, r.problems) for r in rows] == [("kumo-labs", True, ""), ("program", True, "")]
        assert rows[0].ran_at == later
        assert [r.org_id for r in await crud.doctor_results(session, org_ids=["program"])] == ["program"]
