"""Button listeners."""

import re

from slack_bolt.async_app import AsyncApp

from bot.digest.render import TRACK_ADD_ACTION
from bot.slack.alerts import ACK_ACTION, CHECK_ACTION, REBOOT_ACTION, REPLACE_ACTION, UNSILENCE_ACTION, WATCH_ACTION
from bot.slack.approvals import APPROVE_ACTION, REJECT_ACTION
from bot.slack.blocks import CANCEL_ACTION, CONFIRM_ACTION, DELETE_OPEN_ACTION, START_FLEET_ACTION
from bot.slack.launch_form import LAUNCH_OPEN_ACTION
from handlers.actions.alerts import (
    acknowledge_callback,
    check_callback,
    node_action_callback,
    silence_callback,
    unsilence_callback,
    watch_callback,
)
from handlers.actions.approvals import approve_callback, open_reject_callback
from handlers.actions.operations import cancel_callback, confirm_callback, open_delete_callback, start_fleet_callback
from handlers.actions.track import open_track_modal_callback
from handlers.errors import guarded
from handlers.views.launch import open_launch_form_callback

# Plans posted before scale/replace/delete existed carry these ids; they mean the same.
LEGACY_CONFIRM, LEGACY_CANCEL = "launch_confirm", "launch_cancel"


def register(app: AsyncApp) -> None:
    # Every click reaches the audit log: `guarded` records those a listener answered without an entry.
    for action_id in (CONFIRM_ACTION, LEGACY_CONFIRM):
        app.action(action_id)(guarded(confirm_callback))
    for action_id in (CANCEL_ACTION, LEGACY_CANCEL):
        app.action(action_id)(guarded(cancel_callback))
    app.action(DELETE_OPEN_ACTION)(guarded(open_delete_callback))
    app.action(APPROVE_ACTION)(guarded(approve_callback))  # an approval request's Approve
    app.action(REJECT_ACTION)(guarded(open_reject_callback))  # and its Reject… (the reason form)
    app.action(START_FLEET_ACTION)(guarded(start_fleet_callback))  # a stopped compute fleet's Start button
    app.action(TRACK_ADD_ACTION)(guarded(open_track_modal_callback))
    app.action(LAUNCH_OPEN_ACTION)(guarded(open_launch_form_callback))  # the Home tab's Launch…
    app.action(ACK_ACTION)(guarded(acknowledge_callback))
    app.action(REPLACE_ACTION)(guarded(node_action_callback))
    app.action(REBOOT_ACTION)(guarded(node_action_callback))
    app.action(CHECK_ACTION)(guarded(check_callback))  # Run deep health check (HyperPod)
    app.action(WATCH_ACTION)(guarded(watch_callback))  # acknowledge with a reminder
    app.action(re.compile(r"^alert_silence_\d{1,2}$"))(guarded(silence_callback))
    app.action(UNSILENCE_ACTION)(guarded(unsilence_callback))
