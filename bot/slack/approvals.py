"""Approvals in Slack (issue 24): a plan's Confirm relabelled "Request approval", the request message in each of its
states (Approve and Reject while pending), the Reject modal, what a click came to, and `/cluster approvals`."""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime
from typing import Any
from zoneinfo import ZoneInfo

from bot.approvals import desk
from bot.approvals.rules import Needed
from bot.clusters.requests import operation_summary
from bot.mrkdwn import escape, when
from bot.operations import Decision, Started
from bot.publishing import Block, Reply
from bot.slack import blocks
from bot.slack.blocks import CONFIRM_ACTION, DELETE_OPEN_ACTION, PLAN_NOTE_BLOCK, button, context, header, section
from bot.slack.operations import decision_reply
from storage.models import Approval, Operation

APPROVE_ACTION = desk.APPROVE  # the Approve button; its value is the request's id
REJECT_ACTION = "approval_reject_open"  # Reject…: opens the modal that asks why
REJECT_VIEW = desk.REJECT  # that modal's callback_id
REASON_BLOCK, REASON_INPUT = "reject_reason", "reason"
REQUEST_LABEL = "Request approval"
MAX_LISTED = 20  # /cluster approvals and the Home list this many, then say how many more


def gate(reply: Reply, *, operation_id: str, needed: Needed, approvers: str, count: int, ttl_minutes: int) -> Reply:
    """A plan whose change needs approval: its Confirm reads "Request approval" (a delete's Delete… keeps its
    typed-name form and reads "Request approval…"), and the note under it says why and who approves."""
    plan_block = f"plan:{operation_id}"
    who = desk.approvers_words(approvers, "its org").replace("`its org`", "the org")
    note = (
        f":raised_hand: Needs approval: {escape(needed.why)}. {count} of {who} must approve (not the requester) "
        f"within {ttl_minutes} min of the request; any reject ends it. Nothing changes before that."
    )
    shown: list[Block] = []
    for block in reply.blocks:
        if block.get("block_id") == plan_block:
            elements = []
            for element in block.get("elements", []):
                if element.get("action_id") == CONFIRM_ACTION:
                    element = {**element, "text": {"type": "plain_text", "text": REQUEST_LABEL}, "style": "primary"}
                elif element.get("action_id") == DELETE_OPEN_ACTION:
                    element = {**element, "text": {"type": "plain_text", "text": f"{REQUEST_LABEL}…"}}
                elements.append(element)
            shown.append({**block, "elements": elements})
        elif block.get("block_id") == PLAN_NOTE_BLOCK or _is_delete_note(block):
            continue
        else:
            shown.append(block)
    shown.append({**context(note), "block_id": PLAN_NOTE_BLOCK})
    return Reply(text=f"{reply.text} (needs approval: {needed.why})", blocks=shown, public=reply.public)


def _is_delete_note(block: Block) -> bool:
    """The line under a delete plan's buttons (bot.slack.blocks.delete_plan), which has no block id."""
    if block.get("type") != "context":
        return False
    return any("type the cluster's name" in str(e.get("text", "")) for e in block.get("elements", []))


def requested_plan(plan: dict[str, Any] | None, approval: Approval, operation: Operation, *, tz: ZoneInfo) -> Reply:
    """The plan once approval was asked: everything it said without its buttons, and where the request is."""
    line = (
        f":raised_hand: Approval requested by <@{approval.requested_by}>: {escape(approval.why)}. "
        f"The request is posted below (expires {when(approval.expires_at, tz)}); the change runs by itself once "
        f"approved."
    )
    shown = plan.get("blocks") if isinstance(plan, dict) else None
    kept = [
        b
        for b in (shown if isinstance(shown, list) else [])
        if isinstance(b, dict)
        and not str(b.get("block_id", "")).startswith("plan:")
        and b.get("block_id") != PLAN_NOTE_BLOCK
        and not _is_delete_note(b)
    ]
    if not kept:
        kept = [section(f"*{escape(operation_summary(operation))}*")]
    text = str(plan.get("text") if isinstance(plan, dict) and plan.get("text") else operation_summary(operation))
    return Reply(text=f"{text}. Approval requested.", blocks=[*kept, context(line)], public=True)


