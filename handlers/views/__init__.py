"""Modal submission listeners."""

from slack_bolt.async_app import AsyncApp

from bot.slack.blocks import DELETE_VIEW
from handlers.views.delete import delete_submission_callback


def register(app: AsyncApp) -> None:
    app.view(DELETE_VIEW)(delete_submission_callback)
