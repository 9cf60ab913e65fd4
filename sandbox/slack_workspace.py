"""Where the local Slack was first defined; it lives in `sandbox.slack` now (its workspace state, Web API,
user driver and console), and these names stay importable from here."""

from sandbox.slack import ApiCall, LocalSlack, Message, SlackApiFailure, signed_headers

__all__ = ["ApiCall", "LocalSlack", "Message", "SlackApiFailure", "signed_headers"]
