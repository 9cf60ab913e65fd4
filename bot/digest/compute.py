"""Digest maths: facts in, sections out. Pure functions; no Slack, AWS, database or clock.

Instance-hours integrate the node monitor's step functions (`StateChange`), so a cluster held for half a week
at 32 nodes counts 32 x 84 h whatever the sweep interval was.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Iterable, Mapping, Sequence
from datetime import date, datetime, timedelta

from bot.config import normalize_instance_type
from bot.digest.facts import (
    Change,
    ClusterAtEnd,
    Failure,
    FailureSummary,
    HistoryEntry,
    IdleSpan,
    JobTrend,
    OrgFacts,
    OrgSection,
    ProgramDigest,
    ProgramTotals,
    QuotaBar,
    Record,
    RecordKind,
    Stall,
    StateChange,
    TrackingDoc,
    UsageLine,
    Week,
)
from bot.digest.goodput import ACCELERATORS, accelerators, combined, goodput
from bot.digest.weeks import local_midnight, previous_week
from bot.monitor.throughput import DEGRADATION

__all__ = ["ACCELERATORS", "accelerators"]  # re-exported: the digest has always offered them here

NO_STATES_NOTE = (
    "No cluster states recorded in this window yet: usage appears once the node monitor has swept the org's clusters."
)


def format_duration(delta: timedelta) -> str:
    """A short duration such as "45 min", "1 h 20 min" or "2 d 3 h": minutes under a day, whole hours beyond
    (nobody needs the minutes of a 3-day outage). Negative durations read as 0 min."""
    seconds = max(delta.total_seconds(), 0.0)
    minutes = round(seconds / 60)
    if minutes < 60:
        return f"{minutes} min"
    if minutes < 24 * 60:
        hours, rest = divmod(minutes, 60)
        return f"{hours} h {rest} min" if rest else f"{hours} h"
    days, hours = divmod(round(seconds / 3600), 24)
    return f"{days} d {hours} h" if hours else f"{days} d"


# ------------------------------------------------------------------------------------------- cluster states

_Key = tuple[str, str, str, str]  # org_id, backend, cluster_name, instance_type (normalized)


def _by_key(changes: Iterable[StateChange]) -> dict[_Key, list[StateChange]]:
    """Changes grouped per step function, oldest first (stable: of two changes at one instant the later listed
    wins)."""
    grouped: dict[_Key, list[StateChange]] = defaultdict(list)
    for change in changes:
        key = (change.org_id, change.backend, change.cluster_name, normalize_instance_type(change.instance_type))
        grouped[key].append(change)
    for steps in grouped.values():
        steps.sort(key=lambda c: c.at)
    return grouped


def _integrate(grouped: Mapping[_Key, list[StateChange]], since: datetime, until: datetime) -> dict[str, float]:
    seconds: dict[str, float] = defaultdict(float)
    for key, steps in grouped.items():
        for index, change in enumerate(steps):
            # Each change holds from its moment to the next change of its key, clipped to the window; so a change
            # before `since` only contributes through its tail (the starting state), and one at/after `until`
            # contributes nothing.
            held_until = steps[index + 1].at if index + 1 < len(steps) else until
            start, end = max(change.at, since), min(held_until, until)
            if end > start and change.count:
                seconds[key[3]] += change.count * (end - start).total_seconds()
    return {t: s / 3600 for t, s in sorted(seconds.items()) if s > 0}


def instance_hours(changes: Sequence[StateChange], since: datetime, until: datetime) -> dict[str, float]:
    """Instance-hours held in [since, until) by instance type, summed over clusters; types with none left out."""
    return _integrate(_by_key(changes), since, until)


def daily_hours(changes: Sequence[StateChange], week: Week) -> tuple[tuple[date, dict[str, float]], ...]:
    """Instance-hours per local day of `week`, Monday first (days split at local midnight; DST days are 23/25 h)."""
    grouped = _by_key(changes)
    return tuple(
        (day, _integrate(grouped, local_midnight(day, week.tz), local_midnight(day + timedelta(days=1), week.tz)))
        for day in week.days
    )


def holdings_at(changes: Sequence[StateChange], at: datetime) -> tuple[ClusterAtEnd, ...]:
    """Each cluster's instances by type at `at` (the last change at or before it), empty clusters left out,
    sorted by cluster name."""
    clusters: dict[tuple[str, str, str], dict[str, int]] = {}
    for (org_id, backend, cluster_name, instance_type), steps in _by_key(changes).items():
        current = [c for c in steps if c.at <= at]
        if current and current[-1].count > 0:
            clusters.setdefault((org_id, backend, cluster_name), {})[instance_type] = current[-1].count
    return tuple(
        ClusterAtEnd(backend=backend, cluster_name=name, instances=dict(sorted(instances.items())))
        for (_, backend, name), instances in sorted(clusters.items(), key=lambda item: (item[0][2], item[0][1]))
    )


def held_at(changes: Sequence[StateChange], at: datetime) -> dict[str, int]:
    """What the clusters held at `at` by type (the usage ledger records the one held figure, bot.clusters.held)."""
    return _sum_instances(c.instances for c in holdings_at(changes, at))


def _sum_instances(instances: Iterable[Mapping[str, int]]) -> dict[str, int]:
    total: dict[str, int] = defaultdict(int)
    for mapping in instances:
        for instance_type, count in mapping.items():
            total[normalize_instance_type(instance_type)] += count
    return {t: n for t, n in sorted(total.items()) if n > 0}


# ------------------------------------------------------------------------------------------------ quota


def _normalized_quota(quota: Mapping[str, int]) -> dict[str, int]:
    # Like OrgConfig.quota_for: if a type is listed both with and without `ml.`, the first listing counts.
    normalized: dict[str, int] = {}
    for instance_type, allowed in quota.items():
        normalized.setdefault(normalize_instance_type(instance_type), allowed)
    return normalized


def usage_lines(hours: Mapping[str, float], *, quota: Mapping[str, int], window_hours: float) -> tuple[UsageLine, ...]:
    """One line per type that was held or is under quota: quota'd types first, then the rest, each by name."""
    used: dict[str, float] = defaultdict(float)
    for instance_type, value in hours.items():
        used[normalize_instance_type(instance_type)] += value
    limits = _normalized_quota(quota)
    lines = []
    for instance_type in sorted(limits):
        allowed = limits[instance_type]
        quota_hours = allowed * window_hours
        value = used.get(instance_type, 0.0)
        share = value / quota_hours if quota_hours > 0 else None
        lines.append(UsageLine(instance_type, value, allowed, quota_hours, share))
    for instance_type in sorted(used):
        if instance_type not in limits and used[instance_type] > 0:
            lines.append(UsageLine(instance_type, used[instance_type], None, None, None))
    return tuple(lines)


