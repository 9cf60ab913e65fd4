"""AWS and ParallelCluster errors become one line saying what happened and what to do next."""

from __future__ import annotations

import pytest
from botocore.exceptions import ClientError, EndpointConnectionError

from bot.clusters.fleet import describe_error, request_id
from bot.clusters.parallelcluster import ParallelClusterApiError


def client_error(code: str, message: str = "details", operation: str = "UpdateCluster") -> ClientError:
    response = {"Error": {"Code": code, "Message": message}, "ResponseMetadata": {"RequestId": "req-1234"}}
    return ClientError(response, operation)  # type: ignore[arg-type]


@pytest.mark.parametrize(
    ("code", "says"),
    [
        ("ResourceLimitExceeded", "raise the quota in Service Quotas"),
        ("ThrottlingException", "throttling requests even after retrying; wait a minute"),
        ("AccessDeniedException", "check the org's role and its trust policy"),
        ("ConflictException", "wait until it is InService"),
        ("ValidationException", "check the values named above"),
        ("ResourceInUse", "choose another name"),
        ("ResourceNotFound", "`/cluster list` shows what exists"),
    ],
)
def test_each_aws_error_says_what_to_do(code: str, says: str) -> None:
    line = describe_error(client_error(code, "Cluster kumo is Updating"))
    assert says in line
    assert "\n" not in line and "Traceback" not in line


def test_the_aws_message_is_kept_where_it_helps() -> None:
    line = describe_error(client_error("ValidationException", "1 validation error: InstanceCount must be >= 0"))
    assert "InstanceCount must be >= 0" in line


@pytest.mark.parametrize(
    ("status", "says"),
    [
        (400, "fix what the messages name"),
        (403, "resource policy"),
        (409, "busy with another change"),
        (429, "throttling"),
    ],
)
def test_parallelcluster_errors_keep_their_messages_and_say_what_next(status: int, says: str) -> None:
    error = ParallelClusterApiError(status, "Invalid cluster configuration.; MinCount must be <= MaxCount")
    line = describe_error(error)
    assert f"answered {status}" in line and "MinCount must be <= MaxCount" in line and says in line


def test_unreachable_and_unexpected_errors_say_so_without_internals() -> None:
    assert describe_error(EndpointConnectionError(endpoint_url="https://x")) == (
        "AWS unreachable (EndpointConnectionError)"
    )
    assert describe_error(KeyError("secret")) == "unexpected error (KeyError)"


def test_request_id_is_read_for_the_audit_log() -> None:
    assert request_id(client_error("ConflictException")) == "req-1234"
    assert request_id(KeyError("x")) == ""
