"""Slash-command listeners."""

from slack_bolt.async_app import AsyncApp

from handlers.commands.cluster import cluster_command_callback
from handlers.commands.digest import digest_command_callback
from handlers.commands.track import track_command_callback
from handlers.errors import guarded


def register(app: AsyncApp) -> None:
    # Behind the one error boundary: a command that fails after its ack is reported and audited at once.
    app.command("/cluster")(guarded(cluster_command_callback))
    app.command("/track")(guarded(track_command_callback))
    app.command("/digest")(guarded(digest_command_callback))