def quota_bar(usage: Sequence[UsageLine]) -> QuotaBar:
    """An org's hours against its quota-hours, types under quota only (a quota of 0 has no hours to set against)."""
    limited = [u for u in usage if u.quota is not None and u.quota_hours]
    if not limited:
        return QuotaBar(tuple(u.instance_type for u in usage), sum(u.instance_hours for u in usage), 0, None)
    return QuotaBar(
        tuple(u.instance_type for u in limited),
        sum(u.instance_hours for u in limited),
        sum(u.quota or 0 for u in limited),
        sum(u.quota_hours or 0.0 for u in limited),
    )


def quota_levels(held: Mapping[str, int], quota: Mapping[str, int]) -> dict[str, int]:
    """The quota level each quota'd type has reached (100, 80 or 0), for the one-time 80%/100% notices."""
    now = _sum_instances([held])
    levels = {}
    for instance_type, allowed in sorted(_normalized_quota(quota).items()):
        if allowed <= 0:
            continue
        count = now.get(instance_type, 0)
        # Integer comparison: 0.8 * quota in floats can land a hair off a whole number.
        levels[instance_type] = 100 if count >= allowed else 80 if 5 * count >= 4 * allowed else 0
    return levels


# ----------------------------------------------------------------------------------------------- failures


def _in(moment: datetime | None, since: datetime, until: datetime) -> bool:
    return moment is not None and since <= moment < until


def summarize_failures(failures: Sequence[Failure], *, since: datetime, until: datetime) -> FailureSummary:
    opened = [f for f in failures if _in(f.opened_at, since, until)]
    closed = [f for f in failures if _in(f.closed_at, since, until)]
    recoveries = [f.closed_at - f.opened_at for f in closed if f.closed_at is not None]
    mttr = sum(recoveries, timedelta()) / len(recoveries) if recoveries else None
    # An episode that opened and closed in the window is counted once.
    touched = [f for f in failures if _in(f.opened_at, since, until) or _in(f.closed_at, since, until)]
    still_open = [f for f in failures if f.opened_at < until and (f.closed_at is None or f.closed_at >= until)]
    per_cluster: dict[str, int] = defaultdict(int)
    for failure in opened:
        per_cluster[failure.cluster_name] += 1
    return FailureSummary(
        count=len(opened),
        recovered=len(closed),
        mean_time_to_recovery=mttr,
        node_hours_lost=sum(f.node_hours_lost for f in touched),
        gpu_hours_lost=sum(f.node_hours_lost * accelerators(f.instance_type) for f in touched),
        still_open=len(still_open),
        repeated=tuple(sorted(name for name, n in per_cluster.items() if n >= 2)),
    )


