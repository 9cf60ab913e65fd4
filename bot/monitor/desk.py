"""What both monitors (failed nodes, training throughput) share to keep their alerts: episode rows
updated in place, and messages posted, edited and given files through the one poster. A failure to reach
Slack is logged, never raised: the episode is stored, and its next change posts again."""

from __future__ import annotations

import logging
from collections.abc import Callable
from datetime import datetime
from zoneinfo import ZoneInfo

from bot.clusters.fleet import describe_error
from bot.config import ProgramConfig
from bot.slack.blocks import Reply
from bot.slack.poster import Poster
from storage import crud
from storage.db import Database
from storage.models import Episode, utcnow

log = logging.getLogger(__name__)


class AlertDesk:
    def __init__(
        self, *, db: Database, poster: Poster, program: ProgramConfig, clock: Callable[[], datetime] = utcnow
    ) -> None:
        self.db = db
        self.poster = poster
        self.program = program
        self.clock = clock
        self.tz = ZoneInfo(program.timezone)

    def org_name(self, org_id: str) -> str:
        org = self.program.org(org_id)
        return org.name if org else org_id

    async def open(self, episode: Episode) -> Episode | None:
        """Store a new episode under its key's next generation, with its org's channel. None when another
        replica (or task) opened the same one first: that one posts it, this caller must not."""
        org = self.program.org(episode.org_id)
        episode.channel_id = org.channel if org else ""
        async with self.db.session() as session:
            episode.generation = await crud.next_generation(
                session,
                org_id=episode.org_id,
                backend=episode.backend,
                cluster_name=episode.cluster_name,
                node_key=episode.node_key,
            )
            return await crud.add_episode(session, episode=episode)

    async def close(self, row: Episode, values: dict[str, object]) -> bool:
        """Close an open episode with `values`; True only for the caller that closed it (another replica, or
        the other path of the same monitor, may have already)."""
        async with self.db.session() as session:
            if not await crud.close_episode(session, episode_id=row.id or 0, values=values):
                return False
        for key, value in {"state": "closed", **values}.items():
            setattr(row, key, value)
        return True

    async def follow_up(
        self, row: Episode, note: Reply, *, thread_channel: str, message: Reply | None, line: Reply | None
    ) -> None:
        """A note in the episode's thread; then, unless None, its message and coordination line edited."""
        if not row.message_ts:
            return
        await self.post(thread_channel, note, thread_ts=row.message_ts)
        if message is not None:
            await self.edit(row.channel_id, row.message_ts, message)
        if line is not None and row.coordination_ts:
            await self.edit(self.program.coordination_channel, row.coordination_ts, line)

    async def update(self, row: Episode, values: dict[str, object]) -> None:
        async with self.db.session() as session:
            await crud.update_episode(session, episode_id=row.id or 0, values=values)
        for key, value in values.items():
            setattr(row, key, value)

    async def post(self, channel: str, reply: Reply, *, thread_ts: str | None = None) -> str | None:
        try:
            return await self.poster.post(channel=channel, reply=reply, thread_ts=thread_ts)
        except Exception as error:
            log.warning("could not post an alert in %s: %s", channel, describe_error(error))
            return None

    async def permalink(self, channel: str, ts: str) -> str | None:
        """The link to a message (chat.getPermalink, a read through the poster's client); None if Slack fails."""
        try:
            answer = await self.poster.client.chat_getPermalink(channel=channel, message_ts=ts)
        except Exception as error:
            log.warning("no permalink for %s in %s: %s", ts, channel, describe_error(error))
            return None
        link = answer.get("permalink")
        return str(link) if link else None

    async def edit(self, channel: str, ts: str, reply: Reply) -> None:
        try:
            await self.poster.update(channel=channel, ts=ts, reply=reply)
        except Exception as error:
            log.warning("could not edit alert %s in %s: %s", ts, channel, describe_error(error))

    async def upload(self, channel: str, *, filename: str, content: bytes, title: str, thread_ts: str | None) -> None:
        try:
            await self.poster.upload(
                channel=channel, filename=filename, content=content, title=title, thread_ts=thread_ts
            )
        except Exception as error:
            log.warning("could not upload %s to %s: %s", filename, channel, describe_error(error))
