"""Slack listeners only: parse -> authorize -> call bot/ -> render. One register(app) per kind."""

from slack_bolt.async_app import AsyncApp

from handlers import actions, commands, events, views


def register_listeners(app: AsyncApp) -> None:
    commands.register(app)
    actions.register(app)
    views.register(app)
    events.register(app)