# ------------------------------------------------------------------------------------------------ idle


def idle_hours(spans: Iterable[IdleSpan], since: datetime, until: datetime) -> dict[str, float]:
    """Idle accelerator instance-hours in [since, until) by instance type: each episode's nodes times its
    span (from when idleness began to when a job reported again, or the window's end), clipped to the window."""
    seconds: dict[str, float] = defaultdict(float)
    for span in spans:
        start, end = max(span.since, since), min(span.until or until, until)
        if end > start and span.nodes > 0:
            seconds[normalize_instance_type(span.instance_type)] += span.nodes * (end - start).total_seconds()
    return {t: s / 3600 for t, s in sorted(seconds.items()) if s > 0}


# ------------------------------------------------------------------------------------------------ sections


def _plural(n: int, one: str, many: str) -> str:
    return f"{n} {one if n == 1 else many}"


def _attention(
    *, open_incidents: int, failures: FailureSummary, stalls: int, usage: Sequence[UsageLine]
) -> tuple[str, ...]:
    reasons = []
    if open_incidents:
        reasons.append(_plural(open_incidents, "open incident", "open incidents"))
    if failures.count >= 3:
        reasons.append(f"{failures.count} node failures")
    if failures.repeated:
        reasons.append(f"repeated failures on {', '.join(failures.repeated)}")
    if stalls:
        reasons.append(_plural(stalls, "throughput episode", "throughput episodes"))
    over = [line.instance_type for line in usage if line.share is not None and line.share > 1.0]
    if over:
        reasons.append(f"over quota on {', '.join(over)}")
    if failures.still_open:
        reasons.append(_plural(failures.still_open, "failure still open", "failures still open"))
    return tuple(reasons)


def _stalls_in(stalls: Iterable[Stall], since: datetime, until: datetime) -> tuple[Stall, ...]:
    """Episodes begun in the window, or already under way when it started."""
    kept = [
        s
        for s in stalls
        if _in(s.start, since, until) or (s.start < since and (s.closed_at is None or s.closed_at > since))
    ]
    return tuple(sorted(kept, key=lambda s: s.start))


def _of_kind(records: Iterable[Record], kind: RecordKind) -> tuple[Record, ...]:
    return tuple(sorted((r for r in records if r.kind == kind), key=lambda r: r.created_at))


def org_section(facts: OrgFacts, week: Week) -> OrgSection:
    """One org's part of the digest for `week` (facts gathered for exactly the week's window)."""
    since, until = week.start, week.end
    # The state at the end of the week: the last change strictly before `end` (datetimes are whole microseconds).
    clusters = holdings_at(facts.changes, until - timedelta(microseconds=1))
    usage = usage_lines(instance_hours(facts.changes, since, until), quota=facts.quota, window_hours=week.hours)
    failures = summarize_failures(facts.failures, since=since, until=until)
    jobs = tuple(
        JobTrend(
            cluster_name=r.cluster_name,
            job=r.job,
            this_week=r.this_week,
            last_week=r.last_week,
            ratio=(
                r.this_week / r.last_week
                if r.this_week is not None and r.last_week is not None and r.last_week > 0
                else None
            ),
        )
        for r in sorted(facts.rates, key=lambda r: (r.cluster_name, r.job))
    )
    stalls = _stalls_in(facts.stalls, since, until)
    return OrgSection(
        org_id=facts.org_id,
        name=facts.name,
        channel=facts.channel,
        clusters=clusters,
        nodes_by_type=_sum_instances(c.instances for c in clusters),
        usage=usage,
        daily_hours=daily_hours(facts.changes, week),
        failures=failures,
        jobs=jobs,
        stalls=stalls,
        milestones=_of_kind(facts.records, RecordKind.MILESTONE),
        incidents_opened=_of_kind(facts.records, RecordKind.INCIDENT),
        incidents_resolved=tuple(facts.resolved),
        incidents_open=tuple(facts.open_incidents),
        notes=_of_kind(facts.records, RecordKind.NOTE),
        lessons=_of_kind(facts.records, RecordKind.LESSON),
        requirement_changes=_of_kind(facts.records, RecordKind.REQUIREMENT),
        changes=tuple(sorted(facts.operations, key=lambda c: c.at)),
        attention=_attention(
            open_incidents=len(facts.open_incidents),
            failures=failures,
            stalls=sum(s.status != DEGRADATION for s in stalls),  # a degradation is low-urgency: no attention
            usage=usage,
        ),
        idle_hours=idle_hours(facts.idle, since, until),
        goodput=goodput(facts.goodput, since, until) if facts.goodput else None,
        goodput_last_week=(
            goodput(facts.goodput, previous_week(week).start, since)
            if facts.goodput and facts.goodput.since <= previous_week(week).start
            else None
        ),
    )


