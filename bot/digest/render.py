"""Block Kit for tracking and the weekly digest: sections from `bot.digest.facts` in, `Reply`s out (and the
digest's charts, drawn by bot.slack.charts). `SlackDigest` is what the digest and the usage ledger are given.

Nothing here reads storage or decides what happened; `bot.digest.compute` did that. The only choices made
here are wording and fitting into Slack's limits: 50 blocks a message, 3000 characters a section, and a total
of text per message that Slack does not document but enforces (`msg_blocks_too_long` from about 12,000
characters of block text). The digest is split into several messages rather than cut; one-message replies
(`/track show`, `/track doc`) say how much they left out and where to read all of it.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable, Iterable, Mapping, Sequence
from datetime import datetime, timedelta
from typing import Any
from zoneinfo import ZoneInfo

from bot.clusters.model import Backend
from bot.digest.compute import quota_bar
from bot.digest.facts import (
    ClusterNow,
    FailureSummary,
    JobTrend,
    OrgSection,
    ProgramDigest,
    Record,
    RecordKind,
    Stall,
    TrackingDoc,
    UsageLine,
    Week,
)
from bot.digest.goodput import NODE_FAILURES, PARTS, Goodput, percent_text, shares, shown
from bot.slack import charts
from bot.slack.blocks import (
    MAX_BLOCKS,
    MAX_HEADER,
    Block,
    Reply,
    button,
    context,
    divider,
    escape,
    header,
    health_icon,
    section,
    sections,
    when,
)

_section = section  # for org_digest, whose parameter is named `section`

# Slack answers msg_blocks_too_long somewhere above 12,000 characters of text in a message's blocks (counted
# with some overhead per block); 11,000 leaves room for that overhead and for escaping done after counting.
MESSAGE_TEXT_BUDGET = 11_000

TRACK_ADD_ACTION = "track_add"  # the "Add a record" button on `/track`
TRACK_VIEW = "track_add_record"  # the modal's callback_id
TRACK_KIND_BLOCK = TRACK_KIND_INPUT = "kind"
TRACK_ORG_BLOCK = TRACK_ORG_INPUT = "org"
TRACK_TEXT_BLOCK = TRACK_TEXT_INPUT = "text"
TRACK_TEXT_MAX = 1500
MAX_OPTIONS = 100  # Slack's limit for a static_select
MAX_OPTION_TEXT = 75

DASH = "\N{EN DASH}"  # between the two ends of a date range
SUBCOMMANDS = (
    "`/track note|milestone|incident|lesson TEXT [--org ORG]` · `/track require KEY=VALUE ...` · "
    "`/track resolve ID` · `/track show [ORG] [--weeks N]` · `/track doc ORG`"
)

_KIND = {  # icon and label of a record kind, and of the other kinds of history entry
    RecordKind.NOTE.value: (":memo:", "Note"),
    RecordKind.MILESTONE.value: (":checkered_flag:", "Milestone"),
    RecordKind.INCIDENT.value: (":rotating_light:", "Incident"),
    RecordKind.LESSON.value: (":bulb:", "Lesson"),
    RecordKind.REQUIREMENT.value: (":clipboard:", "Requirement"),
    "resolved": (":white_check_mark:", "Resolved"),
    "change": (":gear:", "Change"),
    "failure": (":red_circle:", "Failure"),
    "stall": (":large_orange_circle:", "Throughput"),
}


# ------------------------------------------------------------------------------------------------ formatting


def hours_text(value: float) -> str:
    """Instance-hours: whole numbers with separators from 100 up ("2,150"), one decimal below ("12.5")."""
    if abs(value) >= 100:
        return f"{value:,.0f}"
    text = f"{value:,.1f}"
    return text[:-2] if text.endswith(".0") else text


def _percent(share: float) -> str:
    return f"{share * 100:.0f}%"


def _duration(span: timedelta) -> str:
    """'45 min', '1 h 20 min', '2 d 3 h': as precise as a reader of a weekly summary needs."""
    minutes = round(span.total_seconds() / 60)
    if minutes < 1:
        return "under 1 min"
    if minutes < 60:
        return f"{minutes} min"
    if minutes < 24 * 60:
        hours, rest = divmod(minutes, 60)
        return f"{hours} h {rest} min" if rest else f"{hours} h"
    days, hours = divmod(round(minutes / 60), 24)
    return f"{days} d {hours} h" if hours else f"{days} d"


def _plural(count: int, word: str, many: str | None = None) -> str:
    return f"{count:,} {word if count == 1 else many or word + 's'}"


def _date_range(week: Week) -> str:
    """'Mon 23 Nov - Sun 29 Nov 2026' (with an en dash) in the program's timezone."""
    first, last = week.days[0], week.days[-1]
    return f"{first:%a} {first.day} {first:%b} {DASH} {last:%a} {last.day} {last:%b} {last.year}"


def _instances(counts: Mapping[str, int]) -> str:
    """'32 x p5.48xlarge, 1 x m5.xlarge', biggest first."""
    items = sorted(((n, t) for t, n in counts.items() if n), key=lambda item: (-item[0], item[1]))
    return ", ".join(f"{n:,} x {t}" for n, t in items) or "none"


def _backend(value: str) -> str:
    try:
        return Backend(value).label
    except ValueError:
        return escape(value)


def _user(user_id: str | None) -> str:
    return f"<@{user_id}>" if user_id else "someone"


def _quote(text: str) -> str:
    """User text as a Slack block quote, every line of it."""
    return "\n".join(f">{line}" for line in (escape(text).splitlines() or [""]))