class SlackApprovals:
    """The desk's presenter (bot.approvals.desk.ApprovalPresenter): the request message in each state."""

    def __init__(self, *, tz: ZoneInfo) -> None:
        self._tz = tz

    def request(
        self, approval: Approval, operation: Operation, approved_by: Sequence[str], run: Decision | None = None
    ) -> Reply:
        what = escape(operation_summary(operation))
        who = desk.approvers_words(approval.approvers, approval.org_id)
        tally = ", ".join(f"<@{u}>" for u in approved_by) or "none yet"
        fields = [
            f"*Asked by*\n<@{approval.requested_by}>",
            f"*Why*\n{escape(approval.why)}",
            f"*Approvals*\n{len(approved_by)} of {approval.needed}: {tally}",
            f"*Expires*\n{when(approval.expires_at, self._tz)}",
        ]
        body: list[Block] = [
            header(f"Approval needed: {operation_summary(operation)}"),
            section(f"<@{approval.requested_by}> asks to run *{what}*.", fields=fields),
        ]
        status = approval.status
        if status == "pending":
            key = str(approval.id)
            body += [
                {
                    "type": "actions",
                    "block_id": f"approval:{key}",
                    "elements": [
                        button(APPROVE_ACTION, "Approve", key, style="primary"),
                        button(REJECT_ACTION, "Reject…", key, style="danger"),
                    ],
                },
                context(
                    f"{approval.needed} of {who} must approve; the requester cannot. Any reject ends it; "
                    "nothing runs before the last approval, and it then runs by itself."
                ),
            ]
            text = (
                f"Approval needed: {operation_summary(operation)} asked by <@{approval.requested_by}> ({approval.why})"
            )
        elif status == "approved":
            line = f":white_check_mark: Approved by {tally}: the change runs; its progress is posted below."
            if run is not None and not isinstance(run, Started):
                line = f":warning: Approved by {tally}, but the change did not start: {decision_reply(run).text}"
            body.append(context(line))
            text = f"Approved: {operation_summary(operation)}. {line}"
        elif status == "rejected":
            line = f":no_entry: Rejected by <@{approval.decided_by}>: {escape(approval.reason)}. Nothing ran."
            body.append(context(line))
            text = f"Rejected: {operation_summary(operation)}. {line}"
        else:
            line = (
                f":hourglass: Expired at {when(approval.expires_at, self._tz)} without enough approvals. Nothing ran."
            )
            body.append(context(line))
            text = f"Expired: {operation_summary(operation)}. {line}"
        return Reply(text=text, blocks=body, public=True)


def reject_modal(approval: Approval, operation: Operation, *, private_metadata: str) -> dict[str, Any]:
    return {
        "type": "modal",
        "callback_id": REJECT_VIEW,
        "private_metadata": private_metadata,
        "title": {"type": "plain_text", "text": "Reject the change"},
        "submit": {"type": "plain_text", "text": "Reject"},
        "close": {"type": "plain_text", "text": "Back"},
        "blocks": [
            section(
                f"Reject *{escape(operation_summary(operation))}*, asked by <@{approval.requested_by}>? "
                "The request ends and nothing runs."
            ),
            {
                "type": "input",
                "block_id": REASON_BLOCK,
                "label": {"type": "plain_text", "text": "Why (the requester sees it)"},
                "element": {
                    "type": "plain_text_input",
                    "action_id": REASON_INPUT,
                    "multiline": True,
                    "max_length": 500,
                },
            },
        ],
    }


def vote_reply(vote: desk.Vote, *, tz: ZoneInfo) -> Reply:
    """What the clicker alone is told (the request message itself is edited for everyone)."""
    if isinstance(vote, desk.Unknown):
        return blocks.problem("This approval request is not known (any more); nothing was changed.")
    if isinstance(vote, desk.Refused):
        return blocks.refusal(vote.reason)
    if isinstance(vote, desk.Repeated):
        return blocks.problem("You approved this already; an approval counts once.")
    if isinstance(vote, desk.Expired):
        return blocks.problem(
            f"This request expired at {when(vote.approval.expires_at, tz)}; nothing ran. Ask again with a new plan."
        )
    if isinstance(vote, desk.Closed):
        by = f" by <@{vote.approval.decided_by}>" if vote.approval.decided_by else ""
        return blocks.problem(f"This request is already {vote.approval.status}{by}; nothing more was done.")
    if isinstance(vote, desk.Counted):
        if vote.approval.status != "pending":
            return blocks.problem(f"Your approval is counted; the request is {vote.approval.status}.")
        return blocks.problem(
            f"Your approval is counted ({len(vote.approved_by)} of {vote.approval.needed}); "
            "the change runs once the rest approve."
        )
    if isinstance(vote, desk.Rejected):
        return blocks.problem("Rejected: the request ended and nothing ran. The requester sees your reason.")
    if isinstance(vote, desk.Approved):
        return blocks.problem("Approved: the change runs now; its progress is posted in the channel.")
    raise TypeError(f"not a vote: {type(vote).__name__}")


def approvals_list(
    pending: Sequence[tuple[Approval, Operation]],
    *,
    may_approve: Sequence[int],
    user_id: str,
    tz: ZoneInfo,
    now: datetime,
) -> Reply:
    """`/cluster approvals`: the requests waiting now that the caller may see, marking those they may approve."""
    if not pending:
        text = "No change is waiting for approval in the orgs you can see."
        return Reply(text=text, blocks=[section(text)])
    lines = []
    for approval, operation in pending[:MAX_LISTED]:
        mine = approval.requested_by == user_id
        yours = " · *you may approve*" if approval.id in may_approve else " · yours" if mine else ""
        lines.append(
            f"• *{escape(operation_summary(operation))}*, asked by <@{approval.requested_by}>: {escape(approval.why)}"
            f" · {approval_tally(approval)} · expires {when(approval.expires_at, tz)}{yours}"
        )
    more = len(pending) - MAX_LISTED
    if more > 0:
        lines.append(f"…and {more} more.")
    text = f"{len(pending)} change{'s' if len(pending) != 1 else ''} waiting for approval"
    return Reply(
        text=f"{text}: " + "; ".join(operation_summary(o) for _, o in pending[:MAX_LISTED]),
        blocks=[
            header(f"Waiting for approval ({len(pending)})"),
            *blocks.sections(lines),
            context(f"Approve or reject on each request's message in its org's channel. As of {when(now, tz)}."),
        ],
    )


def approval_tally(approval: Approval) -> str:
    return f"needs {approval.needed} approval{'s' if approval.needed != 1 else ''}"
