"""Shared by the Iceberg sink tests: produce records, open the sink's SQLite catalog from the
test process, and wait for a table to hold a number of rows."""

from __future__ import annotations

import json
import time
from pathlib import Path
from typing import Any

import pyarrow as pa
from confluent_kafka import Producer
from confluent_kafka.admin import AdminClient, NewTopic
from pyiceberg.catalog import Catalog, load_catalog
from pyiceberg.exceptions import NoSuchTableError
from pyiceberg.table import Table


def create_topic(bootstrap: str, topic: str, partitions: int) -> None:
    admin = AdminClient({"bootstrap.servers": bootstrap})
    for f in admin.create_topics([NewTopic(topic, partitions, 1)]).values():
        f.result(30)


def produce(bootstrap: str, topic: str, values: list[bytes], keys: list[bytes] | None = None,
            partitions: int = 1) -> None:
    p = Producer({"bootstrap.servers": bootstrap, "linger.ms": 20, "batch.num.messages": 10000,
                  "queue.buffering.max.messages": 1_000_000})
    errors: list[Any] = []
    for i, v in enumerate(values):
        p.produce(topic, value=v, key=keys[i] if keys else None, partition=i % partitions,
                  on_delivery=lambda e, m: errors.append(e) if e else None)
        if i % 50_000 == 0:
            p.poll(0)
    assert p.flush(60) == 0 and not errors, errors[:3]


def with_schema(schema: dict[str, Any], payload: dict[str, Any]) -> bytes:
    """JsonConverter's schemas.enable envelope."""
    return json.dumps({"schema": schema, "payload": payload}).encode()


def catalog_of(warehouse: Path) -> Catalog:
    """The sink's default catalog (SQLite in the warehouse, catalog name `iceberg`)."""
    for attempt in range(5):
        try:  # the worker may be creating the catalog's tables right now
            return load_catalog("iceberg", type="sql", uri=f"sqlite:///{warehouse}/catalog.db",
                                warehouse=f"file://{warehouse}")
        except Exception:
            if attempt == 4:
                raise
            time.sleep(0.5)
    raise AssertionError("unreachable")


def wait_rows(catalog: Catalog, name: str, rows: int, timeout: float = 60.0,
              log: Any = None) -> Table:
    """The table once it holds at least `rows` rows (bounded wait)."""
    deadline = time.monotonic() + timeout
    got = -1
    while time.monotonic() < deadline:
        try:
            table = catalog.load_table(name)
            got = table.scan().to_arrow().num_rows if table.current_snapshot() else 0
            if got >= rows:
                return table
        except NoSuchTableError:
            pass
        time.sleep(0.3)
    raise AssertionError(f"{name} has {got} rows, not {rows}, after {timeout}s\n"
                         f"{log() if log else ''}")


def data_files(table: Table) -> list[str]:
    """Paths of the Parquet files the current snapshot references (what engines read)."""
    return [t.file.file_path.removeprefix("file://") for t in table.scan().plan_files()]


def read_all(table: Table) -> pa.Table:
    return table.scan().to_arrow()
