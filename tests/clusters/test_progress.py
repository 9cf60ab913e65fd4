"""When a running change is done, failed or still going: judged from the cluster as AWS shows it. Pure."""

from __future__ import annotations

from collections.abc import Iterable, Mapping

from bot.clusters.model import Backend, Cluster, Health, InstanceGroup, Node, hyperpod_node_health
from bot.clusters.progress import MISSING_POLLS, QUIET_REBOOT_POLLS, Kind, State, Watch, judge
from bot.clusters.requests import ChangeRequest, LaunchRequest, from_json


def typed(kind: Kind, request: Mapping[str, object]) -> ChangeRequest:
    """The request as Operation.request stores it, read back (a launch's own request is not judged)."""
    return LaunchRequest(name="c1") if kind is Kind.LAUNCH else from_json(kind, Backend.HYPERPOD, dict(request))


def node(node_id: str, status: str = "Running", group: str = "workers", message: str = "") -> Node:
    return Node(node_id, group, "ml.p5.48xlarge", status, hyperpod_node_health(status), message=message)


def hyperpod(status: str, nodes: Iterable[Node] = (), *, current: int = 2, target: int = 2, **extra: str) -> Cluster:
    groups = (InstanceGroup("workers", "ml.p5.48xlarge", current=current, target=target),)
    return Cluster("kumo-labs", "c1", Backend.HYPERPOD, status, groups=groups, nodes=tuple(nodes), extra=dict(extra))


def states(kind: Kind, request: Mapping[str, object], *clusters: Cluster | None) -> list[State]:
    watch = Watch()
    return [judge(kind, typed(kind, request), cluster, watch).state for cluster in clusters]


def test_launch_is_done_in_service_and_failed_with_aws_message() -> None:
    assert states(Kind.LAUNCH, {}, None, hyperpod("Creating"), hyperpod("InService")) == [
        State.GOING,
        State.GOING,
        State.DONE,
    ]
    failed = Cluster("o", "c", Backend.HYPERPOD, "Failed", failure_message="capacity")
    assert judge(Kind.LAUNCH, typed(Kind.LAUNCH, {}), failed, Watch()).reason == "capacity"


def test_a_cluster_never_seen_is_lost_after_enough_polls() -> None:
    seen = states(Kind.LAUNCH, {}, *([None] * MISSING_POLLS))
    assert seen[-1] is State.FAILED and set(seen[:-1]) == {State.GOING}


def test_scale_waits_for_current_to_reach_target_in_service() -> None:
    request = {"group": "workers", "count": 4, "instance_type": "ml.p5.48xlarge"}
    assert states(
        Kind.SCALE,
        request,
        hyperpod("Updating", current=2, target=4),
        hyperpod("InService", current=3, target=4),
        hyperpod("InService", current=4, target=4),
    ) == [State.GOING, State.GOING, State.DONE]


def test_scale_of_a_pcluster_queue_done_when_update_complete() -> None:
    groups = (InstanceGroup("compute", "p5.48xlarge", current=4, target=4),)
    request = {"group": "compute/p5", "count": 4, "instance_type": "p5.48xlarge"}
    going = Cluster("o", "c", Backend.PCLUSTER, "UPDATE_IN_PROGRESS", groups=groups)
    done = Cluster("o", "c", Backend.PCLUSTER, "UPDATE_COMPLETE", groups=groups)
    failed = Cluster("o", "c", Backend.PCLUSTER, "UPDATE_FAILED", groups=groups)
    assert states(Kind.SCALE, request, going, done) == [State.GOING, State.DONE]
    assert states(Kind.SCALE, request, failed) == [State.FAILED]


def test_reboot_is_done_only_after_its_nodes_went_down_and_came_back() -> None:
    request = {"successful": ["i-00000001"], "groups": ["workers"], "before_ids": ["i-00000001", "i-00000002"]}
    up = hyperpod("InService", [node("i-00000001"), node("i-00000002")])
    down = hyperpod("InService", [node("i-00000001", "Pending"), node("i-00000002")])
    assert states(Kind.REBOOT, request, up, down, up) == [State.GOING, State.GOING, State.DONE]
    # A reboot too quick to see is called done after enough polls, not never.
    assert states(Kind.REBOOT, request, *([up] * QUIET_REBOOT_POLLS))[-1] is State.DONE


def test_replace_is_done_when_the_old_node_is_gone_and_the_group_is_whole_again() -> None:
    request = {"successful": ["i-00000001"], "groups": ["workers"], "before_ids": ["i-00000001", "i-00000002"]}
    shutting = hyperpod("InService", [node("i-00000001", "ShuttingDown"), node("i-00000002")])
    joining = hyperpod("InService", [node("i-00000002"), node("i-00000003", "Pending")], current=2)
    whole = hyperpod("InService", [node("i-00000002"), node("i-00000003")])
    assert states(Kind.REPLACE, request, shutting, joining, whole) == [State.GOING, State.GOING, State.DONE]
    # Done names the successor: the poll that saw it joining may never have come.
    verdict = judge(Kind.REPLACE, typed(Kind.REPLACE, request), whole, Watch())
    assert verdict.reason == "`i-00000001` replaced by `i-00000003`"


def test_replace_fails_when_the_new_node_fails() -> None:
    request = {"successful": ["i-00000001"], "groups": ["workers"], "before_ids": ["i-00000001"]}
    broken = hyperpod("InService", [node("i-00000009", "Failure", message="EFA health check failed")])
    verdict = judge(Kind.REPLACE, typed(Kind.REPLACE, request), broken, Watch())
    assert verdict.state is State.FAILED and "i-00000009" in verdict.reason and "EFA" in verdict.reason
    assert broken.nodes[0].health is Health.UNHEALTHY


def test_delete_is_done_when_the_cluster_is_gone() -> None:
    assert states(Kind.DELETE, {}, hyperpod("Deleting"), None) == [State.GOING, State.DONE]


def test_fleet_stop_is_done_when_the_fleet_is_stopped() -> None:
    def pcluster(fleet: str) -> Cluster:
        return Cluster("o", "c", Backend.PCLUSTER, "UPDATE_COMPLETE", extra={"compute_fleet": fleet})

    assert states(Kind.STOP_FLEET, {}, pcluster("STOPPING"), pcluster("STOPPED")) == [State.GOING, State.DONE]


def test_fleet_start_is_done_when_the_fleet_runs_with_its_static_nodes_back() -> None:
    def pcluster(fleet: str, running: int) -> Cluster:
        gpus = [Node(f"i-{n}", "gpu", "p5.48xlarge", "running", Health.HEALTHY) for n in range(running)]
        nodes = (*gpus, Node("i-head", "HeadNode", "m5.8xlarge", "running", Health.HEALTHY))
        groups = (InstanceGroup("HeadNode", "m5.8xlarge", 1, None), InstanceGroup("gpu", "p5.48xlarge", running, 2))
        return Cluster(
            "o", "c", Backend.PCLUSTER, "UPDATE_COMPLETE", groups, nodes=nodes, extra={"compute_fleet": fleet}
        )

    assert states(
        Kind.START_FLEET, {}, pcluster("START_REQUESTED", 0), pcluster("RUNNING", 1), pcluster("RUNNING", 2)
    ) == [State.GOING, State.GOING, State.DONE]
