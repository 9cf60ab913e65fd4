"""bot.clusters.health: one health rule and one colour rule, from a live cluster or from what was stored. Pure."""

from __future__ import annotations

from bot.clusters.health import Look, cluster_health, judge, seen_health
from bot.clusters.model import Backend, Cluster, Health, Node, Phase


def ready(total: int = 165, healthy: int = 165, unhealthy: int = 0, *, known: bool = True) -> Look:
    return judge(
        phase=Phase.READY, fleet_status="", total=total, healthy=healthy, unhealthy=unhealthy, known=known
    ).look


def test_the_colour_rule() -> None:
    assert ready() is Look.HEALTHY
    assert ready(healthy=158, unhealthy=4) is Look.FAILING, "any unhealthy node is red"
    assert ready(healthy=162) is Look.CHANGING, "nodes in transition are yellow"
    assert ready(0, 0) is Look.CHANGING, "nothing to call healthy"
    assert ready(known=False) is Look.CHANGING
    assert judge(phase=Phase.FAILED, fleet_status="", total=1, healthy=1, unhealthy=0).look is Look.FAILING
    assert judge(phase=Phase.UPDATING, fleet_status="", total=1, healthy=1, unhealthy=0).look is Look.CHANGING
    assert judge(phase=Phase.READY, fleet_status="RUNNING", total=1, healthy=1, unhealthy=0).look is Look.HEALTHY


def test_a_stopped_fleet_is_stopped_not_healthy_and_one_on_its_way_is_changing() -> None:
    stopped = judge(phase=Phase.READY, fleet_status="STOPPED", total=1, healthy=1, unhealthy=0)
    assert stopped.look is Look.STOPPED and stopped.summary() == "compute fleet stopped · 1/1 nodes healthy"
    for word, said in (("STOP_REQUESTED", "stopping"), ("STARTING", "starting")):
        health = judge(phase=Phase.READY, fleet_status=word, total=1, healthy=1, unhealthy=0)
        assert health.look is Look.CHANGING and health.fleet == said
    assert judge(phase=Phase.READY, fleet_status="STOPPED", total=2, healthy=1, unhealthy=1).look is Look.FAILING


def test_the_words_are_the_same_counts_everywhere() -> None:
    health = judge(phase=Phase.READY, fleet_status="", total=165, healthy=158, unhealthy=4)
    assert health.counts() == "158/165 nodes healthy, 4 unhealthy, 3 in transition"
    assert health.counts(strong=True) == "158/165 nodes healthy, *4 unhealthy*, 3 in transition"
    unknown = judge(phase=Phase.READY, fleet_status="", total=1, healthy=0, unhealthy=0, known=False)
    assert unknown.counts() == "nodes unknown"


def test_a_live_cluster_and_its_stored_counts_read_the_same() -> None:
    nodes = (
        Node("i-head", "HeadNode", "m5.8xlarge", "running", Health.HEALTHY),
        Node("i-1", "gpu", "p5.48xlarge", "impaired", Health.UNHEALTHY),
        Node("i-2", "gpu", "p5.48xlarge", "pending", Health.TRANSITIONAL),
    )
    live = Cluster("o", "c", Backend.PCLUSTER, "UPDATE_COMPLETE", nodes=nodes, extra={"compute_fleet": "RUNNING"})
    stored = seen_health(
        backend="pcluster", status="UPDATE_COMPLETE", compute_fleet="RUNNING", total=3, healthy=1, unhealthy=1
    )
    assert cluster_health(live) == stored and stored.look is Look.FAILING
    hyperpod = Cluster("o", "h", Backend.HYPERPOD, "InService", nodes=nodes[:1], extra={"compute_fleet": "STOPPED"})
    assert cluster_health(hyperpod).look is Look.HEALTHY, "no compute fleet to speak of on HyperPod"
    assert seen_health(backend="slurm", status="?", compute_fleet="", total=1, healthy=1, unhealthy=0).look is (
        Look.CHANGING
    )