def _shorten(text: str, limit: int) -> str:
    return text if len(text) <= limit else text[: limit - 1] + "…"


def _record_line(record: Record, tz: ZoneInfo, *, kind: bool = True) -> str:
    icon, label = _KIND.get(record.kind.value, (":small_blue_diamond:", record.kind.value))
    if record.kind is RecordKind.INCIDENT and record.resolved_at is not None:
        icon = _KIND["resolved"][0]
    what = f"{icon} *{label}* *#{record.id}*" if kind else f"*#{record.id}*"
    line = f"{what} {escape(record.text)} · {_user(record.created_by)} · {when(record.created_at, tz)}"
    if record.resolved_at is not None:
        line += f" · resolved by {_user(record.resolved_by)} {when(record.resolved_at, tz)}"
    return line


def _usage_line(line: UsageLine) -> str:
    kind = f"*{escape(line.instance_type)}*"
    if line.quota is None:
        return f"• {kind}: {hours_text(line.instance_hours)} instance-hours (not under quota)"
    if line.quota_hours is None or line.share is None:
        return f"• {kind}: {hours_text(line.instance_hours)} instance-hours · quota {line.quota:,} instances"
    return (
        f"• {kind}: {hours_text(line.instance_hours)} of {hours_text(line.quota_hours)} quota-hours "
        f"(*{_percent(line.share)}*) · quota {line.quota:,} instances"
    )


def _held_lines(held: Mapping[str, int], quota: Mapping[str, int]) -> list[str]:
    """What an org holds now against its quota, quota'd types first (`/track show` and `/track doc` alike)."""
    kinds = sorted(set(quota) | {t for t, n in held.items() if n}, key=lambda t: (t not in quota, t))
    lines = [
        f"• *{escape(kind)}*: {held.get(kind, 0):,} held now "
        + (f"of {quota[kind]:,} allowed" if kind in quota else "(not under quota)")
        for kind in kinds
    ]
    return lines or ["No quota and nothing held."]


def _usage_fallback(usage: Sequence[UsageLine]) -> str:
    return hours_text(sum(u.instance_hours for u in usage))


def goodput_text(value: Goodput, *, last: Goodput | None = None, running: bool = False, bold: bool = True) -> str:
    """ "Goodput 60.8 % (last week 58.2 %) · of 512.0 accelerator-hours held: training 311.3 · node failures 8.0
    · ..." (DESIGN.md, Goodput): every part by name in accelerator-hours with one decimal and no thousands
    separators, rounded so that they add up to the held figure as printed. An org no job of which reported
    throughput: "Goodput n/a: no job reported throughput this week · 512.0 accelerator-hours held" (its idle
    part would be a guess, so no parts but node failures, known without jobs)."""
    head = f"Goodput {percent_text(value)}"
    head = f"*{head}*" if bold else head
    if value.held > 0 and not value.reported:
        head += f": {UNREPORTED}"
    head += " so far" if running else ""
    if last is not None and last.percent is not None:
        head += f" (last week {percent_text(last)})"
    if value.held <= 0:
        return head + " · no accelerator-hours held"
    if not value.reported:
        return head + _unreported_held(value)
    held, parts = shown(value)
    return f"{head} · of {held:.1f} accelerator-hours held: " + " · ".join(
        f"{name} {hours:.1f}" for name, hours in parts
    )


UNREPORTED = "no job reported throughput this week"


def _unreported_held(value: Goodput) -> str:
    """ " · 512.0 accelerator-hours held · node failures 8.0": what is known of an org without reports."""
    held, parts = shown(value)
    failures = dict(parts)[NODE_FAILURES]
    return f" · {held:.1f} accelerator-hours held" + (f" · node failures {failures:.1f}" if failures > 0 else "")


def unreported(digest: ProgramDigest) -> list[OrgSection]:
    """The orgs that held accelerators but none of whose jobs reported throughput: no goodput to chart."""
    return [o for o in digest.orgs if o.goodput is not None and o.goodput.held > 0 and not o.goodput.reported]


def charted(digest: ProgramDigest) -> bool:
    """Whether the summary gets a goodput chart: some org's goodput is known."""
    return digest.totals.goodput is not None and digest.totals.goodput.reported


def _goodput_shares(value: Goodput) -> str:
    """ "node failures 1.6 % · stalls 6.3 % · ...": where the rest went, as shares of held."""
    share = shares(value)
    return " · ".join(f"{name} {share[name]:.1f} %" for name in PARTS[1:])


# ------------------------------------------------------------------------------------------------ fitting


def _chars(block: Block) -> int:
    """Characters of text in a block, as Slack counts them against a message's total."""
    total = 0
    if isinstance(block.get("text"), dict):
        total += len(block["text"].get("text", ""))
    for item in block.get("fields", ()) or block.get("elements", ()):
        if isinstance(item.get("text"), str):
            total += len(item["text"])
        elif isinstance(item.get("text"), dict):
            total += len(item["text"].get("text", ""))
    return total


def _fits(blocks: Sequence[Block]) -> bool:
    return len(blocks) <= MAX_BLOCKS and sum(_chars(b) for b in blocks) <= MESSAGE_TEXT_BUDGET


