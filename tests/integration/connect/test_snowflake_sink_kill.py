"""Exactly-once of the Snowflake-shaped sink across 5 kill -9's of the Connect worker mid-load:
rows and the partitions' next offsets are committed in one DuckDB transaction, the restarted task
resumes from the offsets in the file, so the table ends with every record exactly once (count and
content checked)."""

from __future__ import annotations

import json
import time
from pathlib import Path
from typing import Any

import duckdb
import pytest
from confluent_kafka import Producer
from confluent_kafka.admin import AdminClient, NewTopic

from samsa.connect.connectors.snowflake.naming import table_name
from samsa.testing import SamsaBroker
from samsa.testing.connect import ConnectWorker

pytestmark = pytest.mark.timeout(300)
N = 60_000
PARTITIONS = 3
KILLS = 5


def count(path: Path, table: str) -> int:
    """Rows so far (-1 while the file or table is not there, or the sink holds the file)."""
    try:
        with duckdb.connect(str(path), read_only=True) as conn:
            return int(conn.execute(f"SELECT count(*) FROM {table}").fetchone()[0])  # type: ignore[index]
    except (duckdb.IOException, duckdb.CatalogException):
        return -1


def rows_of(path: Path, sql: str, timeout: float = 30) -> list[tuple[Any, ...]]:
    deadline = time.monotonic() + timeout
    while True:
        try:
            with duckdb.connect(str(path), read_only=True) as conn:
                return conn.execute(sql).fetchall()
        except duckdb.IOException:
            if time.monotonic() > deadline:
                raise
            time.sleep(0.2)


@pytest.mark.slow
def test_exactly_once_across_five_kill9(samsa_broker: SamsaBroker, tmp_path: Path) -> None:
    topic = "sf-kill-orders"
    admin = AdminClient({"bootstrap.servers": samsa_broker.bootstrap})
    for f in admin.create_topics([NewTopic(topic, PARTITIONS, 1)]).values():
        f.result(20)
    p = Producer({"bootstrap.servers": samsa_broker.bootstrap, "linger.ms": 50,
                  "batch.num.messages": 10000})
    for i in range(N):
        p.produce(topic, key=str(i), partition=i % PARTITIONS,
                  value=json.dumps({"id": i, "sku": f"s{i % 50}", "qty": i % 7}).encode())
        if i % 10000 == 0:
            p.poll(0)
    assert p.flush(60) == 0
    db = tmp_path / "kill.duckdb"
    table = "public." + table_name(topic).lower()
    connector = tmp_path / "snowflake-sink.json"
    connector.write_text(json.dumps({"name": "sf-kill", "config": {
        "connector.class": "com.snowflake.kafka.connector.SnowflakeSinkConnector",
        "topics": topic, "snowflake.url.name": f"duckdb:///{db}",
        "snowflake.user.name": "SVC_KAFKA_CONNECTOR", "snowflake.private.key": "...",
        "snowflake.database.name": "STREAMING", "snowflake.schema.name": "PUBLIC",
        "snowflake.ingestion.method": "SNOWPIPE_STREAMING", "snowflake.role.name": "LOADER",
        "buffer.count.records": "1500", "buffer.flush.time": "1",
        "key.converter": "org.apache.kafka.connect.storage.StringConverter",
        "value.converter": "org.apache.kafka.connect.json.JsonConverter",
        "value.converter.schemas.enable": "false"}}))
    w = ConnectWorker(samsa_broker.bootstrap, tmp_path / "worker", connector_files=[connector])
    seen_at_kill: list[int] = []
    try:
        w.start()
        last = 0
        deadline = time.monotonic() + 200
        while len(seen_at_kill) < KILLS and time.monotonic() < deadline:
            c = count(db, table)
            if c > last:  # progress since the (re)start: kill it mid-load
                w.kill()
                seen_at_kill.append(c)
                last = c
                w.start()
            else:
                time.sleep(0.1)
        assert len(seen_at_kill) == KILLS, f"only {len(seen_at_kill)} kills in time"
        deadline = time.monotonic() + 120
        while time.monotonic() < deadline and count(db, table) != N:
            time.sleep(0.5)
    finally:
        w.stop()
        w.http.close()
    assert all(0 < c < N for c in seen_at_kill), seen_at_kill  # every kill was mid-load
    rows = rows_of(db, f"SELECT record_metadata, record_content FROM {table}")
    assert len(rows) == N, f"{len(rows)} rows, kills at {seen_at_kill}"
    ids = []
    for meta_text, content_text in rows:
        meta, content = json.loads(meta_text), json.loads(content_text)
        i = content["id"]
        assert content == {"id": i, "sku": f"s{i % 50}", "qty": i % 7}
        assert (meta["partition"], meta["offset"], meta["key"]) == (i % PARTITIONS, i // PARTITIONS,
                                                                    str(i))
        ids.append(i)
    assert sorted(ids) == list(range(N))  # no duplicate, no gap
    stored = rows_of(db, 'SELECT "partition", next_offset FROM public.__samsa_connect_offsets '
                         "WHERE connector = 'sf-kill' ORDER BY 1")
    assert stored == [(p, N // PARTITIONS) for p in range(PARTITIONS)]
