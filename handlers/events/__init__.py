"""Events API listeners (the Home tab) and the Home's own buttons."""

from slack_bolt.async_app import AsyncApp

from bot.home.render import OPEN_ALERTS_ACTION
from handlers.errors import guarded
from handlers.events.home import app_home_opened_callback, open_alerts_callback


def register(app: AsyncApp) -> None:
    # Not behind `guarded`: opening Home is no command or click, so it leaves no audit row; failures are logged.
    app.event("app_home_opened")(app_home_opened_callback)
    app.action(OPEN_ALERTS_ACTION)(guarded(open_alerts_callback))
