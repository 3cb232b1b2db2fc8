"""Durable partition logs: segments with offset and time indexes, recovery, retention."""
