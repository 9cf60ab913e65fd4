"""The audit log as people read it: one line per entry, the verb in words, who, what, outcome. Pure.

Entries name what happened in the writers' terms (a slash command and its text; a button's action id and
the operation's summary, "scale kumo-labs/kumo-p5-train workers 2→4"); this module turns them into
"confirmed a scale of `kumo-labs/kumo-p5-train workers 2→4`" and knows which entries an `--action` means.

Internal ids (operations' 32-hex ids, AWS request ids, episode and silence numbers) are left out unless
asked for. Whatever a user typed is shown inside inline code that it cannot break out of (bot.mrkdwn);
our own details are shown as plain text with the characters Slack would take for formatting neutralized.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any
from zoneinfo import ZoneInfo

from bot.mrkdwn import code, cut, escape, visible

# Action ids and callback ids as the handlers record them (bot.slack.blocks and bot.digest.render define
# them; tests/test_audit_view.py checks these copies, which cannot be imported here without a cycle).
CONFIRM, CANCEL = "operation_confirm", "operation_cancel"
DELETE_OPEN, DELETE_VIEW = "delete_open", "delete_confirm"
TRACK_VIEW, TRACK_ADD = "track_add_record", "track_add"
LAUNCH_VIEW, LAUNCH_OPEN = "launch_form", "launch_open"  # bot.slack.launch_form
ACK, SILENCE, UNSILENCE = "alert_ack", "alert_silence", "alert_unsilence"
ALERT_REPLACE, ALERT_REBOOT = "alert_replace", "alert_reboot"
ALERT_CHECK, WATCH = "alert_check", "alert_watch"  # Run deep health check, Watch (bot.slack.alerts)
FLEET_START = "fleet_start"  # bot.slack.blocks.START_FLEET_ACTION: a stopped fleet's Start button
# Approvals (bot.approvals.desk): asked, approved (the Approve button's id), rejected (the reason form's id),
# expired, and an approved change starting by itself (bot.operations.APPROVAL_RUN); Reject… opens the form.
APPROVAL_REQUEST, APPROVAL_APPROVE, APPROVAL_REJECT = "approval_request", "approval_approve", "approval_reject"
APPROVAL_EXPIRE, APPROVAL_RUN, APPROVAL_REJECT_OPEN = "approval_expire", "approval_run", "approval_reject_open"
APPROVAL_STEPS = (APPROVAL_REQUEST, APPROVAL_APPROVE, APPROVAL_REJECT, APPROVAL_EXPIRE, APPROVAL_RUN)
KINDS = (
    "launch",
    "scale",
    "reboot",
    "replace",
    "delete",
    "stop_fleet",
    "start_fleet",
    "check",
)  # bot.clusters.progress.Kind
NOUNS = {"stop_fleet": "compute fleet stop", "start_fleet": "compute fleet start", "check": "deep health check"}

# (command, first word of the entry's text or None for any): the entries an `--action` filter keeps.
Match = tuple[str, str | None]


def _change(kind: str, *extra: Match) -> tuple[Match, ...]:
    return (("/cluster", kind), (CONFIRM, kind), (CANCEL, kind), (kind, None), *extra)


CLICK, FORM = "click", "form"  # entries handlers/errors.py writes for clicks that decided nothing
LEGACY_CONFIRM, LEGACY_CANCEL = "launch_confirm", "launch_cancel"
SILENCES = tuple(f"{SILENCE}_{hours}" for hours in (1, 4, 24))  # the Silence buttons' action ids
BUTTONS = {
    CONFIRM: "Confirm",
    LEGACY_CONFIRM: "Confirm",
    CANCEL: "Cancel",
    LEGACY_CANCEL: "Cancel",
    DELETE_OPEN: "Delete…",
    TRACK_ADD: "Add a record",
    LAUNCH_OPEN: "Launch…",
    ACK: "Acknowledge",
    ALERT_REPLACE: "Replace node",
    ALERT_REBOOT: "Reboot node",
    ALERT_CHECK: "Run deep health check",
    WATCH: "Watch",
    FLEET_START: "Start compute fleet",
    APPROVAL_APPROVE: "Approve",
    APPROVAL_REJECT_OPEN: "Reject…",
    UNSILENCE: "Unsilence",
    **{action: f"Silence {action.rsplit('_', 1)[1]} h" for action in SILENCES},
}
FORMS = {DELETE_VIEW: "delete", TRACK_VIEW: "add a record", LAUNCH_VIEW: "launch", APPROVAL_REJECT: "reject"}


def _clicks(*action_ids: str) -> tuple[Match, ...]:
    """A button's entries: the click that decided nothing, and the one an unhandled error recorded."""
    return tuple(match for action in action_ids for match in ((CLICK, action), (action, None)))


