"""`/cluster`'s subcommands (bot.subcommands specs) and the typed commands they parse into. Pure: no Slack,
no AWS.

Every bad input becomes a UsageError carrying one sentence on what was wrong and the usage line
that shows how to do it right.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass

from bot.access import Action
from bot.audit_view import ACTIONS
from bot.subcommands import DIGITS, ORG_ID, Args, CommandSet, Subcommand, UsageError, quoted, tables

__all__ = ["DIGITS", "ORG_ID", "UsageError"]  # shared with the other parsers, importable from here too

MAX_TEXT = 1000  # a real /cluster command is a few dozen characters; longer text is a paste gone wrong
CLUSTER_NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9-]{0,62}")  # HyperPod's and ParallelCluster's common ground
MAX_THROUGHPUT_HOURS = 72
MAX_AUDIT_DAYS = 90
TEMPLATE_ID = re.compile(r"[a-z][a-z0-9-]{1,62}")
GROUP_NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9-]{0,62}(?:/[A-Za-z0-9][A-Za-z0-9-]{0,62})?")
NODE_ID = re.compile(r"i-[a-f0-9]{8}(?:[a-f0-9]{9})?")  # HyperPod node ids are EC2 instance ids
MAX_COUNT = 10_000
# A person in command text: Slack's escaped mention <@U123|name> or <@U123>, or @U123, or the bare id.
SLACK_USER = re.compile(r"<@([UW][A-Z0-9]{2,23})(?:\|[^>]*)?>|@?([UW][A-Z0-9]{2,23})", re.IGNORECASE)
PARAM = re.compile(r"([A-Za-z][A-Za-z0-9_-]{0,63})=(.*)", re.DOTALL)


@dataclass(frozen=True)
class ClusterRef:
    name: str
    org: str | None = None  # given as ORG/CLUSTER

    def __str__(self) -> str:
        return f"{self.org}/{self.name}" if self.org else self.name


@dataclass(frozen=True)
class Help:
    pass


@dataclass(frozen=True)
class ListClusters:
    target: str | None  # None: the default org(s); "all"; or an org id
    public: bool = False


@dataclass(frozen=True)
class RunDoctor:
    org: str | None  # None: every org


@dataclass(frozen=True)
class ListCapacity:
    target: str | None  # None: the default org(s); "all"; or an org id
    public: bool = False


@dataclass(frozen=True)
class ClusterStatus:
    cluster: ClusterRef
    public: bool = False


@dataclass(frozen=True)
class ClusterNodes:
    cluster: ClusterRef
    failed_only: bool = False
    public: bool = False


@dataclass(frozen=True)
class ListTemplates:
    public: bool = False


@dataclass(frozen=True)
class ListApprovals:
    org: str | None = None  # None: every org the caller may see


@dataclass(frozen=True)
class ShowAudit:
    org: str | None  # None: the caller's org (admins: every org)
    days: int = 7
    user: str | None = None  # a Slack user id: only their entries
    action: str | None = None  # a key of bot.audit_view.ACTIONS: only those entries
    ids: bool = False  # show operation and alert ids


@dataclass(frozen=True)
class LaunchCluster:
    template: str
    name: str
    dry_run: bool
    count: int | None = None
    org: str | None = None
    params: tuple[tuple[str, str], ...] = ()


@dataclass(frozen=True)
class LaunchForm:
    """`/cluster launch` with no template or name (`--org ORG` at most): the launch form (a modal) instead."""

    org: str | None = None


@dataclass(frozen=True)
class ScaleGroup:
    cluster: ClusterRef
    group: str
    count: int
    dry_run: bool = False


@dataclass(frozen=True)
class NodeAction:
    """`replace` or `reboot` of named nodes."""

    verb: str
    cluster: ClusterRef
    node_ids: tuple[str, ...]
    dry_run: bool = False


@dataclass(frozen=True)
class CheckNodes:
    """`check`: HyperPod deep health checks of named nodes (both checks unless one is named)."""

    cluster: ClusterRef
    node_ids: tuple[str, ...]
    stress: bool = False
    connectivity: bool = False
    dry_run: bool = False


@dataclass(frozen=True)
class DeleteCluster:
    cluster: ClusterRef


@dataclass(frozen=True)
class StartFleet:
    """`start`: a stopped ParallelCluster compute fleet started again."""

    cluster: ClusterRef
    dry_run: bool = False


@dataclass(frozen=True)
class ShowThroughput:
    cluster: ClusterRef
    hours: int = 6
    public: bool = False


ClusterCommand = (
    Help
    | ListClusters
    | ClusterStatus
    | ClusterNodes
    | ListTemplates
    | LaunchCluster
    | LaunchForm
    | ShowAudit
    | ScaleGroup
    | NodeAction
    | CheckNodes
    | DeleteCluster
    | StartFleet
    | ShowThroughput
    | ListCapacity
    | ListApprovals
    | RunDoctor
)


def _cluster_ref(word: str, usage: str) -> ClusterRef:
    org, _, name = word.rpartition("/")
    if org and not ORG_ID.fullmatch(org):
        raise UsageError(f"`{quoted(org)}` is not an org id (lowercase letters, digits and dashes).", usage)
    if not CLUSTER_NAME.fullmatch(name):
        raise UsageError(
            f"`{quoted(word)}` is not a cluster name (letters, digits and dashes, up to 63 characters).", usage
        )
    return ClusterRef(name=name, org=org or None)


def _flags(args: Args, sub: str, allowed: set[str]) -> tuple[set[str], list[str]]:
    """(the flags given, the positional words) of a subcommand whose flags take no value."""
    flags = {arg for arg in args.words if arg.startswith("--")}
    unknown = sorted(flags - allowed)
    if unknown:
        raise UsageError(f"`{quoted(unknown[0])}` is not an option of `/cluster {sub}`.", args.usage)
    return flags, [arg for arg in args.words if not arg.startswith("--")]


def _help(args: Args) -> Help:
    _, positional = _flags(args, "help", set())
    if positional:
        raise UsageError("`/cluster help` takes no arguments.", args.usage)
    return Help()


def _templates(args: Args) -> ListTemplates:
    flags, positional = _flags(args, "templates", {"--public"})
    if positional:
        raise UsageError("`/cluster templates` takes no arguments.", args.usage)
    return ListTemplates(public="--public" in flags)


def _list(args: Args, sub: str = "list") -> ListClusters:
    flags, positional = _flags(args, sub, {"--public"})
    if len(positional) > 1:
        raise UsageError(f"`/cluster {sub}` takes at most one org.", args.usage)
    target = positional[0].lower() if positional else None
    if target is not None and target != "all" and not ORG_ID.fullmatch(target):
        raise UsageError(f"`{quoted(positional[0])}` is not an org id or `all`.", args.usage)
    return ListClusters(target=target, public="--public" in flags)


def _doctor(args: Args) -> RunDoctor:
    _, positional = _flags(args, "doctor", set())
    if len(positional) > 1:
        raise UsageError("`/cluster doctor` takes at most one org.", args.usage)
    org = positional[0].lower() if positional else None
    if org is not None and not ORG_ID.fullmatch(org):
        raise UsageError(f"`{quoted(positional[0])}` is not an org id.", args.usage)
    return RunDoctor(org=org)


def _approvals(args: Args) -> ListApprovals:
    _, positional = _flags(args, "approvals", set())
    if len(positional) > 1:
        raise UsageError("`/cluster approvals` takes at most one org id.", args.usage)
    org = positional[0].lower() if positional else None
    if org is not None and not ORG_ID.fullmatch(org):
        raise UsageError(f"`{quoted(positional[0])}` is not an org id.", args.usage)
    return ListApprovals(org=org)


def _capacity(args: Args) -> ListCapacity:
    listed = _list(args, "capacity")
    return ListCapacity(target=listed.target, public=listed.public)


def _one_cluster(args: Args, sub: str, allowed: set[str]) -> tuple[ClusterRef, set[str]]:
    flags, positional = _flags(args, sub, allowed)
    if len(positional) != 1:
        what = "a cluster name" if not positional else "one cluster name"
        raise UsageError(f"`/cluster {sub}` needs {what}.", args.usage)
    return _cluster_ref(positional[0], args.usage), flags


def _status(args: Args) -> ClusterStatus:
    ref, flags = _one_cluster(args, "status", {"--public"})
    return ClusterStatus(cluster=ref, public="--public" in flags)


def _nodes(args: Args) -> ClusterNodes:
    ref, flags = _one_cluster(args, "nodes", {"--public", "--failed"})
    return ClusterNodes(cluster=ref, failed_only="--failed" in flags, public="--public" in flags)


def _launch(args: Args) -> LaunchCluster | LaunchForm:
    usage = args.usage
    if not args.words:
        return LaunchForm()
    if len(args.words) == 2 and args.words[0] == "--org" and ORG_ID.fullmatch(args.words[1]):
        return LaunchForm(org=args.words[1])  # the form for another org (an admin's, say)
    positional: list[str] = []
    count: int | None = None
    org: str | None = None
    params: list[tuple[str, str]] = []
    dry_run = False
    words = iter(args.words)
    for word in words:
        if word == "--dry-run":
            dry_run = True
        elif word in ("--count", "--org", "--param"):
            value = next(words, None)
            if value is None:
                raise UsageError(f"`{word}` needs a value.", usage)
            if word == "--count":
                if not re.fullmatch(r"[0-9]{1,5}", value):
                    raise UsageError(f"`--count` takes a whole number; got `{quoted(value)}`.", usage)
                count = int(value)
            elif word == "--org":
                if not ORG_ID.fullmatch(value):
                    raise UsageError(f"`{quoted(value)}` is not an org id.", usage)
                org = value
            else:
                match = PARAM.fullmatch(value)
                if not match:
                    raise UsageError(f"`--param` takes KEY=VALUE; got `{quoted(value)}`.", usage)
                params.append((match[1], match[2]))
        elif word.startswith("--"):
            raise UsageError(f"`{quoted(word)}` is not an option of `/cluster launch`.", usage)
        else:
            positional.append(word)
    if len(positional) != 2:
        raise UsageError("`/cluster launch` needs a template id and a name for the new cluster.", usage)
    template, name = positional
    if not TEMPLATE_ID.fullmatch(template):
        raise UsageError(f"`{quoted(template)}` is not a template id; `/cluster templates` lists them.", usage)
    if not CLUSTER_NAME.fullmatch(name):
        raise UsageError(
            f"`{quoted(name)}` is not a cluster name (letters, digits and dashes, up to 63 characters).", usage
        )
    return LaunchCluster(template=template, name=name, dry_run=dry_run, count=count, org=org, params=tuple(params))


def _audit(args: Args) -> ShowAudit:
    usage = args.usage
    org: str | None = None
    user: str | None = None
    action: str | None = None
    days, ids = 7, False
    actions = ", ".join(f"`{name}`" for name in ACTIONS)
    words = iter(args.words)
    for word in words:
        if word == "--days":
            value = next(words, None)
            if value is None or not DIGITS.fullmatch(value) or not 1 <= int(value) <= MAX_AUDIT_DAYS:
                raise UsageError(f"`--days` takes a whole number from 1 to {MAX_AUDIT_DAYS}.", usage)
            days = int(value)
        elif word == "--user":
            value = next(words, None)
            match = SLACK_USER.fullmatch(value) if value is not None else None
            if match is None:
                got = f"; got `{quoted(value)}`" if value else ""
                if value and value.startswith("@"):  # a display name: Slack passes it on as typed, not as an id
                    got += ", a display name, which Slack does not turn into an id for a command"
                raise UsageError(
                    f"`--user` takes a Slack member id like `U0123ABCD` (profile → ⋯ → Copy member ID){got}.", usage
                )
            user = (match[1] or match[2]).upper()
        elif word == "--action":
            value = next(words, None)
            if value is None or value.lower() not in ACTIONS:
                got = f"`{quoted(value)}` is not one" if value else "it needs one"
                raise UsageError(f"`--action` takes one of {actions}; {got}.", usage)
            action = value.lower()
        elif word == "--ids":
            ids = True
        elif word.startswith("--"):
            raise UsageError(f"`{quoted(word)}` is not an option of `/cluster audit`.", usage)
        elif org is None and ORG_ID.fullmatch(word.lower()):
            org = word.lower()
        else:
            raise UsageError(f"`{quoted(word)}` is not an org id; give at most one.", usage)
    return ShowAudit(org=org, days=days, user=user, action=action, ids=ids)


def _change(args: Args, sub: str) -> tuple[ClusterRef, list[str], bool]:
    """(the cluster, the words after it, --dry-run) of a change; `delete` takes no --dry-run."""
    flags, positional = _flags(args, sub, set() if sub == "delete" else {"--dry-run"})
    if not positional:
        raise UsageError(f"`/cluster {sub}` needs a cluster name.", args.usage)
    return _cluster_ref(positional[0], args.usage), positional[1:], "--dry-run" in flags


def _delete(args: Args) -> DeleteCluster:
    ref, rest, _ = _change(args, "delete")
    if rest:
        raise UsageError("`/cluster delete` takes one cluster name and nothing else.", args.usage)
    return DeleteCluster(cluster=ref)


def _start(args: Args) -> StartFleet:
    ref, rest, dry_run = _change(args, "start")
    if rest:
        raise UsageError("`/cluster start` takes one cluster name and nothing else.", args.usage)
    return StartFleet(cluster=ref, dry_run=dry_run)


def _scale(args: Args) -> ScaleGroup:
    (ref, rest, dry_run), usage = _change(args, "scale"), args.usage
    if len(rest) != 2:
        raise UsageError("`/cluster scale` needs a cluster, a group and the new node count.", usage)
    group, count = rest
    if not GROUP_NAME.fullmatch(group):
        raise UsageError(f"`{quoted(group)}` is not an instance group or queue name.", usage)
    if not DIGITS.fullmatch(count) or int(count) > MAX_COUNT:
        raise UsageError(
            f"The node count must be a whole number from 0 to {MAX_COUNT:,}; got `{quoted(count)}`.", usage
        )
    return ScaleGroup(cluster=ref, group=group, count=int(count), dry_run=dry_run)


def _node_action(sub: str) -> Callable[[Args], NodeAction]:
    """The parser of `replace` or `reboot`."""

    def parse(args: Args) -> NodeAction:
        (ref, rest, dry_run), usage = _change(args, sub), args.usage
        if not rest:
            raise UsageError(f"`/cluster {sub}` needs the ids of the nodes to {sub}.", usage)
        bad = [word for word in rest if not NODE_ID.fullmatch(word)]
        if bad:
            raise UsageError(
                f"`{quoted(bad[0])}` is not a node id; HyperPod node ids are instance ids like "
                "`i-0123456789abcdef0` (`/cluster nodes CLUSTER` lists them).",
                usage,
            )
        return NodeAction(verb=sub, cluster=ref, node_ids=tuple(dict.fromkeys(rest)), dry_run=dry_run)

    return parse


def _check(args: Args) -> CheckNodes:
    usage = args.usage
    flags, positional = _flags(args, "check", {"--stress", "--connectivity", "--dry-run"})
    if not positional:
        raise UsageError("`/cluster check` needs a cluster name and the ids of the nodes to check.", usage)
    ref, rest = _cluster_ref(positional[0], usage), positional[1:]
    if not rest:
        raise UsageError("`/cluster check` needs the ids of the nodes to check.", usage)
    bad = [word for word in rest if not NODE_ID.fullmatch(word)]
    if bad:
        raise UsageError(
            f"`{quoted(bad[0])}` is not a node id; HyperPod node ids are instance ids like "
            "`i-0123456789abcdef0` (`/cluster nodes CLUSTER` lists them).",
            usage,
        )
    return CheckNodes(
        cluster=ref,
        node_ids=tuple(dict.fromkeys(rest)),
        stress="--stress" in flags,
        connectivity="--connectivity" in flags,
        dry_run="--dry-run" in flags,
    )


def _throughput(args: Args) -> ShowThroughput:
    usage = args.usage
    hours, public, positional = 6, False, []
    words = iter(args.words)
    for word in words:
        if word == "--hours":
            value = next(words, None)
            if value is None or not DIGITS.fullmatch(value) or not 1 <= int(value) <= MAX_THROUGHPUT_HOURS:
                raise UsageError(f"`--hours` takes a whole number from 1 to {MAX_THROUGHPUT_HOURS}.", usage)
            hours = int(value)
        elif word == "--public":
            public = True
        elif word.startswith("--"):
            raise UsageError(f"`{quoted(word)}` is not an option of `/cluster throughput`.", usage)
        else:
            positional.append(word)
    if len(positional) != 1:
        raise UsageError("`/cluster throughput` needs one cluster name.", usage)
    return ShowThroughput(cluster=_cluster_ref(positional[0], usage), hours=hours, public=public)


_CHANGE_NODE = "(NODE: instance id, e.g. i-0123456789abcdef0)"
CLUSTER = CommandSet(
    command="/cluster",
    max_text=MAX_TEXT,
    example="/cluster list",
    shell_split=True,
    overview=("list", "status", "nodes", "help"),
    subcommands=(
        Subcommand(name="help", usage="/cluster help", summary="what you may run", needs=None, parse=_help),
        Subcommand(
            name="list",
            usage="/cluster list [ORG|all] [--public]",
            summary="clusters of an org (default: this channel's org), or `all`",
            needs=Action.VIEW,
            parse=_list,
        ),
        Subcommand(
            name="capacity",
            usage="/cluster capacity [ORG|all] [--public]",
            summary="reserved capacity (training plans, Capacity Blocks, capacity reservations): size, end time, "
            "the clusters using it",
            needs=Action.VIEW,
            parse=_capacity,
        ),
        Subcommand(
            name="status",
            usage="/cluster status CLUSTER [--public]   (CLUSTER or ORG/CLUSTER)",
            summary="one cluster's groups, node health, creation time and failure message",
            needs=Action.VIEW,
            parse=_status,
        ),
        Subcommand(
            name="nodes",
            usage="/cluster nodes CLUSTER [--failed] [--public]   (CLUSTER or ORG/CLUSTER)",
            summary="a cluster's nodes, unhealthy first; `--failed` keeps only unhealthy ones",
            needs=Action.VIEW,
            parse=_nodes,
        ),
        Subcommand(
            name="templates",
            usage="/cluster templates [--public]",
            summary="the pre-validated reference architectures a cluster can be launched from",
            needs=Action.VIEW,
            parse=_templates,
        ),
        Subcommand(
            name="launch",
            usage="/cluster launch TEMPLATE NAME [--count N] [--org ORG] [--param KEY=VALUE ...] [--dry-run]",
            summary="a new cluster from a template: the plan (request, quota, cost), then Confirm; "
            "`--dry-run`: plan only; the org's launch defaults fill the parameters; alone, it opens the launch form",
            needs=Action.OPERATE,
            parse=_launch,
        ),
        Subcommand(
            name="scale",
            usage="/cluster scale CLUSTER GROUP COUNT [--dry-run]   (GROUP: instance group, queue, or QUEUE/RESOURCE)",
            summary="set an instance group's (or queue's) node count: the plan (quota, cost), then Confirm",
            needs=Action.OPERATE,
            parse=_scale,
        ),
        Subcommand(
            name="start",
            usage="/cluster start CLUSTER [--dry-run]",
            summary="start a stopped ParallelCluster compute fleet again: the plan (the nodes that come back, "
            "quota), then Confirm",
            needs=Action.OPERATE,
            parse=_start,
        ),
        Subcommand(
            name="replace",
            usage=f"/cluster replace CLUSTER NODE... [--dry-run]   {_CHANGE_NODE}",
            summary="replace HyperPod nodes with new hardware (their volumes are wiped), after Confirm",
            needs=Action.OPERATE,
            parse=_node_action("replace"),
        ),
        Subcommand(
            name="reboot",
            usage=f"/cluster reboot CLUSTER NODE... [--dry-run]   {_CHANGE_NODE}",
            summary="reboot HyperPod nodes, after Confirm",
            needs=Action.OPERATE,
            parse=_node_action("reboot"),
        ),
        Subcommand(
            name="check",
            usage=f"/cluster check CLUSTER NODE... [--stress] [--connectivity] [--dry-run]   {_CHANGE_NODE}",
            summary="HyperPod deep health checks of nodes (InstanceStress and InstanceConnectivity; a flag picks "
            "one), after Confirm; their alerts say the result",
            needs=Action.OPERATE,
            parse=_check,
        ),
        Subcommand(
            name="delete",
            usage="/cluster delete CLUSTER",
            summary="delete a cluster, after typing its name to confirm",
            needs=Action.OPERATE,
            parse=_delete,
        ),
        Subcommand(
            name="throughput",
            usage="/cluster throughput CLUSTER [--hours N] [--public]   (CLUSTER or ORG/CLUSTER)",
            summary="training throughput of a cluster's jobs now, against their baselines, with a chart",
            needs=Action.VIEW,
            parse=_throughput,
        ),
        Subcommand(
            name="doctor",
            usage="/cluster doctor [ORG]",
            summary="check each org's setup (its role and permissions, Prometheus, ingest token, channel): "
            "what is wrong and how to fix it (admins)",
            needs=Action.ADMINISTER,
            parse=_doctor,
        ),
        Subcommand(
            name="approvals",
            usage="/cluster approvals [ORG]",
            summary="changes waiting for approval in the orgs you see (or one), marking those you may approve",
            needs=Action.VIEW,
            parse=_approvals,
        ),
        Subcommand(
            name="audit",
            usage="/cluster audit [ORG] [--days N] [--user @USER] [--action ACTION] [--ids]",
            summary="what was asked, refused, done and failed in an org (operators: their own; admins: any); "
            "`--user` and `--action` narrow it, `--ids` adds operation and alert ids",
            needs=Action.OPERATE,
            parse=_audit,
        ),
    ),
)
# The table by column (the tests read it so; help, dispatch and metrics read the table itself).
USAGE, SUMMARY, NEEDS = tables(CLUSTER)


def parse_cluster_command(text: str) -> ClusterCommand:
    _, parsed = CLUSTER.parse(text)
    result: ClusterCommand = parsed
    return result
