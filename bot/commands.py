"""Parsing of `/cluster` command text into typed commands. Pure: no Slack, no AWS.

Every bad input becomes a UsageError carrying one sentence on what was wrong and the usage line
that shows how to do it right.
"""

from __future__ import annotations

import re
import shlex
from dataclasses import dataclass

from bot.access import Action
from bot.audit_view import ACTIONS
from bot.names import shown

MAX_TEXT = 1000  # a real /cluster command is a few dozen characters; longer text is a paste gone wrong
CLUSTER_NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9-]{0,62}")  # HyperPod's and ParallelCluster's common ground
ORG_ID = re.compile(r"[a-z0-9](?:[a-z0-9-]{0,38}[a-z0-9])?")

USAGE = {
    "help": "/cluster help",
    "list": "/cluster list [ORG|all] [--public]",
    "status": "/cluster status CLUSTER [--public]   (CLUSTER or ORG/CLUSTER)",
    "nodes": "/cluster nodes CLUSTER [--failed] [--public]   (CLUSTER or ORG/CLUSTER)",
    "templates": "/cluster templates [--public]",
    "launch": "/cluster launch TEMPLATE NAME [--count N] [--org ORG] [--param KEY=VALUE ...] [--dry-run]",
    "scale": "/cluster scale CLUSTER GROUP COUNT [--dry-run]   (GROUP: instance group, queue, or QUEUE/RESOURCE)",
    "replace": "/cluster replace CLUSTER NODE... [--dry-run]   (NODE: instance id, e.g. i-0123456789abcdef0)",
    "reboot": "/cluster reboot CLUSTER NODE... [--dry-run]   (NODE: instance id, e.g. i-0123456789abcdef0)",
    "delete": "/cluster delete CLUSTER",
    "throughput": "/cluster throughput CLUSTER [--hours N] [--public]   (CLUSTER or ORG/CLUSTER)",
    "audit": "/cluster audit [ORG] [--days N] [--user @USER] [--action ACTION] [--ids]",
}
SUMMARY = {
    "help": "what you may run",
    "list": "clusters of an org (default: this channel's org), or `all`",
    "status": "one cluster's groups, node health, creation time and failure message",
    "nodes": "a cluster's nodes, unhealthy first; `--failed` keeps only unhealthy ones",
    "templates": "the pre-validated reference architectures a cluster can be launched from",
    "audit": "what was asked, refused, done and failed in an org (operators: their own; admins: any); "
    "`--user` and `--action` narrow it, `--ids` adds operation and alert ids",
    "launch": "a new cluster from a template: the plan (request, quota, cost), then Confirm; `--dry-run`: plan only",
    "scale": "set an instance group's (or queue's) node count: the plan (quota, cost), then Confirm",
    "replace": "replace HyperPod nodes with new hardware (their volumes are wiped), after Confirm",
    "reboot": "reboot HyperPod nodes, after Confirm",
    "delete": "delete a cluster, after typing its name to confirm",
    "throughput": "training throughput of a cluster's jobs now, against their baselines, with a chart",
}
NEEDS = {
    "help": None,
    "list": Action.VIEW,
    "status": Action.VIEW,
    "nodes": Action.VIEW,
    "templates": Action.VIEW,
    "launch": Action.OPERATE,
    "scale": Action.OPERATE,
    "replace": Action.OPERATE,
    "reboot": Action.OPERATE,
    "delete": Action.OPERATE,
    "throughput": Action.VIEW,
    "audit": Action.OPERATE,
}
PLANNED: tuple[str, ...] = ()  # subcommands named in DESIGN.md that a later issue builds
MAX_THROUGHPUT_HOURS = 72
MAX_AUDIT_DAYS = 90
TEMPLATE_ID = re.compile(r"[a-z][a-z0-9-]{1,62}")
GROUP_NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9-]{0,62}(?:/[A-Za-z0-9][A-Za-z0-9-]{0,62})?")
NODE_ID = re.compile(r"i-[a-f0-9]{8}(?:[a-f0-9]{9})?")  # HyperPod node ids are EC2 instance ids
MAX_COUNT = 10_000
DIGITS = re.compile(r"[0-9]{1,6}")  # ASCII only: str.isdigit() accepts "²", which int() then refuses
# A person in command text: Slack's escaped mention <@U123|name> or <@U123>, or @U123, or the bare id.
SLACK_USER = re.compile(r"<@([UW][A-Z0-9]{2,23})(?:\|[^>]*)?>|@?([UW][A-Z0-9]{2,23})", re.IGNORECASE)
PARAM = re.compile(r"([A-Za-z][A-Za-z0-9_-]{0,63})=(.*)", re.DOTALL)


class UsageError(Exception):
    def __init__(self, message: str, usage: str) -> None:
        super().__init__(message)
        self.message = message
        self.usage = usage


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
class DeleteCluster:
    cluster: ClusterRef


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
    | ShowAudit
    | ScaleGroup
    | NodeAction
    | DeleteCluster
    | ShowThroughput
)


