"""Every org's clusters, queried concurrently with a bound. The one layer through which AWS is reached.

boto3 is synchronous, so each org's work runs in a worker thread of a pool sized to the bound: the
default asyncio executor has only cpu+4 threads, which on a 2-core machine would serialize a dozen orgs.
One org's failure (AccessDenied, a timeout) becomes that org's error line, never a failed command.

An org's listing is kept for a few seconds (PITCREW_CACHE_SECONDS), and concurrent requests for the same
org share one AWS pass: a channel of people typing /cluster list at once must not multiply AWS calls
(the control plane throttles) nor load the process that must ack Slack within 3 seconds. Replies say
how old their data is; failures are never cached.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections import Counter
from collections.abc import Callable, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field, replace
from datetime import UTC, datetime
from typing import TypeVar

import httpx
from botocore.exceptions import BotoCoreError, ClientError

from bot.clusters.accounts import AwsAccounts
from bot.clusters.backend import Capabilities, ClusterBackend, GroupNotFound, NodeBatchResult, ResizePlan, Unsupported
from bot.clusters.diagnosis import ClusterEvent, Detection
from bot.clusters.hyperpod import HyperPodBackend
from bot.clusters.model import Backend, Cluster, ClusterNotFound
from bot.clusters.parallelcluster import (
    ParallelClusterApiBackend,
    ParallelClusterApiError,
    ParallelClusterEc2Backend,
)
from bot.clusters.requests import LaunchRequest
from bot.config import OrgConfig, ProgramConfig
from bot.iam.denied import AccessProblem, refusal, translated
from bot.tls import tls_context

log = logging.getLogger(__name__)
T = TypeVar("T")
CLOSE_GRACE_SECONDS = 5.0  # a stop's wait for AWS work under way (after the scheduler's 20 s: within 30 s in all)


class UnknownOrg(KeyError):
    """An org id that is not in the program file."""

    def __str__(self) -> str:
        return f"there is no org `{self.args[0]}` in this program"


@dataclass(frozen=True)
class OrgClusters:
    org: str
    clusters: list[Cluster] = field(default_factory=list)
    errors: list[str] = field(default_factory=list)  # one short line per backend that could not be read
    as_of: datetime = field(default_factory=lambda: datetime.now(UTC))  # when AWS was asked
    cached: bool = False  # served from the short-lived cache rather than a fresh AWS pass


@dataclass(frozen=True)
class Lookup:
    """Where a cluster name was found among the orgs a user may see."""

    found: list[Cluster]
    errors: dict[str, str]  # org -> why it could not be searched


# What a person can do about each AWS error code the cluster operations meet (the list, plus the
# codes HyperPod uses for the same situations).
_NEXT_STEP = {
    "ResourceLimitExceeded": "the AWS account's service quota for this is reached: ask for fewer nodes, or ask the "
    "org's AWS admin to raise the quota in Service Quotas",
    "ResourceInUse": "that name is taken in the account: choose another name",
    "ConflictException": "the cluster is busy with another change: wait until it is InService (`/cluster status`) "
    "and try again",
    "ValidationException": "AWS found the request invalid: check the values named above and try again",
    "ResourceNotFound": "AWS does not know that cluster or node (any more): `/cluster list` shows what exists",
    "ResourceNotFoundException": "AWS does not know that cluster or node (any more): `/cluster list` shows what exists",
}
_PCLUSTER_NEXT_STEP = {
    400: "fix what the messages name and try again",
    401: "the org's role may not call its ParallelCluster API: check the API's resource policy",
    403: "the org's role may not call its ParallelCluster API: check the API's resource policy",
    404: "ParallelCluster does not know that cluster (any more): `/cluster list` shows what exists",
    409: "the cluster is busy with another change: wait until it is *_COMPLETE (`/cluster status`) and try again",
    412: "the dry run found nothing to stop the request",
    429: "the ParallelCluster API is throttling requests: wait a minute and try again",
}


def request_id(error: BaseException) -> str:
    """AWS's request id of a failed call (for the audit log), or ""."""
    if isinstance(error, ClientError):
        return str(error.response.get("ResponseMetadata", {}).get("RequestId", ""))
    return ""


