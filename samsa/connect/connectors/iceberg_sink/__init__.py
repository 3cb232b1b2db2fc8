"""Iceberg sink connector: Kafka records appended to Apache Iceberg tables through pyiceberg,
exactly-once via Kafka offsets stored in the snapshot summaries (Iceberg's Kafka Connect sink's
config names and summary keys)."""

from .connector import IcebergSinkConnector
from .task import IcebergSinkTask

__all__ = ["IcebergSinkConnector", "IcebergSinkTask"]
