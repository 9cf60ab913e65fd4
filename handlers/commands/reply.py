"""What every command does around its answer, whichever transport brought it (a slash command here, an @mention
or a DM in handlers.events.messages): check membership, parse, dispatch to the subcommand, reply where the person
looks, audit. Help is read off the command's table (bot.subcommands).

One command gets one reply (a digest preview too long for one message adds its continuation), and an answer
that fails becomes one plain message (handlers.errors.INTERNAL_ERROR), never a stack trace in Slack; any
other failure is the error boundary's (handlers.errors)."""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Mapping, Sequence
from dataclasses import dataclass
from logging import Logger
from typing import Any

from slack_bolt.context.ack.async_ack import AsyncAck

from bot.access import Action
from bot.actor import current_team
from bot.names import unknown_org
from bot.services import Services
from bot.slack import blocks
from bot.slack.blocks import Reply
from bot.subcommands import CommandSet, Subcommand, UsageError
from handlers.errors import INTERNAL_ERROR
from storage.models import Outcome


@dataclass(frozen=True)
class Answer:
    reply: Reply
    outcome: Outcome = Outcome.ALLOWED
    org_id: str | None = None
    detail: str = ""
    more: tuple[Reply, ...] = ()  # continuation messages, after the reply


def invalid(error: UsageError, org_id: str | None = None) -> Answer:
    """The answer to bad input: what was wrong and the usage line."""
    return Answer(blocks.usage_error(error), Outcome.INVALID, org_id, error.message)


def org_refusal(services: Services, *, user_id: str, action: Action, org_id: str) -> Answer | None:
    """None when the user may `action` on `org_id`; else the answer saying why not.

    An org the user cannot see gets the same words whether it exists or not (refusals reveal nothing), with
    the orgs they can see and a "did you mean" among those; for an admin, who sees every org, it does not
    exist. An org they see but whose role is too low gets the role refusal."""
    access = services.access
    visible = access.visible_orgs(user_id)
    if org_id not in visible:
        admin = access.is_admin(user_id)
        reason = unknown_org(org_id, visible, admin=admin)
        outcome = Outcome.INVALID if admin else Outcome.REFUSED
        # Audited under the org named when it exists: its operators see who tried (the asker never does).
        named = org_id if services.program.org(org_id) is not None else None
        return Answer(blocks.refusal(reason), outcome, named, reason)
    decision = access.decide(user_id=user_id, action=action, org_id=org_id)
    if decision.allowed:
        return None
    return Answer(blocks.refusal(decision.reason), Outcome.REFUSED, org_id, decision.reason)


def help_answer(services: Services, user_id: str, commands: CommandSet, *, title: str) -> Answer:
    """The subcommands of `commands` the user may run somewhere, and their role in each org they see."""
    access = services.access
    visible = access.visible_orgs(user_id)

    def may_run(needs: Action | None) -> bool:
        return (
            needs is None
            or access.is_admin(user_id)
            or any(access.may(user_id=user_id, action=needs, org_id=org) for org in visible)
        )

    lines = commands.help_lines(may_run)
    if access.is_admin(user_id):
        role_line = "You are a program admin: every org is yours to see."
    else:
        roles = [f"{access.role(user_id=user_id, org_id=org)} of `{org}`" for org in visible]
        role_line = "You are " + ", ".join(roles) + "."
    text = f"{title} you may run:\n" + "\n".join(usage for usage, _ in lines)
    shown = [f"`{usage}`\n{summary}" for usage, summary in lines]
    reply = Reply(
        text=text,
        blocks=[blocks.header(f"Pitcrew: {commands.command}"), *blocks.sections(shown), blocks.context(role_line)],
    )
    return Answer(reply)


@dataclass(frozen=True, kw_only=True)
class Invocation:
    """One command to answer, however it came: a slash command, an @mention or a DM (each transport turns its
    Slack payload into one of these: `SlashCommand.listener` below, handlers.events.messages for mentions and
    DMs). Who (the user and their team), where, the command and its text, and how to reply so the person sees it
    where they look."""

    user_id: str
    team_id: str | None  # the actor's workspace (Slack Connect members come from their own)
    channel_id: str
    command: str  # "/cluster", "/track", "/digest"
    text: str
    via: str  # "slash", "mention", "dm": audited with the command
    request_key: str | None  # a retried delivery of the same request records once (trigger id, event id)
    trigger_id: str | None  # opens a modal; only a slash command has one
    reply: Callable[[Reply], Awaitable[object]]  # one message: public ones where everyone in the place sees it


