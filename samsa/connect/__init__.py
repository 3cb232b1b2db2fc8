"""Samsa's Kafka Connect runtime: a Connect-compatible worker with connectors written in Python."""
