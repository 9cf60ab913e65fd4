"""What the handlers call: the domain objects of one running Pitcrew, built once and passed in."""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable, Coroutine, Sequence
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any
from zoneinfo import ZoneInfo

from bot import audit_view
from bot.access import AccessPolicy
from bot.alerts.desk import AlertDesk
from bot.alerts.escalation import Escalation
from bot.approvals.desk import ApprovalDesk
from bot.audit import AuditLog
from bot.capacity.service import CapacityService
from bot.clusters.changes import Changes
from bot.clusters.fleet import Fleet
from bot.clusters.model import Cluster
from bot.clusters.templates import TemplateSet
from bot.config import ProgramConfig, Settings
from bot.digest.ledger import cluster_seen_rows
from bot.digest.weekly import WeeklyDigest
from bot.home.tab import HomeTab
from bot.metrics import Metrics
from bot.monitor.idle import IdleMonitor
from bot.monitor.jobs import ThroughputMonitor
from bot.monitor.nodes import NodeMonitor
from bot.operations import Operations
from bot.publishing import Publisher
from bot.scheduler import LeaderScheduler
from bot.tracking.records import RecordBook
from storage import crud
from storage.db import Database
from storage.models import AuditEntry, Org, utcnow

log = logging.getLogger(__name__)


@dataclass
class Services:
    settings: Settings
    program: ProgramConfig
    access: AccessPolicy
    fleet: Fleet
    db: Database
    poster: Publisher
    audit: AuditLog
    templates: TemplateSet
    operations: Operations
    alerts: AlertDesk  # every alert's lifecycle: the buttons on alerts act through it
    monitor: NodeMonitor
    throughput: ThroughputMonitor
    digest: WeeklyDigest
    records: RecordBook
    metrics: Metrics  # GET /metrics: the one build_services wired
    scheduler: LeaderScheduler | None = None  # the monitors and the digest, on the leader replica (if enabled)
    capacity: CapacityService | None = None  # reserved capacity per org (/cluster capacity, plans, Home)
    idle: IdleMonitor | None = None  # idle-accelerator notices (told each sweep's listings)
    escalation: Escalation | None = None  # unacknowledged alerts posted again (run by the scheduler)
    approvals: ApprovalDesk | None = None  # changes waiting for approval (the program file's `approvals:`)
    home: HomeTab | None = None  # the App Home tab: published on app_home_opened, refreshed after changes
    clock: Callable[[], datetime] = utcnow
    bot_user_id: str | None = None  # Pitcrew's own Slack user (auth.test): its mention is no part of a command
    _background: set[asyncio.Task[None]] = field(default_factory=set)

    def spawn(self, work: Coroutine[Any, Any, None]) -> None:
        """Run bookkeeping after the reply; the task is held so it is not collected mid-flight."""
        task = asyncio.get_running_loop().create_task(work)
        self._background.add(task)
        task.add_done_callback(self._background.discard)

    async def drain(self) -> None:
        """Wait for background work and write what the audit log holds (tests and shutdown)."""
        if self._background:
            await asyncio.gather(*self._background, return_exceptions=True)
        await self.audit.flush()

    @property
    def changes(self) -> Changes:
        """Planning cluster changes (the /cluster commands and the alerts' node buttons)."""
        return Changes(
            fleet=self.fleet,
            operations=self.operations,
            program=self.program,
            templates=self.templates,
            capacity=self.capacity,
        )

    @property
    def tz(self) -> ZoneInfo:
        return ZoneInfo(self.program.timezone)

    @property
    def org_names(self) -> dict[str, str]:
        return {org.id: org.name for org in self.program.orgs}

    @property
    def team_names(self) -> dict[str, str]:
        """The orgs' own Slack workspaces (`slack_teams`), by team id: "Kumo Labs' workspace"."""
        owner = {org.id: org.name + ("'" if org.name.endswith("s") else "'s") for org in self.program.orgs}
        return {team: f"{owner[org.id]} workspace" for org in self.program.orgs for team in org.slack_teams}

    async def learn_identity(self) -> None:
        """Who Pitcrew is in Slack (auth.test): its user id, and the workspace it is installed in, the one whose
        members every org accepts (bot.access). Slack unreachable: logged, and learnt from the next request."""
        try:
            answer = await self.poster.client.auth_test()
        except Exception as error:  # a line, not a traceback: Slack being away at start is no bug
            log.warning("auth.test failed (%s): Pitcrew's workspace is learnt from the first request", error)
            return
        self.access.home_team = self.access.home_team or answer.get("team_id") or None
        self.bot_user_id = self.bot_user_id or answer.get("user_id") or None

    async def first_delivery(self, key: str) -> bool:
        """Whether this replica is the first to take a delivery (a Slack event id): True once, across replicas.
        A database that cannot say lets it through: an answer twice beats none."""
        try:
            async with self.db.session() as session:
                return await crud.mark_event_seen(session, event_id=key, at=self.clock())
        except Exception:
            log.warning("could not mark %s seen; answering it anyway", key, exc_info=True)
            return True

    async def sync_orgs(self) -> None:
        now = self.clock()
        rows = [
            Org(
                id=o.id, name=o.name, channel=o.channel, account_id=o.aws.account_id, region=o.aws.region, synced_at=now
            )
            for o in self.program.orgs
        ]
        async with self.db.session() as session:
            await crud.sync_orgs(session, orgs=rows)

    async def audit_entries(
        self,
        *,
        org_id: str | None,
        since: datetime,
        user_id: str | None = None,
        action: str | None = None,
        limit: int = 40,
    ) -> list[AuditEntry]:
        """The newest audit entries of an org (None: every org) since a time, of one user and of one kind of
        action (a key of bot.audit_view.ACTIONS) when given; everything recorded so far is written first."""
        await self.audit.flush()
        matches = audit_view.ACTIONS[action] if action else None
        async with self.db.session() as session:
            entries = await crud.audit_entries(
                session, org_id=org_id, user_id=user_id, since=since, matches=matches, limit=limit
            )
        return list(entries)

    async def remember(self, clusters: Sequence[Cluster]) -> None:
        """Store clusters as last seen; a failure here is logged, never shown to the caller."""
        now = self.clock()
        rows = cluster_seen_rows(clusters, at=now)
        try:
            async with self.db.session() as session:
                await crud.record_clusters_seen(session, rows=rows)
        except Exception:
            log.exception("could not record %d clusters as seen", len(rows))
