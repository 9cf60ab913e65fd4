"""Console links: the right service page in the right region and partition, names that cannot break a link."""

from __future__ import annotations

from urllib.parse import urlsplit

from hypothesis import given
from hypothesis import strategies as st

from bot.clusters.console import cluster_url, node_url
from bot.clusters.model import Backend


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
