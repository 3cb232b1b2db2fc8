"""A Debezium-compatible PostgreSQL change-data-capture source (logical replication with
pgoutput): io.debezium.connector.postgresql.PostgresConnector."""

from __future__ import annotations

from .connector import PostgresConnector
from .task import PostgresConnectorTask

__all__ = ["PostgresConnector", "PostgresConnectorTask"]
