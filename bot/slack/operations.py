"""What a Confirm or Cancel click came to (bot.operations' decisions), and a running change's progress, said
in Slack."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from bot.clusters.model import Cluster
from bot.clusters.requests import NodeFailure
from bot.operations import (
    AlreadyDecided,
    Cancelled,
    Decision,
    NameNotTyped,
    NotAllowed,
    OtherChangeRunning,
    PlanExpired,
    PlanMoved,
    PlanUnknown,
    Started,
    StartFailed,
)
from bot.slack import blocks
from bot.slack.blocks import Reply
from storage.models import Operation


def expired_reply(expired: PlanExpired) -> Reply:
    return blocks.problem(f"This {expired.why}; run the command again for current quota and prices.")


def decision_reply(decision: Decision, *, plan: dict[str, Any] | None = None) -> Reply:
    """`plan`: the plan message the click came from (Slack sends it for messages in a channel), kept readable
    once confirmed (bot.slack.blocks.confirmed_plan)."""
    if isinstance(decision, PlanUnknown):
        again = "; run the command again" if decision.run_again else ""
        return blocks.problem(f"This plan is not known (any more){again}.")
    if isinstance(decision, NameNotTyped):
        return blocks.problem("A delete is confirmed by typing the cluster's name: press *Delete…* on the plan.")
    if isinstance(decision, NotAllowed):
        return blocks.refusal(decision.reason)
    if isinstance(decision, PlanExpired):
        return expired_reply(decision)
    if isinstance(decision, OtherChangeRunning):
        return blocks.problem(blocks.busy_text(decision.running))
    if isinstance(decision, AlreadyDecided):
        if decision.state is None:
            return blocks.problem(f"This {decision.noun} was already decided; nothing more was done.")
        by = f" by <@{decision.by}>" if decision.by else ""
        return blocks.problem(f"This {decision.noun} is already {decision.state}{by}; nothing more was done.")
    if isinstance(decision, StartFailed):
        verb = "was refused" if decision.refused else "failed"
        return blocks.refusal(f"The {decision.noun} of `{decision.cluster_name}` {verb}: {decision.reason}")
    if isinstance(decision, PlanMoved):
        return blocks.problem(
            f"Nothing was sent: {decision.why}. This {decision.noun} plan is withdrawn; "
            "run the command again for the nodes there are now."
        )
    if isinstance(decision, Started):
        kept = blocks.confirmed_plan(plan, decision.operation) if plan else None
        return kept or blocks.operation_decided(decision.operation, "confirmed")
    if isinstance(decision, Cancelled):
        return blocks.operation_decided(decision.operation, "cancelled", by=decision.by)
    raise TypeError(f"not a decision: {type(decision).__name__}")


class SlackProgress:
    """Operations' presenter (bot.operations.ProgressPresenter): the progress message and its lines."""

    def progress(self, operation: Operation, line: str) -> Reply:
        return blocks.operation_progress(operation, line)

    def standing(self, operation: Operation, cluster: Cluster | None) -> str:
        return blocks.operation_line(operation, cluster)

    def cluster_line(self, cluster: Cluster) -> str:
        return blocks.progress_line(cluster)

    def failed_nodes(self, failed: Sequence[NodeFailure]) -> str:
        return blocks.failed_nodes_text(failed)
