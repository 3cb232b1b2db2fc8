"""The pipeline's warehouse tables and the Spark job's exactly-once writer, on the shared SQL layer
(samsa.connect.connectors.sql: DuckDB by default, PostgreSQL with a postgresql:// URL).

Exactly-once: each micro-batch's window rows are upserted (absolute values: the aggregate's state
after this batch) and its (query id, batch id) is inserted into `spark_committed_batches` in ONE
transaction; a batch already recorded is skipped. Spark re-runs an uncommitted batch after a crash
with the same offsets and state, so it either finds the batch recorded (skip) or writes the same
rows again; the primary key on the batch table also fences off a second, zombie writer."""

from __future__ import annotations

import time
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from samsa.connect.connectors.sql import Column, Database, open_database
from samsa.connect.errors import RetriableException

REVENUE = "product_revenue_1m"
BATCHES = "spark_committed_batches"
REVENUE_COLUMNS = ("window_start", "window_end", "product_id", "orders", "units", "revenue_cents",
                   "spark_batch")
REVENUE_KEYS = ("window_start", "product_id")
RAW_TABLE = "ORDER_EVENTS"  # snowflake.topic2table.map's name for the topic
RAW_QUALIFIED = "public.order_events"  # where the sink creates it (schema PUBLIC; names folded)
RETRY_S = 60.0


def default_url(data_dir: Path) -> str:
    return f"duckdb:{data_dir / 'pipeline' / 'warehouse.duckdb'}"


def raw_url(warehouse: str, data_dir: Path) -> str:
    """Where the Connect sink lands the raw events: the same PostgreSQL database, or for DuckDB a
    file of its own (a DuckDB file has one read-write process at a time: the Spark driver owns
    warehouse.duckdb, the Connect worker raw.duckdb)."""
    if warehouse.startswith(("postgresql:", "postgres:", "jdbc:postgresql:")):
        return warehouse
    return f"duckdb:{data_dir / 'pipeline' / 'raw.duckdb'}"


def is_duckdb(url: str) -> bool:
    return not url.startswith(("postgresql:", "postgres:", "jdbc:postgresql:"))


def to_ts(ms: int) -> datetime:
    """A window bound as a naive UTC timestamp (TIMESTAMP without zone in both databases)."""
    return datetime.fromtimestamp(ms / 1000, tz=UTC).replace(tzinfo=None)


def ms_of(ts: datetime) -> int:
    return int(ts.replace(tzinfo=UTC).timestamp() * 1000)


def ensure_tables(db: Database) -> None:
    d = db.dialect
    db.execute(d.create_table(REVENUE, [
        Column("window_start", "TIMESTAMP", nullable=False),
        Column("window_end", "TIMESTAMP", nullable=False),
        Column("product_id", "VARCHAR(64)", nullable=False), Column("orders", "BIGINT", nullable=False),
        Column("units", "BIGINT", nullable=False), Column("revenue_cents", "BIGINT", nullable=False),
        Column("spark_batch", "BIGINT", nullable=False)], REVENUE_KEYS))
    db.execute(d.create_table(BATCHES, [
        Column("query_id", "VARCHAR(64)", nullable=False), Column("batch_id", "BIGINT", nullable=False),
        Column("window_rows", "BIGINT", nullable=False), Column("committed_at", "TIMESTAMP", nullable=False)],
        ("query_id", "batch_id")))


@dataclass
class BatchResult:
    batch_id: int
    rows: int
    skipped: bool


class BatchWriter:
    """Writes the job's micro-batches into the warehouse, once each."""

    def __init__(self, url: str) -> None:
        self.url = url
        self.db = open_database(url)
        ensure_tables(self.db)
        d = self.db.dialect
        p = d.placeholder
        self._upsert = d.upsert(REVENUE, REVENUE_COLUMNS, REVENUE_KEYS)
        self._seen = (f"SELECT window_rows FROM {d.table(BATCHES)} WHERE {d.quote('query_id')} = {p} "
                      f"AND {d.quote('batch_id')} = {p}")
        self._record = d.insert(BATCHES, ("query_id", "batch_id", "window_rows", "committed_at"))

    def write(self, query_id: str, batch_id: int, rows: Sequence[tuple[int, int, str, int, int, int]]
              ) -> BatchResult:
        """rows: (window start ms, window end ms, product, orders, units, revenue cents). Retries
        while the database is unreachable (RETRY_S), so a short outage does not fail the query."""
        deadline = time.monotonic() + RETRY_S
        while True:
            try:
                return self._write_once(query_id, batch_id, rows)
            except RetriableException:
                if time.monotonic() > deadline:
                    raise
                time.sleep(1.0)

    def _write_once(self, query_id: str, batch_id: int,
                    rows: Sequence[tuple[int, int, str, int, int, int]]) -> BatchResult:
        with self.db.transaction():
            if self.db.execute(self._seen, [query_id, batch_id]):
                return BatchResult(batch_id, len(rows), True)
            self.db.executemany(self._upsert, [
                (to_ts(ws), to_ts(we), prod, orders, units, revenue, batch_id)
                for ws, we, prod, orders, units, revenue in rows])
            self.db.execute(self._record, [query_id, batch_id, len(rows),
                                           datetime.now(UTC).replace(tzinfo=None)])
        return BatchResult(batch_id, len(rows), False)

    def close(self) -> None:
        self.db.close()


def read_revenue(db: Database) -> dict[tuple[int, str], tuple[int, int, int]]:
    """(window start ms, product) -> (orders, units, revenue cents) as the warehouse holds it."""
    d = db.dialect
    rows = db.execute("SELECT window_start, product_id, orders, units, revenue_cents "
                      f"FROM {d.table(REVENUE)}")
    return {(ms_of(ws), str(prod)): (int(o), int(u), int(r)) for ws, prod, o, u, r in rows}


def batches_committed(db: Database) -> int:
    return int(db.execute(f"SELECT count(*) FROM {db.dialect.table(BATCHES)}")[0][0])


def read_raw(db: Database, table: str = RAW_QUALIFIED) -> list[tuple[Any, ...]]:
    """(partition, offset, order_id) of every row the Connect sink landed (Snowflake's layout:
    RECORD_METADATA and RECORD_CONTENT as JSON)."""
    if db.kind == "postgresql":
        sql = ("SELECT (record_metadata->>'partition')::int, (record_metadata->>'offset')::bigint, "
               f"record_content->>'order_id' FROM {table}")
    else:
        sql = ("SELECT CAST(json_extract_string(record_metadata, '$.partition') AS INTEGER), "
               "CAST(json_extract_string(record_metadata, '$.offset') AS BIGINT), "
               f"json_extract_string(record_content, '$.order_id') FROM {table}")
    return db.execute(sql)
