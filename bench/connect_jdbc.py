"""JDBC sink throughput (issue 16): rows/s of ONE sink task into PostgreSQL and into DuckDB, on a
standalone Connect worker and a Samsa broker.

    PYTHONPATH=. .venv/bin/python bench/connect_jdbc.py [--records 100000]

The topic holds `--records` records: JsonConverter envelopes (schemas.enable=true), an int64 key
over 20,000 distinct keys and a 5-field struct value. For each target and mode a fresh connector
(tasks.max=1, batch.size 3000 = Confluent's default) reads the whole topic:
- upsert: insert.mode=upsert, pk.mode=record_key (the hot path: INSERT .. ON CONFLICT);
- insert: insert.mode=insert, pk.mode=none (PostgreSQL: COPY).
Timed from the first stored row to the last (the task's start-up excluded; "incl. start" adds
it): the database's own offset table says how far the sink got, so the figure counts rows that
are committed, offsets included (exactly-once). DuckDB is read back after the connector stops
(one writer process per file).

Then, to separate the sink from the runtime around it (consumer, JsonConverter), the same records
already converted are handed to JdbcSinkTask.put in this process, 500 per put (the worker's
batch), upsert mode: "put only" rows/s, and the JsonConverter alone (key + value) for comparison.
"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import duckdb
import psycopg
from confluent_kafka import Consumer, Producer
from confluent_kafka import TopicPartition as KTP

from samsa.testing import SamsaBroker
from samsa.testing.connect import ConnectWorker
from samsa.testing.postgres import PostgresServer

JSON = "org.apache.kafka.connect.json.JsonConverter"
TOPIC = "bench-jdbc"
KEY = {"type": "int64", "optional": False}
VALUE = {"type": "struct", "name": "order", "optional": False, "fields": [
    {"field": "seq", "type": "int64", "optional": False},
    {"field": "customer", "type": "string", "optional": False},
    {"field": "product", "type": "string", "optional": False},
    {"field": "qty", "type": "int32", "optional": False},
    {"field": "price", "type": "double", "optional": True}]}


def produce(bootstrap: str, n: int) -> None:
    p = Producer({"bootstrap.servers": bootstrap, "linger.ms": 20, "batch.size": 1_000_000,
                  "queue.buffering.max.messages": 500_000, "compression.type": "lz4"})
    for i in range(n):
        key = json.dumps({"schema": KEY, "payload": i % 20_000}).encode()
        value = json.dumps({"schema": VALUE, "payload": {
            "seq": i, "customer": f"customer-{i % 977}", "product": f"product-{i % 31}",
            "qty": i % 9 + 1, "price": (i % 1000) / 10}}).encode()
        p.produce(TOPIC, key=key, value=value)
        if i % 10_000 == 0:
            p.poll(0)
    p.flush(120)


def pg_progress(dsn: str, name: str) -> int:
    try:
        with psycopg.connect(dsn, autocommit=True) as c:
            row = c.execute('SELECT coalesce(sum(next_offset), 0) FROM "__samsa_connect_offsets" '
                            "WHERE connector = %s", [name]).fetchone()
            return int(row[0]) if row else 0
    except psycopg.Error:
        return 0


def group_progress(bootstrap: str, name: str) -> int:
    c = Consumer({"bootstrap.servers": bootstrap, "group.id": f"connect-{name}", "log_level": 3})
    try:
        got = c.committed([KTP(TOPIC, 0)], timeout=5)
        return max(0, got[0].offset)
    finally:
        c.close()


def run(w: ConnectWorker, name: str, config: dict[str, str], n: int,
        progress: Any) -> dict[str, float]:
    created = time.monotonic()
    resp = w.create(name, config)
    resp.raise_for_status()
    first = last = None
    p0 = 0
    deadline = created + 900
    while time.monotonic() < deadline:
        p = progress()
        now = time.monotonic()
        if first is None and p > 0:
            first, p0 = now, p
        if p >= n:
            last = now
            break
        time.sleep(0.05)
    if last is None or first is None:
        raise TimeoutError(f"{name}: not done: {w.log_tail()}")
    w.http.delete(f"/connectors/{name}")
    steady = (n - p0) / (last - first) if last > first else float("nan")
    return {"rows_per_s": steady, "incl_start_rows_per_s": n / (last - created),
            "seconds": last - created}


class _Context:
    """The SinkTaskContext a task needs outside a worker (no rewinds, no DLQ)."""

    configs: dict[str, str] = {}

    def offset(self, offsets: Any) -> None:
        pass

    def timeout(self, timeout_ms: int) -> None:
        pass

    def errant_record_reporter(self) -> None:
        return None


def put_only(urls: dict[str, str], n: int) -> dict[str, float]:
    from samsa.connect.connectors.jdbc_sink import JdbcSinkTask
    from samsa.connect.converters.json_converter import JsonConverter
    from samsa.connect.data import SinkRecord

    kc, vc = JsonConverter(), JsonConverter()
    kc.configure({"schemas.enable": "true"}, True)
    vc.configure({"schemas.enable": "true"}, False)
    raw = [(json.dumps({"schema": KEY, "payload": i % 20_000}).encode(),
            json.dumps({"schema": VALUE, "payload": {
                "seq": i, "customer": f"customer-{i % 977}", "product": f"product-{i % 31}",
                "qty": i % 9 + 1, "price": (i % 1000) / 10}}).encode()) for i in range(n)]
    t = time.perf_counter()
    records = []
    for i, (k, v) in enumerate(raw):
        ks, vs = kc.to_connect_data(TOPIC, k), vc.to_connect_data(TOPIC, v)
        records.append(SinkRecord(TOPIC, 0, ks.schema, ks.value, vs.schema, vs.value,
                                  kafka_offset=i))
    out = {"JsonConverter alone": n / (time.perf_counter() - t)}
    for label, url in urls.items():
        task = JdbcSinkTask()
        task.initialize(_Context())  # type: ignore[arg-type]
        task.start({"name": f"put-{label}", "connection.url": url, "connection.user": "postgres",
                    "insert.mode": "upsert", "pk.mode": "record_key", "pk.fields": "id",
                    "auto.create": "true", "table.name.format": "put_only"})
        task.put(records[:1])
        t = time.perf_counter()
        for i in range(1, n, 500):
            task.put(records[i:i + 500])
        out[f"put only, {label}"] = (n - 1) / (time.perf_counter() - t)
        task.stop()
    return out


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--records", type=int, default=100_000)
    args = ap.parse_args()
    n = args.records
    results: dict[str, dict[str, float]] = {}
    with tempfile.TemporaryDirectory(prefix="bench-jdbc-") as tmp, \
            SamsaBroker(Path(tmp) / "broker") as broker, PostgresServer() as pg:
        t = time.monotonic()
        produce(broker.bootstrap, n)
        print(f"produced {n} records in {time.monotonic() - t:.1f} s", flush=True)
        common = {"connector.class": "io.confluent.connect.jdbc.JdbcSinkConnector",
                  "tasks.max": "1", "topics": TOPIC, "auto.create": "true",
                  "key.converter": JSON, "key.converter.schemas.enable": "true",
                  "value.converter": JSON, "value.converter.schemas.enable": "true"}
        modes = {"upsert": {"insert.mode": "upsert", "pk.mode": "record_key", "pk.fields": "id"},
                 "insert": {"insert.mode": "insert", "pk.mode": "none"}}
        with ConnectWorker(broker.bootstrap, Path(tmp) / "worker",
                           props={"offset.flush.interval.ms": "200"}) as w:
            for mode, extra in modes.items():
                db = f"bench_{mode}"
                dsn = pg.create_database(db)
                name = f"pg-{mode}"
                results[f"postgresql {mode}"] = run(
                    w, name, {**common, **extra, "connection.url": pg.jdbc_url(db),
                              "connection.user": "postgres"}, n,
                    lambda dsn=dsn, name=name: pg_progress(dsn, name))
                print(f"postgresql {mode}: {results[f'postgresql {mode}']}", flush=True)
                path = Path(tmp) / f"{mode}.duckdb"
                name = f"duck-{mode}"
                results[f"duckdb {mode}"] = run(
                    w, name, {**common, **extra, "connection.url": f"jdbc:duckdb:{path}"}, n,
                    lambda name=name: group_progress(broker.bootstrap, name))
                time.sleep(2)  # the deleted connector's task closes the file
                with duckdb.connect(str(path), read_only=True) as con:
                    row = con.execute(f'SELECT count(*) FROM "{TOPIC}"').fetchone()
                want = 20_000 if mode == "upsert" else n
                assert row is not None and row[0] == min(want, n), row
                print(f"duckdb {mode}: {results[f'duckdb {mode}']}", flush=True)
        pg.create_database("bench_put")
        inproc = put_only({"postgresql upsert": pg.jdbc_url("bench_put"),
                           "duckdb upsert": f"jdbc:duckdb:{Path(tmp) / 'put.duckdb'}"}, n)
    print(f"\nJDBC sink, one task, {n} records (JSON with schemas, 5 fields):")
    for k, v in results.items():
        print(f"  {k:18s} {v['rows_per_s']:>10,.0f} rows/s   "
              f"({v['incl_start_rows_per_s']:,.0f} rows/s incl. task start, {v['seconds']:.1f} s)")
    for k, r in inproc.items():
        print(f"  {k:30s} {r:>10,.0f} rows/s (in process)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
