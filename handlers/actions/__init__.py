"""Button listeners."""

from slack_bolt.async_app import AsyncApp

from bot.slack.blocks import CANCEL_ACTION, CONFIRM_ACTION, DELETE_OPEN_ACTION
from handlers.actions.operations import cancel_callback, confirm_callback, open_delete_callback

# Plans posted before scale/replace/delete existed carry these ids; they mean the same.
LEGACY_CONFIRM, LEGACY_CANCEL = "launch_confirm", "launch_cancel"


def register(app: AsyncApp) -> None:
    for action_id in (CONFIRM_ACTION, LEGACY_CONFIRM):
        app.action(action_id)(confirm_callback)
    for action_id in (CANCEL_ACTION, LEGACY_CANCEL):
        app.action(action_id)(cancel_callback)
    app.action(DELETE_OPEN_ACTION)(open_delete_callback)
