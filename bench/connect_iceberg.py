"""Iceberg sink throughput (issue 16): rows/s from a topic into an Iceberg table (SQLite catalog,
local warehouse) through a standalone Connect worker, per task.

    PYTHONPATH=. .venv/bin/python bench/connect_iceberg.py [--rows 200000] [--tasks 1,2]

Records are JsonConverter structs with a schema (6 fields: long, string, int, double, timestamp,
string), produced up front into a topic with as many partitions as tasks. The time is from the
connector's creation until the table's current snapshot holds every row (`total-records` in the
snapshot summary), with iceberg.control.commit.interval-ms=1000; it includes the consumer group's
join. Reference in the same run: pyiceberg appending the same rows as one Arrow table (no Kafka,
no conversion), i.e. the ceiling of the write path.
"""

from __future__ import annotations

import argparse
import datetime
import json
import sys
import tempfile
import time
from pathlib import Path

import pyarrow as pa
from confluent_kafka import Producer
from confluent_kafka.admin import AdminClient, NewTopic
from pyiceberg.catalog import load_catalog
from pyiceberg.exceptions import NoSuchTableError

from samsa.testing import SamsaBroker
from samsa.testing.connect import ConnectWorker

SCHEMA = {"type": "struct", "optional": False, "fields": [
    {"field": "id", "type": "int64", "optional": False},
    {"field": "product", "type": "string", "optional": False},
    {"field": "qty", "type": "int32", "optional": True},
    {"field": "price", "type": "double", "optional": True},
    {"field": "ts", "type": "int64", "optional": False,
     "name": "org.apache.kafka.connect.data.Timestamp", "version": 1},
    {"field": "note", "type": "string", "optional": True},
]}
T0 = 1_767_225_600_000


def payload(i: int) -> dict[str, object]:
    return {"id": i, "product": f"p{i % 50}", "qty": i % 9, "price": i * 0.25,
            "ts": T0 + i * 1000, "note": "x" * 20}


def produce(bootstrap: str, topic: str, rows: int, partitions: int) -> None:
    admin = AdminClient({"bootstrap.servers": bootstrap})
    admin.create_topics([NewTopic(topic, partitions, 1)])[topic].result(30)
    p = Producer({"bootstrap.servers": bootstrap, "linger.ms": 50, "batch.num.messages": 10000,
                  "queue.buffering.max.messages": 2_000_000, "compression.type": "lz4"})
    for i in range(rows):
        p.produce(topic, json.dumps({"schema": SCHEMA, "payload": payload(i)}).encode(),
                  partition=i % partitions)
        if i % 20000 == 0:
            p.poll(0)
    assert p.flush(120) == 0


def total_records(warehouse: Path, name: str) -> int:
    try:
        cat = load_catalog("iceberg", type="sql", uri=f"sqlite:///{warehouse}/catalog.db",
                           warehouse=f"file://{warehouse}")
        snap = cat.load_table(name).current_snapshot()
    except (NoSuchTableError, Exception):
        return 0
    if snap is None or snap.summary is None:
        return 0
    return int(snap.summary.additional_properties.get("total-records", "0"))


def run_sink(bootstrap: str, work: Path, rows: int, tasks: int) -> float:
    topic = f"bench-ice-{tasks}"
    produce(bootstrap, topic, rows, tasks)
    warehouse = work / f"wh-{tasks}"
    with ConnectWorker(bootstrap, work / f"worker-{tasks}",
                       props={"offset.flush.interval.ms": "500"}) as w:
        start = time.monotonic()
        resp = w.create(f"bench-ice-{tasks}", {
            "connector.class": "org.apache.iceberg.connect.IcebergSinkConnector",
            "tasks.max": str(tasks), "topics": topic,
            "value.converter": "org.apache.kafka.connect.json.JsonConverter",
            "value.converter.schemas.enable": "true",
            "iceberg.tables": "bench.orders", "iceberg.tables.auto-create-enabled": "true",
            "iceberg.catalog.warehouse": str(warehouse),
            "iceberg.control.commit.interval-ms": "1000"})
        assert resp.status_code == 201, resp.text
        deadline = start + 900
        while total_records(warehouse, "bench.orders") < rows:
            if time.monotonic() > deadline:
                raise SystemExit(f"timed out\n{w.log_tail()}")
            time.sleep(0.2)
        return time.monotonic() - start


def run_direct(work: Path, rows: int) -> float:
    warehouse = work / "wh-direct"
    warehouse.mkdir()
    cat = load_catalog("direct", type="sql", uri=f"sqlite:///{warehouse}/catalog.db",
                       warehouse=f"file://{warehouse}")
    cat.create_namespace("bench")
    epoch = datetime.datetime(1970, 1, 1, tzinfo=datetime.UTC)
    start = time.monotonic()
    data = []
    for i in range(rows):
        row = payload(i)
        row["ts"] = epoch + datetime.timedelta(milliseconds=int(row["ts"]))  # type: ignore[arg-type]
        data.append(row)
    df = pa.Table.from_pylist(data)
    table = cat.create_table("bench.orders", df.schema)
    table.append(df)
    return time.monotonic() - start


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--rows", type=int, default=200_000)
    ap.add_argument("--tasks", default="1,2")
    args = ap.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        work = Path(tmp)
        with SamsaBroker(work / "broker") as b:
            for tasks in [int(t) for t in args.tasks.split(",")]:
                secs = run_sink(b.bootstrap, work, args.rows, tasks)
                print(f"iceberg sink, {tasks} task(s): {args.rows} rows in {secs:.1f} s = "
                      f"{args.rows / secs:,.0f} rows/s ({args.rows / secs / tasks:,.0f} rows/s "
                      f"per task)", flush=True)
        secs = run_direct(work, args.rows)
        print(f"reference, pyiceberg append of the same rows (one Arrow table): {secs:.1f} s = "
              f"{args.rows / secs:,.0f} rows/s", flush=True)
    sys.exit(0)


if __name__ == "__main__":
    main()
