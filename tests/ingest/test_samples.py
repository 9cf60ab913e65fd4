"""parse_samples and read_batch: what a posted body must look like, the reason given for each way it can be
wrong (every problem of every sample, whatever its kind), and the refusal of a cluster the org does not have."""

from __future__ import annotations

import json
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest

from bot.ingest.samples import IngestRefused, parse_samples, read_batch
from storage.models import ThroughputSample

NOW = datetime(2026, 11, 30, 9, 0, tzinfo=UTC)
ORG = "kumo-labs"
MAX_AGE = timedelta(days=14)
GOOD: dict[str, Any] = {"org": ORG, "cluster": "kumo-p5", "job": "llama-70b", "tokens_per_second": 1234.5}


def parse(body: Any, *, raw: bool = False, **kwargs: Any) -> list[ThroughputSample]:
    data = body if raw else json.dumps(body).encode()
    return parse_samples(data, org_id=ORG, now=NOW, max_age=MAX_AGE, **kwargs)


def refused(body: Any, *, raw: bool = False, status: int = 400, **kwargs: Any) -> list[dict[str, Any]]:
    with pytest.raises(IngestRefused) as info:
        parse(body, raw=raw, **kwargs)
    assert info.value.status == status, info.value
    return info.value.errors


def reason(body: Any, **kwargs: Any) -> str:
    """The reason a single bad sample (or a bad body) was refused."""
    errors = refused(body, **kwargs)
    assert len(errors) == 1, errors
    return str(errors[0]["reason"])


def one(**changes: Any) -> dict[str, Any]:
    """GOOD with keys changed; a value of ... removes the key."""
    sample = {**GOOD, **changes}
    return {k: v for k, v in sample.items() if v is not ...}


# -- accepted shapes ---------------------------------------------------------------------------------------


def test_a_single_sample_defaults_ts_to_now() -> None:
    [row] = parse(GOOD)
    assert (row.org_id, row.cluster, row.job) == (ORG, "kumo-p5", "llama-70b")
    assert row.ts == NOW and row.received_at == NOW
    assert row.tokens_per_second == 1234.5 and row.samples_per_second is None
    assert row.step is None and row.event is None and row.id is None


def test_a_list_and_a_samples_object_are_batches() -> None:
    batch = [one(ts="2026-11-30T08:59:00Z", step=10), one(samples_per_second=8, tokens_per_second=...)]
    for body in (batch, {"samples": batch}):
        rows = parse(body)
        assert [(r.ts, r.step, r.value) for r in rows] == [(NOW - timedelta(minutes=1), 10, 1234.5), (NOW, None, 8.0)]
        assert rows[1].samples_per_second == 8.0 and isinstance(rows[1].samples_per_second, float)


def test_ts_with_an_offset_is_stored_in_utc() -> None:
    [row] = parse(one(ts="2026-11-30T17:59:30+09:00"))
    assert row.ts == datetime(2026, 11, 30, 8, 59, 30, tzinfo=UTC) and row.ts.utcoffset() == timedelta(0)


@pytest.mark.parametrize(
    "written", ["2026-11-30T08:59:30Z", "2026-11-30T08:59:30z", "2026-11-30t08:59:30Z", "2026-11-30 08:59:30+00:00"]
)
def test_ts_in_any_rfc_3339_spelling_is_the_same_instant(written: str) -> None:
    [row] = parse(one(ts=written))
    assert row.ts == datetime(2026, 11, 30, 8, 59, 30, tzinfo=UTC)


@pytest.mark.parametrize("event", ["start", "end"])
def test_an_event_needs_no_value_but_may_have_one(event: str) -> None:
    [row] = parse(one(event=event, tokens_per_second=...))
    assert row.event == event and row.value is None
    [row] = parse(one(event=event))
    assert row.event == event and row.value == 1234.5


def test_null_optional_values_count_as_absent() -> None:
    [row] = parse(one(ts=None, step=None, event="start", tokens_per_second=None, samples_per_second=None))
    assert row.ts == NOW and row.value is None


def test_zero_throughput_and_step_zero_are_fine() -> None:
    [row] = parse(one(tokens_per_second=0, step=0))
    assert row.value == 0.0 and row.step == 0


def test_ts_within_the_limits_is_accepted() -> None:
    [ahead, old] = parse([one(ts="2026-11-30T09:04:59Z"), one(ts="2026-11-16T09:00:01Z")])
    assert ahead.ts == NOW + timedelta(minutes=4, seconds=59) and old.ts == NOW - MAX_AGE + timedelta(seconds=1)


# -- the body as a whole -------------------------------------------------------------------------------------