def describe_error(error: BaseException) -> str:
    """One line a person can act on; never a stack trace."""
    if isinstance(error, AccessProblem):  # names the missing permission and what to deploy (bot.iam.denied)
        return str(error)
    if isinstance(error, ClientError):
        info = error.response.get("Error", {})
        code = info.get("Code", "Error")
        message = str(info.get("Message", ""))[:240]
        if code in ("AccessDenied", "AccessDeniedException", "UnauthorizedOperation"):
            return f"AWS refused access ({code}): check the org's role and its trust policy"
        if code in ("ThrottlingException", "Throttling", "RequestLimitExceeded"):
            return "AWS is throttling requests even after retrying; wait a minute and try again"
        step = _NEXT_STEP.get(code)
        if step:
            return f"AWS said {code}: {message} — {step}"
        return f"AWS error {code}: {message}"
    if isinstance(error, ClusterNotFound):
        return "that cluster does not exist (any more): `/cluster list` shows what exists"
    if isinstance(error, UnknownOrg):
        return f"{error}: `/cluster list all` shows the orgs"
    if isinstance(error, GroupNotFound):
        return f"{error} `/cluster status` shows its groups"
    if isinstance(error, Unsupported):
        return str(error)
    if isinstance(error, TimeoutError | asyncio.TimeoutError):
        return "timed out"
    if isinstance(error, ParallelClusterApiError):
        step = _PCLUSTER_NEXT_STEP.get(error.status)
        return f"{str(error)[:500]}" + (f" — {step}" if step else "")
    if isinstance(error, httpx.HTTPError):
        return f"ParallelCluster API unreachable ({type(error).__name__})"
    if isinstance(error, BotoCoreError):
        return f"AWS unreachable ({type(error).__name__})"
    return f"unexpected error ({type(error).__name__})"


