"""Two more transports for the same commands: an @mention of Pitcrew in a channel (`app_mention`) and a direct
message to it (`message.im`). Org engineers in their own workspaces, joined to the program's channels through
Slack Connect, cannot use another workspace's slash commands; they can mention Pitcrew and press its buttons.

Each event becomes one Invocation (handlers.commands.reply) for the same command tables as `/cluster`, `/track`
and `/digest`. Replies go where the person looks: what the slash form shows only to its caller is shown only to
them (chat.postEphemeral, in the mention's thread); what it posts in the channel (plans with Confirm, records)
goes in the mention's thread; in a DM, in the DM. Slack retries an event it thinks was lost (same event_id):
the first replica to mark it seen (events_seen) answers, once. Edited messages, bot messages (Pitcrew's own
among them) and messages of any other subtype never run a command.
"""

from __future__ import annotations

import logging
from logging import Logger
from typing import Any

from bot.actor import current_team
from bot.audit_view import HELP  # what `@Pitcrew` alone, `@Pitcrew help` or no command is audited as
from bot.services import Services
from bot.slack import blocks
from bot.slack.blocks import Reply
from bot.slack.message_text import command_text, split_command
from bot.subcommands import UsageError, quoted
from handlers.commands.cluster import CLUSTER_COMMAND
from handlers.commands.digest import DIGEST_COMMAND
from handlers.commands.reply import Answer, Invocation, SlashCommand, answer_invocation, help_answer
from handlers.commands.track import TRACK_COMMAND
from storage.models import Outcome

log = logging.getLogger(__name__)
COMMANDS: dict[str, SlashCommand] = {c.commands.command: c for c in (CLUSTER_COMMAND, TRACK_COMMAND, DIGEST_COMMAND)}
NOT_A_COMMAND = "Pitcrew reads a command after its name: `cluster …`, `track …` or `digest …`."
USAGE = "@Pitcrew cluster|track|digest SUBCOMMAND ... (`@Pitcrew help` lists what you may run)"


async def _help(services: Services, invocation: Invocation) -> tuple[Answer, list[Reply]]:
    """`@Pitcrew` alone or `@Pitcrew help`: the help of all three commands for this person, in one message;
    anything else that is no command gets what was wrong and the usage line."""
    access, user_id = services.access, invocation.user_id
    if not access.is_known(user_id):
        return Answer(blocks.refusal(access.not_a_member), Outcome.REFUSED, detail="not a member"), []
    if invocation.text.strip().lower() not in ("", HELP):
        error = UsageError(f"{NOT_A_COMMAND} `{quoted(invocation.text.strip())}` is none of them.", USAGE)
        return Answer(blocks.usage_error(error), Outcome.INVALID, detail="not a command"), []
    parts = [help_answer(services, user_id, c.commands, title=c.title).reply for c in COMMANDS.values()]
    role = parts[0].blocks[-1]  # each help ends with the same line naming the person's roles
    how = blocks.context("Mention Pitcrew with any of these, with or without the slash: `@Pitcrew cluster list`.")
    merged = [block for part in parts for block in part.blocks[:-1]]
    reply = Reply(
        text="\n\n".join(part.text for part in parts),
        blocks=blocks.fit([*merged, how, role], overflow="{hidden} more blocks"),
    )
    return Answer(reply), []


async def _answer(services: Services, invocation: Invocation) -> tuple[Answer, list[Reply]]:
    command = COMMANDS.get(invocation.command)
    if command is None:
        return await _help(services, invocation)
    answer, more = await command.answer(services, invocation)
    return answer, list(more)


def _runs_a_command(event: dict[str, Any], bot_user_id: str | None) -> bool:
    """A person's new message: no subtype (message_changed, bot_message, …), not edited, not from a bot."""
    user = event.get("user")
    return (
        not event.get("subtype")
        and not event.get("bot_id")
        and "edited" not in event
        and isinstance(user, str)
        and bool(user)
        and user != bot_user_id
        and isinstance(event.get("channel"), str)
    )


async def _invoke(
    services: Services, body: dict[str, Any], event: dict[str, Any], context: dict[str, Any], logger: Logger, via: str
) -> None:
    bot_user_id = context.get("bot_user_id") or services.bot_user_id
    if not _runs_a_command(event, bot_user_id):
        return
    event_id = body.get("event_id")
    key = event_id if isinstance(event_id, str) and event_id else f"{event.get('channel')}:{event.get('ts')}"
    if not await services.first_delivery(f"slack:{key}"[:128]):
        logger.info("event %s delivered again (retry %s); answered once already", key, context.get("retry_num"))
        return
    user_id, channel_id = str(event["user"])[:24], str(event["channel"])[:24]
    text = command_text(str(event.get("text") or ""), bot_user_id=bot_user_id)
    name, rest = split_command(text)
    # Replies in the mention's thread (its own, or the one it was written in); in a DM, where it was written.
    thread_ts = event.get("thread_ts") or (event.get("ts") if via == "mention" else None)
    thread = str(thread_ts) if thread_ts else None

    async def reply(answer: Reply) -> None:
        try:
            if via == "dm" or answer.public:
                await services.poster.post(channel=channel_id, reply=answer, thread_ts=thread)
            else:
                await services.poster.post_ephemeral(channel=channel_id, user=user_id, reply=answer, thread_ts=thread)
        except Exception:  # the channel refused Pitcrew (it was removed, say): the person still gets the answer
            logger.warning("replying to a %s in %s failed; answering in a DM", via, channel_id, exc_info=True)
            await services.poster.post(channel=await services.poster.open_dm(user_id), reply=answer)

    invocation = Invocation(
        user_id=user_id,
        team_id=current_team(),
        channel_id=channel_id,
        command=name or HELP,
        text=rest,
        via=via,
        request_key=key[:64],
        trigger_id=None,
        reply=reply,
    )
    await answer_invocation(services, invocation, logger, answer=_answer)


async def app_mention_callback(
    body: dict[str, Any], event: dict[str, Any], context: dict[str, Any], logger: Logger
) -> None:
    """`@Pitcrew cluster list all` in a channel (Events API acks events itself, at once)."""
    await _invoke(context["services"], body, event, context, logger, via="mention")


async def direct_message_callback(
    body: dict[str, Any], event: dict[str, Any], context: dict[str, Any], logger: Logger
) -> None:
    """`cluster status kumo-p5-train` in a DM with Pitcrew; messages in channels are not subscribed to."""
    if event.get("channel_type") != "im":
        return
    await _invoke(context["services"], body, event, context, logger, via="dm")