def build_digest(
    *, program_name: str, week: Week, facts: Sequence[OrgFacts], skipped_weeks: Sequence[str] = ()
) -> ProgramDigest:
    """The program's digest for `week`: one section per org (in the given order), totals and attention."""
    sections = tuple(org_section(f, week) for f in facts)
    hours: dict[str, float] = defaultdict(float)
    for section in sections:
        for line in section.usage:
            if line.instance_hours > 0:
                hours[line.instance_type] += line.instance_hours
    measured = [s.goodput for s in sections if s.goodput is not None]
    # Orgs no job of which reported are left out of the program's figure (their held hours are not all idle,
    # only not told apart); when none reported, the figure is theirs, unknown.
    measured = [g for g in measured if g.reported] or measured
    totals = ProgramTotals(
        clusters=sum(len(s.clusters) for s in sections),
        nodes_by_type=_sum_instances(s.nodes_by_type for s in sections),
        instance_hours_by_type=dict(sorted(hours.items())),
        failures=sum(s.failures.count for s in sections),
        gpu_hours_lost=sum(s.failures.gpu_hours_lost for s in sections),
        stalls=sum(len(s.stalls) for s in sections),
        incidents_open=sum(len(s.incidents_open) for s in sections),
        milestones=sum(len(s.milestones) for s in sections),
        idle_instance_hours=sum(sum(s.idle_hours.values()) for s in sections),
        goodput=combined(measured, week.start, max(g.until for g in measured)) if measured else None,
    )
    return ProgramDigest(
        program_name=program_name,
        week=week,
        orgs=sections,
        totals=totals,
        attention=tuple((s.org_id, s.attention) for s in sections if s.attention),
        lessons=tuple(sorted((r for s in sections for r in s.lessons), key=lambda r: r.created_at)),
        skipped_weeks=tuple(skipped_weeks),
    )


# ------------------------------------------------------------------------------------------- living document


def _failure_text(failure: Failure) -> str:
    where = f"{failure.kind} failure on {failure.cluster_name}"
    if failure.instance_type:
        where += f" ({failure.instance_type})"
    lost = f"{failure.node_hours_lost:.1f} node-hours lost" if failure.node_hours_lost > 0 else ""
    if failure.closed_at is None:
        return f"{where}, still open" + (f", {lost} so far" if lost else "")
    return f"{where}, recovered after {format_duration(failure.closed_at - failure.opened_at)}" + (
        f", {lost}" if lost else ""
    )


def _stall_text(stall: Stall) -> str:
    text = f"{stall.status} of job {stall.job} on {stall.cluster_name}"
    if stall.closed_at is None:
        return f"{text}, still open"
    return f"{text}, lasted {format_duration(stall.closed_at - stall.start)}"


def _change_text(change: Change) -> str:
    return change.summary + (" (failed)" if change.status == "failed" else "")


def history(facts: OrgFacts) -> tuple[HistoryEntry, ...]:
    """An org's dated history, newest first: records, resolutions, cluster changes, failures and stalls."""
    entries = [HistoryEntry(r.created_at, r.kind.value, r.text, r.created_by, f"#{r.id}") for r in facts.records]
    entries += [
        HistoryEntry(r.resolved_at, "resolved", f"resolved #{r.id}: {r.text}", r.resolved_by or "", f"#{r.id}")
        for r in facts.resolved
        if r.resolved_at is not None
    ]
    entries += [HistoryEntry(c.at, "change", _change_text(c), c.by) for c in facts.operations]
    entries += [HistoryEntry(f.opened_at, "failure", _failure_text(f)) for f in facts.failures]
    entries += [HistoryEntry(s.start, "stall", _stall_text(s)) for s in facts.stalls]
    # Stable sort: entries at the same instant keep the order above (a record before its resolution).
    return tuple(sorted(entries, key=lambda e: e.at, reverse=True))


def tracking_doc(facts: OrgFacts, *, generated_at: datetime) -> TrackingDoc:
    """An org's living document over the facts' window."""
    window_hours = (facts.until - facts.since).total_seconds() / 3600
    usage = usage_lines(
        instance_hours(facts.changes, facts.since, facts.until), quota=facts.quota, window_hours=window_hours
    )
    return TrackingDoc(
        org_id=facts.org_id,
        name=facts.name,
        generated_at=generated_at,
        requirements=tuple(sorted(facts.requirements, key=lambda r: r.key)),
        clusters=tuple(facts.clusters_now),
        quota=facts.quota,
        held=_sum_instances(c.instances for c in facts.clusters_now),
        usage=usage,
        usage_window=(facts.since, facts.until),
        open_incidents=tuple(facts.open_incidents),
        history=history(facts),
        notes=() if facts.changes else (NO_STATES_NOTE,),
    )
