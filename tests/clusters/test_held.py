"""The one held figure (bot.clusters.held), pure: running nodes, targets of groups on their way to them, and
nothing for a stopped fleet, a cluster being deleted or a failed one."""

from __future__ import annotations

from bot.clusters.held import back_on_start, cluster_held, held_instances, holds
from bot.clusters.model import Backend, Cluster, Health, InstanceGroup, Node

P5, ML_P5, HEAD = "p5.48xlarge", "ml.p5.48xlarge", "m5.xlarge"


def node(i: int, group: str, instance_type: str = P5, status: str = "running") -> Node:
    return Node(node_id=f"i-{group}{i}", group=group, instance_type=instance_type, status=status, health=Health.HEALTHY)


def pcluster(
    *, nodes: int, target: int | None, fleet: str = "RUNNING", status: str = "UPDATE_COMPLETE", state: str = "running"
) -> Cluster:
    return Cluster(
        org="kumo-labs",
        name="kumo-p5-dev",
        backend=Backend.PCLUSTER,
        status=status,
        groups=(
            InstanceGroup("HeadNode", HEAD, current=1, target=None),
            InstanceGroup("compute-gpu", P5, current=nodes, target=target),
        ),
        nodes=(node(0, "HeadNode", HEAD), *(node(i, "compute-gpu", status=state) for i in range(nodes))),
        extra={"compute_fleet": fleet},
    )


def hyperpod(*, nodes: int, target: int, status: str = "InService", node_status: str = "Running") -> Cluster:
    return Cluster(
        org="kumo-labs",
        name="kumo-p5-train",
        backend=Backend.HYPERPOD,
        status=status,
        groups=(InstanceGroup("workers", ML_P5, current=nodes, target=target),),
        nodes=tuple(node(i, "workers", ML_P5, node_status) for i in range(nodes)),
    )


def test_running_nodes_are_held_and_head_nodes_keep_their_own_type() -> None:
    assert cluster_held(pcluster(nodes=4, target=4)) == {P5: 4, HEAD: 1}


def test_a_group_on_its_way_to_its_target_holds_the_target() -> None:
    assert cluster_held(hyperpod(nodes=4, target=8, status="Updating"))[ML_P5] == 8
    assert cluster_held(hyperpod(nodes=0, target=10, status="Creating"))[ML_P5] == 10
    assert cluster_held(pcluster(nodes=0, target=2, fleet="STARTING"))[P5] == 2  # a fleet starting comes back
    assert cluster_held(hyperpod(nodes=8, target=4, status="Updating"))[ML_P5] == 8, "shrinking: nodes still run"


def test_a_stopped_fleet_holds_only_its_head_node_whatever_its_count() -> None:
    """Issue 21: Stop compute fleet and a scale to 2 left the plans counting 2 the views did not."""
    assert cluster_held(pcluster(nodes=0, target=2, fleet="STOPPED")) == {HEAD: 1}
    assert cluster_held(pcluster(nodes=4, target=4, fleet="STOP_REQUESTED")) == {P5: 4, HEAD: 1}, "still running"
    assert cluster_held(pcluster(nodes=4, target=4, fleet="STOPPED", state="stopped")) == {HEAD: 1}


def test_nodes_leaving_hold_nothing_but_failed_and_stopped_ones_of_a_running_fleet_do() -> None:
    for status in ("terminated", "shutting-down"):
        assert not holds(node(0, "q", status=status)), status
    for status in ("stopped", "stopping"):  # one stopped instance: the cluster still counts it (a static node)
        assert holds(node(0, "q", status=status)) and not holds(node(0, "q", status=status), fleet_down=True)
    assert cluster_held(pcluster(nodes=4, target=None, state="stopped")) == {P5: 4, HEAD: 1}
    assert not holds(node(0, "workers", ML_P5, "ShuttingDown"))
    assert holds(node(0, "workers", ML_P5, "Failure")) and holds(node(0, "q", status="pending"))
    assert cluster_held(pcluster(nodes=4, target=None, state="terminated")) == {HEAD: 1}


def test_a_cluster_being_deleted_or_failed_holds_only_what_still_runs() -> None:
    assert cluster_held(hyperpod(nodes=3, target=8, status="Deleting"))[ML_P5] == 3
    assert cluster_held(hyperpod(nodes=0, target=8, status="Failed")) == {}
    assert cluster_held(pcluster(nodes=0, target=4, status="CREATE_FAILED")) == {HEAD: 1}


def test_both_backends_count_as_one_type_across_clusters() -> None:
    together = held_instances([hyperpod(nodes=32, target=32), pcluster(nodes=0, target=2, fleet="STOPPED")])
    assert together == {P5: 32, HEAD: 1}


def test_ml_and_ec2_names_of_one_group_meet_as_one_type() -> None:
    mixed = Cluster(
        org="kumo-labs",
        name="x",
        backend=Backend.HYPERPOD,
        status="Updating",
        groups=(InstanceGroup("workers", P5, current=2, target=3),),
        nodes=(node(0, "workers", ML_P5), node(1, "workers", ML_P5)),
    )
    assert cluster_held(mixed) == {ML_P5: 3}


def test_starting_a_stopped_fleet_brings_its_counts_back_and_that_is_what_start_requests() -> None:
    assert back_on_start(pcluster(nodes=0, target=2, fleet="STOPPED")) == {P5: 2}
    assert back_on_start(pcluster(nodes=4, target=4)) == {}, "a running fleet asks for nothing"
    assert back_on_start(hyperpod(nodes=4, target=4)) == {}
