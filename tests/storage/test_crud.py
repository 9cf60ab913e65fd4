"""Storage on SQLite and Postgres: migrations, org sync, clusters as last seen, audit log."""

from __future__ import annotations

import asyncio
from datetime import UTC, datetime, timedelta

import pytest
from sqlalchemy import inspect

import storage.db
from bot.audit import AuditLog
from storage import crud
from storage.db import Database, head_revision, upgrade
from storage.models import ClusterSeen, Operation, OperationStatus, Org, Outcome
from tests.waiting import wait_for

T0 = datetime(2026, 11, 29, 9, 0, tzinfo=UTC)


def org(org_id: str, name: str = "Org", at: datetime = T0) -> Org:
    return Org(
        id=org_id,
        name=name,
        channel="C0" + org_id.upper()[:6],
        account_id="111111111111",
        region="us-east-1",
        synced_at=at,
    )


async def test_migrations_create_tables_and_are_idempotent(db: Database) -> None:
    await db.upgrade()  # a second start must not fail
    async with db.engine.connect() as connection:
        tables = await connection.run_sync(lambda sync: set(inspect(sync).get_table_names()))
    assert {"orgs", "clusters", "audit_log", "alembic_version"} <= tables


async def test_an_upgrade_finds_where_the_database_stands_and_moves_only_a_database_behind_head(
    database_url: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    db = Database(url=database_url)
    try:
        assert await db.revision() is None, "a new database was never migrated"
        await asyncio.to_thread(upgrade, database_url, "0010")
        assert await db.revision() == "0010"
        await db.upgrade()
        assert await db.revision() == head_revision() != "0010"

        # At head, a start is one query: Alembic (which loads every migration file) is not run again.
        def must_not_migrate(url: str, revision: str = "head") -> None:
            raise AssertionError(f"migrated {url} again")

        monkeypatch.setattr(storage.db, "upgrade", must_not_migrate)
        await db.upgrade()
        assert await db.revision() == head_revision()
    finally:
        await db.dispose()


async def test_sync_orgs_adds_updates_and_retires(db: Database) -> None:
    async with db.session() as session:
        await crud.sync_orgs(session, orgs=[org("kumo-labs", "Kumo"), org("sakura-ai", "Sakura")])
    async with db.session() as session:
        await crud.sync_orgs(session, orgs=[org("kumo-labs", "Kumo Labs", T0 + timedelta(days=1))])
    async with db.session() as session:
        active = await crud.list_orgs(session)
        everything = await crud.list_orgs(session, active_only=False)
    assert [(o.id, o.name) for o in active] == [("kumo-labs", "Kumo Labs")]
    assert {o.id: o.active for o in everything} == {"kumo-labs": True, "sakura-ai": False}


async def test_clusters_seen_upsert_keeps_one_row_per_cluster(db: Database) -> None:
    async with db.session() as session:
        await crud.sync_orgs(session, orgs=[org("kumo-labs")])

    def seen(status: str, healthy: int, at: datetime) -> ClusterSeen:
        return ClusterSeen(
            org_id="kumo-labs",
            backend="hyperpod",
            name="kumo-p5",
            status=status,
            nodes_total=17,
            nodes_healthy=healthy,
            instances={"ml.p5.48xlarge": 16, "ml.m5.12xlarge": 1},
            last_seen_at=at,
        )

    async with db.session() as session:
        await crud.record_clusters_seen(session, rows=[seen("Creating", 0, T0)])
    async with db.session() as session:
        await crud.record_clusters_seen(session, rows=[seen("InService", 15, T0 + timedelta(minutes=5))])
    async with db.session() as session:
        rows = await crud.clusters_seen(session, org_id="kumo-labs")
    assert len(rows) == 1
    assert (rows[0].status, rows[0].nodes_healthy, rows[0].instances["ml.p5.48xlarge"]) == ("InService", 15, 16)


async def test_audit_log_is_written_in_batches_and_filtered(db: Database) -> None:
    audit = AuditLog(db=db, flush_seconds=0.05)
    for i, (user, org_id, text, outcome) in enumerate(
        [
            ("U0ALICE01", "kumo-labs", "list", Outcome.ALLOWED),
            ("U0BOB0001", "sakura-ai", "status x", Outcome.REFUSED),
            ("U0ALICE01", None, "frob", Outcome.INVALID),
        ]
    ):
        audit.record(
            at=T0 + timedelta(minutes=i),
            user_id=user,
            channel_id="C0KUMOLAB",
            org_id=org_id,
            command="/cluster",
            text=text,
            outcome=outcome,
        )
    async with db.session() as session:
        assert await crud.audit_entries(session) == []  # not yet: the batch waits for its flush

    async def written() -> bool:
        async with db.session() as session:
            return len(await crud.audit_entries(session)) == 3

    await wait_for(written, what="the batch's flush of 3 audit rows")  # by its timer: no flush() called
    async with db.session() as session:
        newest_first = await crud.audit_entries(session)
        alice = await crud.audit_entries(session, user_id="U0ALICE01")
        kumo = await crud.audit_entries(session, org_id="kumo-labs")
        recent = await crud.audit_entries(session, since=T0 + timedelta(minutes=1))
    assert [e.text for e in newest_first] == ["frob", "status x", "list"]
    assert [e.outcome for e in alice] == ["invalid", "allowed"]
    assert [e.text for e in kumo] == ["list"]
    assert len(recent) == 2


async def test_an_operation_is_claimed_exactly_once(db: Database) -> None:
    operation = Operation(
        id="op1",
        kind="launch",
        org_id="kumo-labs",
        backend="hyperpod",
        cluster_name="c",
        template="t@1",
        request={"ClusterName": "c"},
        requested_by="U0ALICE01",
        requested_at=T0,
        channel_id="C0KUMOLAB",
        status=OperationStatus.PLANNED.value,
        updated_at=T0,
    )
    async with db.session() as session:
        await crud.add_operation(session, operation=operation)

    async def claim(user: str) -> bool:
        async with db.session() as session:
            return await crud.claim_operation(
                session, operation_id="op1", from_status="planned", to_status="running", values={"confirmed_by": user}
            )

    results = await asyncio.gather(*(claim(f"U0USER{i:04d}") for i in range(8)))
    assert sorted(results) == [False] * 7 + [True]
    async with db.session() as session:
        stored = await crud.get_operation(session, operation_id="op1")
        running = await crud.operations_with_status(session, status="running")
    assert stored is not None and stored.status == "running" and stored.request == {"ClusterName": "c"}
    assert [op.id for op in running] == ["op1"]
    async with db.session() as session:
        on_cluster = await crud.running_operation(session, org_id="kumo-labs", backend="hyperpod", cluster_name="c")
        elsewhere = await crud.running_operation(session, org_id="kumo-labs", backend="pcluster", cluster_name="c")
    assert on_cluster is not None and on_cluster.id == "op1", "the running change of a cluster is found"
    assert elsewhere is None, "a same-named cluster on the other backend is another cluster"


async def test_two_different_changes_of_one_cluster_cannot_both_start(db: Database) -> None:
    """Review finding: a busy check then a claim, in two transactions, let two plans start together. A partial
    unique index now allows one running operation per cluster (SQLite and Postgres)."""

    def planned(operation_id: str, cluster: str = "c") -> Operation:
        return Operation(
            id=operation_id,
            kind="scale",
            org_id="kumo-labs",
            backend="hyperpod",
            cluster_name=cluster,
            request={},
            requested_by="U0ALICE01",
            requested_at=T0,
            channel_id="C0KUMOLAB",
            status=OperationStatus.PLANNED.value,
            updated_at=T0,
        )

    async with db.session() as session:
        for operation_id, cluster in (("a", "c"), ("b", "c"), ("d", "other")):
            await crud.add_operation(session, operation=planned(operation_id, cluster))

    async def claim(operation_id: str) -> bool:
        async with db.session() as session:
            return await crud.claim_operation(
                session, operation_id=operation_id, from_status="planned", to_status="running", values={}
            )

    results = await asyncio.gather(claim("a"), claim("b"))
    assert sorted(results) == [False, True], "one of two changes of one cluster starts"
    assert await claim("d"), "another cluster is not held up"