def _split(title: str, body: Sequence[Block], *, text: str) -> list[Reply]:
    """`body` under a header, in as many messages as the limits need; later ones are titled "(continued 2/3)".
    Blocks stay whole and in order, so nothing is cut (sections are already within 3000 characters). `title` is
    raw (a header is plain text, which Slack does not parse); `text`, the fallback, must be escaped already."""
    pages: list[list[Block]] = [[]]
    room = MESSAGE_TEXT_BUDGET - MAX_HEADER - 20  # every page has a header of at most this many characters
    used = 0
    for block in body:
        size = _chars(block)
        page = pages[-1]
        if page and (len(page) + 1 >= MAX_BLOCKS or used + size > room):
            pages.append([])
            used = 0
        pages[-1].append(block)
        used += size
    replies = []
    for number, page in enumerate(pages, start=1):
        if number == 1:
            heading, fallback = title, text
        else:
            suffix = f" (continued {number}/{len(pages)})"
            heading = _shorten(title, MAX_HEADER - len(suffix)) + suffix
            fallback = escape(title) + suffix
        # Not `public`: the scheduler posts these with chat.postMessage, and `/digest preview` shows them only to
        # the one who asked.
        replies.append(Reply(text=fallback, blocks=[header(heading), *page]))
    return replies


def _fit_lines(
    head: Sequence[Block],
    title: str,
    lines: Sequence[str],
    tail: Sequence[Block],
    *,
    overflow: Callable[[int], str],
) -> list[Block]:
    """One message: `head`, then `title` and as many of `lines` as fit (in order), a context saying how many
    were left out, then `tail`. Used where the lines are a long list of which the first are the ones to read."""

    def blocks(shown: int) -> list[Block]:
        more = [context(overflow(len(lines) - shown))] if shown < len(lines) else []
        return [*head, *sections([title, *lines[:shown]]), *more, *tail]

    if _fits(blocks(len(lines))):
        return blocks(len(lines))
    low, high = 0, len(lines)  # the most lines that fit with the overflow note is in [low, high)
    while high - low > 1:
        middle = (low + high) // 2
        if _fits(blocks(middle)):
            low = middle
        else:
            high = middle
    # The head alone might not fit (hundreds of open incidents): then the last blocks go, and that is said too.
    return _guard(blocks(low))


def _guard(blocks: list[Block]) -> list[Block]:
    """Like `blocks.fit()` (same wording), and also within the message's text budget."""
    if _fits(blocks):
        return blocks

    def note(hidden: int) -> Block:
        return context(f"… and {hidden} more blocks not shown")

    keep = min(len(blocks), MAX_BLOCKS - 1)
    while keep > 1 and not _fits([*blocks[:keep], note(len(blocks) - keep)]):
        keep -= 1
    return [*blocks[:keep], note(len(blocks) - keep)]


# ------------------------------------------------------------------------------------------------ digest


def digest_summary(digest: ProgramDigest) -> list[Reply]:
    """The program-wide message for the coordination channel: totals, orgs needing attention, every lesson of
    the week. Usually one message; more when the lessons do not fit in one (never cut)."""
    week, totals = digest.week, digest.totals
    title = f"Weekly digest: {digest.program_name} — {week.label}"
    names = {org.org_id: org.name for org in digest.orgs}

    figures = [
        f"*Clusters:* {totals.clusters:,} · *nodes:* {sum(totals.nodes_by_type.values()):,}"
        + (f" ({_instances(totals.nodes_by_type)})" if totals.nodes_by_type else ""),
        "*Instance-hours:* "
        + (
            ", ".join(
                f"{hours_text(h)} {t}"
                for t, h in sorted(totals.instance_hours_by_type.items(), key=lambda item: (-item[1], item[0]))
            )
            or "none"
        ),
        f"*Node failures:* {totals.failures:,} · {hours_text(totals.gpu_hours_lost)} GPU-hours lost",
        f"*Throughput episodes* (stalls, slowdowns and degradations): {totals.stalls:,}",
        f"*Open incidents:* {totals.incidents_open:,} · *milestones reached:* {totals.milestones:,}",
    ]
    if totals.idle_instance_hours > 0:
        figures.append(
            f"*Idle accelerators:* {hours_text(totals.idle_instance_hours)} instance-hours with no job running"
        )
    if totals.goodput is not None:
        running = totals.goodput.until < week.end
        line = goodput_text(totals.goodput, running=running).replace("*Goodput", "*Program goodput", 1)
        if totals.goodput.reported and (left := len(unreported(digest))):
            line += f" · {_plural(left, 'org')} left out: no job of theirs reported throughput"
        figures.append(line)
    body: list[Block] = [context(f"{_date_range(week)} ({week.tz.key})"), section("\n".join(figures))]

    if digest.attention:
        body += sections(
            [":warning: *Needs attention*"]
            + [
                f"• *{escape(names.get(org_id, org_id))}*: {escape('; '.join(reasons))}"
                for org_id, reasons in digest.attention
            ]
        )
    else:
        body.append(section(":white_check_mark: No org needs attention."))

    if digest.orgs:
        body += sections(["*Orgs*", *(_org_overview(org) for org in digest.orgs)])
    measured = [org for org in digest.orgs if org.goodput is not None]
    if measured:
        body += sections(
            [":chart_with_upwards_trend: *Goodput by org* (training / held accelerator-hours; where the rest went)"]
            + [_org_goodput(org, week, charted=charted(digest)) for org in measured]
        )

    body.append(divider())
    if digest.lessons:
        body += sections(
            [f":bulb: *Lessons of the week* ({len(digest.lessons)})"]
            + [
                f"• *{escape(names.get(lesson.org_id, lesson.org_id))}*: {escape(lesson.text)} — "
                f"{_user(lesson.created_by)} · #{lesson.id}"
                for lesson in digest.lessons
            ]
        )
    else:
        body.append(section(":bulb: No lessons recorded this week."))

    if digest.skipped_weeks:
        body += sections(
            f":warning: The digest for {label} was not posted: Pitcrew was not running when it was due."
            for label in digest.skipped_weeks
        )
    body.append(context("Each org's section follows in this thread; each org channel gets its own section only."))

    text = (
        f"{escape(title)}: {_plural(totals.clusters, 'cluster')}, {_plural(totals.failures, 'node failure')}, "
        f"{_plural(totals.incidents_open, 'open incident')}, {_plural(len(digest.attention), 'org')} needing "
        f"attention, {_plural(len(digest.lessons), 'lesson')}"
    )
    return _split(title, body, text=text)