@dataclass(frozen=True, kw_only=True)
class Call:
    """One command being answered: who asked, where, and which subcommand it named."""

    services: Services
    user_id: str
    channel_id: str
    request_key: str | None  # a retried request records once
    trigger_id: str | None  # opens a modal (a slash command's); None where the transport has none (mention, DM)
    spec: Subcommand[Any]


# A subcommand's run: the call and what its parser made of the text -> the answer.
Run = Callable[[Call, Any], Awaitable[Answer]]


@dataclass(frozen=True, kw_only=True)
class SlashCommand:
    """A command (/cluster, /track, /digest): its table (bot.subcommands) and the run of each subcommand, by
    name; `help` is answered from the table. Every transport answers through the same one."""

    commands: CommandSet
    title: str  # help's first line: "{title} you may run"
    runs: Mapping[str, Run]

    def __post_init__(self) -> None:
        named = set(self.commands.names) - {"help"} | ({self.commands.home.name} if self.commands.home else set())
        if named != set(self.runs):
            raise ValueError(f"{self.commands.command}: runs {sorted(self.runs)} do not match {sorted(named)}")

    async def answer(self, services: Services, invocation: Invocation) -> tuple[Answer, Sequence[Reply]]:
        user_id = invocation.user_id
        if not services.access.is_known(user_id):
            return Answer(blocks.refusal(services.access.not_a_member), Outcome.REFUSED, detail="not a member"), ()
        try:
            spec, parsed = self.commands.parse(invocation.text)
        except UsageError as error:
            return invalid(error), ()
        if spec.name == "help":
            return help_answer(services, user_id, self.commands, title=self.title), ()
        call = Call(
            services=services,
            user_id=user_id,
            channel_id=invocation.channel_id,
            request_key=invocation.request_key,
            trigger_id=invocation.trigger_id,
            spec=spec,
        )
        found = await self.runs[spec.name](call, parsed)
        return found, found.more

    async def listener(self, ack: AsyncAck, command: dict[str, Any], context: dict[str, Any], logger: Logger) -> None:
        """The slash-command transport of this command (Bolt's listener for /cluster, say)."""
        await ack()  # empty ack: the one reply goes through the response URL
        services: Services = context["services"]
        response_url = str(command.get("response_url") or "")
        trigger_id = command.get("trigger_id")

        async def reply(answer: Reply) -> None:
            await services.poster.respond(response_url, answer)

        invocation = Invocation(
            user_id=command["user_id"],
            team_id=current_team(),
            channel_id=command["channel_id"],
            command=str(command.get("command") or self.commands.command),
            text=command.get("text") or "",
            via="slash",
            request_key=trigger_id if isinstance(trigger_id, str) else None,
            trigger_id=trigger_id if isinstance(trigger_id, str) else None,
            reply=reply,
        )
        await answer_invocation(services, invocation, logger, answer=self.answer)


# (services, the invocation) -> the answer and any continuation messages
Answerer = Callable[[Services, Invocation], Awaitable[tuple[Answer, Sequence[Reply]]]]


async def answer_invocation(services: Services, invocation: Invocation, logger: Logger, *, answer: Answerer) -> None:
    """Answer one command, reply once (plus any continuation), and audit it, whatever transport it came by."""
    received = services.clock()
    user_id, channel_id, text, name = invocation.user_id, invocation.channel_id, invocation.text, invocation.command
    try:
        result, more = await answer(services, invocation)
    except Exception:
        logger.exception("%s %r from %s failed", name, text[:200], user_id)
        result, more = Answer(blocks.problem(INTERNAL_ERROR), Outcome.FAILED, detail="internal error"), ()
    # An answer that names no org (bad input, say) is audited under the org the command would have meant, so
    # that org's operators see their own typos in /cluster audit, not only admins.
    org_id = result.org_id or services.access.default_org(user_id=user_id, channel_id=channel_id)
    services.audit.record(
        at=received,
        user_id=user_id,
        channel_id=channel_id,
        command=name[:32],
        text=text,
        outcome=result.outcome,
        org_id=org_id,
        detail=result.detail,
        via=invocation.via,
        team_id=invocation.team_id,
    )
    services.metrics.command(command=name, text=text, outcome=result.outcome.value)
    # Recorded before the reply is sent (queuing costs microseconds): whoever sees the reply finds its row.
    await invocation.reply(result.reply)
    for reply in more:
        await invocation.reply(reply)
