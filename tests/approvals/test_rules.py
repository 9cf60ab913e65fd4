"""Which stored changes need approval, and why in words (bot/approvals/rules.py)."""

from __future__ import annotations

from pathlib import Path

import pytest

from bot.approvals.rules import Needed, launch_groups, needed
from bot.clusters.templates import load_templates
from bot.config import ApprovalsConfig
from bot.resources import shipped_templates

RULES = ApprovalsConfig(delete=True, launch_over_usd_per_day=5000, nodes_over=32, replace_or_reboot_over=4)
PRICES = load_templates(Path(shipped_templates())).prices
P5 = {
    "InstanceGroups": [
        {"InstanceType": "ml.m5.12xlarge", "InstanceCount": 1},
        {"InstanceType": "ml.p5.48xlarge", "InstanceCount": 16},
    ]
}


def test_without_rules_nothing_needs_approval() -> None:
    assert needed(None, kind="delete", request={}, prices=PRICES) is None


def test_a_large_launch_names_its_cost_against_the_rule() -> None:
    found = needed(RULES, kind="launch", request=P5, prices=PRICES)
    assert found is not None and found.rule == "launch_over_usd_per_day"
    assert found.why.startswith("estimated $") and found.why.endswith("/day > $5,000")


def test_a_small_launch_needs_none() -> None:
    small = {"InstanceGroups": [{"InstanceType": "ml.p5.48xlarge", "InstanceCount": 1}]}
    assert (
        needed(
            RULES.model_copy(update={"launch_over_usd_per_day": 100000}), kind="launch", request=small, prices=PRICES
        )
        is None
    )


def test_parallelcluster_groups_are_read_from_the_yaml() -> None:
    yaml_text = (
        "HeadNode: {InstanceType: m5.8xlarge}\nScheduling:\n  SlurmQueues:\n  - Name: gpu\n    ComputeResources:\n"
        "    - {Name: p5, InstanceType: p5.48xlarge, MinCount: 40, MaxCount: 40}\n"
    )
    request = {"clusterName": "x", "clusterConfiguration": yaml_text}
    assert launch_groups(request) == [("m5.8xlarge", 1), ("p5.48xlarge", 40)]
    rules = RULES.model_copy(update={"launch_over_usd_per_day": None})
    assert needed(rules, kind="launch", request=request, prices=PRICES) == Needed(
        "nodes_over", "40 nodes in one group > 32"
    )


@pytest.mark.parametrize(
    ("kind", "request_", "expected"),
    [
        ("delete", {}, "delete"),
        ("scale", {"group": "w", "count": 33}, "nodes_over"),
        ("scale", {"group": "w", "count": 32}, None),
        ("replace", {"node_ids": ["i-1", "i-2", "i-3", "i-4", "i-5"]}, "replace_or_reboot_over"),
        ("reboot", {"node_ids": ["i-1", "i-2", "i-3", "i-4"]}, None),
        ("start_fleet", {}, None),
    ],
)
def test_each_rule(kind: str, request_: dict[str, object], expected: str | None) -> None:
    found = needed(RULES, kind=kind, request=request_, prices=PRICES)
    assert (found.rule if found else None) == expected
