"""ParallelCluster API calls are retried on throttling and transient failures, with capped exponential backoff
and full jitter like botocore's standard mode, against a real local HTTP server that answers as scripted."""

from __future__ import annotations

import json
import socket
import threading
from collections.abc import Iterator
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

import httpx
import pytest
from botocore.credentials import Credentials

from bot.clusters.parallelcluster import MAX_BACKOFF, ParallelClusterApiBackend, ParallelClusterApiError, backoff

ANSWERS: dict[int, tuple[int, dict[str, str], Any]] = {
    200: (200, {}, {"clusters": []}),
    202: (202, {}, {"cluster": {"clusterName": "kumo-new", "clusterStatus": "CREATE_IN_PROGRESS"}}),
    412: (412, {}, {"message": "Request would have succeeded, but DryRun flag is set."}),
    429: (429, {}, {"message": "Too Many Requests"}),
    500: (500, {}, {"message": "Internal server error"}),
    502: (502, {}, {"message": "Bad Gateway"}),
    503: (503, {}, {"message": "Service Unavailable"}),
    504: (504, {}, {"message": "Endpoint request timed out"}),
}


@dataclass
class ScriptedApi:
    """Answers requests in order from `script` (status codes, or (status, headers) pairs); records each."""

    script: list[int | tuple[int, dict[str, str]]] = field(default_factory=list)
    requests: list[tuple[str, str, str]] = field(default_factory=list)  # method, path with query, x-amz-date
    url: str = ""


@pytest.fixture
def api() -> Iterator[ScriptedApi]:
    scripted = ScriptedApi()

    class Handler(BaseHTTPRequestHandler):
        def _answer(self) -> None:
            length = int(self.headers.get("Content-Length") or 0)
            self.rfile.read(length)
            scripted.requests.append((self.command, self.path, self.headers.get("X-Amz-Date", "")))
            step = scripted.script.pop(0) if scripted.script else 200
            code, extra = step if isinstance(step, tuple) else (step, {})
            status, headers, payload = ANSWERS[code]
            data = json.dumps(payload).encode()
            self.send_response(status)
            for key, value in {**headers, **extra, "Content-Type": "application/json"}.items():
                self.send_header(key, value)
            self.send_header("Content-Length", str(len(data)))
            self.end_headers()
            self.wfile.write(data)

        do_GET = do_POST = do_PUT = do_PATCH = do_DELETE = _answer

        def log_message(self, format: str, *args: Any) -> None:  # quiet in test output
            pass

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    scripted.url = f"http://127.0.0.1:{server.server_address[1]}/prod"
    try:
        yield scripted
    finally:
        server.shutdown()
        server.server_close()


@dataclass
class Sleeps:
    seconds: list[float] = field(default_factory=list)

    def __call__(self, delay: float) -> None:
        self.seconds.append(delay)


def backend(url: str, sleeps: Sleeps, http: httpx.Client, rand: float = 1.0) -> ParallelClusterApiBackend:
    return ParallelClusterApiBackend(
        org_id="kumo-labs",
        api_url=url,
        region="us-east-1",
        credentials=lambda: Credentials("AKIDEXAMPLE", "secret"),
        ec2=None,
        http=http,
        sleep=sleeps,
        rand=lambda: rand,  # the top of the jitter range: the delays are the caps themselves
    )


@pytest.fixture
def http() -> Iterator[httpx.Client]:
    with httpx.Client(timeout=httpx.Timeout(5.0, connect=2.0)) as client:
        yield client


def test_a_throttled_then_unavailable_get_succeeds_on_the_third_attempt(api: ScriptedApi, http: httpx.Client) -> None:
    api.script = [429, 503, 200]
    sleeps = Sleeps()
    assert backend(api.url, sleeps, http).list_clusters() == []
    assert [method for method, _, _ in api.requests] == ["GET"] * 3
    # botocore's standard mode: rand * min(base * 2 ** i, 20 s), base 1 s when throttled, 50 ms otherwise.
    assert sleeps.seconds == [1.0, 0.1]
    assert all(signed for _, _, signed in api.requests), "each attempt is signed"


