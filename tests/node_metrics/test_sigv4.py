"""SigV4 for Amazon Managed Service for Prometheus: the reader's requests pass a local gate that recomputes
botocore's signature from the credentials it knows (refusing unsigned, tampered, mis-scoped or wrongly signed
requests, as AMP does) and hands them to a real Prometheus."""

from __future__ import annotations

import hmac
import threading
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any
from urllib.parse import urlencode

import httpx
import pytest
from botocore.auth import SigV4Auth
from botocore.awsrequest import AWSRequest
from botocore.credentials import Credentials

from bot.clusters.accounts import AwsAccounts
from bot.config import MetricsConfig, OrgConfig, load_program
from bot.node_metrics.prometheus import READS, MetricsError, PrometheusReader, reader_for
from bot.node_metrics.series import ClusterMetrics, Series, Signal
from sandbox.world import EXAMPLE_PROGRAM

T0 = 1_764_000_000.0
START, END = datetime.fromtimestamp(T0, UTC), datetime.fromtimestamp(T0 + 600, UTC)
REGION = "us-east-1"
WORKSPACE = "/workspaces/ws-0123456789/"
KEY = Credentials("AKIAPITCREWTEST00001", "secret-of-the-test-key", "session-token-of-the-test")


@dataclass
class _Seen:
    accepted: list[tuple[str, str]] = field(default_factory=list)  # (access key, region) of each good request
    refused: list[str] = field(default_factory=list)  # why each bad one was refused


class SigV4Gate:
    """AMP's front door in miniature: `known` maps access keys to their credentials; a request is let through
    to `upstream` (a real Prometheus) only if its Authorization header carries botocore's signature of exactly
    this method, path, query, signed headers and body, for service aps in `region`, dated within 5 minutes."""

    def __init__(self, *, upstream: str, known: dict[str, Credentials], region: str = REGION) -> None:
        self.seen = _Seen()
        gate = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self) -> None:
                body = self.rfile.read(int(self.headers.get("Content-Length", 0)))
                problem = gate.check("POST", self.path, dict(self.headers.items()), body, known, region)
                if problem:
                    gate.seen.refused.append(problem)
                    self._answer(403, b'{"message": "%s"}' % problem.encode())
                    return
                if not self.path.startswith(WORKSPACE):
                    self._answer(404, b'{"message": "no such workspace"}')
                    return
                target = upstream + "/" + self.path.removeprefix(WORKSPACE)
                # Generous: on a loaded machine the real Prometheus behind the gate may take seconds (ReadError at 5 s).
                answer = httpx.post(
                    target, content=body, headers={"Content-Type": self.headers["Content-Type"]}, timeout=60.0
                )
                self._answer(answer.status_code, answer.content)

            def _answer(self, status: int, body: bytes) -> None:
                self.send_response(status)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)

            def log_message(self, *args: Any) -> None:
                pass

        class Server(ThreadingHTTPServer):
            # The reader sends its queries at once (one per metric, READS); socketserver's backlog of 5 reset
            # the extra connections when the machine was loaded (ReadError), as no real gateway would.
            request_queue_size = 128
            daemon_threads = True

        self.server = Server(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}{WORKSPACE}"
        threading.Thread(target=self.server.serve_forever, daemon=True).start()

    def check(
        self, method: str, path: str, headers: dict[str, str], body: bytes, known: dict[str, Credentials], region: str
    ) -> str | None:
        """Why the request is refused, or None when its signature is botocore's for these credentials."""
        lower = {name.lower(): value for name, value in headers.items()}
        authorization = lower.get("authorization", "")
        if not authorization.startswith("AWS4-HMAC-SHA256 "):
            return "Missing Authentication Token"
        fields = dict(part.strip().split("=", 1) for part in authorization.removeprefix("AWS4-HMAC-SHA256 ").split(","))
        access_key, day, scope_region, service, terminal = fields["Credential"].split("/")
        credentials = known.get(access_key)
        if credentials is None:
            return "The security token included in the request is invalid"
        if (scope_region, service, terminal) != (region, "aps", "aws4_request"):
            return f"Credential should be scoped to a valid region and service aps, not {scope_region}/{service}"
        amz_date = lower.get("x-amz-date", "")
        signed_at = datetime.strptime(amz_date, "%Y%m%dT%H%M%SZ").replace(tzinfo=UTC) if amz_date else None
        if signed_at is None or abs(datetime.now(UTC) - signed_at) > timedelta(minutes=5) or day != amz_date[:8]:
            return "Signature expired or not yet valid"
        signed_names = fields["SignedHeaders"].split(";")
        if credentials.token and (
            "x-amz-security-token" not in signed_names or lower.get("x-amz-security-token") != credentials.token
        ):
            return "The security token included in the request is invalid"
        # Recompute: the same request as botocore saw it, only the headers the client said it signed.
        again = AWSRequest(
            method=method,
            url=f"http://{lower['host']}{path}",
            data=body,
            headers={name: lower[name] for name in signed_names if name in lower},
        )
        again.context["timestamp"] = amz_date
        signer = SigV4Auth(credentials, "aps", region)
        expected = signer.signature(signer.string_to_sign(again, signer.canonical_request(again)), again)
        if signer.signed_headers(signer.headers_to_sign(again)) != fields["SignedHeaders"]:
            return "The request signature we calculated does not match: signed headers differ"
        if not hmac.compare_digest(expected, fields["Signature"]):
            return "The request signature we calculated does not match the signature you provided"
        self.seen.accepted.append((access_key, scope_region))
        return None

    def close(self) -> None:
        self.server.shutdown()
        self.server.server_close()


