"""Modal submission listeners."""

from slack_bolt.async_app import AsyncApp

from bot.digest.render import TRACK_VIEW
from bot.slack.blocks import DELETE_VIEW
from handlers.views.delete import delete_submission_callback
from handlers.views.track import track_submission_callback


def register(app: AsyncApp) -> None:
    app.view(DELETE_VIEW)(delete_submission_callback)
    app.view(TRACK_VIEW)(track_submission_callback)