def _org_overview(org: OrgSection) -> str:
    if org.quiet:
        return f"• *{escape(org.name)}*: quiet"
    return (
        f"• *{escape(org.name)}*: {_plural(len(org.clusters), 'cluster')} · "
        f"{hours_text(sum(u.instance_hours for u in org.usage))} instance-hours · "
        f"{_plural(org.failures.count, 'node failure')} · {_plural(len(org.incidents_open), 'incident')} open"
        + (f" · {hours_text(sum(org.idle_hours.values()))} idle instance-hours" if org.idle_hours else "")
    )


def _org_goodput(org: OrgSection, week: Week, *, charted: bool = True) -> str:
    value = org.goodput
    if value is None:
        return f"• *{escape(org.name)}*: no goodput"
    if value.held > 0 and not value.reported:
        text = goodput_text(value, last=org.goodput_last_week, running=value.until < week.end, bold=False)
        return f"• *{escape(org.name)}*: {text}" + (" · not in the chart" if charted else "")
    line = f"• *{escape(org.name)}*: Goodput {percent_text(value)}" + (" so far" if value.until < week.end else "")
    last = org.goodput_last_week
    if last is not None and last.percent is not None:
        line += f" (last week {percent_text(last)})"
    return line + (f" · {_goodput_shares(value)}" if value.held > 0 else " · no accelerator-hours held")


def idle_line(idle_hours: Mapping[str, float]) -> str:
    """An org's idle accelerator instance-hours of the week, by type."""
    by_type = ", ".join(
        f"{hours_text(h)} {escape(t)}" for t, h in sorted(idle_hours.items(), key=lambda i: (-i[1], i[0]))
    )
    return f"*Idle accelerators:* {hours_text(sum(idle_hours.values()))} instance-hours with no job running ({by_type})"


def org_digest(section: OrgSection, *, week: Week, program_name: str) -> list[Reply]:
    """One org's section of the digest. It is posted on its own in the org's channel, so it names no other org
    and needs no other message to be understood."""
    org, tz = section, week.tz
    name = escape(org.name)
    if org.quiet:
        text = (
            f"*{name}* · {week.label} ({_date_range(week)}): nothing happened and nothing was held this week: "
            "no clusters, no instance-hours, no failures, no records."
        )
        return [Reply(text=text.replace("*", ""), blocks=[_section(text)])]

    title = f"{org.name} — {week.label}"
    body: list[Block] = [context(f"Weekly digest of {escape(program_name)} · {_date_range(week)} ({tz.key})")]
    if org.attention:
        body.append(_section(f":warning: *Needs attention:* {escape('; '.join(org.attention))}"))

    lines = [f"*Clusters at the end of the week:* {len(org.clusters)}"]
    lines += [f"• `{escape(c.cluster_name)}` · {_backend(c.backend)} · {_instances(c.instances)}" for c in org.clusters]
    lines.append(f"*Nodes:* {sum(org.nodes_by_type.values()):,}" + _by_type(org.nodes_by_type))
    body += sections(lines)

    body += sections(
        ["*Instance-hours used*", *(_usage_line(u) for u in org.usage)]
        if org.usage
        else ["*Instance-hours used:* none"]
    )
    if org.goodput is not None:
        running = org.goodput.until < week.end
        body.append(_section(goodput_text(org.goodput, last=org.goodput_last_week, running=running)))
    if org.idle_hours:
        body.append(_section(idle_line(org.idle_hours)))
    body += sections(_failure_lines(org.failures))
    if org.jobs:
        body += sections(["*Throughput* (median tokens/s, this week vs last)", *(_job_line(j) for j in org.jobs)])
    if org.stalls:
        heading = f"*Throughput episodes*: {episode_counts(org.stalls)}"
        body += sections([heading, *(_stall_line(s, tz) for s in org.stalls)])
    body += _records_part(":checkered_flag: *Milestones*", org.milestones, tz)
    body += sections(_incident_lines(org, tz))
    body += _records_part(":memo: *Notes*", org.notes, tz)
    body += _records_part(":bulb: *Lessons*", org.lessons, tz)
    body += _records_part(":clipboard: *Requirement changes*", org.requirement_changes, tz)
    if org.changes:
        body += sections(
            [":gear: *Cluster changes*"]
            + [
                f"• {':x: *failed*: ' if c.status == 'failed' else ''}{escape(c.summary)} · {_user(c.by)} · "
                f"{when(c.at, tz)}"
                for c in org.changes
            ]
        )

    text = (
        f"{escape(title)}: {_plural(len(org.clusters), 'cluster')}, {_usage_fallback(org.usage)} instance-hours, "
        f"{_plural(org.failures.count, 'node failure')}, {_plural(len(org.incidents_open), 'incident')} open"
    )
    return _split(title, body, text=text)


def _by_type(counts: Mapping[str, int]) -> str:
    return f" ({_instances(counts)})" if any(counts.values()) else ""


