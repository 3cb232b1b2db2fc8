"""The Iceberg sink in a real Connect worker against a real broker: appends readable by pyiceberg
and DuckDB (the Parquet files of the current snapshot), multi-table fan-out partitioned by a field
and by hour, Kafka offsets in the snapshot summary, schema evolution from Avro schemas registered
in Samsa's registry, and records that do not fit the table going to the dead letter queue."""

from __future__ import annotations

import datetime
import json
import time
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import duckdb
import pytest
from confluent_kafka import Consumer
from confluent_kafka.schema_registry import SchemaRegistryClient
from confluent_kafka.schema_registry.avro import AvroSerializer
from confluent_kafka.serialization import MessageField, SerializationContext
from pyiceberg.catalog import load_catalog
from pyiceberg.transforms import HourTransform, IdentityTransform
from pyiceberg.types import LongType, StringType

from samsa.testing import SamsaBroker, free_port
from samsa.testing.connect import ConnectWorker
from samsa.testing.registry import InProcessRegistry
from tests.integration.connect.iceberg_helpers import (
    catalog_of,
    create_topic,
    data_files,
    produce,
    read_all,
    wait_rows,
    with_schema,
)
from tests.integration.connect.iceberg_rest_catalog import RestCatalogServer

pytestmark = pytest.mark.timeout(240)

SINK = "org.apache.iceberg.connect.IcebergSinkConnector"
ORDER_SCHEMA = {"type": "struct", "optional": False, "fields": [
    {"field": "id", "type": "int64", "optional": False},
    {"field": "product", "type": "string", "optional": False},
    {"field": "qty", "type": "int32", "optional": True},
    {"field": "ts", "type": "int64", "optional": False,
     "name": "org.apache.kafka.connect.data.Timestamp", "version": 1},
]}
T0 = datetime.datetime(2026, 1, 1, tzinfo=datetime.UTC)


@pytest.fixture(scope="module")
def worker(samsa_broker: SamsaBroker, tmp_path_factory: pytest.TempPathFactory) -> Iterator[ConnectWorker]:
    with ConnectWorker(samsa_broker.bootstrap, tmp_path_factory.mktemp("iceberg-worker"),
                       props={"offset.flush.interval.ms": "300"}) as w:
        yield w


def sink_config(warehouse: Path, topic: str, **extra: str) -> dict[str, str]:
    return {"connector.class": SINK, "tasks.max": "1", "topics": topic,
            "iceberg.catalog.type": "sql", "iceberg.catalog.warehouse": str(warehouse),
            "iceberg.control.commit.interval-ms": "500",
            "iceberg.tables.auto-create-enabled": "true", **extra}


def order(i: int) -> dict[str, object]:
    ts = T0 + datetime.timedelta(minutes=7 * i)
    return {"id": i, "product": f"p{i % 3}", "qty": i % 5,
            "ts": int(ts.timestamp() * 1000)}


