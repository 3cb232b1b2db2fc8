"""The Snowflake-shaped warehouse sink in a real Connect worker process, against a real broker, the
broker's schema registry, DuckDB files and a real PostgreSQL: the seeds' connector JSON as written
(only snowflake.url.name changed), Avro and Protobuf values, topic2table.map, the database going
down and coming back, wrong credentials, and records that cannot be converted (DLQ)."""

from __future__ import annotations

import importlib
import json
import sys
import time
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import duckdb
import httpx
import psycopg
import pytest
from confluent_kafka import Consumer, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic
from confluent_kafka.schema_registry import SchemaRegistryClient
from confluent_kafka.schema_registry.avro import AvroSerializer
from confluent_kafka.schema_registry.protobuf import ProtobufSerializer
from confluent_kafka.serialization import MessageField, SerializationContext

from samsa.connect.connectors.snowflake.naming import table_name
from samsa.testing import SamsaBroker, free_port
from samsa.testing.connect import ConnectWorker
from samsa.testing.postgres import PostgresServer
from samsa.testing.registry import InProcessRegistry

pytestmark = pytest.mark.timeout(240)

# The seeds' example (004), verbatim; tests change snowflake.url.name only (and say so when they
# change more for what they test).
SEED = json.loads("""{
  "name": "snowflake-sink",
  "config": {
    "connector.class": "com.snowflake.kafka.connector.SnowflakeSinkConnector",
    "topics": "order-events",
    "snowflake.url.name": "your-account.snowflakecomputing.com",
    "snowflake.user.name": "SVC_KAFKA_CONNECTOR",
    "snowflake.private.key": "...",
    "snowflake.database.name": "STREAMING",
    "snowflake.schema.name": "PUBLIC",
    "buffer.count.records": "10000",
    "buffer.flush.time": "60",
    "key.converter": "org.apache.kafka.connect.storage.StringConverter",
    "value.converter": "io.confluent.connect.avro.AvroConverter"
  }
}""")

ORDER_AVRO = json.dumps({
    "type": "record", "name": "OrderEvent", "namespace": "shop", "fields": [
        {"name": "order_id", "type": "long"}, {"name": "customer_id", "type": "string"},
        {"name": "total", "type": "double"}, {"name": "status", "type": "string"},
        {"name": "created_at", "type": {"type": "long", "logicalType": "timestamp-millis"}}]})
T0 = 1_767_225_600_000  # 2026-01-01T00:00:00Z


@pytest.fixture(scope="module")
def registry(samsa_broker: SamsaBroker) -> Iterator[InProcessRegistry]:
    with InProcessRegistry(samsa_broker.bootstrap) as r:
        yield r


def make_worker(bootstrap: str, tmp_path: Path, registry: InProcessRegistry) -> ConnectWorker:
    # The worker's registry URL is what the seeds' JSON (which names none) falls back to.
    return ConnectWorker(bootstrap, tmp_path / "worker",
                         props={"value.converter.schema.registry.url": registry.url})


def create_topic(bootstrap: str, topic: str, partitions: int = 1) -> None:
    admin = AdminClient({"bootstrap.servers": bootstrap})
    for f in admin.create_topics([NewTopic(topic, partitions, 1)]).values():
        f.result(20)


def order(i: int) -> dict[str, Any]:
    return {"order_id": i, "customer_id": f"c{i % 97}", "total": round(i * 1.25, 2),
            "status": ("NEW", "PAID", "SHIPPED")[i % 3], "created_at": T0 + i}


