"""Validation of throughput samples posted to the ingest API (pure: bytes in, rows or a refusal out).

A body is one sample object, a JSON list of them, or {"samples": [...]}. A sample:
    {"org": "kumo-labs", "cluster": "kumo-p5-train", "job": "llama-70b-run3", "ts": "2026-11-30T09:00:00Z",
     "tokens_per_second": 412000.5, "step": 1200, "event": "start", "nodes": 16}
(`nodes`, optional: the nodes the job runs on; a run that starts again slow on the same nodes is a slowdown.)
Either every sample is accepted or none is: one bad sample refuses the batch, with a reason per bad sample
(its index and every problem found in it, whatever their kind). The status is 403 when every problem is one
of authorization (a sample of another org than the token's), else 400: a batch that is also malformed needs
more than another token, and the 400 lists the org problems among the rest, so none is hidden.

A sample's cluster must be one of the token's org (`Batch.check_clusters`, given what the caller found in the
latest sweep and in AWS): a typo would otherwise show up as a job of a cluster that does not exist.
"""

from __future__ import annotations

import difflib
import json
import math
import re
from collections.abc import Collection, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from typing import Any

from storage.models import ThroughputSample

MAX_BATCH = 1000
FUTURE_SLACK = timedelta(minutes=5)  # clock skew allowed between a training host and Pitcrew
EVENTS = ("start", "end")
VALUE_KEYS = ("tokens_per_second", "samples_per_second")
KEYS = ("org", "cluster", "job", "ts", *VALUE_KEYS, "step", "event", "nodes")
CLUSTER_RE = re.compile(r"[A-Za-z0-9-]{1,63}")
JOB_RE = re.compile(r"[A-Za-z0-9._:/-]{1,128}")
MAX_STEP = 2**63 - 1  # BIGINT
MAX_NODES = 2**31 - 1  # INTEGER
CLUSTERS_SHOWN = 20  # an org's clusters listed in a refusal; more are counted
SHAPE = 'send one sample object, a JSON list of them, or {"samples": [...]}'
EXAMPLE = '{"org": "ORG", "cluster": "CLUSTER", "job": "JOB", "tokens_per_second": 1234.5}'


class IngestRefused(Exception):
    """Nothing of the request is stored. `errors` holds {"reason": ...} for the whole body, or
    {"index": i, "reason": ...} for each bad sample (index in the posted list; 0 for a single object)."""

    def __init__(self, status: int, errors: list[dict[str, Any]]) -> None:
        super().__init__(status, errors)
        self.status = status
        self.errors = errors

    def __str__(self) -> str:
        return f"{self.status}: " + "; ".join(
            (f"[{e['index']}] " if "index" in e else "") + str(e["reason"]) for e in self.errors
        )


def _refuse(reason: str) -> IngestRefused:
    return IngestRefused(400, [{"reason": reason}])


def _items(body: bytes, max_batch: int) -> list[Any]:
    """The posted samples as decoded JSON values, before any check of their own."""
    if not body.strip():
        raise _refuse(f"empty body; {SHAPE}, e.g. {EXAMPLE}")
    try:
        data = json.loads(body)
    except UnicodeDecodeError:
        raise _refuse(f"the body is not UTF-8 text; {SHAPE}") from None
    except json.JSONDecodeError as error:
        raise _refuse(
            f"the body is not valid JSON ({error.msg} at line {error.lineno}, column {error.colno}); "
            f"{SHAPE}, e.g. {EXAMPLE}"
        ) from None
    except (ValueError, RecursionError):  # a number over 4,300 digits, or nesting deeper than Python recurses
        raise _refuse(f"the body is JSON no sample can be made of (a huge number or deep nesting); {SHAPE}") from None
    if isinstance(data, dict) and "samples" in data:
        extra = sorted(set(data) - {"samples"})
        if extra:
            raise _refuse(
                f"unknown key(s) {', '.join(map(repr, extra))} beside 'samples'; "
                'a batch is {"samples": [...]} and nothing else (org, cluster and job go in each sample)'
            )
        items = data["samples"]
        if not isinstance(items, list):
            raise _refuse(f"'samples' must be a JSON list of sample objects, not {_kind(items)}")
    elif isinstance(data, dict):
        items = [data]
    elif isinstance(data, list):
        items = data
    else:
        raise _refuse(f"the body is {_kind(data)}; {SHAPE}, e.g. {EXAMPLE}")
    if not items:
        raise _refuse(f"no samples: the list is empty; {SHAPE}")
    if len(items) > max_batch:
        raise _refuse(
            f"{len(items)} samples in one request; at most {max_batch} are accepted: split the batch "
            f"(posting every 30 s, one sample per job each time, is plenty)"
        )
    return items


