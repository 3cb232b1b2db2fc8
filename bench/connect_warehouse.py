"""Snowflake-shaped warehouse sink throughput (issue 16): rows/s of ONE sink task into a DuckDB
file and into PostgreSQL, on a standalone Connect worker and a Samsa broker.

    PYTHONPATH=. .venv/bin/python bench/connect_warehouse.py [--records 100000]

The topic (1 partition) holds `--records` Avro order events (the seeds' shape, Confluent wire
format through Samsa's registry), string keys and one header. Each target gets the seeds' JSON
with snowflake.url.name pointing at it, SNOWPIPE_STREAMING with buffer.flush.time=1 and the
seeds' buffer.count.records=10000. Rows are counted as stored when the group's committed offset
says so: the sink's pre_commit only returns offsets the warehouse holds (rows + offsets in one
transaction), so the figure counts exactly-once committed rows. Timed from the first committed
row to the last (and from the connector's creation, "incl. start").
"""

from __future__ import annotations

import argparse
import json
import tempfile
import time
from pathlib import Path
from typing import Any

from confluent_kafka import Consumer, Producer
from confluent_kafka import TopicPartition as KTP
from confluent_kafka.admin import AdminClient, NewTopic
from confluent_kafka.schema_registry import SchemaRegistryClient
from confluent_kafka.schema_registry.avro import AvroSerializer
from confluent_kafka.serialization import MessageField, SerializationContext

from samsa.testing import SamsaBroker
from samsa.testing.connect import ConnectWorker
from samsa.testing.postgres import PostgresServer
from samsa.testing.registry import InProcessRegistry

TOPIC = "order-events"
ORDER = json.dumps({
    "type": "record", "name": "OrderEvent", "namespace": "shop", "fields": [
        {"name": "order_id", "type": "long"}, {"name": "customer_id", "type": "string"},
        {"name": "total", "type": "double"}, {"name": "status", "type": "string"},
        {"name": "created_at", "type": {"type": "long", "logicalType": "timestamp-millis"}}]})


def produce(bootstrap: str, registry: str, n: int) -> None:
    admin = AdminClient({"bootstrap.servers": bootstrap})
    for f in admin.create_topics([NewTopic(TOPIC, 1, 1)]).values():
        f.result(30)
    ser = AvroSerializer(SchemaRegistryClient({"url": registry}), ORDER)
    ctx = SerializationContext(TOPIC, MessageField.VALUE)
    p = Producer({"bootstrap.servers": bootstrap, "linger.ms": 20, "batch.size": 1_000_000,
                  "queue.buffering.max.messages": 500_000})
    for i in range(n):
        value = {"order_id": i, "customer_id": f"c{i % 997}", "total": i * 0.25,
                 "status": ("NEW", "PAID", "SHIPPED")[i % 3], "created_at": 1_767_225_600_000 + i}
        p.produce(TOPIC, key=str(i), value=ser(value, ctx), headers=[("source", b"web")])
        if i % 20_000 == 0:
            p.poll(0)
    assert p.flush(120) == 0


def committed(bootstrap: str, group: str) -> int:
    c = Consumer({"bootstrap.servers": bootstrap, "group.id": group})
    try:
        off = c.committed([KTP(TOPIC, 0)], timeout=10)[0].offset
        return max(int(off), 0)
    finally:
        c.close()


def run(bootstrap: str, registry: str, work: Path, name: str, url: str, n: int,
        extra: dict[str, str]) -> dict[str, Any]:
    config = {"connector.class": "com.snowflake.kafka.connector.SnowflakeSinkConnector",
              "topics": TOPIC, "snowflake.url.name": url,
              "snowflake.user.name": "postgres", "snowflake.private.key": "...",
              "snowflake.database.name": "STREAMING", "snowflake.schema.name": "PUBLIC",
              "snowflake.ingestion.method": "SNOWPIPE_STREAMING", "snowflake.role.name": "LOADER",
              "buffer.count.records": "10000", "buffer.flush.time": "1",
              "key.converter": "org.apache.kafka.connect.storage.StringConverter",
              "value.converter": "io.confluent.connect.avro.AvroConverter", **extra}
    with ConnectWorker(bootstrap, work / name, props={
            "value.converter.schema.registry.url": registry,
            "offset.flush.interval.ms": "200"}) as w:
        t0 = time.monotonic()
        assert w.create(name, config).status_code == 201
        first = last = None
        deadline = t0 + 600
        while time.monotonic() < deadline:
            done = committed(bootstrap, f"connect-{name}")
            now = time.monotonic()
            if done > 0 and first is None:
                first = (now, done)
            if done >= n:
                last = now
                break
            time.sleep(0.2)
        if first is None or last is None:
            raise SystemExit(f"{name}: not done in time\n{w.log_tail()}")
    rows = n - first[1]
    return {"target": name, "records": n, "seconds": round(last - first[0], 2),
            "rows_per_s": round(rows / max(last - first[0], 1e-6)),
            "incl_start_rows_per_s": round(n / (last - t0))}


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--records", type=int, default=100_000)
    args = ap.parse_args()
    with tempfile.TemporaryDirectory(prefix="bench-warehouse-") as tmp, SamsaBroker() as broker, \
            InProcessRegistry(broker.bootstrap) as registry, PostgresServer() as pg:
        work = Path(tmp)
        produce(broker.bootstrap, registry.url, args.records)
        pg.create_database("streaming")
        results = [
            run(broker.bootstrap, registry.url, work, "duckdb",
                f"duckdb:///{work / 'warehouse.duckdb'}", args.records, {}),
            run(broker.bootstrap, registry.url, work, "postgresql", pg.jdbc_url("streaming"),
                args.records, {}),
        ]
    for r in results:
        print(f"{r['target']:>10}: {r['rows_per_s']:>7} rows/s per task "
              f"({r['records']} records, {r['seconds']} s; incl. start {r['incl_start_rows_per_s']})")
    print(json.dumps(results))


if __name__ == "__main__":
    main()