def produce_avro(bootstrap: str, registry_url: str, topic: str, rows: list[dict[str, Any]],
                 partitions: int = 1) -> int:
    """Avro values (Confluent wire format), string keys, a header; returns the schema id."""
    client = SchemaRegistryClient({"url": registry_url})
    ser = AvroSerializer(client, ORDER_AVRO)
    ctx = SerializationContext(topic, MessageField.VALUE)
    p = Producer({"bootstrap.servers": bootstrap, "linger.ms": 20})
    errors: list[Any] = []
    for row in rows:
        i = int(row["order_id"])
        p.produce(topic, key=str(i), value=ser(row, ctx), partition=i % partitions,
                  timestamp=T0 + i, headers=[("source", b"web")],
                  on_delivery=lambda e, m: errors.append(e) if e else None)
        p.poll(0)
    assert p.flush(30) == 0 and not errors, errors
    return int(client.get_latest_version(f"{topic}-value").schema_id)


def duck_query(path: Path, sql: str, timeout: float = 30.0) -> list[tuple[Any, ...]]:
    """Query the DuckDB file between the sink's flushes (it holds the file only while writing)."""
    deadline = time.monotonic() + timeout
    while True:
        try:
            with duckdb.connect(str(path), read_only=True) as conn:
                return conn.execute(sql).fetchall()
        except (duckdb.IOException, duckdb.CatalogException) as e:
            if time.monotonic() > deadline:
                raise AssertionError(f"DuckDB {path}: {e}") from e
            time.sleep(0.2)


def wait_for(fn: Any, want: Any, timeout: float, what: str) -> Any:
    deadline = time.monotonic() + timeout
    got = None
    while time.monotonic() < deadline:
        got = fn()
        if got == want:
            return got
        time.sleep(0.3)
    raise AssertionError(f"{what}: wanted {want!r}, last saw {got!r}")


def duck_count(path: Path, table: str) -> int:
    if not path.exists():
        return -1
    try:
        return int(duck_query(path, f"SELECT count(*) FROM {table}", timeout=5)[0][0])
    except AssertionError:
        return -1


def pg_rows(dsn: str, sql: str) -> list[tuple[Any, ...]]:
    try:
        with psycopg.connect(dsn, autocommit=True) as conn:
            return conn.execute(sql).fetchall()
    except psycopg.errors.UndefinedTable:
        return []


def task_state(w: ConnectWorker, name: str) -> tuple[str, str]:
    st = w.status(name)
    tasks = st.get("tasks") or [{}]
    return str(tasks[0].get("state")), str(tasks[0].get("trace") or "")


# ---- the seeds' JSON ---------------------------------------------------------------------------
def test_seed_json_avro_into_duckdb_on_samsa_serve(tmp_path: Path) -> None:
    """`samsa serve --schema-registry --connect` and the seeds' JSON as written (only the URL
    changed): the embedded worker's converters default to the embedded registry; 10,000 Avro
    order events fill the 10,000-record buffer, which lands in one flush; both columns carry what
    Snowflake's connector would write."""
    rport, cport = free_port(), free_port()
    registry_url = f"http://127.0.0.1:{rport}"
    db = tmp_path / "warehouse.duckdb"
    table = "public." + table_name("order-events").lower()
    assert table == "public.order_events_782987144"  # Snowflake's name: _ for '-', + hash
    n = 10_000
    with SamsaBroker(tmp_path / "b", overrides={
            "schema.registry.enable": "true", "schema.registry.listeners": registry_url,
            "connect.enable": "true", "connect.listeners": f"http://127.0.0.1:{cport}",
            "connect.worker.offset.flush.interval.ms": "1000"}) as b, \
            httpx.Client(base_url=f"http://127.0.0.1:{cport}", timeout=30) as http:
        create_topic(b.bootstrap, "order-events")
        schema_id = produce_avro(b.bootstrap, registry_url, "order-events",
                                 [order(i) for i in range(n)])
        wait_for(lambda: _health(http), True, 60, "embedded worker up")
        config = dict(SEED["config"], **{"snowflake.url.name": f"duckdb:///{db}"})
        resp = http.post("/connectors", json={"name": SEED["name"], "config": config})
        assert resp.status_code == 201, resp.text
        wait_for(lambda: duck_count(db, table), n, 90, "rows in DuckDB")
    rows = duck_query(db, f"SELECT record_metadata, record_content FROM {table}")
    types = duck_query(db, "SELECT column_name, data_type FROM information_schema.columns "
                           "WHERE table_name = 'order_events_782987144' ORDER BY 1")
    assert types == [("record_content", "JSON"), ("record_metadata", "JSON")]
    seen = {}
    for meta_text, content_text in rows:
        meta, content = json.loads(meta_text), json.loads(content_text)
        i = meta["offset"]
        assert meta == {"topic": "order-events", "partition": 0, "offset": i, "CreateTime": T0 + i,
                        "key": str(i), "schema_id": schema_id, "headers": {"source": "web"}}
        assert content == order(i)  # created_at: Timestamp -> epoch ms, as Snowflake writes it
        seen[i] = True
    assert sorted(seen) == list(range(n))
    offsets = duck_query(db, 'SELECT topic, "partition", next_offset FROM '
                             'public.__samsa_connect_offsets WHERE connector = \'snowflake-sink\'')
    assert offsets == [("order-events", 0, n)]