def _kind(value: Any) -> str:
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "a boolean"
    if isinstance(value, int | float):
        return "a number"
    if isinstance(value, str):
        return "a string"
    if isinstance(value, list):
        return "a list"
    return "an object"


def _timestamp(value: Any, *, now: datetime, max_age: timedelta) -> tuple[datetime | None, str | None]:
    if value is None:
        return now, None
    if not isinstance(value, str):
        return None, (
            f'ts must be an ISO-8601 string such as "2026-11-30T09:00:00Z", not {_kind(value)} '
            "(or leave ts out to use the time of receipt)"
        )
    try:
        text = value.strip()
        # RFC 3339 allows a lowercase z (Go's and some loggers' output); Python's parser takes only Z.
        at = datetime.fromisoformat(text[:-1] + "Z" if text.endswith("z") else text)
    except ValueError:
        return None, f'ts {value!r} is not an ISO-8601 time; write it like "2026-11-30T09:00:00Z"'
    if at.tzinfo is None or at.utcoffset() is None:
        return None, (
            f'ts {value!r} has no time zone; end it with Z (UTC) or an offset, e.g. "2026-11-30T09:00:00Z" '
            "(in Python: datetime.now(timezone.utc).isoformat())"
        )
    try:
        at = at.astimezone(UTC)
    except OverflowError:  # e.g. 9999-12-31T23:59:59-23:59: in UTC, past the last year a datetime holds
        return None, f'ts {value!r} is out of range; write a time near now, like "2026-11-30T09:00:00Z"'
    if at > now + FUTURE_SLACK:
        ahead = (at - now).total_seconds() / 60
        return None, (
            f"ts {value!r} is {ahead:.0f} minutes in the future (at most {FUTURE_SLACK.seconds // 60} allowed); "
            "check the sending host's clock (NTP) or leave ts out to use the time of receipt"
        )
    if at < now - max_age:
        return None, (
            f"ts {value!r} is older than the {_age(max_age)} that raw samples are kept; "
            "send samples as they are measured, not old history"
        )
    return at, None


def _age(span: timedelta) -> str:
    if span.days and not span.seconds:
        return f"{span.days} day{'s' if span.days != 1 else ''}"
    return f"{span.total_seconds() / 3600:g} hours"


