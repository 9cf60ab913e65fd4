"""Console links: the right service page in the right region and partition, names that cannot break a link."""

from __future__ import annotations

from datetime import UTC, datetime
from urllib.parse import urlsplit
from zoneinfo import ZoneInfo

from hypothesis import given
from hypothesis import strategies as st

from bot.alerts.kind import AlertView
from bot.alerts.kinds import KINDS
from bot.clusters.console import cluster_url, node_url
from bot.clusters.model import Backend, Cluster
from bot.monitor.idle import SeenBackends
from bot.slack.alerts import SlackAlerts
from storage.models import Episode


def test_a_hyperpod_cluster_links_to_its_sagemaker_cluster_page_in_its_region() -> None:
    assert cluster_url(Backend.HYPERPOD, "ap-northeast-1", "kumo-p5") == (
        "https://ap-northeast-1.console.aws.amazon.com/sagemaker/home?region=ap-northeast-1#/cluster-management/kumo-p5"
    )


def test_a_hyperpod_arn_gives_its_own_region() -> None:
    arn = "arn:aws:sagemaker:us-west-2:111111111111:cluster/abcdef012345"
    url = cluster_url("hyperpod", "us-east-1", arn)
    assert url.startswith("https://us-west-2.console.aws.amazon.com/sagemaker/home?region=us-west-2#")
    assert url.endswith("/cluster-management/abcdef012345")


def test_a_hyperpod_node_links_to_its_cluster_page() -> None:
    assert node_url(Backend.HYPERPOD, "us-east-1", "kumo-p5", "i-0abc") == cluster_url(
        Backend.HYPERPOD, "us-east-1", "kumo-p5"
    )


def test_a_parallelcluster_cluster_links_to_its_stack_and_a_node_to_its_instance() -> None:
    assert cluster_url(Backend.PCLUSTER, "us-east-1", "hoshi-trn1") == (
        "https://us-east-1.console.aws.amazon.com/cloudformation/home?region=us-east-1"
        "#/stacks?filteringText=hoshi-trn1&filteringStatus=active&viewNested=true"
    )
    assert node_url("pcluster", "eu-west-1", "hoshi-trn1", "i-0123456789abcdef0") == (
        "https://eu-west-1.console.aws.amazon.com/ec2/home?region=eu-west-1#InstanceDetails:instanceId=i-0123456789abcdef0"
    )


def test_china_and_govcloud_have_their_own_console_hosts() -> None:
    assert cluster_url(Backend.HYPERPOD, "cn-north-1", "a").startswith("https://cn-north-1.console.amazonaws.cn/")
    assert node_url(Backend.PCLUSTER, "us-gov-west-1", "a", "i-1").startswith("https://console.amazonaws-us-gov.com/")


@given(
    backend=st.sampled_from(list(Backend)),
    region=st.sampled_from(["us-east-1", "ap-northeast-1", "cn-north-1", "us-gov-west-1"]),
    name=st.text(min_size=1, max_size=70),
    node=st.text(min_size=1, max_size=40),
)
def test_no_name_breaks_a_slack_link_or_the_host(backend: Backend, region: str, name: str, node: str) -> None:
    for url in (cluster_url(backend, region, name), node_url(backend, region, name, node)):
        assert not set(url) & set("|<> \n")
        assert urlsplit(url).scheme == "https" and "console" in (urlsplit(url).hostname or "")
        assert f"region={region}" in url or region.startswith("us-gov-")


# ------------------------------------------------------------------ every alert links to its console pages


T0 = datetime(2026, 11, 30, 9, 0, tzinfo=UTC)


def _episode(kind: str, backend: str, node_key: str, node_ids: list[str]) -> Episode:
    return Episode(
        id=7,
        org_id="kumo-labs",
        backend=backend,
        cluster_name="kumo-p5-dev",
        node_key=node_key,
        kind=kind,
        state="open",
        node_ids=node_ids,
        status="stall" if kind == "job" else "Failure",
        message="4 \u00d7 p5.48xlarge\nabout $5,284 a day at the price table" if kind == "idle" else "",
        opened_at=T0,
        failing_since=T0,
        updated_at=T0,
    )


def _links(alerts: SlackAlerts, row: Episode) -> str:
    kind = KINDS[row.kind]
    view = AlertView(
        rows=(row,), org_name="Kumo Labs", tz=ZoneInfo("UTC"), now=T0, silence=None, actions=kind.actions([row])
    )
    reply = alerts.alert(kind, view)
    contexts = [e["text"] for b in reply.blocks if b["type"] == "context" for e in b["elements"]]
    return " ".join(t for t in contexts if t.startswith(":link:"))


async def test_every_alert_kind_links_its_cluster_and_a_parallelcluster_node_its_instance() -> None:
    seen = SeenBackends()
    dev = Cluster(org="kumo-labs", name="kumo-p5-dev", backend=Backend.PCLUSTER, status="RUNNING")
    await seen.observe("kumo-labs", [dev])
    alerts = SlackAlerts(regions={"kumo-labs": "us-east-1"}, backends=seen)
    stack = cluster_url(Backend.PCLUSTER, "us-east-1", "kumo-p5-dev")
    instance = node_url(Backend.PCLUSTER, "us-east-1", "kumo-p5-dev", "i-0abc")
    node = _links(alerts, _episode("node", "pcluster", "i-0abc", ["i-0abc"]))
    assert stack in node and instance in node
    assert instance in _links(alerts, _episode("faulty_node", "pcluster", "i-0abc", ["i-0abc"]))
    idle = _links(alerts, _episode("idle", "pcluster", "cluster", ["i-0abc", "i-0def"]))
    assert stack in idle and "EC2 console" not in idle, "many nodes: the cluster's page"
    assert stack in _links(alerts, _episode("job", "throughput", "sft", [])), "a job's: from the sweep's backend"
    hyperpod = _links(alerts, _episode("node", "hyperpod", "i-0abc", ["i-0abc"]))
    assert cluster_url(Backend.HYPERPOD, "us-east-1", "kumo-p5-dev") in hyperpod and "EC2" not in hyperpod
    assert _links(SlackAlerts(), _episode("node", "pcluster", "i-0abc", ["i-0abc"])) == "", "no region: no links"
    await seen.observe(
        "kumo-labs", [dev, Cluster(org="kumo-labs", name="kumo-p5-dev", backend=Backend.HYPERPOD, status="InService")]
    )
    assert seen("kumo-labs", "kumo-p5-dev") is None, "a name under both backends has no single backend"
    assert _links(alerts, _episode("job", "throughput", "sft", [])) == ""
