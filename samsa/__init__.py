"""Samsa: an event streaming platform in Python that speaks the Apache Kafka wire protocol."""

__version__ = "0.1.0"