def _check(item: Any, *, org_id: str, now: datetime, max_age: timedelta) -> tuple[ThroughputSample | None, list[str]]:
    """One sample: the row, or every problem found in it (an org mismatch is reported by the caller, which
    passes the sample's own org as `org_id` then, for the hints)."""
    if not isinstance(item, dict):
        return None, [f"a sample must be a JSON object like {EXAMPLE}, not {_kind(item)}"]
    problems: list[str] = []
    unknown = [key for key in item if key not in KEYS]
    if unknown:
        problems.append(f"unknown key(s) {', '.join(map(repr, unknown))}; the keys are {', '.join(KEYS)}")

    org = item.get("org")
    if org is None:
        problems.append(f'org is missing; give the org this token belongs to: "org": "{org_id}"')
    elif not isinstance(org, str):
        problems.append(f'org must be a string, e.g. "org": "{org_id}"')

    cluster = item.get("cluster")
    if cluster is None:
        problems.append('cluster is missing; give the cluster the job runs on, e.g. "cluster": "kumo-p5-train"')
    elif not isinstance(cluster, str) or not CLUSTER_RE.fullmatch(cluster):
        problems.append(
            f"cluster {cluster!r} is not a cluster name: use the cluster's name as AWS shows it "
            "(letters, digits and dashes, at most 63)"
        )

    job = item.get("job")
    if job is None:
        problems.append('job is missing; give a name that stays the same across restarts, e.g. "job": "llama-70b"')
    elif not isinstance(job, str) or not JOB_RE.fullmatch(job):
        problems.append(
            f"job {job!r} is not a job name: 1 to 128 letters, digits and . _ : / - (e.g. a Slurm job name or a run id)"
        )

    ts, problem = _timestamp(item.get("ts"), now=now, max_age=max_age)
    if problem:
        problems.append(problem)

    event = item.get("event")
    if event is not None and event not in EVENTS:
        problems.append(f'event {event!r} is not known; use "start" or "end" (or leave it out)')

    given = [key for key in VALUE_KEYS if item.get(key) is not None]
    values: dict[str, float] = {}
    if len(given) > 1:
        problems.append("give one of tokens_per_second or samples_per_second, not both")
    elif not given and event not in EVENTS:
        problems.append(
            "tokens_per_second (or samples_per_second) is missing; every sample needs one, "
            'except a "start" or "end" event'
        )
    for key in given:
        value = item[key]
        if isinstance(value, bool) or not isinstance(value, int | float):
            problems.append(f"{key} must be a number, not {_kind(value)} (e.g. {key}: 1234.5)")
            continue
        try:
            number = float(value)
        except OverflowError:
            number = math.inf
        if not math.isfinite(number) or number < 0:
            problems.append(f"{key} must be a finite number of 0 or more, not {value!r}")
        else:
            values[key] = number

    step = item.get("step")
    if step is not None and (isinstance(step, bool) or not isinstance(step, int) or not 0 <= step <= MAX_STEP):
        problems.append(f"step must be a whole number of 0 or more (the training step), not {step!r}")

    nodes = item.get("nodes")
    if nodes is not None and (isinstance(nodes, bool) or not isinstance(nodes, int) or not 1 <= nodes <= MAX_NODES):
        problems.append(
            f"nodes must be a whole number of 1 or more (the nodes the job runs on, e.g. nodes: 16), not {nodes!r}; "
            "or leave it out"
        )

    if problems:
        return None, problems
    assert ts is not None and isinstance(org, str) and isinstance(cluster, str) and isinstance(job, str)
    return (
        ThroughputSample(
            org_id=org,
            cluster=cluster,
            job=job,
            ts=ts,
            tokens_per_second=values.get("tokens_per_second"),
            samples_per_second=values.get("samples_per_second"),
            step=step,
            event=event,
            received_at=now,
            nodes=nodes,
        ),
        [],
    )


def _foreign(org: str, org_id: str) -> str:
    return (
        f"org {org!r} is not this token's org ({org_id!r}): a token writes only its own org's "
        f"samples; use a token of {org!r} (pitcrew token create ORG) or send org {org_id!r}"
    )


def _near_misses(name: str, clusters: Sequence[str]) -> str:
    """' Did you mean 'a' or 'b'?' for the clusters closest to `name` (difflib's ratio, 0.6 at least, within
    0.1 of the best). Not bot.names.did_you_mean's single best match: `kumo-p5` is about as close to
    `kumo-p5-dev` as to `kumo-p5-train`, and only the sender knows which one was meant."""
    scores = {cluster: difflib.SequenceMatcher(None, name.lower(), cluster.lower()).ratio() for cluster in clusters}
    best = max(scores.values(), default=0.0)
    close = sorted(cluster for cluster, score in scores.items() if score >= max(0.6, best - 0.1))
    if not close:
        return ""
    return " Did you mean " + " or ".join(repr(cluster) for cluster in close[:3]) + "?"


