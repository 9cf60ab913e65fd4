"""Per-org AWS sessions: STS assume_role with the org's external id, cached until shortly before expiry.

An org without a role_arn uses Pitcrew's own credentials (the standard chain; AWS_ENDPOINT_URL is
honoured by botocore itself). Every client is made from the one base session with the org's
credentials passed in, so botocore loads each service model once per process, not once per org
(the SageMaker model alone takes about half a second to load); clients are cached with their
credentials.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import boto3
from botocore.config import Config
from botocore.credentials import Credentials

from bot.config import OrgConfig

CallObserver = Callable[..., None]  # (service=, operation=, error_code=None|str): bot.metrics.Metrics.aws_call

REFRESH_BEFORE_EXPIRY = 300.0  # seconds; re-assume a role this long before its credentials expire
SESSION_SECONDS = 3600

MAX_ATTEMPTS = 3  # retries after the first try (botocore Config counts them so: 4 attempts in all)
# Adaptive mode adds a client-side rate limiter on top of standard retries: a sweep over many clusters that
# meets ThrottlingException slows itself down instead of spending its attempts (HyperPod publishes no TPS).
CLIENT_CONFIG = Config(
    retries={"mode": "adaptive", "max_attempts": MAX_ATTEMPTS},
    connect_timeout=5,
    read_timeout=20,
    max_pool_connections=20,
)


@dataclass
class _OrgSession:
    credentials: dict[str, str]  # aws_access_key_id, ...; empty for the base session's own chain
    expires_at: float  # epoch seconds; inf for the base credentials
    clients: dict[str, Any] = field(default_factory=dict)


class AwsAccounts:
    """Hands out boto3 clients per org; thread-safe, since backends run in worker threads."""

    def __init__(
        self,
        *,
        base_session: boto3.Session | None = None,
        clock: Callable[[], float] = time.time,
        session_name: str = "pitcrew",
    ) -> None:
        self._base = base_session or boto3.Session()
        self._clock = clock
        self._session_name = session_name
        self._sessions: dict[tuple[str, ...], _OrgSession] = {}
        self._lock = threading.Lock()
        self._org_locks: dict[tuple[str, ...], threading.Lock] = {}
        self._client_lock = threading.Lock()  # boto3 sessions are not thread-safe when making clients
        self._sts: dict[str, Any] = {}
        self.assume_role_calls = 0  # read by tests
        self._observer: CallObserver | None = None

    def observe_calls(self, observer: CallObserver | None) -> None:
        """Tell `observer` of every AWS call of every client made here (bot.metrics); replaces the last one."""
        self._observer = observer

    def _after_call(
        self, *, event_name: str, http_response: Any = None, parsed: Any = None, exception: Any = None, **_: Any
    ) -> None:
        # botocore emits after-call.SERVICE.OPERATION once per call, after its retries; after-call-error when
        # no answer came at all (a connection error, a timeout): then the exception's class is the code.
        if self._observer is None:
            return
        service, operation = [*event_name.split(".", 2), "", ""][1:3]
        error: str | None = type(exception).__name__ if exception is not None else None
        if http_response is not None and getattr(http_response, "status_code", 200) >= 300:
            answer = parsed.get("Error", {}) if isinstance(parsed, dict) else {}
            error = str(answer.get("Code") or http_response.status_code)
        self._observer(service=service, operation=operation, error_code=error)

    def _watched(self, client: Any) -> Any:
        for event in ("after-call", "after-call-error"):
            client.meta.events.register(event, self._after_call, unique_id=f"pitcrew-{event}")
        return client

    @property
    def base_session(self) -> boto3.Session:
        return self._base

    def client(self, org: OrgConfig, service: str) -> Any:
        """A boto3 client for `service` in the org's account and region."""
        entry = self._session(org)
        client = entry.clients.get(service)
        if client is None:
            client = self._make_client(service, org.aws.region, entry.credentials)
            entry.clients[service] = client
        return client

    def credentials(self, org: OrgConfig) -> Credentials:
        """Credentials for signing non-boto3 requests (the ParallelCluster REST API)."""
        entry = self._session(org)
        if entry.credentials:
            return Credentials(
                entry.credentials["aws_access_key_id"],
                entry.credentials["aws_secret_access_key"],
                entry.credentials["aws_session_token"],
            )
        credentials = self._base.get_credentials()
        if credentials is None:
            raise RuntimeError("no AWS credentials found (set AWS_ACCESS_KEY_ID or a profile)")
        frozen = credentials.get_frozen_credentials()
        return Credentials(frozen.access_key, frozen.secret_key, frozen.token)

    def home_client(self, service: str, region: str) -> Any:
        """A boto3 client in Pitcrew's own account: the base session's credentials (the standard chain),
        never an org's role. For what Pitcrew owns itself, such as the central EventBridge queue.

        Made from the same base session and client config as the org clients, but not cached: the caller
        keeps it. SQS gets a longer read timeout, since a long poll holds its answer up to 20 s.
        """
        config = CLIENT_CONFIG
        if service == "sqs":
            config = CLIENT_CONFIG.merge(Config(read_timeout=max(CLIENT_CONFIG.read_timeout, 20 + 10)))
        with self._client_lock:
            return self._watched(self._base.client(service, region_name=region, config=config))

    def _make_client(self, service: str, region: str, credentials: dict[str, str]) -> Any:
        with self._client_lock:
            return self._watched(self._base.client(service, region_name=region, config=CLIENT_CONFIG, **credentials))

    def _session(self, org: OrgConfig) -> _OrgSession:
        with self._lock:
            # Keyed by everything that decides the session, so an org whose account or role changes
            # (a reloaded program file, a test's variant) never reuses the old account's credentials.
            key = (org.id, org.aws.account_id, org.aws.region, org.aws.role_arn or "", org.aws.external_id or "")
            org_lock = self._org_locks.setdefault(key, threading.Lock())
        with org_lock:  # one assume_role per org at a time, others wait and reuse it
            entry = self._sessions.get(key)
            if entry is None or entry.expires_at - self._clock() < REFRESH_BEFORE_EXPIRY:
                entry = self._open(org)
                self._sessions[key] = entry
            return entry

    def _open(self, org: OrgConfig) -> _OrgSession:
        if not org.aws.role_arn:
            return _OrgSession(credentials={}, expires_at=float("inf"))
        sts = self._sts.get(org.aws.region)
        if sts is None:
            sts = self._sts[org.aws.region] = self._make_client("sts", org.aws.region, {})
        request: dict[str, Any] = {
            "RoleArn": org.aws.role_arn,
            "RoleSessionName": f"{self._session_name}-{org.id}"[:64],
            "DurationSeconds": SESSION_SECONDS,
        }
        if org.aws.external_id:
            request["ExternalId"] = org.aws.external_id
        answer = sts.assume_role(**request)
        self.assume_role_calls += 1
        creds = answer["Credentials"]
        return _OrgSession(
            credentials={
                "aws_access_key_id": creds["AccessKeyId"],
                "aws_secret_access_key": creds["SecretAccessKey"],
                "aws_session_token": creds["SessionToken"],
            },
            expires_at=creds["Expiration"].timestamp(),
        )
