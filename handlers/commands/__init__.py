"""Slash-command listeners."""

from slack_bolt.async_app import AsyncApp

from handlers.audited import reported
from handlers.commands.cluster import cluster_command_callback
from handlers.commands.digest import digest_command_callback
from handlers.commands.track import track_command_callback


def register(app: AsyncApp) -> None:
    # A command that fails after its ack (a reply that cannot be sent) is reported and audited at once.
    app.command("/cluster")(reported(cluster_command_callback))
    app.command("/track")(reported(track_command_callback))
    app.command("/digest")(reported(digest_command_callback))