def _failure_lines(failures: FailureSummary) -> list[str]:
    if not failures.count and not failures.still_open:
        return ["*Node failures:* none"]
    mttr = (
        f" (mean time to recovery {_duration(failures.mean_time_to_recovery)})"
        if failures.mean_time_to_recovery is not None
        else ""
    )
    lines = [
        f"*Node failures:* {failures.count:,} · {failures.recovered:,} recovered{mttr} · "
        f"{hours_text(failures.gpu_hours_lost)} GPU-hours lost ({hours_text(failures.node_hours_lost)} node-hours) · "
        f"{failures.still_open:,} still open"
    ]
    if failures.repeated:
        lines.append("• Failed more than once: " + ", ".join(f"`{escape(c)}`" for c in failures.repeated))
    return lines


def _job_line(job: JobTrend) -> str:
    where = f"• `{escape(job.cluster_name)}` · `{escape(job.job)}`: "
    if job.this_week is None:
        last = f" (last week {job.last_week:,.0f})" if job.last_week is not None else ""
        return where + f"no samples this week{last}"
    now = f"{job.this_week:,.0f}"
    if job.last_week is None:
        return where + f"{now} · new this week"
    if job.ratio is None:
        return where + f"{now} (last week {job.last_week:,.0f})"
    change = round((job.ratio - 1) * 100)
    arrow = "↑" if change > 0 else "↓" if change < 0 else "→"
    return where + f"{now} vs {job.last_week:,.0f} {arrow} {abs(change)}%"


EPISODE_KINDS = (("stall", "stalls"), ("slowdown", "slowdowns"), ("degradation", "degradations"))


def episode_counts(stalls: Sequence[Stall]) -> str:
    """Pure: "1 stall, 2 slowdowns, 1 degradation": an org's throughput episodes counted by kind."""
    counts = Counter(s.status for s in stalls)
    known = [f"{counts[one]} {one if counts[one] == 1 else many}" for one, many in EPISODE_KINDS if counts[one]]
    other = sum(n for status, n in counts.items() if status not in dict(EPISODE_KINDS))
    return ", ".join(known + ([f"{other} other"] if other else []))


def _stall_line(stall: Stall, tz: ZoneInfo) -> str:
    what = f"• {escape(stall.status)} of `{escape(stall.job)}` on `{escape(stall.cluster_name)}`: "
    if stall.closed_at is None:
        return what + f"since {when(stall.start, tz)}, still open"
    return what + f"{when(stall.start, tz)}, {_duration(stall.closed_at - stall.start)}"


def _records_part(title: str, records: Sequence[Record], tz: ZoneInfo) -> list[Block]:
    if not records:
        return []
    return sections([title, *(f"• {_record_line(r, tz, kind=False)}" for r in records)])


def _incident_lines(org: OrgSection, tz: ZoneInfo) -> list[str]:
    if not (org.incidents_opened or org.incidents_resolved or org.incidents_open):
        return [":rotating_light: *Incidents:* none opened, none open"]
    lines = [
        f":rotating_light: *Incidents:* {len(org.incidents_opened)} opened · {len(org.incidents_resolved)} resolved · "
        f"{len(org.incidents_open)} still open"
        + (" (" + ", ".join(f"#{r.id}" for r in org.incidents_open) + ")" if org.incidents_open else "")
    ]
    lines += [f"• opened {_record_line(r, tz, kind=False)}" for r in org.incidents_opened]
    lines += [f"• resolved {_record_line(r, tz, kind=False)}" for r in org.incidents_resolved]
    # Those opened this week are listed above already; older ones still open are worth their own line.
    shown = {r.id for r in (*org.incidents_opened, *org.incidents_resolved)}
    lines += [f"• still open {_record_line(r, tz, kind=False)}" for r in org.incidents_open if r.id not in shown]
    return lines


# ------------------------------------------------------------------------------------------------ /track


def _newest_first(records: Iterable[Record]) -> list[Record]:
    return sorted(records, key=lambda r: (r.created_at, r.id), reverse=True)


def track_show(
    *,
    org_id: str,
    org_name: str,
    weeks: int,
    since: datetime,
    records: Sequence[Record],
    open_incidents: Sequence[Record],
    usage: Sequence[UsageLine],
    tz: ZoneInfo,
    held: Mapping[str, int] | None = None,
    goodput: Sequence[tuple[Week, Goodput]] = (),
) -> Reply:
    """`/track show`: what the org holds now, the usage ledger of the window, its goodput week by week (newest
    first), open incidents, then the window's records newest first. One ephemeral message; the oldest records
    are left out, and said to be, when they do not all fit."""
    quota = {u.instance_type: u.quota for u in usage if u.quota is not None}
    span = _plural(weeks, "week")
    title = f"Tracking · {org_name} · last {span}"
    head: list[Block] = [
        header(title),
        context(f"`{escape(org_id)}` · since {when(since, tz)}"),
        *sections([":bar_chart: *Held now*", *_held_lines(held or {}, quota)]),
        *sections(
            [f"*Instance-hours since {since.astimezone(tz):%a} {since.astimezone(tz).day} {since.astimezone(tz):%b}*"]
            + ([_usage_line(u) for u in usage] or ["No instance-hours recorded in this window."])
        ),
        *(sections([":chart_with_upwards_trend: *Goodput by week*", *_weekly_goodput(goodput)]) if goodput else []),
        *sections(
            [f":rotating_light: *Open incidents* ({len(open_incidents)})"]
            + ([f"• {_record_line(r, tz, kind=False)}" for r in _newest_first(open_incidents)] or ["None."])
        ),
        divider(),
    ]
    heading = f"*Records, newest first* ({len(records)})" if records else "No records in this window."
    lines = [_record_line(r, tz) for r in _newest_first(records)]

    def overflow(hidden: int) -> str:
        return (
            f"… and {_plural(hidden, 'older record')}: `/track doc {org_id}` or "
            f"`pitcrew track export {org_id} --format md` has them all."
        )

    blocks = _fit_lines(head, heading, lines, [], overflow=overflow)
    text = f"{escape(title)}: {_plural(len(records), 'record')}, {_plural(len(open_incidents), 'open incident')}"
    return Reply(text=text, blocks=blocks)