def test_fan_out_partitioned_readable_by_pyiceberg_and_duckdb(
        samsa_broker: SamsaBroker, worker: ConnectWorker, tmp_path: Path) -> None:
    topic, n = "ice-orders", 3000
    create_topic(samsa_broker.bootstrap, topic, 2)
    produce(samsa_broker.bootstrap, topic, [with_schema(ORDER_SCHEMA, order(i)) for i in range(n)],
            partitions=2)
    config = sink_config(
        tmp_path, topic, **{
            "value.converter": "org.apache.kafka.connect.json.JsonConverter",
            "value.converter.schemas.enable": "true",
            "iceberg.tables": "shop.by_product,shop.by_hour",
            "iceberg.table.shop.by_product.partition-by": "product",
            "iceberg.table.shop.by_hour.partition-by": "hour(ts)"})
    resp = worker.create("ice-orders-sink", config)
    assert resp.status_code == 201, resp.text
    catalog = catalog_of(tmp_path)
    by_product = wait_rows(catalog, "shop.by_product", n,
                           log=lambda: f"{worker.status('ice-orders-sink')}\n{worker.log_tail()}")
    by_hour = wait_rows(catalog, "shop.by_hour", n, log=worker.log_tail)
    time.sleep(1.5)  # any further commit would add duplicates: there must be none
    for table in (by_product, by_hour):
        table = catalog.load_table(table.name())
        rows = read_all(table)
        assert rows.num_rows == n
        assert sorted(rows.column("id").to_pylist()) == list(range(n))
        # pyiceberg reads back the values and types the records had
        first = rows.filter(rows.column("id").to_numpy() == 10).to_pylist()[0]
        assert first["product"] == "p1" and first["qty"] == 0
        assert first["ts"] == T0 + datetime.timedelta(minutes=70)
        assert table.schema().find_field("id").field_type == LongType()
        assert table.schema().find_field("product").field_type == StringType()
        # the snapshot summary carries the Kafka offsets, Iceberg's sink's key names
        summary = table.current_snapshot().summary.additional_properties
        offsets = json.loads(summary[f"kafka.connect.offsets.{topic}.connect-ice-orders-sink"])
        assert offsets == {"0": n // 2, "1": n // 2}
        assert summary["kafka.connect.commit-id"]
        # DuckDB reads the Parquet files the current snapshot lists
        files = data_files(table)
        con = duckdb.connect()
        count, total, ids = con.execute(
            "select count(*), sum(qty), count(distinct id) from read_parquet(?)", [files]).fetchone()
        assert (count, total, ids) == (n, sum(i % 5 for i in range(n)), n)
    # partitioned by identity(product) and hour(ts)
    spec = catalog.load_table("shop.by_product").spec()
    assert [(f.name, f.transform) for f in spec.fields] == [("product", IdentityTransform())]
    spec = catalog.load_table("shop.by_hour").spec()
    assert [(f.name, f.transform) for f in spec.fields] == [("ts_hour", HourTransform())]
    parts = {json.dumps(p, default=str) for p in
             catalog.load_table("shop.by_product").inspect.partitions().column("partition").to_pylist()}
    assert len(parts) == 3  # p0, p1, p2
    hours = catalog.load_table("shop.by_hour").inspect.partitions().num_rows
    assert hours == len({(T0 + datetime.timedelta(minutes=7 * i)).replace(minute=0) for i in range(n)})
    for f in data_files(catalog.load_table("shop.by_product")):
        assert "/product=p" in f  # Hive-style partition directories


AVRO_V1 = {"type": "record", "name": "User", "namespace": "samsa.test", "fields": [
    {"name": "id", "type": "long"},
    {"name": "name", "type": "string"},
    {"name": "score", "type": "int"},
]}
AVRO_V2 = {"type": "record", "name": "User", "namespace": "samsa.test", "fields": [
    {"name": "id", "type": "long"},
    {"name": "name", "type": "string"},
    {"name": "score", "type": "long"},
    {"name": "email", "type": ["null", "string"], "default": None},
]}


def test_schema_evolution_from_registry_avro(samsa_broker: SamsaBroker, worker: ConnectWorker,
                                             tmp_path: Path) -> None:
    topic = "ice-users"
    with InProcessRegistry(samsa_broker.bootstrap) as registry:
        client = SchemaRegistryClient({"url": registry.url})
        ctx = SerializationContext(topic, MessageField.VALUE)
        v1 = AvroSerializer(client, json.dumps(AVRO_V1))
        produce(samsa_broker.bootstrap, topic,
                [v1({"id": i, "name": f"u{i}", "score": i}, ctx) for i in range(100)])
        config = sink_config(tmp_path, topic, **{
            "value.converter": "io.confluent.connect.avro.AvroConverter",
            "value.converter.schema.registry.url": registry.url,
            "iceberg.tables": "crm.users", "iceberg.tables.evolve-schema-enabled": "true"})
        assert worker.create("ice-users-sink", config).status_code == 201
        catalog = catalog_of(tmp_path)
        table = wait_rows(catalog, "crm.users", 100, log=worker.log_tail)
        assert table.schema().find_field("score").field_type.__class__.__name__ == "IntegerType"
        assert "email" not in [f.name for f in table.schema().fields]
        v2 = AvroSerializer(client, json.dumps(AVRO_V2))
        produce(samsa_broker.bootstrap, topic,
                [v2({"id": i, "name": f"u{i}", "score": 2**40 + i, "email": f"u{i}@x"}, ctx)
                 for i in range(100, 200)])
        table = wait_rows(catalog, "crm.users", 200, log=worker.log_tail)
    schema = table.schema()
    email = schema.find_field("email")
    assert email.field_type == StringType() and not email.required  # new optional column
    assert schema.find_field("score").field_type == LongType()  # int widened to long
    rows = {r["id"]: r for r in read_all(table).to_pylist()}
    assert len(rows) == 200
    assert rows[5]["email"] is None and rows[5]["score"] == 5
    assert rows[150]["email"] == "u150@x" and rows[150]["score"] == 2**40 + 150


def test_records_that_do_not_fit_go_to_the_dlq(samsa_broker: SamsaBroker, worker: ConnectWorker,
                                               tmp_path: Path) -> None:
    topic, dlq = "ice-events", "ice-events-dlq"
    good = [json.dumps({"id": i, "name": f"n{i}"}).encode() for i in range(50)]
    bad = [json.dumps({"id": "not-a-number", "name": "bad1"}).encode(),
           json.dumps({"id": [1, 2], "name": "bad2"}).encode()]
    produce(samsa_broker.bootstrap, topic, good[:25] + bad + good[25:])
    config = sink_config(tmp_path, topic, **{
        "value.converter": "org.apache.kafka.connect.json.JsonConverter",
        "value.converter.schemas.enable": "false",
        "iceberg.tables": "ev.events",
        "errors.tolerance": "all", "errors.deadletterqueue.topic.name": dlq,
        "errors.deadletterqueue.topic.replication.factor": "1",
        "errors.deadletterqueue.context.headers.enable": "true"})
    assert worker.create("ice-events-sink", config).status_code == 201
    catalog = catalog_of(tmp_path)
    table = wait_rows(catalog, "ev.events", 50, log=worker.log_tail)
    c = Consumer({"bootstrap.servers": samsa_broker.bootstrap, "group.id": f"g-{uuid.uuid4()}",
                  "auto.offset.reset": "earliest"})
    c.subscribe([dlq])
    got = []
    deadline = time.monotonic() + 30
    while len(got) < 2 and time.monotonic() < deadline:
        m = c.poll(0.5)
        if m is not None and not m.error():
            got.append(m)
    c.close()
    assert sorted(m.value() for m in got) == sorted(bad)
    for m in got:  # reported by the task's put (KIP-610), with the KIP-298 headers
        headers = dict(m.headers() or [])
        assert headers["__connect.errors.topic"] == topic.encode()
        assert b"does not fit Iceberg table ev.events" in headers["__connect.errors.exception.message"]
    time.sleep(1.0)
    rows = read_all(catalog.load_table("ev.events"))
    assert sorted(rows.column("id").to_pylist()) == list(range(50))
    assert table.schema().find_field("id").field_type == LongType()
    assert worker.status("ice-events-sink")["tasks"][0]["state"] == "RUNNING"


def test_missing_table_without_auto_create_fails_with_clear_trace(
        worker: ConnectWorker, tmp_path: Path) -> None:
    config = sink_config(tmp_path, "ice-nothing", **{"iceberg.tables": "db.absent",
                                                     "iceberg.tables.auto-create-enabled": "false"})
    produce(worker.bootstrap, "ice-nothing", [b'{"a": 1}'])
    config["value.converter"] = "org.apache.kafka.connect.json.JsonConverter"
    config["value.converter.schemas.enable"] = "false"
    assert worker.create("ice-absent-sink", config).status_code == 201
    deadline = time.monotonic() + 60
    trace = ""
    while time.monotonic() < deadline and not trace:
        st = worker.status("ice-absent-sink")
        tasks = st["tasks"]
        if tasks and tasks[0]["state"] == "FAILED":
            trace = tasks[0]["trace"]
        time.sleep(0.3)
    assert "db.absent does not exist" in trace, worker.log_tail()


@pytest.mark.slow
def test_spark_reads_the_snapshot_parquet_files(samsa_broker: SamsaBroker, worker: ConnectWorker,
                                                tmp_path: Path, spark: Any) -> None:
    topic, n = "ice-spark", 1000
    produce(samsa_broker.bootstrap, topic, [with_schema(ORDER_SCHEMA, order(i)) for i in range(n)])
    config = sink_config(tmp_path, topic, **{
        "value.converter": "org.apache.kafka.connect.json.JsonConverter",
        "value.converter.schemas.enable": "true",
        "iceberg.tables": "shop.spark", "iceberg.tables.default-partition-by": "hour(ts)"})
    assert worker.create("ice-spark-sink", config).status_code == 201
    table = wait_rows(catalog_of(tmp_path), "shop.spark", n, log=worker.log_tail)
    files = data_files(table)
    df = spark.read.parquet(*files)
    got = df.selectExpr("count(*) c", "count(distinct id) d", "sum(qty) q", "min(ts) t0").collect()[0]
    assert (got.c, got.d, got.q) == (n, n, sum(i % 5 for i in range(n)))
    assert got.t0.replace(tzinfo=None) == spark_local(T0)
    assert dict(df.dtypes)["ts"] == "timestamp" and dict(df.dtypes)["id"] == "bigint"


def spark_local(ts: datetime.datetime) -> datetime.datetime:
    """Spark's collect() gives naive datetimes in the session time zone (the machine's)."""
    return ts.astimezone().replace(tzinfo=None)


def test_rest_catalog(samsa_broker: SamsaBroker, worker: ConnectWorker, tmp_path: Path) -> None:
    """iceberg.catalog.type=rest + uri: the sink talks to a REST catalog (a minimal one backed by
    pyiceberg's SqlCatalog) and its commits carry the offsets like the SQLite catalog's."""
    topic, n = "ice-rest", 500
    produce(samsa_broker.bootstrap, topic, [with_schema(ORDER_SCHEMA, order(i)) for i in range(n)])
    with RestCatalogServer(tmp_path / "rest") as rest:
        config = sink_config(tmp_path, topic, **{
            "value.converter": "org.apache.kafka.connect.json.JsonConverter",
            "value.converter.schemas.enable": "true", "iceberg.tables": "shop.rest",
            "iceberg.catalog.type": "rest", "iceberg.catalog.uri": rest.url,
            "iceberg.tables.default-partition-by": "product"})
        del config["iceberg.catalog.warehouse"]
        assert worker.create("ice-rest-sink", config).status_code == 201
        client = load_catalog("rest-client", type="rest", uri=rest.url)
        table = wait_rows(client, "shop.rest", n, log=worker.log_tail)
        assert rest.commits >= 1
    assert sorted(read_all(table).column("id").to_pylist()) == list(range(n))
    summary = table.current_snapshot().summary.additional_properties
    assert json.loads(summary[f"kafka.connect.offsets.{topic}.connect-ice-rest-sink"]) == {"0": n}
    assert not (tmp_path / "catalog.db").exists()  # nothing went to the default SQLite catalog


def test_catalog_down_and_back_loses_and_duplicates_nothing(
        samsa_broker: SamsaBroker, worker: ConnectWorker, tmp_path: Path) -> None:
    """The REST catalog goes away mid-load: commits fail and are retried, the task keeps
    running, and once the catalog is back the table holds every record exactly once."""
    topic = "ice-down"
    first = [with_schema(ORDER_SCHEMA, order(i)) for i in range(500)]
    second = [with_schema(ORDER_SCHEMA, order(i)) for i in range(500, 1000)]
    produce(samsa_broker.bootstrap, topic, first)
    rest = RestCatalogServer(tmp_path / "rest").__enter__()
    port = rest.port
    config = sink_config(tmp_path, topic, **{
        "value.converter": "org.apache.kafka.connect.json.JsonConverter",
        "value.converter.schemas.enable": "true", "iceberg.tables": "shop.down",
        "iceberg.catalog.type": "rest", "iceberg.catalog.uri": rest.url,
        "iceberg.control.commit.interval-ms": "300"})
    del config["iceberg.catalog.warehouse"]
    try:
        assert worker.create("ice-down-sink", config).status_code == 201
        client = load_catalog("rest-client", type="rest", uri=rest.url)
        wait_rows(client, "shop.down", 500, log=worker.log_tail)
        rest.__exit__(None, None, None)  # the catalog is down ...
        produce(samsa_broker.bootstrap, topic, second)
        time.sleep(4)  # ... while the task buffers and its commits fail
        assert worker.status("ice-down-sink")["tasks"][0]["state"] == "RUNNING"
        failed = [line for line in worker.log_tail(200_000).splitlines()
                  if "ice-down-sink" in line and "pre_commit failed" in line]
        assert failed, "no commit failed while the catalog was down"
        rest = RestCatalogServer(tmp_path / "rest", port=port).__enter__()  # ... and back
        table = wait_rows(client, "shop.down", 1000, log=worker.log_tail)
        time.sleep(1.5)
        table = client.load_table("shop.down")
    finally:
        rest.__exit__(None, None, None)
    ids = read_all(table).column("id").to_pylist()
    assert sorted(ids) == list(range(1000))
    assert worker.status("ice-down-sink")["tasks"][0]["state"] == "RUNNING"


def test_unreachable_catalog_fails_the_task_with_a_clear_trace(
        worker: ConnectWorker, tmp_path: Path) -> None:
    config = sink_config(tmp_path, "ice-nowhere", **{
        "iceberg.tables": "db.t", "iceberg.catalog.type": "rest",
        "iceberg.catalog.uri": f"http://127.0.0.1:{free_port()}"})
    assert worker.create("ice-nowhere-sink", config).status_code == 201
    deadline = time.monotonic() + 60
    trace = ""
    while time.monotonic() < deadline and not trace:
        tasks = worker.status("ice-nowhere-sink")["tasks"]
        if tasks and tasks[0]["state"] == "FAILED":
            trace = tasks[0]["trace"]
        time.sleep(0.3)
    assert "cannot load Iceberg catalog 'iceberg' (rest)" in trace, worker.log_tail()