ACTIONS: dict[str, tuple[Match, ...]] = {
    "launch": _change("launch", (LAUNCH_VIEW, None), (FORM, LAUNCH_VIEW), *_clicks(LAUNCH_OPEN)),
    "scale": (*_change("scale"), *_change("stop_fleet")[1:]),  # a shrink may need the fleet stopped first
    "replace": _change("replace", (ALERT_REPLACE, None), (CLICK, ALERT_REPLACE)),
    "reboot": _change("reboot", (ALERT_REBOOT, None), (CLICK, ALERT_REBOOT)),
    "check": _change("check", (ALERT_CHECK, None), (CLICK, ALERT_CHECK)),
    "delete": _change("delete", *_clicks(DELETE_OPEN), (DELETE_VIEW, None), (FORM, DELETE_VIEW)),
    "start": (("/cluster", "start"), *_change("start_fleet")[1:], *_clicks(FLEET_START)),
    "confirm": (*_clicks(CONFIRM, LEGACY_CONFIRM), (DELETE_VIEW, None), (FORM, DELETE_VIEW)),
    "cancel": _clicks(CANCEL, LEGACY_CANCEL),
    "ack": _clicks(ACK, WATCH),
    "silence": (*_clicks(*SILENCES, UNSILENCE), (SILENCE, None)),
    "alerts": (*_clicks(ACK, WATCH, *SILENCES, UNSILENCE, ALERT_REPLACE, ALERT_REBOOT, ALERT_CHECK), (SILENCE, None)),
    "approvals": (
        ("/cluster", "approvals"),
        *((step, None) for step in APPROVAL_STEPS),
        *_clicks(APPROVAL_APPROVE, APPROVAL_REJECT_OPEN),
        (FORM, APPROVAL_REJECT),
    ),
    "track": (("/track", None), (TRACK_VIEW, None), (FORM, TRACK_VIEW), *_clicks(TRACK_ADD)),
    "digest": (("/digest", None),),
    **{read: (("/cluster", read),) for read in ("list", "status", "nodes", "templates", "throughput", "audit")},
}

OUTCOME_ICON = {
    "allowed": ":white_check_mark:",
    "done": ":white_check_mark:",
    "refused": ":no_entry:",
    "invalid": ":warning:",
    "failed": ":x:",
}
OUTCOME_WORD = {"allowed": "ok", "done": "done", "refused": "refused", "invalid": "bad input", "failed": "failed"}
TEXT_LIMIT, DETAIL_LIMIT = 100, 160
USER_ID = re.compile(r"[UW][A-Z0-9]{2,23}")
_OPERATION_ID = re.compile(r"\b[0-9a-f]{32}\b")
_PROPOSED_AS = re.compile(r"\s+as\s+(?:[0-9a-f]{32}|None)\b")  # "proposed as <id>" -> "proposed"
_REQUEST_ID = re.compile(r"\s*\(requests? [^)]{1,400}\)")
# What an operation started with, appended to its outcome by bot.operations ("; request RID", "; requests
# RID, RID"): AWS request ids, shown only with --ids like the parenthesized ones.
_STARTED_WITH = re.compile(r";\s*requests? [A-Za-z0-9_+/=:.-]{1,120}(?:, [A-Za-z0-9_+/=:.-]{1,120})*")
_UTC_TIME = re.compile(r"(\d{4}-\d\d-\d\d \d\d:\d\d)(?::\d\d)? UTC")
_ALERT_TEXT = re.compile(r"(episode|silence) (\d+) (\S+)(?: (\S+))?")
# The details that only repeat the verb ("confirmed a scale ... · ok · confirmed").
_SAID_BY_VERB = {"confirmed", "cancelled", "acknowledged", "ended early"}


@dataclass(frozen=True)
class AuditLine:
    icon: str
    at: str
    who: str
    what: str  # the verb and its object, mrkdwn
    outcome: str
    detail: str  # plain, mrkdwn-safe; "" for none

    def render(self) -> str:
        detail = f": {self.detail}" if self.detail else ""
        return f"{self.icon} {self.at} · {self.who} {self.what} · *{self.outcome}*{detail}"


def when(moment: datetime, tz: ZoneInfo) -> str:
    """A time in the program's zone, short: the zone is named once, under the list."""
    aware = moment if moment.tzinfo is not None else moment.replace(tzinfo=UTC)
    return aware.astimezone(tz).strftime("%b %d %H:%M")