def _health(http: httpx.Client) -> bool:
    try:
        return http.get("/health").status_code == 200
    except httpx.HTTPError:
        return False


# ---- Protobuf, topic2table.map, PostgreSQL -----------------------------------------------------
ORDER_PROTO = """syntax = "proto3";
package shop;
message Line { string sku = 1; int32 qty = 2; }
message ProtoOrder { int64 order_id = 1; string customer_id = 2; double total = 3;
                     repeated Line lines = 4; map<string, string> attrs = 5; }
"""


def compile_proto(d: Path, name: str, text: str, module: str) -> Any:
    import grpc_tools
    from grpc_tools import protoc
    (d / name).write_text(text)
    inc = str(Path(grpc_tools.__file__).parent / "_proto")
    assert protoc.main(["protoc", f"-I{d}", f"-I{inc}", f"--python_out={d}", name]) == 0
    sys.path.insert(0, str(d))
    try:
        return importlib.import_module(module)
    finally:
        sys.path.remove(str(d))


def test_protobuf_topic2table_into_postgresql(samsa_broker: SamsaBroker, registry: InProcessRegistry,
                                              postgres_server: PostgresServer,
                                              tmp_path: Path) -> None:
    """Protobuf values land as JSON in jsonb columns of the table topic2table.map names, in the
    schema snowflake.schema.name names, with the role snowflake.user.name names."""
    topic = f"proto-orders-{uuid.uuid4().hex[:6]}"
    create_topic(samsa_broker.bootstrap, topic, 2)
    dsn = postgres_server.create_database("sf_proto")
    pb2 = compile_proto(tmp_path, "sf_order.proto", ORDER_PROTO, "sf_order_pb2")
    client = SchemaRegistryClient({"url": registry.url})
    ser = ProtobufSerializer(pb2.ProtoOrder, client, {"use.deprecated.format": False})
    ctx = SerializationContext(topic, MessageField.VALUE)
    p = Producer({"bootstrap.servers": samsa_broker.bootstrap})
    n = 300
    for i in range(n):
        msg = pb2.ProtoOrder(order_id=i, customer_id=f"c{i}", total=i / 4,
                             lines=[pb2.Line(sku=f"s{i}", qty=i % 5)], attrs={"ch": "web"})
        p.produce(topic, key=f"k{i}", value=ser(msg, ctx), partition=i % 2)
    assert p.flush(30) == 0
    schema_id = int(client.get_latest_version(f"{topic}-value").schema_id)
    config = dict(SEED["config"], **{
        "topics": topic, "snowflake.url.name": postgres_server.jdbc_url("sf_proto"),
        "snowflake.user.name": "postgres", "snowflake.schema.name": "ANALYTICS",
        "snowflake.topic2table.map": f"{topic}:ORDERS",
        "snowflake.ingestion.method": "SNOWPIPE_STREAMING", "snowflake.role.name": "LOADER",
        "buffer.flush.time": "1",
        "value.converter": "io.confluent.connect.protobuf.ProtobufConverter",
        "value.converter.schema.registry.url": registry.url})
    with make_worker(samsa_broker.bootstrap, tmp_path, registry) as w:
        assert w.create("sf-proto", config).status_code == 201
        wait_for(lambda: pg_rows(dsn, "SELECT count(*) FROM analytics.orders"), [(n,)], 60,
                 "rows in PostgreSQL")
    rows = pg_rows(dsn, "SELECT record_metadata, record_content, pg_typeof(record_content)::text "
                        "FROM analytics.orders")
    assert {r[2] for r in rows} == {"jsonb"}
    by_id = {r[1]["order_id"]: r for r in rows}
    assert sorted(by_id) == list(range(n))
    for i, (meta, content, _) in by_id.items():
        assert content == {"order_id": i, "customer_id": f"c{i}", "total": i / 4,
                           "lines": [{"sku": f"s{i}", "qty": i % 5}], "attrs": {"ch": "web"}}
        assert meta["topic"] == topic and meta["partition"] == i % 2 and meta["key"] == f"k{i}"
        assert meta["schema_id"] == schema_id and "CreateTime" in meta


