"""A local Slack workspace: the subset of Slack's Web API that Pitcrew uses, plus a browser console.

`LocalSlack` plays Slack's part on both sides of the wire:

* the bot's `AsyncWebClient(base_url=local_slack.api_url)` calls `POST /api/{method}` on it (`web_api`);
* it delivers slash commands, button clicks and modal submissions to the bot's `/slack/events` URL as
  form posts signed exactly as Slack signs them, and events (mentions, DMs, Home) as signed JSON
  envelopes with Slack's retries, and hands out `response_url`s that behave like Slack's (`driver`);
* its people may belong to other workspaces (Slack Connect members of shared channels, `user_teams`).

Everything it sees is kept in `messages`, `open_views` and `calls` (`workspace`), so tests can assert on
what a user would see. The same object backs the console page (`GET /`, `console`) that `pitcrew demo`
opens in a browser.
"""

import contextlib
from collections.abc import AsyncIterator
from functools import cached_property

from starlette.applications import Starlette
from starlette.routing import Route

from sandbox.slack.console import Console
from sandbox.slack.driver import signed_headers
from sandbox.slack.web_api import WebApi
from sandbox.slack.workspace import ApiCall, Message, SlackApiFailure

__all__ = ["ApiCall", "LocalSlack", "Message", "SlackApiFailure", "signed_headers"]


class LocalSlack(WebApi, Console):
    """An in-process Slack workspace serving the Web API, response_urls and the console as one ASGI app."""

    @cached_property
    def app(self) -> Starlette:
        return Starlette(
            routes=[
                Route("/api/{method}", self._handle_api, methods=["GET", "POST"]),
                Route("/upload/{file_id}", self._handle_upload, methods=["POST", "PUT"]),
                Route("/files/{file_id}", self._handle_file, methods=["GET"]),
                Route("/response/{token}", self._handle_response_url, methods=["POST"]),
                Route("/", self._handle_console_page, methods=["GET"]),
                Route("/console/state", self._handle_console_state, methods=["GET"]),
                Route("/console/command", self._handle_console_command, methods=["POST"]),
                Route("/console/message", self._handle_console_message, methods=["POST"]),
                Route("/console/action", self._handle_console_action, methods=["POST"]),
                Route("/console/home-opened", self._handle_console_home_opened, methods=["POST"]),
                Route("/console/view-submit", self._handle_console_view_submit, methods=["POST"]),
                Route("/console/view-close", self._handle_console_view_close, methods=["POST"]),
                Route("/console/command-forms", self._handle_console_command_forms, methods=["POST"]),
            ],
            lifespan=self._lifespan,
        )

    @contextlib.asynccontextmanager
    async def _lifespan(self, app: Starlette) -> AsyncIterator[None]:
        try:
            yield
        finally:
            await self.aclose()