def who(user_id: str) -> str:
    return f"<@{user_id}>" if USER_ID.fullmatch(user_id) else code(user_id, limit=24)


def plain(text: str, limit: int = DETAIL_LIMIT) -> str:
    """Our own text (a refusal's reason, an error) shown as plain mrkdwn that cannot change the line's
    formatting: backticks become quotes, and *, ~ and a word-edge _ (what Slack takes for bold, strike and
    italics) become look-alikes that Slack does not. Details are stored as the mrkdwn they were shown in,
    so Slack's three escapes are undone first (and done again last), never doubled."""
    raw = text.replace("&lt;", "<").replace("&gt;", ">").replace("&amp;", "&")
    clean = cut(visible(raw, one_line=True), limit)
    clean = clean.replace("`", "'").replace("*", "\u2217").replace("~", "\u223c")
    clean = re.sub(r"(?<![A-Za-z0-9])_|_(?![A-Za-z0-9])", "\uff3f", clean)
    return escape(clean)


def _without_ids(text: str) -> str:
    text = _PROPOSED_AS.sub("", text)
    text = _REQUEST_ID.sub("", text)
    text = _STARTED_WITH.sub("", text)
    return _OPERATION_ID.sub("", text).strip()


def _local_times(text: str, tz: ZoneInfo) -> str:
    """Times written into details in UTC ("until 2026-12-01 14:00 UTC") shown in the program's zone."""

    def local(match: re.Match[str]) -> str:
        moment = datetime.strptime(match[1], "%Y-%m-%d %H:%M").replace(tzinfo=UTC)
        return when(moment, tz)

    return _UTC_TIME.sub(local, text)


def _operation(text: str) -> tuple[str, str]:
    """(noun, what) of an operation summary, "scale kumo-labs/x workers 2→4"."""
    kind, _, rest = text.partition(" ")
    if kind in KINDS:
        return NOUNS.get(kind, kind), rest
    return "change", text


def _alert(text: str, *, ids: bool) -> tuple[str, str]:
    """(cluster, extra) of an alert entry's text, "episode 12 kumo-labs/x i-0abc"."""
    match = _ALERT_TEXT.fullmatch(text.strip())
    if match is None:
        return text, ""
    extra = f" (node {code(match[4])})" if match[4] else ""
    if ids:
        extra += f" ({match[1]} {match[2]})"
    return match[3], extra


def _pressed(action_id: str, value: str, *, ids: bool) -> str:
    button = BUTTONS.get(action_id)
    words = f"pressed \u201c{button}\u201d" if button else f"pressed the button {code(action_id, limit=32)}"
    return words + (f" ({code(value, limit=TEXT_LIMIT)})" if ids and value else "")


def _submitted(callback_id: str) -> str:
    form = FORMS.get(callback_id)
    return f"submitted the \u201c{form}\u201d form" if form else f"submitted the form {code(callback_id, limit=32)}"


def _unhandled(command: str, text: str, *, ids: bool) -> str | None:
    """The words for an entry handlers/errors.py wrote ("click operation_confirm", "form delete_confirm")."""
    kind, _, name = text.partition(" ")
    if name != command:
        return None
    if kind == "click":
        return _pressed(command, "", ids=ids)
    if kind == "form":
        return _submitted(command)
    if kind == "command":
        return "ran " + code(command, limit=32)
    return "sent a request " + code(command, limit=32)


def _external(team: str | None, home_team: str | None, team_names: Mapping[str, str]) -> str:
    """ " (external: Kumo Labs' workspace T0KUMOLAB)" for an actor from another workspace than Pitcrew's."""
    if not team or home_team is None or team == home_team:
        return ""
    name = team_names.get(team)
    return f" (external: {plain(name)} {team})" if name else f" (external: {plain(team)})"


VIA_WORDS = {"mention": " by mention", "dm": " by DM"}  # a slash command says nothing more
HELP = "help"  # what a mention or DM naming no command is recorded as (handlers.events.messages)


