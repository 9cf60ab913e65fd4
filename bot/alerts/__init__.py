"""Alerts: one lifecycle (bot.alerts.desk.AlertDesk) for every kind of alert (bot.alerts.kinds)."""