def unknown_cluster(name: str, *, org_id: str, clusters: Sequence[str]) -> str:
    """The reason for a sample whose cluster the org does not have: the org's clusters, and a near miss."""
    if not clusters:
        return (
            f"cluster {name!r} is not a cluster of {org_id!r}: neither Pitcrew's sweep nor AWS knows any cluster "
            f"of {org_id!r}; send the cluster's name as AWS shows it"
        )
    shown = ", ".join(clusters[:CLUSTERS_SHOWN])
    if len(clusters) > CLUSTERS_SHOWN:
        shown += f" and {len(clusters) - CLUSTERS_SHOWN} more"
    hint = _near_misses(name, clusters)
    return (
        f"cluster {name!r} is not a cluster of {org_id!r} (its clusters: {shown}); "
        f"send the cluster's name as AWS shows it.{hint}"
    )


@dataclass
class Batch:
    """The samples of one request, each checked on its own: `rows[i]` is the stored row of sample i, or None
    with its problems in `problems[i]`. `clusters` are the cluster names to check against the org's
    (`check_clusters`); then `samples()` gives the rows or raises the refusal of the whole request."""

    org_id: str
    rows: list[ThroughputSample | None]
    problems: list[list[str]]
    forbidden: set[int] = field(default_factory=set)  # samples of another org: authorization problems
    cluster_of: dict[int, str] = field(default_factory=dict)  # index -> a well-formed cluster of the token's org

    @property
    def clusters(self) -> set[str]:
        return set(self.cluster_of.values())

    def check_clusters(self, *, unknown: Collection[str], clusters: Sequence[str]) -> None:
        """Refuse the samples on a cluster in `unknown` (names the org does not have; `clusters` the ones
        it has, for the reason)."""
        for index, name in self.cluster_of.items():
            if name in unknown:
                self.problems[index].append(unknown_cluster(name, org_id=self.org_id, clusters=clusters))
                self.rows[index] = None

    def samples(self) -> list[ThroughputSample]:
        """Every row, or IngestRefused naming every bad sample (403 if all that is wrong is the org)."""
        errors = [
            {"index": index, "reason": "; ".join(problems)} for index, problems in enumerate(self.problems) if problems
        ]
        if errors:
            bad = [index for index, problems in enumerate(self.problems) if problems]
            only_org = all(index in self.forbidden and len(self.problems[index]) == 1 for index in bad)
            raise IngestRefused(403 if only_org else 400, errors)
        return [row for row in self.rows if row is not None]


def read_batch(body: bytes, *, org_id: str, now: datetime, max_age: timedelta, max_batch: int = MAX_BATCH) -> Batch:
    """The samples of one request, posted with a token of `org_id`, received at `now` (aware UTC), none older
    than `max_age`, each checked. Raises IngestRefused (400) only for a body that is not samples at all."""
    now = now.replace(tzinfo=UTC) if now.tzinfo is None else now.astimezone(UTC)
    items = _items(body, max_batch)
    batch = Batch(org_id=org_id, rows=[], problems=[])
    for index, item in enumerate(items):
        org = item.get("org") if isinstance(item, dict) else None
        foreign = org if isinstance(org, str) and org != org_id else None
        row, problems = _check(item, org_id=foreign or org_id, now=now, max_age=max_age)
        if foreign is not None:
            problems.insert(0, _foreign(foreign, org_id))
            batch.forbidden.add(index)
            row = None
        elif isinstance(item, dict):
            cluster = item.get("cluster")
            if isinstance(cluster, str) and CLUSTER_RE.fullmatch(cluster):
                batch.cluster_of[index] = cluster
        batch.rows.append(row)
        batch.problems.append(problems)
    return batch


def parse_samples(
    body: bytes, *, org_id: str, now: datetime, max_age: timedelta, max_batch: int = MAX_BATCH
) -> list[ThroughputSample]:
    """`read_batch` without the cluster check: the rows, or IngestRefused naming every problem (403 if every
    problem is a sample of another org, else 400; one reason per bad sample, saying how to fix it)."""
    return read_batch(body, org_id=org_id, now=now, max_age=max_age, max_batch=max_batch).samples()