# ---- bad input --------------------------------------------------------------------------------
def test_postgresql_down_and_back_loses_nothing(samsa_broker: SamsaBroker,
                                                registry: InProcessRegistry,
                                                postgres_server: PostgresServer,
                                                tmp_path: Path) -> None:
    """PostgreSQL killed (-9) mid-stream: flushes fail and are retried, the task stays RUNNING,
    and once the server is back every record is in the table exactly once."""
    topic = f"down-{uuid.uuid4().hex[:6]}"
    create_topic(samsa_broker.bootstrap, topic, 2)
    dsn = postgres_server.create_database("sf_down")
    config = dict(SEED["config"], **{
        "topics": topic, "snowflake.url.name": postgres_server.jdbc_url("sf_down"),
        "snowflake.user.name": "postgres", "snowflake.ingestion.method": "SNOWPIPE_STREAMING",
        "snowflake.role.name": "LOADER", "buffer.flush.time": "1", "buffer.count.records": "200"})
    table = "public." + table_name(topic).lower()
    with make_worker(samsa_broker.bootstrap, tmp_path, registry) as w:
        produce_avro(samsa_broker.bootstrap, registry.url, topic, [order(i) for i in range(1000)], 2)
        assert w.create("sf-down", config).status_code == 201
        wait_for(lambda: pg_rows(dsn, f"SELECT count(*) FROM {table}"), [(1000,)], 60, "first half")
        postgres_server.kill()
        try:
            produce_avro(samsa_broker.bootstrap, registry.url, topic,
                         [order(i) for i in range(1000, 2000)], 2)
            time.sleep(4)  # several flush attempts fail meanwhile
            assert task_state(w, "sf-down")[0] == "RUNNING"
        finally:
            postgres_server.start()
        wait_for(lambda: pg_rows(dsn, f"SELECT count(*) FROM {table}"), [(2000,)], 60, "all rows")
        log_text = w.log_path.read_text()
        assert "asked for a retry" in log_text and "unavailable" in log_text, w.log_tail()
    ids = pg_rows(dsn, f"SELECT (record_content->>'order_id')::int FROM {table}")
    assert sorted(i for (i,) in ids) == list(range(2000))


def test_wrong_credentials_fail_the_task_with_a_clear_trace(samsa_broker: SamsaBroker,
                                                            registry: InProcessRegistry,
                                                            postgres_server: PostgresServer,
                                                            tmp_path: Path) -> None:
    config = dict(SEED["config"], **{
        "topics": "creds-topic", "snowflake.url.name": postgres_server.jdbc_url("postgres"),
        "snowflake.user.name": "svc_no_such_role"})
    with make_worker(samsa_broker.bootstrap, tmp_path, registry) as w:
        assert w.create("sf-creds", config).status_code == 201
        deadline = time.monotonic() + 60
        state, trace = "", ""
        while time.monotonic() < deadline and state != "FAILED":
            try:
                state, trace = task_state(w, "sf-creds")
            except Exception:
                pass
            time.sleep(0.3)
    assert state == "FAILED"
    assert "refused the credentials" in trace and "svc_no_such_role" in trace, trace


