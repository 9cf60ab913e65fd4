"""`nodes` on the ingest API (issue 23): an optional whole number per sample, the nodes the job runs on; stored
(SQLite and Postgres: the `db` fixture), read back by the throughput monitor as its detector's Sample.nodes; any
other value is a 400 naming the field and how to give it, and nothing of the request is stored."""

from __future__ import annotations

from typing import Any

from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st

from bot.monitor.jobs import sample_of
from tests.ingest.test_api import Api, api, good  # noqa: F401  (the running ingest API, on each database)

NODES_PROBLEM = "nodes must be a whole number of 1 or more (the nodes the job runs on, e.g. nodes: 16)"


async def test_nodes_are_stored_and_read_back_as_the_detectors_sample(api: Api) -> None:  # noqa: F811
    batch = [good(nodes=16), good(job="bert", nodes=1), good(job="gpt", nodes=2**31 - 1), good(job="t5")]
    response = await api.post({"samples": batch})
    assert response.status_code == 202, response.text
    stored = {row.job: row for row in await api.stored()}
    assert {job: row.nodes for job, row in stored.items()} == {"llama-70b": 16, "bert": 1, "gpt": 2**31 - 1, "t5": None}
    assert sample_of(stored["llama-70b"]).nodes == 16 and sample_of(stored["t5"]).nodes is None


async def test_a_start_event_may_say_its_nodes(api: Api) -> None:  # noqa: F811
    response = await api.post({**good(event="start", nodes=8), "tokens_per_second": None})
    assert response.status_code == 202, response.text
    [row] = await api.stored()
    assert (row.event, row.nodes) == ("start", 8)


bad_nodes = st.one_of(
    st.integers(max_value=0),
    st.integers(min_value=2**31),
    st.floats(allow_nan=True, allow_infinity=True),
    st.booleans(),
    st.text(max_size=8),
    st.lists(st.integers(), max_size=2),
    st.dictionaries(st.text(max_size=3), st.integers(), max_size=1),
)


@settings(
    max_examples=25,
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
    derandomize=True,
    database=None,
)
@given(nodes=bad_nodes)
@example(nodes=0)
@example(nodes=-16)
@example(nodes=16.0)
@example(nodes="16")
@example(nodes=True)
async def test_bad_nodes_are_a_400_naming_the_field_and_nothing_is_stored(api: Api, nodes: Any) -> None:  # noqa: F811
    response = await api.post({"samples": [good(), good(job="bert", nodes=nodes)]})
    assert response.status_code == 400, response.text
    [error] = response.json()["errors"]
    assert error["index"] == 1 and error["reason"].startswith(NODES_PROBLEM), error
    assert error["reason"].endswith("or leave it out")
    assert await api.stored() == []