def _weekly_goodput(weeks: Sequence[tuple[Week, Goodput]]) -> list[str]:
    """One line per week, newest first, each against the week before it."""
    lines = []
    for index in range(len(weeks) - 1, -1, -1):
        week, value = weeks[index]
        last = weeks[index - 1][1] if index > 0 else None
        running = value.until < week.end
        lines.append(f"• {week.label}: {goodput_text(value, last=last, running=running, bold=False)}")
    return lines


def tracking_doc_reply(doc: TrackingDoc, *, tz: ZoneInfo) -> Reply:
    """`/track doc ORG`: the org's living document in one message; the oldest history is left out, and said
    to be, when it does not all fit (the Markdown export has everything)."""
    title = f"{doc.name} — tracking document"
    head: list[Block] = [header(title), context(f"`{escape(doc.org_id)}` · generated {when(doc.generated_at, tz)}")]

    if doc.requirements:
        head += sections(
            [":clipboard: *Requirements*"]
            + [
                f"• *{escape(r.key)}*: {escape(r.value)} · set by {_user(r.set_by)} {when(r.set_at, tz)}"
                for r in doc.requirements
            ]
        )
    else:
        head.append(section(":clipboard: No requirements recorded: `/track require model_size=70B framework=NeMo ...`"))

    head += sections(
        [f":desktop_computer: *Clusters now* ({len(doc.clusters)})"]
        + ([_cluster_now_line(c, tz) for c in doc.clusters] or ["No clusters."])
    )

    start, end = doc.usage_window
    quota_lines = [":bar_chart: *Quota and usage*", *_held_lines(doc.held, doc.quota)]
    quota_lines.append(f"_Used from {when(start, tz)} to {when(end, tz)}:_")
    quota_lines += [_usage_line(u) for u in doc.usage] or ["No instance-hours recorded."]
    head += sections(quota_lines)

    head += sections(
        [f":rotating_light: *Open incidents* ({len(doc.open_incidents)})"]
        + ([f"• {_record_line(r, tz, kind=False)}" for r in _newest_first(doc.open_incidents)] or ["None."])
    )
    head.append(divider())

    heading = f"*History, newest first* ({len(doc.history)})" if doc.history else "No history yet."
    lines = []
    for entry in doc.history:
        icon, label = _KIND.get(entry.kind, (":small_blue_diamond:", entry.kind))
        ref = f" *{escape(entry.ref)}*" if entry.ref else ""
        by = f" · {_user(entry.by)}" if entry.by else ""
        lines.append(f"{when(entry.at, tz)} {icon} {label}{ref}: {escape(entry.text)}{by}")
    tail = [context(*(escape(note) for note in doc.notes))] if doc.notes else []

    def overflow(hidden: int) -> str:
        return (
            f"… and {_plural(hidden, 'older history entry', 'older history entries')}: "
            f"`pitcrew track export {doc.org_id} --format md` has them all."
        )

    blocks = _fit_lines(head, heading, lines, tail, overflow=overflow)
    text = (
        f"{escape(title)}: {_plural(len(doc.requirements), 'requirement')}, {_plural(len(doc.clusters), 'cluster')}, "
        f"{_plural(len(doc.open_incidents), 'open incident')}, "
        f"{_plural(len(doc.history), 'history entry', 'history entries')}"
    )
    return Reply(text=text, blocks=blocks)


def _cluster_now_line(cluster: ClusterNow, tz: ZoneInfo) -> str:
    health = cluster.health  # the colour and words `/cluster list` and the Home give it (bot.clusters.health)
    return (
        f"• {health_icon(health)} `{escape(cluster.name)}` · {_backend(cluster.backend)} · "
        f"`{escape(cluster.status)}` · {health.summary()} · {_instances(cluster.instances)} · "
        f"seen {when(cluster.last_seen_at, tz)}"
    )


def record_added(record: Record, *, org_name: str, tz: ZoneInfo) -> Reply:
    """Posted in the channel (public) so the team sees what was recorded."""
    icon, label = _KIND.get(record.kind.value, (":small_blue_diamond:", record.kind.value))
    blocks: list[Block] = [
        section(f"{icon} {label} *#{record.id}* recorded for *{escape(org_name)}*:\n{_quote(record.text)}"),
        context(
            f"by {_user(record.created_by)} · {when(record.created_at, tz)}"
            + (f" · `/track resolve {record.id}` when it is over" if record.kind is RecordKind.INCIDENT else "")
        ),
    ]
    text = f"{label} #{record.id} recorded for {escape(org_name)}: {escape(record.text)}"
    return Reply(text=text, blocks=blocks, public=True)


