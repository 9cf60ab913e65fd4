"""Parsing of /cluster text: every bad input is a UsageError with a Usage line, never an exception."""

import pytest
from hypothesis import given
from hypothesis import strategies as st

from bot.commands import (
    ClusterNodes,
    ClusterRef,
    ClusterStatus,
    DeleteCluster,
    Help,
    LaunchCluster,
    ListApprovals,
    ListClusters,
    ListTemplates,
    NodeAction,
    ScaleGroup,
    ShowAudit,
    ShowThroughput,
    UsageError,
    parse_cluster_command,
)


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("help", Help()),
        ("list", ListClusters(target=None)),
        ("list all", ListClusters(target="all")),
        ("LIST Kumo-Labs", ListClusters(target="kumo-labs")),
        ("list kumo-labs --public", ListClusters(target="kumo-labs", public=True)),
        ("status kumo-p5-train", ClusterStatus(cluster=ClusterRef("kumo-p5-train"))),
        ("status kumo-labs/kumo-p5-train", ClusterStatus(cluster=ClusterRef("kumo-p5-train", "kumo-labs"))),
        ("nodes c1 --failed", ClusterNodes(cluster=ClusterRef("c1"), failed_only=True)),
        ("  nodes   c1  ", ClusterNodes(cluster=ClusterRef("c1"))),
        ("templates", ListTemplates()),
        ("scale kumo-labs/c1 workers 8", ScaleGroup(cluster=ClusterRef("c1", "kumo-labs"), group="workers", count=8)),
        ("scale c1 compute/p5 0 --dry-run", ScaleGroup(ClusterRef("c1"), group="compute/p5", count=0, dry_run=True)),
        (
            "replace c1 i-0123456789abcdef0 i-0abcdef0 i-0123456789abcdef0",
            NodeAction(verb="replace", cluster=ClusterRef("c1"), node_ids=("i-0123456789abcdef0", "i-0abcdef0")),
        ),
        ("reboot c1 i-0abcdef0 --dry-run", NodeAction("reboot", ClusterRef("c1"), ("i-0abcdef0",), dry_run=True)),
        ("delete sakura-ai/c1", DeleteCluster(cluster=ClusterRef("c1", "sakura-ai"))),
        ("throughput c1 --hours 12 --public", ShowThroughput(cluster=ClusterRef("c1"), hours=12, public=True)),
        ("audit", ShowAudit(org=None)),
        ("approvals", ListApprovals()),
        ("approvals Kumo-Labs", ListApprovals(org="kumo-labs")),
        ("audit Kumo-Labs --days 30", ShowAudit(org="kumo-labs", days=30)),
        (
            "launch hyperpod-p5 kumo-new --dry-run --count 8 --org kumo-labs --param lifecycle_s3_uri=s3://sagemaker-x/"
            " --param 'subnet_id=subnet-0123'",
            LaunchCluster(
                template="hyperpod-p5",
                name="kumo-new",
                dry_run=True,
                count=8,
                org="kumo-labs",
                params=(("lifecycle_s3_uri", "s3://sagemaker-x/"), ("subnet_id", "subnet-0123")),
            ),
        ),
    ],
)
def test_parses(text: str, expected: object) -> None:
    assert parse_cluster_command(text) == expected