def describe(
    entry: Any,
    *,
    tz: ZoneInfo,
    ids: bool = False,
    home_team: str | None = None,
    team_names: Mapping[str, str] | None = None,
) -> AuditLine:
    """One audit entry (an AuditEntry, or anything with its fields) as a line. An actor whose team is not
    `home_team` (Pitcrew's workspace) is marked external, with the team's name from `team_names` if known."""
    command, text, detail = str(entry.command), str(entry.text), str(entry.detail or "")
    via_words = VIA_WORDS.get(getattr(entry, "via", ""), "")
    actor = who(str(entry.user_id)) + _external(getattr(entry, "team_id", None), home_team, team_names or {})
    unhandled = _unhandled(command, text, ids=ids) if detail.startswith("unhandled ") else None
    if unhandled is not None:
        what = unhandled
    elif command == CLICK:
        action_id, _, value = text.partition(" ")
        what = _pressed(action_id, value, ids=ids)
    elif command == FORM:
        what = _submitted(text)
    elif command.startswith("/"):
        what = (
            "ran " + code(f"{command} {text.strip()}", limit=TEXT_LIMIT) + VIA_WORDS.get(getattr(entry, "via", ""), "")
        )
    elif command == HELP:  # `@Pitcrew` alone, `@Pitcrew help`, or a mention that named no command
        asked = text.strip().lower() in ("", HELP)
        what = ("asked for help" if asked else "wrote " + code(text.strip(), limit=TEXT_LIMIT)) + via_words
    elif command in (CONFIRM, CANCEL, DELETE_OPEN, DELETE_VIEW):
        noun, target = _operation(text)
        verb = {
            CONFIRM: f"confirmed a {noun} of",
            CANCEL: f"cancelled a {noun} of",
            DELETE_OPEN: "asked for the form to delete",
            DELETE_VIEW: "typed the name to delete",
        }[command]
        what = f"{verb} {code(target, limit=TEXT_LIMIT)}"
    elif command in APPROVAL_STEPS:
        noun, target = _operation(text)
        target = code(target, limit=TEXT_LIMIT)
        if command in (APPROVAL_EXPIRE, APPROVAL_RUN):  # no click of anyone's: said of the requester's change
            actor += "'s"
        what = {
            APPROVAL_REQUEST: f"asked for approval of a {noun} of {target}",
            APPROVAL_APPROVE: f"approved a {noun} of {target}",
            APPROVAL_REJECT: f"rejected a {noun} of {target}",
            APPROVAL_EXPIRE: f"request to approve a {noun} of {target} expired",
            APPROVAL_RUN: f"approved {noun} of {target} started",
        }[command]
    elif command in KINDS:
        noun, target = _operation(text)
        actor += "'s"
        what = f"{noun} of {code(target, limit=TEXT_LIMIT)} ended"
    elif command in (ACK, WATCH, SILENCE, UNSILENCE, ALERT_REPLACE, ALERT_REBOOT, ALERT_CHECK):
        cluster, extra = _alert(text, ids=ids)
        target = code(cluster, limit=TEXT_LIMIT)
        what = {
            ACK: f"acknowledged the alert on {target}{extra}",
            SILENCE: f"silenced alerts of {target}{extra}",
            UNSILENCE: f"ended the silence of {target}{extra}",
            ALERT_REPLACE: f"asked from an alert to replace a node of {target}{extra}",
            ALERT_REBOOT: f"asked from an alert to reboot a node of {target}{extra}",
            ALERT_CHECK: f"asked from an alert for a deep health check of a node of {target}{extra}",
            WATCH: f"watches the alert on {target}{extra}",
        }[command]
    elif command == FLEET_START:
        what = f"asked with a button to start the compute fleet of {code(text, limit=TEXT_LIMIT)}"
    elif command == TRACK_VIEW:
        what = "added a record with the form"
    elif command == LAUNCH_VIEW:
        what = "used the launch form: " + code(text.strip(), limit=TEXT_LIMIT)
    elif command == TRACK_ADD:
        what = "opened the form to add a record"
    else:  # a name this version does not know (an older or newer writer): shown as recorded
        what = f"did {code(command, limit=32)} on {code(text, limit=TEXT_LIMIT)}"
    shown = detail if ids else _without_ids(detail)
    shown = "" if shown.strip() in _SAID_BY_VERB else _local_times(shown, tz)
    outcome = str(entry.outcome)
    return AuditLine(
        icon=OUTCOME_ICON.get(outcome, ":grey_question:"),
        at=when(entry.at, tz),
        who=actor,
        what=what,
        outcome=OUTCOME_WORD.get(outcome, outcome),
        detail=plain(shown) if shown.strip() else "",
    )


def describe_all(
    entries: Sequence[Any],
    *,
    tz: ZoneInfo,
    ids: bool = False,
    home_team: str | None = None,
    team_names: Mapping[str, str] | None = None,
) -> list[str]:
    return [describe(entry, tz=tz, ids=ids, home_team=home_team, team_names=team_names).render() for entry in entries]
