"""Monitors: node health, throughput, and the alert episodes they open."""