@pytest.fixture(scope="module")
def held() -> ClusterMetrics:
    times = tuple(T0 + 30 * i for i in range(21))
    return ClusterMetrics(
        cluster="amp-cluster",
        start=START,
        end=END,
        step_seconds=30,
        series=(
            Series(Signal.SM_CLOCK, "i-0sig", "2", times, tuple(1980.0 - i for i in range(21))),
            Series(Signal.EFA_TX, "i-0sig", "rdmap0s31", times, (7.5e9,) * 21),
        ),
    )


@pytest.fixture
def gate_for(prometheus_with: Callable[..., str], held: ClusterMetrics) -> Iterator[Callable[..., SigV4Gate]]:
    gates: list[SigV4Gate] = []

    def make(known: dict[str, Credentials], region: str = REGION) -> SigV4Gate:
        gates.append(SigV4Gate(upstream=prometheus_with(held), known=known, region=region))
        return gates[-1]

    yield make
    for gate in gates:
        gate.close()


def _amp(url: str, *, sigv4: bool = True) -> MetricsConfig:
    return MetricsConfig(prometheus_url=url, sigv4=sigv4)


async def _read(reader: PrometheusReader) -> ClusterMetrics:
    try:
        return await reader.cluster_metrics("amp-cluster", start=START, end=END)
    finally:
        await reader.aclose()


async def test_signed_reads_pass_the_gate_and_read_what_prometheus_holds(
    gate_for: Callable[..., SigV4Gate], prometheus_with: Callable[..., str], held: ClusterMetrics
) -> None:
    gate = gate_for({KEY.access_key: KEY})
    calls: list[int] = []

    def credentials() -> Credentials:
        calls.append(1)
        return KEY

    signed = await _read(PrometheusReader(config=_amp(gate.url), credentials=credentials, region=REGION))
    direct = await _read(PrometheusReader(config=_amp(prometheus_with(held), sigv4=False)))
    assert signed == direct
    assert signed.series and {s.node for s in signed.series} == {"i-0sig"}
    assert gate.seen.refused == []
    assert gate.seen.accepted == [(KEY.access_key, REGION)] * len(READS)  # one signed query per metric
    assert len(calls) == len(READS)  # fresh credentials for each request: a renewed role is picked up


async def test_rotated_credentials_are_used_as_they_come(gate_for: Callable[..., SigV4Gate]) -> None:
    renewed = Credentials("AKIAPITCREWTEST00002", "the-renewed-secret", "the-renewed-token")
    gate = gate_for({KEY.access_key: KEY, renewed.access_key: renewed})
    # As many credentials as the reader makes signed queries (one per metric read, READS): a fixed count ran out
    # when the Neuron metrics came, and a StopIteration raised in the credentials' thread hung the read.
    renewals = len(READS) - 4
    handed = iter([KEY] * 4 + [renewed] * renewals)
    await _read(PrometheusReader(config=_amp(gate.url), credentials=lambda: next(handed), region=REGION))
    assert sorted(key for key, _ in gate.seen.accepted) == [KEY.access_key] * 4 + [renewed.access_key] * renewals


