"""Tests of bot/monitor."""
