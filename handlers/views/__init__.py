"""Modal submission listeners."""

from slack_bolt.async_app import AsyncApp

from bot.digest.render import TRACK_VIEW
from bot.slack.blocks import DELETE_VIEW
from handlers.audited import audited
from handlers.views.delete import delete_submission_callback
from handlers.views.track import track_submission_callback


def register(app: AsyncApp) -> None:
    # Every submission reaches the audit log: `audited` records those a listener answered without an entry.
    app.view(DELETE_VIEW)(audited(delete_submission_callback))
    app.view(TRACK_VIEW)(audited(track_submission_callback))
