"""Modal submission listeners."""

from slack_bolt.async_app import AsyncApp

from bot.digest.render import TRACK_VIEW
from bot.slack.approvals import REJECT_VIEW
from bot.slack.blocks import DELETE_VIEW
from bot.slack.launch_form import LAUNCH_VIEW
from handlers.errors import guarded
from handlers.views.approvals import reject_submission_callback
from handlers.views.delete import delete_submission_callback
from handlers.views.launch import launch_submission_callback
from handlers.views.track import track_submission_callback


def register(app: AsyncApp) -> None:
    # Every submission reaches the audit log: `guarded` records those a listener answered without an entry.
    app.view(DELETE_VIEW)(guarded(delete_submission_callback))
    app.view(REJECT_VIEW)(guarded(reject_submission_callback))  # an approval request's reason to reject
    app.view(TRACK_VIEW)(guarded(track_submission_callback))
    app.view(LAUNCH_VIEW)(guarded(launch_submission_callback))
