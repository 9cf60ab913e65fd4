"""Slash-command listeners."""

from slack_bolt.async_app import AsyncApp

from handlers.commands.cluster import cluster_command_callback
from handlers.commands.digest import digest_command_callback
from handlers.commands.track import track_command_callback


def register(app: AsyncApp) -> None:
    app.command("/cluster")(cluster_command_callback)
    app.command("/track")(track_command_callback)
    app.command("/digest")(digest_command_callback)