def record_resolved(record: Record, *, org_name: str, tz: ZoneInfo, already: bool) -> Reply:
    """An incident resolved (public), or, when it already was, an ephemeral note that nothing changed."""
    ref = f"#{record.id}"
    if already:
        text = (
            f"{ref} was already resolved by {_user(record.resolved_by)} at {when(record.resolved_at, tz)}, "
            "nothing changed."
        )
        return Reply(text=text, blocks=[section(f":information_source: {text}")])
    lasted = f", open for {_duration(record.resolved_at - record.created_at)}" if record.resolved_at is not None else ""
    blocks: list[Block] = [
        section(
            f":white_check_mark: Incident *{ref}* of *{escape(org_name)}* resolved by {_user(record.resolved_by)}:\n"
            f"{_quote(record.text)}"
        ),
        context(
            f"Opened by {_user(record.created_by)} {when(record.created_at, tz)}; resolved "
            f"{when(record.resolved_at, tz)}{lasted}"
        ),
    ]
    text = f"Incident {ref} of {escape(org_name)} resolved: {escape(record.text)}"
    return Reply(text=text, blocks=blocks, public=True)


def requirements_set(
    *, org_name: str, changed: Sequence[tuple[str, str | None, str]], unchanged: Sequence[str]
) -> Reply:
    """`/track require`: each changed key with its old and new value (public: the team sees requirements move)."""
    name = escape(org_name)
    lines = [
        f"• *{escape(key)}*: " + (f"{escape(old)} → *{escape(new)}*" if old is not None else f"*{escape(new)}* (new)")
        for key, old, new in changed
    ]
    same = ", ".join(f"`{escape(key)}`" for key in unchanged)
    if not changed:
        text = f"Requirements of {name} unchanged: {same or 'nothing given'}."
        return Reply(text=text, blocks=[section(f":clipboard: {text}")])
    blocks: list[Block] = sections([f":clipboard: Requirements of *{name}* updated:", *lines])
    if unchanged:
        blocks.append(context(f"Unchanged (same value as before): {same}"))
    text = f"Requirements of {name} updated: " + ", ".join(f"{escape(key)}={escape(new)}" for key, _old, new in changed)
    return Reply(text=text, blocks=_guard(blocks), public=True)


READ_ONLY = "Your role lets you read tracking records (`/track show`, `/track doc ORG`), not write them."


def track_home(
    *,
    org_name: str | None,
    open_incidents: int,
    records_this_week: int,
    usage_hint: str,
    org_id: str | None = None,
    may_add: bool = True,
) -> Reply:
    """`/track` with no arguments: where the org stands, a button opening the "Add a record" modal (its value
    is the org to preselect, "" for none) and the subcommands. Without `may_add` (a viewer) no button: a form
    they could not submit is not offered."""
    if org_name is None:
        summary = "*Tracking*\nThis channel is not an org's channel: choose the org in the form."
        text = "Tracking: add a record, or use the /track subcommands."
    else:
        summary = (
            f"*Tracking · {escape(org_name)}*\n{_plural(open_incidents, 'open incident')} · "
            f"{_plural(records_this_week, 'record')} this week"
        )
        text = f"Tracking {escape(org_name)}: {open_incidents} open incidents, {records_this_week} records this week"
    if usage_hint:
        summary += f"\n{escape(usage_hint)}"
    if not may_add:
        return Reply(text=text, blocks=[section(summary), context(READ_ONLY)])
    blocks: list[Block] = [
        section(summary),
        {
            "type": "actions",
            "block_id": "track_home",
            "elements": [button(TRACK_ADD_ACTION, "Add a record", org_id or "", style="primary")],
        },
        context(SUBCOMMANDS),
    ]
    return Reply(text=text, blocks=blocks)


def _option(text: str, value: str) -> dict[str, Any]:
    return {"text": {"type": "plain_text", "text": _shorten(text, MAX_OPTION_TEXT)}, "value": value}


def track_modal(*, orgs: Sequence[tuple[str, str]], default_org: str | None, private_metadata: str) -> dict[str, Any]:
    """The "Add a record" modal: kind, org (id, name) and text. Slack takes at most 100 options: beyond that the
    default org is kept and the form says how to record for the others."""
    if not orgs:
        raise ValueError("the modal needs at least one org to choose from")
    kinds = [
        _option("Note", RecordKind.NOTE.value),
        _option("Milestone", RecordKind.MILESTONE.value),
        _option("Incident (open until resolved)", RecordKind.INCIDENT.value),
        _option("Lesson", RecordKind.LESSON.value),
    ]
    listed = list(orgs[:MAX_OPTIONS])
    default = next((org for org in orgs if org[0] == default_org), None)
    if default is not None and default not in listed:
        listed[-1] = default
    org_options = [_option(name, org_id) for org_id, name in listed]
    org_select: dict[str, Any] = {"type": "static_select", "action_id": TRACK_ORG_INPUT, "options": org_options}
    if default is not None:
        org_select["initial_option"] = _option(default[1], default[0])
    blocks: list[Block] = [
        {
            "type": "input",
            "block_id": TRACK_KIND_BLOCK,
            "label": {"type": "plain_text", "text": "Kind"},
            "element": {
                "type": "static_select",
                "action_id": TRACK_KIND_INPUT,
                "options": kinds,
                "initial_option": kinds[0],
            },
        },
        {
            "type": "input",
            "block_id": TRACK_ORG_BLOCK,
            "label": {"type": "plain_text", "text": "Org"},
            "element": org_select,
        },
        {
            "type": "input",
            "block_id": TRACK_TEXT_BLOCK,
            "label": {"type": "plain_text", "text": "Text"},
            "element": {
                "type": "plain_text_input",
                "action_id": TRACK_TEXT_INPUT,
                "multiline": True,
                "max_length": TRACK_TEXT_MAX,
                "placeholder": {"type": "plain_text", "text": "What happened, what was decided, what was learned"},
            },
        },
    ]
    if len(orgs) > MAX_OPTIONS:
        blocks.append(
            context(
                f"Only {MAX_OPTIONS} of {len(orgs)} orgs can be listed here; for the others use "
                "`/track note TEXT --org ORG`."
            )
        )
    return {
        "type": "modal",
        "callback_id": TRACK_VIEW,
        "private_metadata": private_metadata,
        "title": {"type": "plain_text", "text": "Add a record"},
        "submit": {"type": "plain_text", "text": "Record"},
        "close": {"type": "plain_text", "text": "Cancel"},
        "blocks": blocks,
    }


