"""Events API listeners: the Home tab (and its own buttons), and the commands by @mention and DM."""

from slack_bolt.async_app import AsyncApp

from bot.home.render import OPEN_ALERTS_ACTION
from handlers.errors import guarded
from handlers.events.home import app_home_opened_callback, open_alerts_callback
from handlers.events.messages import app_mention_callback, direct_message_callback


def register(app: AsyncApp) -> None:
    # Not behind `guarded`: opening Home is no command or click, so it leaves no audit row; failures are logged.
    app.event("app_home_opened")(app_home_opened_callback)
    app.action(OPEN_ALERTS_ACTION)(guarded(open_alerts_callback))
    # Not behind `guarded` either: each answered command audits itself (handlers.commands.reply), and an event
    # that runs nothing (an edit, a bot's message, a retry already answered) leaves no row.
    app.event("app_mention")(app_mention_callback)
    app.event("message")(direct_message_callback)