@pytest.mark.parametrize(
    ("text", "message_part", "usage_part"),
    [
        ("", "Tell Pitcrew what to do", "/cluster list"),
        ("approvals kumo-labs sakura-ai", "at most one org id", "/cluster approvals [ORG]"),
        ("approvals --all", "not an option of `/cluster approvals`", "/cluster approvals [ORG]"),
        ("approvals kumo_labs", "not an org id", "/cluster approvals [ORG]"),
        ("   ", "Tell Pitcrew what to do", "/cluster list"),
        ("frobnicate", "`frobnicate` is not a /cluster subcommand", "/cluster status"),
        ("status", "needs a cluster name", "/cluster status CLUSTER"),
        ("nodes a b", "needs one cluster name", "/cluster nodes CLUSTER"),
        ("list a b", "at most one org", "/cluster list"),
        ("list Bad_Org!", "is not an org id", "/cluster list"),
        ("status ../../etc/passwd", "is not", "/cluster status"),
        ("status x; rm -rf /", "needs one cluster name", "/cluster status"),
        ("status 'x; DROP TABLE audit_log;--'", "is not a cluster name", "/cluster status"),
        ("status $(reboot)", "is not a cluster name", "/cluster status"),
        ("status クラスタ", "is not a cluster name", "/cluster status"),
        ("nodes c1 --fialed", "`--fialed` is not an option", "/cluster nodes"),
        ("status 'unclosed", "quote", "/cluster list"),
        ("throughput", "needs one cluster name", "/cluster throughput"),
        ("throughput c1 --hours ¹", "from 1 to 72", "/cluster throughput"),
        ("scale c1 workers ²", "whole number from 0", "/cluster scale"),
        ("audit --days ³", "from 1 to 90", "/cluster audit"),
        ("throughput c1 --hours 0", "from 1 to 72", "/cluster throughput"),
        ("throughput c1 --since 3", "`--since` is not an option", "/cluster throughput"),
        ("scale", "needs a cluster name", "/cluster scale"),
        ("scale c1 workers", "needs a cluster, a group and the new node count", "/cluster scale"),
        ("scale c1 workers four", "whole number from 0 to 10,000", "/cluster scale"),
        ("scale c1 workers -1", "whole number from 0", "/cluster scale"),
        ("scale c1 workers 99999", "whole number from 0 to 10,000", "/cluster scale"),
        ("scale c1 work_ers 4", "is not an instance group or queue name", "/cluster scale"),
        ("scale c1 workers 4 --force", "`--force` is not an option", "/cluster scale"),
        ("replace c1", "needs the ids of the nodes to replace", "/cluster replace"),
        ("reboot c1 node-7", "is not a node id", "/cluster reboot"),
        ("reboot c1 i-XYZ", "`/cluster nodes CLUSTER` lists them", "/cluster reboot"),
        ("delete", "needs a cluster name", "/cluster delete"),
        ("delete c1 c2", "takes one cluster name", "/cluster delete"),
        ("delete c1 --dry-run", "`--dry-run` is not an option", "/cluster delete"),
        ("launch hyperpod-p5 --dry-run", "needs a template id and a name", "/cluster launch"),
        ("launch hyperpod-p5 x --dry-run --count", "`--count` needs a value", "/cluster launch"),
        ("launch hyperpod-p5 x --dry-run --count many", "takes a whole number", "/cluster launch"),
        ("launch hyperpod-p5 x --dry-run --param nokey", "takes KEY=VALUE", "/cluster launch"),
        ("launch hyperpod-p5 x --dry-run --org Bad_Org", "is not an org id", "/cluster launch"),
        ("launch HyperPod! x --dry-run", "is not a template id", "/cluster launch"),
        ("launch hyperpod-p5 x --dry-run --force", "`--force` is not an option", "/cluster launch"),
        ("templates extra", "takes no arguments", "/cluster templates"),
        ("audit --days 0", "takes a whole number from 1 to 90", "/cluster audit"),
        ("audit --days", "takes a whole number", "/cluster audit"),
        ("audit kumo-labs sakura-ai", "give at most one", "/cluster audit"),
        ("audit --since x", "`--since` is not an option", "/cluster audit"),
        ("x" * 4000, "4,000 characters", "/cluster list"),
        ("help me", "takes no arguments", "/cluster help"),
        ("status " + "a" * 64, "up to 63 characters", "/cluster status"),
    ],
)
def test_bad_input_says_what_and_how(text: str, message_part: str, usage_part: str) -> None:
    with pytest.raises(UsageError) as caught:
        parse_cluster_command(text)
    assert message_part in caught.value.message
    assert usage_part in caught.value.usage


def test_user_text_quoted_back_is_short_and_cannot_break_formatting() -> None:
    with pytest.raises(UsageError) as caught:
        parse_cluster_command("`" * 5 + "y" * 200)
    assert "`" * 2 not in caught.value.message.strip("`")
    assert len(caught.value.message) < 120


@given(st.text(max_size=1200))
def test_any_text_parses_or_is_a_usage_error(text: str) -> None:
    try:
        parse_cluster_command(text)
    except UsageError as error:
        assert error.message
        assert error.usage.startswith("/cluster")


def test_help_is_read_off_the_table_each_usage_line_once() -> None:
    from bot.access import Action
    from bot.commands import CLUSTER
    from bot.tracking.parse import TRACK

    viewer = CLUSTER.help_lines(lambda needs: needs in (None, Action.VIEW))
    assert [usage.split()[1] for usage, _ in viewer] == [
        "help",
        "list",
        "capacity",
        "status",
        "nodes",
        "templates",
        "throughput",
        "approvals",
    ]
    writer = TRACK.help_lines(lambda needs: True)
    assert [usage for usage, _ in writer].count("/track note|milestone|incident|lesson TEXT [--org ORG]") == 1
    assert writer[0][1] == "record a note for the org (default: this channel's org)"
    assert CLUSTER.all_usage().splitlines() == [CLUSTER.usage(name) for name in ("list", "status", "nodes", "help")]


def test_a_table_with_a_name_twice_is_refused() -> None:
    from bot.subcommands import CommandSet, Subcommand, no_arguments

    spec = Subcommand(name="help", usage="/x help", summary="", needs=None, parse=no_arguments(Help, "/x help"))
    with pytest.raises(ValueError, match="repeat"):
        CommandSet(command="/x", max_text=10, subcommands=(spec, spec))
