"""Button listeners."""

from slack_bolt.async_app import AsyncApp

from bot.operations import CANCEL_LAUNCH, CONFIRM_LAUNCH
from handlers.actions.launch import cancel_launch_callback, confirm_launch_callback


def register(app: AsyncApp) -> None:
    app.action(CONFIRM_LAUNCH)(confirm_launch_callback)
    app.action(CANCEL_LAUNCH)(cancel_launch_callback)
