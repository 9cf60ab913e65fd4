"""Change requests as `Operation.request` stores them: written and read in one place, old rows still read."""

from __future__ import annotations

from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from bot.clusters.model import Backend
from bot.clusters.requests import (
    BadRequest,
    ChangeRequest,
    DeleteRequest,
    Kind,
    LaunchRequest,
    NodeFailure,
    NodeRequest,
    ScaleRequest,
    StopFleetRequest,
    from_json,
    to_json,
)

ROUND_TRIPS: list[tuple[Kind, Backend, ChangeRequest]] = [
    (
        Kind.LAUNCH,
        Backend.HYPERPOD,
        LaunchRequest(name="kumo-new", create_cluster={"ClusterName": "kumo-new", "InstanceGroups": []}),
    ),
    (Kind.LAUNCH, Backend.PCLUSTER, LaunchRequest(name="pc-new", configuration="Region: ap-northeast-1\n")),
    (Kind.SCALE, Backend.HYPERPOD, ScaleRequest(group="workers", count=4, before=2, instance_type="ml.p5.48xlarge")),
    (Kind.REBOOT, Backend.HYPERPOD, NodeRequest(node_ids=("i-1",), groups=("workers",), before_ids=("i-1", "i-2"))),
    (
        Kind.REPLACE,
        Backend.HYPERPOD,
        NodeRequest(
            node_ids=("i-1", "i-2"),
            groups=("workers",),
            before_ids=("i-1", "i-2"),
            successful=("i-1",),
            failed=(NodeFailure("i-2", "InternalServerError", "try again"),),
        ),
    ),
    (Kind.DELETE, Backend.PCLUSTER, DeleteRequest()),
    (Kind.STOP_FLEET, Backend.PCLUSTER, StopFleetRequest(then="/cluster scale pc train 2")),
    (Kind.STOP_FLEET, Backend.PCLUSTER, StopFleetRequest()),
]


@pytest.mark.parametrize(("kind", "backend", "request_"), ROUND_TRIPS)
def test_every_request_reads_back_as_written(kind: Kind, backend: Backend, request_: ChangeRequest) -> None:
    assert from_json(kind, backend, to_json(request_)) == request_


def test_rows_stored_before_the_types_read_the_same() -> None:
    """The shapes the handlers built by hand, as they sit in existing databases."""
    hyperpod_launch = {"ClusterName": "kumo-new", "InstanceGroups": [{"InstanceGroupName": "workers"}]}
    assert from_json(Kind.LAUNCH, Backend.HYPERPOD, hyperpod_launch) == LaunchRequest(
        name="kumo-new", create_cluster=hyperpod_launch
    )
    assert to_json(from_json(Kind.LAUNCH, Backend.HYPERPOD, hyperpod_launch)) == hyperpod_launch
    pcluster_launch = {"clusterName": "pc", "clusterConfiguration": "Image: {}\n"}
    assert to_json(from_json(Kind.LAUNCH, Backend.PCLUSTER, pcluster_launch)) == pcluster_launch
    scale = {"group": "gpu/p5", "count": 0, "before": 2, "instance_type": "p5.48xlarge"}
    assert to_json(from_json(Kind.SCALE, Backend.PCLUSTER, scale)) == scale
    ran = {
        "node_ids": ["i-1"],
        "groups": ["workers"],
        "before_ids": ["i-1"],
        "successful": [],
        "failed": [{"node_id": "i-1", "code": "ResourceNotFound", "message": "gone"}],
    }
    assert to_json(from_json(Kind.REBOOT, Backend.HYPERPOD, ran)) == ran
    assert from_json(Kind.DELETE, Backend.HYPERPOD, {}) == DeleteRequest()
    assert from_json(Kind.STOP_FLEET, Backend.PCLUSTER, {"then": "/cluster scale c q 1"}).then == "/cluster scale c q 1"


@pytest.mark.parametrize(
    ("kind", "stored", "says"),
    [
        (Kind.SCALE, {"group": "workers"}, "`count` is not a count"),
        (Kind.SCALE, {"group": "workers", "count": -1}, "`count` is not a count"),
        (Kind.SCALE, {"group": "workers", "count": True}, "`count` is not a count"),
        (Kind.SCALE, {"count": 2}, "no `group`"),
        (Kind.REBOOT, {"node_ids": "i-1"}, "`node_ids` is not a list of names"),
        (Kind.REPLACE, {"node_ids": ["i-1"], "failed": [{"node_id": "i-1"}]}, "not a node failure"),
        (Kind.LAUNCH, {"clusterConfiguration": "x"}, "no `clusterName`"),
        (Kind.DELETE, [], "is a JSON object"),
    ],
)
def test_a_request_of_the_wrong_shape_says_which_field(kind: Kind, stored: Any, says: str) -> None:
    with pytest.raises(BadRequest, match=says.replace("`", ".")):
        from_json(kind, Backend.PCLUSTER, stored)


json_values = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False) | st.text(max_size=8),
    lambda children: st.lists(children, max_size=4) | st.dictionaries(st.text(max_size=12), children, max_size=5),
    max_leaves=20,
)
# Dictionaries that use the real field names, so the checks past "is it an object" are reached too.
FIELDS = ["ClusterName", "clusterName", "clusterConfiguration", "group", "count", "before", "instance_type"]
FIELDS += ["node_ids", "groups", "before_ids", "successful", "failed", "then"]
shaped = st.dictionaries(st.sampled_from(FIELDS), json_values, max_size=len(FIELDS))


@given(
    kind=st.sampled_from(list(Kind)),
    backend=st.sampled_from(list(Backend)),
    stored=json_values | shaped,
)
def test_any_json_reads_as_a_request_or_one_clear_error(kind: Kind, backend: Backend, stored: Any) -> None:
    try:
        request = from_json(kind, backend, stored)
    except BadRequest as error:
        assert str(error).startswith(("the request", "a ", "an entry"))
        return
    assert from_json(kind, backend, to_json(request)) == request  # what was read is written back the same