@pytest.mark.parametrize("body", [b"", b"   \n"])
def test_an_empty_body(body: bytes) -> None:
    assert reason(body, raw=True).startswith("empty body; send one sample object, a JSON list of them")


def test_bad_json_says_where() -> None:
    text = reason(b'{"org": "kumo-labs",', raw=True)
    assert text.startswith("the body is not valid JSON (") and "line 1, column" in text and '{"samples"' in text


def test_a_body_that_is_not_utf8() -> None:
    assert reason(b"\xff\xfe\x00{", raw=True).startswith("the body is not")


@pytest.mark.parametrize(("body", "kind"), [(42, "a number"), ("x", "a string"), (None, "null"), (True, "a boolean")])
def test_a_body_that_is_not_samples(body: Any, kind: str) -> None:
    assert reason(body).startswith(f"the body is {kind}; send one sample object")


def test_an_empty_list() -> None:
    assert reason([]).startswith("no samples: the list is empty")
    assert reason({"samples": []}).startswith("no samples: the list is empty")


def test_samples_must_be_a_list() -> None:
    assert reason({"samples": GOOD}) == "'samples' must be a JSON list of sample objects, not an object"


def test_keys_beside_samples_are_refused() -> None:
    text = reason({"samples": [GOOD], "org": ORG})
    assert text.startswith("unknown key(s) 'org' beside 'samples'") and "go in each sample" in text


def test_too_many_samples() -> None:
    text = reason([GOOD] * 4, max_batch=3)
    assert text.startswith("4 samples in one request; at most 3 are accepted: split the batch")
    assert len(parse([GOOD] * 3, max_batch=3)) == 3
    assert reason([GOOD] * 1001).startswith("1001 samples in one request; at most 1000")


# -- org ------------------------------------------------------------------------------------------------------


FOREIGN = (
    "org 'sakura-ai' is not this token's org ('kumo-labs'): a token writes only its own org's "
    "samples; use a token of 'sakura-ai' (pitcrew token create ORG) or send org 'kumo-labs'"
)


def test_samples_of_another_org_alone_refuse_the_request_with_403() -> None:
    errors = refused([GOOD, one(org="sakura-ai"), GOOD, one(org="sakura-ai", job="other")], status=403)
    assert errors == [{"index": 1, "reason": FOREIGN}, {"index": 3, "reason": FOREIGN}]


def test_a_batch_bad_in_several_ways_is_a_400_naming_every_index() -> None:
    """Review finding: a sample of another org and a malformed sample answered only the 403, hiding the 400's
    reasons. Now every bad sample is named, whatever is wrong with it; the status is 400 (more than the token
    needs fixing) and the org problem is among the reasons."""
    errors = refused([one(org="sakura-ai"), GOOD, GOOD, one(cluster="bad name!"), one(org="sakura-ai", step=-1)])
    assert [e["index"] for e in errors] == [0, 3, 4]
    assert errors[0]["reason"] == FOREIGN
    assert errors[1]["reason"].startswith("cluster 'bad name!' is not a cluster name")
    assert errors[2]["reason"].startswith(FOREIGN + "; step must be a whole number")


def test_org_is_required() -> None:
    assert reason(one(org=...)) == 'org is missing; give the org this token belongs to: "org": "kumo-labs"'
    assert reason(one(org=None)).startswith("org is missing")
    assert reason(one(org=7)) == 'org must be a string, e.g. "org": "kumo-labs"'


# -- cluster and job --------------------------------------------------------------------------------------------


def test_cluster_is_required() -> None:
    assert reason(one(cluster=...)).startswith("cluster is missing; give the cluster the job runs on")


@pytest.mark.parametrize("cluster", ["", "has space", "under_score", "x" * 64, 5, ["kumo-p5"]])
def test_a_bad_cluster_name(cluster: Any) -> None:
    assert reason(one(cluster=cluster)) == (
        f"cluster {cluster!r} is not a cluster name: use the cluster's name as AWS shows it "
        "(letters, digits and dashes, at most 63)"
    )


def test_cluster_names_of_63_characters_are_fine() -> None:
    assert parse(one(cluster="A1-" + "x" * 60))[0].cluster == "A1-" + "x" * 60


def test_job_is_required() -> None:
    assert reason(one(job=...)).startswith("job is missing; give a name that stays the same across restarts")


@pytest.mark.parametrize("job", ["", "a b", "x" * 129, "semi;colon", 12])
def test_a_bad_job_name(job: Any) -> None:
    assert reason(one(job=job)) == (
        f"job {job!r} is not a job name: 1 to 128 letters, digits and . _ : / - (e.g. a Slurm job name or a run id)"
    )


