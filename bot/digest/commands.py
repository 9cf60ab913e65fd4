"""Kept only for bot.metrics' import until it reads the tables from their own modules (bot.tracking.parse,
bot.digest.parse); nothing else imports this."""

from bot.digest.parse import DIGEST_USAGE
from bot.tracking.parse import TRACK_USAGE

__all__ = ["DIGEST_USAGE", "TRACK_USAGE"]