class Fleet:
    def __init__(
        self,
        *,
        program: ProgramConfig,
        accounts: AwsAccounts,
        concurrency: int = 16,
        timeout: float = 20.0,
        cache_seconds: float = 10.0,
        http: httpx.Client | None = None,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self._program = program
        self._accounts = accounts
        self._timeout = timeout
        self._cache_seconds = cache_seconds
        self._clock = clock
        self._cache: dict[str, tuple[float, OrgClusters]] = {}  # org -> (monotonic time asked, listing)
        self._inflight: dict[str, asyncio.Future[OrgClusters]] = {}
        self._limit = asyncio.Semaphore(concurrency)
        self._pool = ThreadPoolExecutor(max_workers=concurrency, thread_name_prefix="aws")
        self._http = http or httpx.Client(timeout=httpx.Timeout(15.0, connect=5.0), verify=tls_context())
        shared = Counter((org.aws.account_id, org.aws.region) for org in program.orgs)
        self._shared = {key for key, count in shared.items() if count > 1}

    @property
    def accounts(self) -> AwsAccounts:
        """The per-org sessions every AWS call goes through (pitcrew doctor probes through them too)."""
        return self._accounts

    def close(self) -> None:
        self._pool.shutdown(wait=False, cancel_futures=True)
        self._http.close()

    async def aclose(self, *, grace: float = CLOSE_GRACE_SECONDS) -> None:
        """Close at a stop: work already under way in the pool (a listing whose caller was cancelled, the Home's
        or a command's) finishes first, for up to `grace` seconds. Closing the HTTP client under it made it fail
        and log the org's listing as failed ("the client has been closed") at every stop that met one."""
        self._pool.shutdown(wait=False, cancel_futures=True)  # nothing new starts; queued work is dropped
        try:
            await asyncio.wait_for(asyncio.to_thread(self._pool.shutdown, wait=True), grace)
        except TimeoutError:
            log.warning("stopping: AWS work still under way after %g s; closing its client", grace)
        self._http.close()

    def backends(self, org: OrgConfig) -> list[ClusterBackend]:
        shared = (org.aws.account_id, org.aws.region) in self._shared
        hyperpod = HyperPodBackend(
            org_id=org.id,
            sagemaker=self._accounts.client(org, "sagemaker"),
            shared_account=shared,
            logs=lambda: self._accounts.client(org, "logs"),
        )
        ec2 = self._accounts.client(org, "ec2")
        pcluster: ClusterBackend
        if org.aws.parallelcluster_api:
            pcluster = ParallelClusterApiBackend(
                org_id=org.id,
                api_url=org.aws.parallelcluster_api,
                region=org.aws.region,
                credentials=lambda: self._accounts.credentials(org),
                ec2=ec2,
                http=self._http,
                shared_account=shared,
            )
        else:
            pcluster = ParallelClusterEc2Backend(org_id=org.id, ec2=ec2, shared_account=shared)
        return [hyperpod, pcluster]

    async def _in_thread(self, work: Callable[[], T], *, timeout: float | None = -1.0) -> T:
        """`work` in a worker thread; the org timeout applies unless `timeout` says otherwise (None: wait)."""
        async with self._limit:
            loop = asyncio.get_running_loop()
            limit = self._timeout if timeout == -1.0 else timeout
            return await asyncio.wait_for(loop.run_in_executor(self._pool, work), limit)

    def _org(self, org_id: str) -> OrgConfig:
        org = self._program.org(org_id)
        if org is None:  # callers check names first (bot.names); this is the guard behind them
            raise UnknownOrg(org_id)
        return org

    def _list_org(self, org: OrgConfig) -> OrgClusters:
        clusters: list[Cluster] = []
        errors: list[str] = []
        try:
            backends = self.backends(org)
        except (ClientError, BotoCoreError) as error:  # assume_role failed: nothing of this org is reachable
            return OrgClusters(org=org.id, errors=[describe_error(translated(org.id, error))])
        for backend in backends:
            try:
                clusters.extend(backend.list_clusters())
            except Exception as error:  # one backend's failure must not hide the other's clusters
                log.warning("listing %s clusters of %s failed: %r", backend.backend, org.id, error)
                errors.append(f"{backend.backend.label}: {describe_error(translated(org.id, error))}")
        return OrgClusters(org=org.id, clusters=clusters, errors=errors)

    def _fresh(self, org_id: str) -> OrgClusters | None:
        entry = self._cache.get(org_id)
        if entry is None or self._clock() - entry[0] >= self._cache_seconds:
            return None
        return replace(entry[1], cached=True)

    async def _org_clusters(self, org_id: str) -> OrgClusters:
        fresh = self._fresh(org_id)
        if fresh is not None:
            return fresh
        pending = self._inflight.get(org_id)
        if pending is not None:
            return replace(await asyncio.shield(pending), cached=True)
        org = self._program.org(org_id)
        if org is None:  # before registering a pass: one that never ends would hang every later caller
            return OrgClusters(org=org_id, errors=[describe_error(UnknownOrg(org_id))])
        future: asyncio.Future[OrgClusters] = asyncio.get_running_loop().create_future()
        self._inflight[org_id] = future
        asked = self._clock()
        try:
            result = await self._in_thread(lambda: self._list_org(org))
        except asyncio.CancelledError:
            future.cancel()
            raise
        except Exception as error:
            result = OrgClusters(org=org_id, errors=[describe_error(error)])
        finally:
            del self._inflight[org_id]
        if not result.errors:
            self._cache[org_id] = (asked, result)
        future.set_result(result)
        return result

    async def list_orgs(self, org_ids: Sequence[str], *, fresh: bool = False) -> list[OrgClusters]:
        """Each org's clusters, in the order given; slow or failing orgs become error lines.

        `fresh`: ask AWS now rather than serve the cache (the node monitor's sweep; a pass already under way
        for a person's command is shared). What it reads refreshes the cache for everyone."""
        if fresh:
            for org_id in org_ids:
                self._cache.pop(org_id, None)
        cached = [self._fresh(org_id) for org_id in org_ids]
        if all(listing is not None for listing in cached):  # the common case under load: no tasks to make
            return [listing for listing in cached if listing is not None]
        return list(await asyncio.gather(*(self._org_clusters(org_id) for org_id in org_ids)))

    def _backend(self, org: OrgConfig, backend: Backend) -> ClusterBackend:
        return next(b for b in self.backends(org) if b.backend is backend)

    async def _change(self, org_id: str, backend: Backend, work: Callable[[ClusterBackend], T]) -> T:
        """Run one change in a worker thread; whatever happens, the org's cached listing is stale after it."""
        org = self._org(org_id)
        try:
            # No timeout: giving up on the await would not stop the thread, so a change that AWS goes on to
            # make would be reported as failed. boto3's own connect/read timeouts and retries bound it.
            return await self._in_thread(lambda: work(self._backend(org, backend)), timeout=None)
        except Exception as error:
            raise translated(org_id, error, change=True) from error
        finally:
            self._cache.pop(org_id, None)

    async def capabilities(self, org_id: str, backend: Backend) -> Capabilities:
        """What the org's backend can change (made in a worker thread: assuming the role may call STS)."""
        org = self._org(org_id)
        try:
            return await self._in_thread(lambda: self._backend(org, backend).capabilities)
        except Exception as error:
            raise translated(org_id, error) from error

    async def plan_resize(self, cluster: Cluster, *, group: str, count: int) -> ResizePlan:
        """What resizing would change (ParallelCluster's dry run); raises GroupNotFound for a group it lacks."""
        org = self._org(cluster.org)
        try:
            plan = await self._in_thread(
                lambda: self._backend(org, cluster.backend).plan_resize(cluster, group=group, count=count)
            )
        except Exception as error:  # the dry run of a change needs the change's permission
            raise translated(org.id, error, change=True) from error
        if plan.objection is not None and (problem := refusal(org.id, plan.objection, change=True)) is not None:
            return replace(plan, objection=problem, reasons=(), needs_fleet_stop=False)
        return plan

    async def launch(self, org_id: str, backend: Backend, request: LaunchRequest) -> str:
        return await self._change(org_id, backend, lambda target: target.launch(request))

    async def resize(self, org_id: str, backend: Backend, name: str, *, group: str, count: int) -> str:
        return await self._change(org_id, backend, lambda target: target.resize(name=name, group=group, count=count))

    async def node_batch(
        self, org_id: str, backend: Backend, name: str, *, replace: bool, node_ids: Sequence[str]
    ) -> NodeBatchResult:
        """Reboot or replace nodes (chunked by the backend); partial failures are in the result."""

        def act(target: ClusterBackend) -> NodeBatchResult:
            run = target.replace_nodes if replace else target.reboot_nodes
            return run(name=name, node_ids=node_ids)

        return await self._change(org_id, backend, act)

    async def health_check(
        self, org_id: str, name: str, *, checks: Sequence[str], nodes: Sequence[tuple[str, str]]
    ) -> str:
        """StartClusterHealthCheck (HyperPod) of `nodes` ((group, instance id)); AWS's request id."""

        def act(target: ClusterBackend) -> str:
            if not isinstance(target, HyperPodBackend):
                raise Unsupported("deep health checks are HyperPod's")
            return target.health_check(name=name, checks=checks, nodes=nodes)

        return await self._change(org_id, Backend.HYPERPOD, act)

    async def diagnosis(
        self, cluster: Cluster, *, since: datetime, events: bool, detections: bool
    ) -> tuple[list[ClusterEvent], list[Detection]]:
        """HyperPod's own diagnosis of a cluster since a time: its cluster events (asked only when `events`: only
        clusters with continuous provisioning have them) and its health-monitoring agent's detections."""
        org = self._org(cluster.org)

        def read() -> tuple[list[ClusterEvent], list[Detection]]:
            target = self._backend(org, Backend.HYPERPOD)
            assert isinstance(target, HyperPodBackend)
            found = target.cluster_events(name=cluster.name, since=since) if events else []
            arn = str(cluster.extra.get("arn", ""))
            seen = target.detections(name=cluster.name, arn=arn, since=since) if detections and arn else []
            return found, seen

        try:
            return await self._in_thread(read)
        except Exception as error:
            raise translated(cluster.org, error) from error

    async def stop_fleet(self, org_id: str, backend: Backend, name: str) -> None:
        await self._change(org_id, backend, lambda target: target.stop_fleet(name=name))

    async def start_fleet(self, org_id: str, backend: Backend, name: str) -> None:
        await self._change(org_id, backend, lambda target: target.start_fleet(name=name))

    async def delete(self, org_id: str, backend: Backend, name: str) -> str:
        return await self._change(org_id, backend, lambda target: target.delete(name=name))

    async def get(self, org_id: str, backend: Backend, name: str) -> Cluster | None:
        """One cluster as AWS says it now (no cache), or None when it does not exist."""
        org = self._org(org_id)

        def read() -> Cluster | None:
            try:
                return self._backend(org, backend).get_cluster(name)
            except ClusterNotFound:
                return None

        try:
            return await self._in_thread(read)
        except Exception as error:
            raise translated(org_id, error) from error

    async def warm(self) -> None:
        """Assume every org's role and build its clients ahead of the first command (best effort)."""

        async def one(org: OrgConfig) -> None:
            try:
                await self._in_thread(lambda: self.backends(org))
            except Exception as error:
                log.warning("could not prepare AWS access for %s: %s", org.id, describe_error(error))

        await asyncio.gather(*(one(org) for org in self._program.orgs))

    def _find_in_org(self, org: OrgConfig, name: str) -> list[Cluster]:
        found = []
        for backend in self.backends(org):
            try:
                found.append(backend.get_cluster(name))
            except ClusterNotFound:
                continue
        return found

    async def find(self, name: str, org_ids: Sequence[str]) -> Lookup:
        """Search the given orgs for a cluster by name, concurrently."""

        async def one(org_id: str) -> tuple[str, list[Cluster] | BaseException]:
            listing = self._fresh(org_id)
            if listing is not None:  # a recent listing holds every cluster of the org, nodes included
                return org_id, [cluster for cluster in listing.clusters if cluster.name == name]
            try:
                org = self._org(org_id)
                return org_id, await self._in_thread(lambda: self._find_in_org(org, name))
            except Exception as error:
                return org_id, error

        found: list[Cluster] = []
        errors: dict[str, str] = {}
        for org_id, result in await asyncio.gather(*(one(org_id) for org_id in org_ids)):
            if isinstance(result, BaseException):
                errors[org_id] = describe_error(translated(org_id, result))
            else:
                found.extend(result)
        return Lookup(found=found, errors=errors)
