"""Deep health checks: the command's parsing, the checks chosen, which nodes can be checked, the stored request, the
watch's verdict and the alert's diagnosis line. Pure."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from bot.alerts.checks import with_check
from bot.clusters.checks import check_request, chosen_checks, uncheckable
from bot.clusters.model import Backend, Cluster, InstanceGroup, Node, hyperpod_node_health
from bot.clusters.progress import QUIET_REBOOT_POLLS, Kind, State, Watch, judge
from bot.clusters.requests import BadRequest, CheckRequest, from_json, operation_summary, to_json
from bot.commands import CheckNodes, ClusterRef, UsageError, parse_cluster_command

A, B = "i-0123456789abcdef0", "i-0fedcba9876543210"


def node(node_id: str, status: str = "Running", group: str = "workers", message: str = "") -> Node:
    return Node(node_id, group, "ml.p5.48xlarge", status, hyperpod_node_health(status), message=message)


def cluster(*nodes: Node) -> Cluster:
    groups = (InstanceGroup("workers", "ml.p5.48xlarge", current=len(nodes), target=len(nodes)),)
    return Cluster("kumo-labs", "c1", Backend.HYPERPOD, "InService", groups=groups, nodes=tuple(nodes))


def test_the_command_parses_nodes_and_flags() -> None:
    assert parse_cluster_command(f"check c1 {A} {B} {A} --stress") == CheckNodes(
        cluster=ClusterRef("c1"), node_ids=(A, B), stress=True
    )
    assert parse_cluster_command(f"check kumo-labs/c1 {A} --connectivity --dry-run") == CheckNodes(
        cluster=ClusterRef("c1", "kumo-labs"), node_ids=(A,), connectivity=True, dry_run=True
    )


@pytest.mark.parametrize(
    ("text", "said"),
    [
        ("check", "needs a cluster name"),
        ("check c1", "needs the ids of the nodes"),
        ("check c1 node-1", "is not a node id"),
        (f"check c1 {A} --all", "is not an option"),
        (f"check bad_name {A}", "is not a cluster name"),
    ],
)
def test_bad_commands_say_what_and_how(text: str, said: str) -> None:
    with pytest.raises(UsageError) as error:
        parse_cluster_command(text)
    assert said in error.value.message and error.value.usage.startswith("/cluster check CLUSTER NODE...")


@given(st.booleans(), st.booleans())
def test_both_checks_unless_one_is_named(stress: bool, connectivity: bool) -> None:
    checks = chosen_checks(stress=stress, connectivity=connectivity)
    if stress == connectivity:
        assert checks == ("InstanceStress", "InstanceConnectivity")
    else:
        assert checks == (("InstanceStress",) if stress else ("InstanceConnectivity",))


def test_which_nodes_can_be_checked() -> None:
    c = cluster(node(A), node(B, "Failure"), node("i-0aaaaaaaaaaaaaaaa", "DeepHealthCheckInProgress"))
    assert uncheckable(c, [A, B]) is None
    assert "is not a node of" in (uncheckable(c, ["i-0bbbbbbbbbbbbbbbb"]) or "")
    assert "already in a deep health check" in (uncheckable(c, ["i-0aaaaaaaaaaaaaaaa"]) or "")
    pending = cluster(node(A, "Pending"))
    assert "Running or in Failure" in (uncheckable(pending, [A]) or "")


def test_the_request_round_trips_and_is_read_strictly() -> None:
    request = check_request(cluster(node(A), node(B, group="other")), [A, B], ["InstanceStress"])
    assert request.node_groups == ("workers", "other") and request.groups == ("other", "workers")
    stored = to_json(request)
    assert from_json(Kind.CHECK, Backend.HYPERPOD, stored) == request
    for broken in (
        {**stored, "checks": ["Everything"]},
        {**stored, "node_groups": ["workers"]},
        {**stored, "checks": []},
    ):
        with pytest.raises(BadRequest):
            from_json(Kind.CHECK, Backend.HYPERPOD, broken)

    class Row:
        kind, org_id, cluster_name, backend, request = "check", "kumo-labs", "c1", "hyperpod", stored

    assert operation_summary(Row()) == f"check kumo-labs/c1 {A} {B} (InstanceStress)"


def test_the_watch_waits_for_the_check_and_says_each_result() -> None:
    request = CheckRequest(
        node_ids=(A, B), groups=("workers",), before_ids=(A, B), successful=(A, B), node_groups=("workers", "workers")
    )
    watch = Watch()
    checking = cluster(node(A, "DeepHealthCheckInProgress"), node(B, "DeepHealthCheckInProgress"))
    assert judge(Kind.CHECK, request, checking, watch).state is State.GOING
    half = cluster(node(A), node(B, "DeepHealthCheckInProgress"))
    assert judge(Kind.CHECK, request, half, watch).state is State.GOING
    over = cluster(node(A), node(B, "Failure", message="Deep health check failed: GPU 3"))
    verdict = judge(Kind.CHECK, request, over, watch)
    assert verdict.state is State.DONE
    assert f"passed: `{A}` Running" in verdict.reason
    assert f"`{B}` failed the deep health check (Failure: Deep health check failed: GPU 3)" in verdict.reason


def test_a_check_never_seen_is_judged_after_quiet_polls() -> None:
    request = CheckRequest(
        node_ids=(A,), groups=("workers",), before_ids=(A,), successful=(A,), node_groups=("workers",)
    )
    watch = Watch()
    states = [judge(Kind.CHECK, request, cluster(node(A)), watch).state for _ in range(QUIET_REBOOT_POLLS)]
    assert states[-1] is State.DONE and set(states[:-1]) == {State.GOING}


def test_the_diagnosis_keeps_hyperpods_word_and_one_check_line() -> None:
    agent = "HyperPod: NvidiaErrorTerminate (XidHardwareFailure)"
    running = with_check(agent, "Deep health check running (InstanceStress)")
    assert running == f"{agent} · Deep health check running (InstanceStress)"
    assert with_check(running, "Deep health check passed") == f"{agent} · Deep health check passed"
    assert with_check("", "Deep health check failed: x") == "Deep health check failed: x"
    assert len(with_check("x" * 400, "Deep health check failed")) == 300