def _all_usage() -> str:
    return "\n".join(USAGE[name] for name in ("list", "status", "nodes", "help"))


def _shown(text: str, limit: int = 40) -> str:
    """A user's word quoted back safely (bot.names.shown: short, no backticks, no control characters, no
    mentions)."""
    return shown(text, limit)


def _cluster_ref(word: str, usage: str) -> ClusterRef:
    org, _, name = word.rpartition("/")
    if org and not ORG_ID.fullmatch(org):
        raise UsageError(f"`{_shown(org)}` is not an org id (lowercase letters, digits and dashes).", usage)
    if not CLUSTER_NAME.fullmatch(name):
        raise UsageError(
            f"`{_shown(word)}` is not a cluster name (letters, digits and dashes, up to 63 characters).", usage
        )
    return ClusterRef(name=name, org=org or None)


def _split(text: str) -> list[str]:
    if len(text) > MAX_TEXT:
        raise UsageError(f"That command is {len(text):,} characters long; a /cluster command is short.", _all_usage())
    try:
        return shlex.split(text)
    except ValueError:
        raise UsageError("A quote in that command is not closed.", _all_usage()) from None


def parse_cluster_command(text: str) -> ClusterCommand:
    words = _split(text.strip())
    if not words:
        raise UsageError("Tell Pitcrew what to do, for example `/cluster list`.", _all_usage())
    sub, args = words[0].lower(), words[1:]
    if sub in PLANNED:
        raise UsageError(f"`/cluster {sub}` is not available in this version yet.", _all_usage())
    if sub not in USAGE:
        raise UsageError(f"`{_shown(words[0])}` is not a /cluster subcommand.", _all_usage())
    usage = USAGE[sub]
    if sub == "launch":
        return _launch(args, usage)
    if sub == "audit":
        return _audit(args, usage)
    if sub in ("scale", "replace", "reboot", "delete"):
        return _change(sub, args, usage)
    if sub == "throughput":
        return _throughput(args, usage)
    flags = {arg for arg in args if arg.startswith("--")}
    positional = [arg for arg in args if not arg.startswith("--")]
    allowed_flags = {
        "help": set(),
        "list": {"--public"},
        "status": {"--public"},
        "nodes": {"--public", "--failed"},
        "templates": {"--public"},
    }
    unknown = sorted(flags - allowed_flags[sub])
    if unknown:
        raise UsageError(f"`{_shown(unknown[0])}` is not an option of `/cluster {sub}`.", usage)
    public = "--public" in flags
    if sub in ("help", "templates"):
        if positional:
            raise UsageError(f"`/cluster {sub}` takes no arguments.", usage)
        return Help() if sub == "help" else ListTemplates(public=public)
    if sub == "list":
        if len(positional) > 1:
            raise UsageError("`/cluster list` takes at most one org.", usage)
        target = positional[0].lower() if positional else None
        if target is not None and target != "all" and not ORG_ID.fullmatch(target):
            raise UsageError(f"`{_shown(positional[0])}` is not an org id or `all`.", usage)
        return ListClusters(target=target, public=public)
    if len(positional) != 1:
        what = "a cluster name" if not positional else "one cluster name"
        raise UsageError(f"`/cluster {sub}` needs {what}.", usage)
    ref = _cluster_ref(positional[0], usage)
    if sub == "status":
        return ClusterStatus(cluster=ref, public=public)
    return ClusterNodes(cluster=ref, failed_only="--failed" in flags, public=public)


def _launch(args: list[str], usage: str) -> LaunchCluster:
    positional: list[str] = []
    count: int | None = None
    org: str | None = None
    params: list[tuple[str, str]] = []
    dry_run = False
    words = iter(args)
    for word in words:
        if word == "--dry-run":
            dry_run = True
        elif word in ("--count", "--org", "--param"):
            value = next(words, None)
            if value is None:
                raise UsageError(f"`{word}` needs a value.", usage)
            if word == "--count":
                if not re.fullmatch(r"[0-9]{1,5}", value):
                    raise UsageError(f"`--count` takes a whole number; got `{_shown(value)}`.", usage)
                count = int(value)
            elif word == "--org":
                if not ORG_ID.fullmatch(value):
                    raise UsageError(f"`{_shown(value)}` is not an org id.", usage)
                org = value
            else:
                match = PARAM.fullmatch(value)
                if not match:
                    raise UsageError(f"`--param` takes KEY=VALUE; got `{_shown(value)}`.", usage)
                params.append((match[1], match[2]))
        elif word.startswith("--"):
            raise UsageError(f"`{_shown(word)}` is not an option of `/cluster launch`.", usage)
        else:
            positional.append(word)
    if len(positional) != 2:
        raise UsageError("`/cluster launch` needs a template id and a name for the new cluster.", usage)
    template, name = positional
    if not TEMPLATE_ID.fullmatch(template):
        raise UsageError(f"`{_shown(template)}` is not a template id; `/cluster templates` lists them.", usage)
    if not CLUSTER_NAME.fullmatch(name):
        raise UsageError(
            f"`{_shown(name)}` is not a cluster name (letters, digits and dashes, up to 63 characters).", usage
        )
    return LaunchCluster(template=template, name=name, dry_run=dry_run, count=count, org=org, params=tuple(params))