def test_unconvertible_records_go_to_the_dlq(samsa_broker: SamsaBroker, registry: InProcessRegistry,
                                             tmp_path: Path) -> None:
    """Bytes the Avro converter cannot read (the runtime's conversion stage) and a record with a
    NaN, which has no JSON form (the sink's own conversion, reported through the errant record
    reporter), go to the dead letter queue; every other record is in the table."""
    topic = f"dlq-src-{uuid.uuid4().hex[:6]}"
    dlq = f"dlq-{uuid.uuid4().hex[:6]}"
    create_topic(samsa_broker.bootstrap, topic)
    good = [order(i) for i in range(20)]
    produce_avro(samsa_broker.bootstrap, registry.url, topic, good[:10])
    p = Producer({"bootstrap.servers": samsa_broker.bootstrap})
    p.produce(topic, key="bad", value=b"not avro at all")
    assert p.flush(10) == 0
    produce_avro(samsa_broker.bootstrap, registry.url, topic,
                 [dict(order(99), total=float("nan"))] + good[10:])
    db = tmp_path / "dlq.duckdb"
    config = dict(SEED["config"], **{
        "topics": topic, "snowflake.url.name": str(db),  # a bare .duckdb path works too
        "snowflake.ingestion.method": "SNOWPIPE_STREAMING", "snowflake.role.name": "LOADER",
        "buffer.flush.time": "1", "errors.tolerance": "all",
        "errors.deadletterqueue.topic.name": dlq,
        "errors.deadletterqueue.context.headers.enable": "true"})
    table = "public." + table_name(topic).lower()
    with make_worker(samsa_broker.bootstrap, tmp_path, registry) as w:
        assert w.create("sf-dlq", config).status_code == 201
        wait_for(lambda: duck_count(db, table), 20, 60, "good rows")
        assert task_state(w, "sf-dlq")[0] == "RUNNING"
    contents = duck_query(db, f"SELECT record_content->>'order_id' FROM {table}")
    assert sorted(int(c) for (c,) in contents) == list(range(20))
    c = Consumer({"bootstrap.servers": samsa_broker.bootstrap, "group.id": f"g-{dlq}",
                  "auto.offset.reset": "earliest"})
    c.assign([TopicPartition(dlq, 0, 0)])
    got: list[Any] = []
    deadline = time.monotonic() + 20
    while len(got) < 2 and time.monotonic() < deadline:
        m = c.poll(0.5)
        if m is not None and not m.error():
            got.append(m)
    c.close()
    assert len(got) == 2
    assert got[0].value() == b"not avro at all" and got[1].key() == b"99"
    stage = {dict(m.headers())["__connect.errors.stage"] for m in got}
    assert stage == {b"VALUE_CONVERTER", b"TASK_PUT"}
    assert b"no JSON form" in dict(got[1].headers())["__connect.errors.exception.message"]


def test_validation_rejects_a_snowflake_account_url(samsa_broker: SamsaBroker,
                                                    registry: InProcessRegistry,
                                                    tmp_path: Path) -> None:
    """The seeds' JSON with its account URL is refused with a message saying what to use."""
    with make_worker(samsa_broker.bootstrap, tmp_path, registry) as w:
        resp = w.http.put("/connector-plugins/SnowflakeSinkConnector/config/validate",
                          json=SEED["config"])
        assert resp.status_code == 200
        body = resp.json()
        errs = {c["value"]["name"]: c["value"]["errors"] for c in body["configs"]}
        assert body["error_count"] >= 1
        assert any("duckdb:///" in e for e in errs["snowflake.url.name"]), errs
        assert w.create("sf-invalid", SEED["config"]).status_code == 400