@pytest.mark.parametrize(
    ("credentials", "region", "refusal"),
    [
        (Credentials(KEY.access_key, "not-the-secret", KEY.token), REGION, "does not match the signature"),
        (Credentials(KEY.access_key, KEY.secret_key, "another-token"), REGION, "security token"),
        (Credentials("AKIAUNKNOWN000000000", "whatever", None), REGION, "security token"),
        (KEY, "eu-west-1", "scoped to a valid region"),
    ],
    ids=["wrong-secret", "wrong-token", "unknown-key", "wrong-region"],
)
async def test_wrong_credentials_fail_with_what_the_gate_said(
    gate_for: Callable[..., SigV4Gate], credentials: Credentials, region: str, refusal: str
) -> None:
    gate = gate_for({KEY.access_key: KEY})
    with pytest.raises(MetricsError) as raised:
        await _read(PrometheusReader(config=_amp(gate.url), credentials=lambda: credentials, region=region))
    message = str(raised.value)
    assert message.startswith(f"Prometheus at {gate.url.rstrip('/')} refused ")
    assert "HTTP 403" in message and refusal in message and "\n" not in message
    assert gate.seen.accepted == []


async def test_an_unsigned_request_is_refused(gate_for: Callable[..., SigV4Gate]) -> None:
    gate = gate_for({KEY.access_key: KEY})
    with pytest.raises(MetricsError, match=r"HTTP 403.*Missing Authentication Token"):
        await _read(PrometheusReader(config=_amp(gate.url, sigv4=False)))


def test_the_gate_refuses_a_signed_request_whose_body_was_changed(gate_for: Callable[..., SigV4Gate]) -> None:
    """The gate is what the tests above trust, so it must tell a tampered request from the genuine one."""
    gate = gate_for({KEY.access_key: KEY})
    url = gate.url + "api/v1/query_range"
    body = urlencode({"query": "up", "start": T0, "end": T0 + 60, "step": 30})
    request = AWSRequest(
        method="POST", url=url, data=body, headers={"Content-Type": "application/x-www-form-urlencoded"}
    )
    SigV4Auth(KEY, "aps", REGION).add_auth(request)
    headers = dict(request.headers.items())
    tampered = body.replace("up", "DCGM_FI_DEV_SM_CLOCK")
    assert httpx.post(url, content=tampered.encode(), headers=headers).status_code == 403
    assert httpx.post(url, content=body.encode(), headers=headers).status_code == 200
    assert gate.seen.refused == ["The request signature we calculated does not match the signature you provided"]


async def test_no_credentials_to_sign_with_is_one_clear_line(gate_for: Callable[..., SigV4Gate]) -> None:
    gate = gate_for({KEY.access_key: KEY})

    def missing() -> Credentials:
        raise RuntimeError("no AWS credentials found (set AWS_ACCESS_KEY_ID or a profile)")

    with pytest.raises(MetricsError) as raised:
        await _read(PrometheusReader(config=_amp(gate.url), credentials=missing, region=REGION))
    assert str(raised.value) == (
        f"Prometheus at {gate.url.rstrip('/')}: no AWS credentials to sign with SigV4 "
        "(no AWS credentials found (set AWS_ACCESS_KEY_ID or a profile))"
    )


def _org(metrics: MetricsConfig | None, *, index: int = 0) -> OrgConfig:
    return load_program(EXAMPLE_PROGRAM).orgs[index].model_copy(update={"metrics": metrics})


async def test_reader_for_signs_with_the_orgs_role_in_its_region(
    gate_for: Callable[..., SigV4Gate], moto_endpoint: str
) -> None:
    accounts = AwsAccounts()
    placeholder = _org(_amp("http://127.0.0.1:1/"), index=1)  # sakura-ai: its own role, in us-west-2
    assert placeholder.aws.role_arn and placeholder.aws.region == "us-west-2"
    role = accounts.credentials(placeholder)  # what STS (moto) gave for the org's role; cached by AwsAccounts
    base = accounts.base_session.get_credentials()
    assert base is not None and role.access_key != base.access_key
    gate = gate_for({role.access_key: role}, region="us-west-2")
    org = _org(_amp(gate.url), index=1)
    reader = reader_for(org, accounts)
    assert reader is not None
    read = await _read(reader)
    assert {s.node for s in read.series} == {"i-0sig"}
    assert set(gate.seen.accepted) == {(role.access_key, "us-west-2")}


async def test_reader_for_without_sigv4_sends_no_signature(
    prometheus_with: Callable[..., str], held: ClusterMetrics
) -> None:
    seen: list[str | None] = []

    async def note(request: httpx.Request) -> None:
        seen.append(request.headers.get("Authorization"))

    async with httpx.AsyncClient(event_hooks={"request": [note]}) as http:
        reader = reader_for(_org(_amp(prometheus_with(held), sigv4=False)), AwsAccounts(), http=http)
        assert reader is not None
        read = await _read(reader)
    assert read.series and seen == [None] * len(READS)


def test_reader_for_an_org_without_metrics_is_none() -> None:
    assert reader_for(_org(None), AwsAccounts()) is None
