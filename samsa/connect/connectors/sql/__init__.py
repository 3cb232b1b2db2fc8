"""The SQL layer the database sinks share (JDBC sink, warehouse sink, the pipeline's writer):
open a PostgreSQL (psycopg 3) or DuckDB database from a JDBC-style URL, build dialect-correct
statements from Connect schemas, run them batched inside one transaction, and keep consumed Kafka
offsets in the same database (`OffsetTable`) so rows and offsets commit together.

    db = open_database("jdbc:postgresql://127.0.0.1:5432/shop", user="app")
    offsets = OffsetTable(db)
    with db.transaction():
        db.executemany(db.dialect.upsert("orders", ["id", "total"], ["id"]), rows)
        offsets.write("my-sink", {("orders", 0): 1234})
"""

from __future__ import annotations

from .database import Database, open_database
from .dialect import Column, Dialect, DuckDBDialect, PostgresDialect
from .offsets import OffsetTable

__all__ = ["Column", "Database", "Dialect", "DuckDBDialect", "OffsetTable", "PostgresDialect",
           "open_database"]