def test_job_names_may_hold_dots_colons_and_slashes() -> None:
    job = "team/llama-70b:run_3.v2"
    assert parse(one(job=job))[0].job == job
    assert parse(one(job="j" * 128))[0].job == "j" * 128


# -- ts ---------------------------------------------------------------------------------------------------------


def test_ts_must_be_a_string() -> None:
    assert reason(one(ts=1764493200)).startswith('ts must be an ISO-8601 string such as "2026-11-30T09:00:00Z", not')


def test_ts_must_be_iso_8601() -> None:
    assert reason(one(ts="yesterday")) == (
        "ts 'yesterday' is not an ISO-8601 time; write it like \"2026-11-30T09:00:00Z\""
    )


def test_ts_needs_a_time_zone() -> None:
    text = reason(one(ts="2026-11-30T09:00:00"))
    assert text.startswith("ts '2026-11-30T09:00:00' has no time zone; end it with Z (UTC) or an offset")


def test_ts_in_the_future() -> None:
    text = reason(one(ts="2026-11-30T09:06:00Z"))
    assert text.startswith("ts '2026-11-30T09:06:00Z' is 6 minutes in the future (at most 5 allowed)")
    assert "clock" in text


def test_ts_too_old() -> None:
    text = reason(one(ts="2026-11-16T08:59:59Z"))
    assert text.startswith("ts '2026-11-16T08:59:59Z' is older than the 14 days that raw samples are kept")


# -- values -----------------------------------------------------------------------------------------------------


def test_a_value_is_required_without_an_event() -> None:
    assert reason(one(tokens_per_second=...)) == (
        'tokens_per_second (or samples_per_second) is missing; every sample needs one, except a "start" or "end" event'
    )


def test_only_one_kind_of_value() -> None:
    assert reason(one(samples_per_second=3)) == "give one of tokens_per_second or samples_per_second, not both"


@pytest.mark.parametrize(("value", "kind"), [("12", "a string"), (True, "a boolean"), ([1], "a list")])
def test_a_value_must_be_a_number(value: Any, kind: str) -> None:
    assert reason(one(tokens_per_second=value)).startswith(f"tokens_per_second must be a number, not {kind}")


@pytest.mark.parametrize("value", [-1, -0.5, float("nan"), float("inf"), 10**400])
def test_a_value_must_be_finite_and_not_negative(value: Any) -> None:
    assert reason(one(tokens_per_second=value)).startswith("tokens_per_second must be a finite number of 0 or more")


def test_samples_per_second_is_checked_the_same_way() -> None:
    assert reason(one(tokens_per_second=..., samples_per_second=-2)) == (
        "samples_per_second must be a finite number of 0 or more, not -2"
    )


# -- step and event -------------------------------------------------------------------------------------------


@pytest.mark.parametrize("step", [-1, 1.5, "10", True, 2**63])
def test_a_bad_step(step: Any) -> None:
    assert reason(one(step=step)) == (f"step must be a whole number of 0 or more (the training step), not {step!r}")


@pytest.mark.parametrize("event", ["stop", "START", 1])
def test_an_unknown_event(event: Any) -> None:
    assert reason(one(event=event)) == f'event {event!r} is not known; use "start" or "end" (or leave it out)'


# -- unknown keys, several problems, several samples ----------------------------------------------------------


def test_unknown_keys_are_named() -> None:
    assert reason(one(tps=5, gpu="h100")) == (
        "unknown key(s) 'tps', 'gpu'; the keys are org, cluster, job, ts, tokens_per_second, "
        "samples_per_second, step, event, nodes"
    )


def test_a_sample_that_is_not_an_object() -> None:
    errors = refused([GOOD, [1, 2]])
    assert errors == [{"index": 1, "reason": errors[0]["reason"]}]
    assert str(errors[0]["reason"]).startswith("a sample must be a JSON object like {")


def test_every_problem_of_a_sample_is_in_its_one_reason() -> None:
    text = reason(one(cluster=..., step=-3, tokens_per_second="fast"))
    assert text.split("; ")[0].startswith("cluster is missing")
    assert "tokens_per_second must be a number" in text and "step must be a whole number" in text


def test_a_batch_with_bad_samples_names_each_by_index_and_keeps_none() -> None:
    errors = refused([GOOD, one(job=...), GOOD, one(tokens_per_second=-1), GOOD])
    assert [e["index"] for e in errors] == [1, 3]
    assert str(errors[0]["reason"]).startswith("job is missing")
    assert str(errors[1]["reason"]).startswith("tokens_per_second must be a finite number")