def quota_notice(*, org_name: str, instance_type: str, held: int, quota: int, level: int) -> Reply:
    """Posted once in the org's channel when what it holds of a type crosses `level` (80 or 100) percent."""
    name, kind = escape(org_name), escape(instance_type)
    share = f" ({held / quota:.0%})" if quota > 0 else ""
    if level >= 100:
        body = (
            f":no_entry: *{name}* holds {held:,} of its {quota:,} `{kind}` instances{share}: the whole quota. "
            f"Further launches and scale-ups of `{kind}` are refused until something is released (scale a cluster "
            "down or delete one). To change the quota, ask a program admin."
        )
        text = f"{name} holds its whole {kind} quota ({held} of {quota}): launches and scale-ups of it are refused"
    else:
        body = (
            f":warning: *{name}* holds {held:,} of its {quota:,} `{kind}` instances{share}, past {level}% of its "
            f"quota. Launches and scale-ups beyond {quota:,} will be refused; release what is idle, or ask a "
            "program admin to change the quota."
        )
        text = f"{name} holds {held} of {quota} {kind} instances, past {level}% of its quota"
    blocks = [section(body), context(f"Said once when {level}% of the quota is crossed.")]
    return Reply(text=text, blocks=blocks, public=True)


def digest_sent(*, week: str, channels: int, skipped: Sequence[str]) -> Reply:
    text = f"Digest for {week} posted to {_plural(channels, 'channel')}."
    blocks: list[Block] = [section(f":white_check_mark: {text}")]
    if skipped:
        skipped_text = "Skipped: " + ", ".join(escape(item) for item in skipped)
        blocks += sections([skipped_text])
        text += f" {skipped_text}"
    return Reply(text=text, blocks=_guard(blocks))


def digest_already_sent(*, week: str, at: datetime, by: str | None, tz: ZoneInfo) -> Reply:
    who = f" by {_user(by)}" if by else " by the schedule"
    text = f"The digest for {week} was already posted at {when(at, tz)}{who}. `/digest send --force` posts it again."
    return Reply(text=text, blocks=[section(f":information_source: {text}")])


def org_chart(section: OrgSection, week: Week) -> bytes:
    bar = quota_bar(section.usage)  # the types under quota stacked against it; all of them without one
    used = {t for _, hours in section.daily_hours for t in hours}
    types = sorted(used if bar.quota_hours is None else used & set(bar.types))
    what = "instance-hours per day" if bar.quota_hours is None else "instance-hours per day of types under quota"
    return charts.daily_usage_chart(
        title=f"{section.name}: {what}, {week.label}",
        days=[day for day, _ in section.daily_hours],
        hours_by_type={t: [hours.get(t, 0.0) for _, hours in section.daily_hours] for t in types},
        quota_hours_per_day=bar.quota * 24.0 if bar.quota_hours is not None else None,
    )


def program_chart(digest: ProgramDigest) -> bytes:
    bars = [quota_bar(section.usage) for section in digest.orgs]
    return charts.org_usage_chart(
        title=f"{digest.program_name}: instance-hours of types under quota, by org, {digest.week.label}",
        orgs=[section.name for section in digest.orgs],
        used=[bar.instance_hours for bar in bars],
        available=[bar.quota_hours for bar in bars],
    )


def goodput_chart(digest: ProgramDigest) -> bytes:
    """Each org's held accelerator-hours as one bar of 100 %: training, then where the rest went. Orgs none of
    whose jobs reported throughput have no bar (an all-idle bar would be a guess); the title says how many."""
    left = unreported(digest)
    out = {org.org_id for org in left}
    measured = [org for org in digest.orgs if org.goodput is not None and org.org_id not in out]
    title = f"{digest.program_name}: goodput and where the rest went, by org, {digest.week.label}"
    if left:
        title += f"\n{_plural(len(left), 'org')} left out: no job of theirs reported throughput"
    return charts.goodput_chart(
        title=title,
        orgs=[f"{org.name} {percent_text(org.goodput)}" for org in measured if org.goodput is not None],
        shares=[shares(org.goodput) for org in measured if org.goodput is not None],
    )


class SlackDigest:
    """The digest's presenter (bot.digest.weekly.DigestPresenter) and the usage ledger's (its quota notices)."""

    def summary(self, digest: ProgramDigest) -> list[Reply]:
        return digest_summary(digest)

    def org_section(self, section: OrgSection, *, week: Week, program_name: str) -> list[Reply]:
        return org_digest(section, week=week, program_name=program_name)

    def org_chart(self, section: OrgSection, week: Week) -> bytes:
        return org_chart(section, week)

    def program_chart(self, digest: ProgramDigest) -> bytes:
        return program_chart(digest)

    def goodput_chart(self, digest: ProgramDigest) -> bytes:
        return goodput_chart(digest)

    def quota_notice(self, *, org_name: str, instance_type: str, held: int, quota: int, level: int) -> Reply:
        return quota_notice(org_name=org_name, instance_type=instance_type, held=held, quota=quota, level=level)