def _audit(args: list[str], usage: str) -> ShowAudit:
    org: str | None = None
    user: str | None = None
    action: str | None = None
    days, ids = 7, False
    actions = ", ".join(f"`{name}`" for name in ACTIONS)
    words = iter(args)
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
                got = f"; got `{_shown(value)}`" if value else ""
                if value and value.startswith("@"):  # a display name: Slack passes it on as typed, not as an id
                    got += ", a display name, which Slack does not turn into an id for a command"
                raise UsageError(
                    f"`--user` takes a Slack member id like `U0123ABCD` (profile → ⋯ → Copy member ID){got}.", usage
                )
            user = (match[1] or match[2]).upper()
        elif word == "--action":
            value = next(words, None)
            if value is None or value.lower() not in ACTIONS:
                got = f"`{_shown(value)}` is not one" if value else "it needs one"
                raise UsageError(f"`--action` takes one of {actions}; {got}.", usage)
            action = value.lower()
        elif word == "--ids":
            ids = True
        elif word.startswith("--"):
            raise UsageError(f"`{_shown(word)}` is not an option of `/cluster audit`.", usage)
        elif org is None and ORG_ID.fullmatch(word.lower()):
            org = word.lower()
        else:
            raise UsageError(f"`{_shown(word)}` is not an org id; give at most one.", usage)
    return ShowAudit(org=org, days=days, user=user, action=action, ids=ids)


def _change(sub: str, args: list[str], usage: str) -> ScaleGroup | NodeAction | DeleteCluster:
    allowed = set() if sub == "delete" else {"--dry-run"}
    flags = [arg for arg in args if arg.startswith("--")]
    unknown = [flag for flag in flags if flag not in allowed]
    if unknown:
        raise UsageError(f"`{_shown(unknown[0])}` is not an option of `/cluster {sub}`.", usage)
    positional = [arg for arg in args if not arg.startswith("--")]
    dry_run = "--dry-run" in flags
    if not positional:
        raise UsageError(f"`/cluster {sub}` needs a cluster name.", usage)
    ref, rest = _cluster_ref(positional[0], usage), positional[1:]
    if sub == "delete":
        if rest:
            raise UsageError("`/cluster delete` takes one cluster name and nothing else.", usage)
        return DeleteCluster(cluster=ref)
    if sub == "scale":
        if len(rest) != 2:
            raise UsageError("`/cluster scale` needs a cluster, a group and the new node count.", usage)
        group, count = rest
        if not GROUP_NAME.fullmatch(group):
            raise UsageError(f"`{_shown(group)}` is not an instance group or queue name.", usage)
        if not DIGITS.fullmatch(count) or int(count) > MAX_COUNT:
            raise UsageError(
                f"The node count must be a whole number from 0 to {MAX_COUNT:,}; got `{_shown(count)}`.", usage
            )
        return ScaleGroup(cluster=ref, group=group, count=int(count), dry_run=dry_run)
    if not rest:
        raise UsageError(f"`/cluster {sub}` needs the ids of the nodes to {sub}.", usage)
    bad = [word for word in rest if not NODE_ID.fullmatch(word)]
    if bad:
        raise UsageError(
            f"`{_shown(bad[0])}` is not a node id; HyperPod node ids are instance ids like `i-0123456789abcdef0` "
            "(`/cluster nodes CLUSTER` lists them).",
            usage,
        )
    return NodeAction(verb=sub, cluster=ref, node_ids=tuple(dict.fromkeys(rest)), dry_run=dry_run)


def _throughput(args: list[str], usage: str) -> ShowThroughput:
    hours, public, positional = 6, False, []
    words = iter(args)
    for word in words:
        if word == "--hours":
            value = next(words, None)
            if value is None or not DIGITS.fullmatch(value) or not 1 <= int(value) <= MAX_THROUGHPUT_HOURS:
                raise UsageError(f"`--hours` takes a whole number from 1 to {MAX_THROUGHPUT_HOURS}.", usage)
            hours = int(value)
        elif word == "--public":
            public = True
        elif word.startswith("--"):
            raise UsageError(f"`{_shown(word)}` is not an option of `/cluster throughput`.", usage)
        else:
            positional.append(word)
    if len(positional) != 1:
        raise UsageError("`/cluster throughput` needs one cluster name.", usage)
    return ShowThroughput(cluster=_cluster_ref(positional[0], usage), hours=hours, public=public)