def test_failing_past_the_last_attempt_is_a_clear_error(api: ScriptedApi, http: httpx.Client) -> None:
    api.script = [503, 503, 503, 503]
    sleeps = Sleeps()
    with pytest.raises(ParallelClusterApiError) as raised:
        backend(api.url, sleeps, http).list_clusters()
    assert str(raised.value) == "ParallelCluster API answered 503 (after 3 attempts): Service Unavailable"
    assert raised.value.status == 503 and raised.value.attempts == 3
    assert len(api.requests) == 3 and len(sleeps.seconds) == 2, "three attempts in all, as botocore makes"
    assert api.script == [503], "the fourth answer was never asked for"


def test_retry_after_is_honoured_and_a_long_one_is_not_asked_early(api: ScriptedApi, http: httpx.Client) -> None:
    api.script = [(429, {"Retry-After": "3"}), 200]
    sleeps = Sleeps()
    backend(api.url, sleeps, http, rand=0.5).list_clusters()
    assert sleeps.seconds == [3.0], "the server's wait, not the shorter backoff (0.5 s)"
    api.requests.clear()
    api.script = [(429, {"x-amz-retry-after": "1500"}), 200]
    sleeps = Sleeps()
    backend(api.url, sleeps, http, rand=0.5).list_clusters()
    assert sleeps.seconds == [1.5], "x-amz-retry-after is milliseconds, as botocore reads it"
    api.requests.clear()
    api.script = [(429, {"Retry-After": "120"}), 200]
    sleeps = Sleeps()
    with pytest.raises(ParallelClusterApiError, match="asks to wait 120 s"):
        backend(api.url, sleeps, http).list_clusters()
    assert sleeps.seconds == [] and len(api.requests) == 1


def test_a_create_is_retried_only_where_the_first_attempt_certainly_did_nothing(
    api: ScriptedApi, http: httpx.Client
) -> None:
    # dry run: throttled, then passes (412); the create itself: 503 (refused at the gateway), then accepted.
    api.script = [429, 412, 503, 202]
    sleeps = Sleeps()
    backend(api.url, sleeps, http).create(name="kumo-new", configuration="Region: us-east-1\n")
    assert [(method, "dryrun=true" in path) for method, path, _ in api.requests] == [
        ("POST", True),
        ("POST", True),
        ("POST", False),
        ("POST", False),
    ]
    for answer in (500, 502, 504):  # the Lambda may have run (504: API Gateway stopped waiting; it did not)
        api.requests.clear()
        api.script = [412, answer, 202]
        with pytest.raises(ParallelClusterApiError) as raised:
            backend(api.url, Sleeps(), http).create(name="kumo-new", configuration="Region: us-east-1\n")
        assert raised.value.status == answer and raised.value.attempts == 1
        assert len(api.requests) == 2, f"a create that got {answer} is not sent again"
        api.script.clear()


def test_a_dry_run_update_is_retried_like_a_get(api: ScriptedApi, http: httpx.Client) -> None:
    api.script = [500, 412]
    changes = backend(api.url, Sleeps(), http).update(name="kumo-p5-dev", configuration="x: 1\n", dryrun_only=True)
    assert changes == [] and len(api.requests) == 2


def test_connection_errors_are_retried_then_raised(http: httpx.Client) -> None:
    with socket.socket() as closed:
        closed.bind(("127.0.0.1", 0))
        port = closed.getsockname()[1]  # bound, never listening: connections are refused
        sleeps = Sleeps()
        with pytest.raises(httpx.ConnectError):
            backend(f"http://127.0.0.1:{port}/prod", sleeps, http).list_clusters()
    assert sleeps.seconds == [0.05, 0.1]


def test_the_backoff_is_capped_and_jittered() -> None:
    assert backoff(1, throttled=True, rand=lambda: 1.0) == 1.0
    assert backoff(10, throttled=True, rand=lambda: 1.0) == MAX_BACKOFF
    assert backoff(3, throttled=False, rand=lambda: 0.5) == pytest.approx(0.1)
    assert backoff(2, throttled=True, rand=lambda: 0.0) == 0.0, "full jitter: anywhere from 0"