def test_the_refusal_reads_as_text() -> None:
    with pytest.raises(IngestRefused) as info:
        parse([GOOD, one(job=...)])
    assert str(info.value).startswith("400: [1] job is missing")


@pytest.mark.parametrize("body", [b'{"tokens_per_second": ' + b"9" * 5000 + b"}", b"[" * 100_000 + b"]" * 100_000])
def test_json_python_cannot_hold_is_a_400_not_a_500(body: bytes) -> None:
    """Review finding: json.loads raises a plain ValueError (over 4,300 digits) or RecursionError here."""
    with pytest.raises(IngestRefused) as refused:
        parse_samples(body, org_id=ORG, now=NOW, max_age=MAX_AGE)
    assert refused.value.status == 400 and "huge number or deep nesting" in refused.value.errors[0]["reason"]


# -- the org's clusters ---------------------------------------------------------------------------------------


CLUSTERS = ["kumo-p5-dev", "kumo-p5-train"]


def test_the_clusters_to_check_are_those_of_the_tokens_org_samples() -> None:
    body = [GOOD, one(cluster="kumo-p5-train"), one(org="sakura-ai", cluster="sakura-x"), one(cluster="bad name!")]
    batch = read_batch(json.dumps(body).encode(), org_id=ORG, now=NOW, max_age=MAX_AGE)
    assert batch.clusters == {"kumo-p5", "kumo-p5-train"}


def test_a_cluster_the_org_does_not_have_is_refused_with_its_clusters_and_a_near_miss() -> None:
    body = [one(cluster="kumo-p5-train"), one(cluster="kumo-p5"), one(cluster="kumo-p5", tokens_per_second=-1)]
    batch = read_batch(json.dumps(body).encode(), org_id=ORG, now=NOW, max_age=MAX_AGE)
    batch.check_clusters(unknown={"kumo-p5"}, clusters=CLUSTERS)
    with pytest.raises(IngestRefused) as info:
        batch.samples()
    assert info.value.status == 400
    unknown = (
        "cluster 'kumo-p5' is not a cluster of 'kumo-labs' (its clusters: kumo-p5-dev, kumo-p5-train); "
        "send the cluster's name as AWS shows it. Did you mean 'kumo-p5-dev' or 'kumo-p5-train'?"
    )
    assert info.value.errors == [
        {"index": 1, "reason": unknown},
        {"index": 2, "reason": info.value.errors[1]["reason"]},
    ]
    # Every problem of a sample: its value, then its cluster.
    assert info.value.errors[1]["reason"].startswith("tokens_per_second must be a finite number")
    assert info.value.errors[1]["reason"].endswith("; " + unknown)


def test_a_cluster_far_from_any_gets_no_suggestion_and_an_org_without_clusters_says_so() -> None:
    batch = read_batch(json.dumps(one(cluster="zeta")).encode(), org_id=ORG, now=NOW, max_age=MAX_AGE)
    batch.check_clusters(unknown={"zeta"}, clusters=CLUSTERS)
    with pytest.raises(IngestRefused) as far:
        batch.samples()
    assert "(its clusters: kumo-p5-dev, kumo-p5-train)" in far.value.errors[0]["reason"]
    assert "Did you mean" not in far.value.errors[0]["reason"]
    batch = read_batch(json.dumps(one(cluster="Kumo-p5-tran")).encode(), org_id=ORG, now=NOW, max_age=MAX_AGE)
    batch.check_clusters(unknown={"Kumo-p5-tran"}, clusters=CLUSTERS)
    with pytest.raises(IngestRefused) as near:
        batch.samples()
    assert near.value.errors[0]["reason"].endswith("Did you mean 'kumo-p5-train'?")
    batch = read_batch(json.dumps(one(cluster="zeta")).encode(), org_id=ORG, now=NOW, max_age=MAX_AGE)
    batch.check_clusters(unknown={"zeta"}, clusters=[])
    with pytest.raises(IngestRefused) as none:
        batch.samples()
    assert none.value.errors[0]["reason"].startswith(
        "cluster 'zeta' is not a cluster of 'kumo-labs': neither Pitcrew's sweep nor AWS knows any cluster"
    )


def test_known_clusters_pass() -> None:
    batch = read_batch(json.dumps([GOOD, GOOD]).encode(), org_id=ORG, now=NOW, max_age=MAX_AGE)
    batch.check_clusters(unknown=set(), clusters=["kumo-p5"])
    assert [row.cluster for row in batch.samples()] == ["kumo-p5", "kumo-p5"]
