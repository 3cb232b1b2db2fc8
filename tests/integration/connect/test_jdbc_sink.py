"""The JDBC sink in a real Connect worker process, fed by a real broker, writing into a real
PostgreSQL server (and DuckDB files): insert / upsert / update, every pk.mode, auto.create and
auto.evolve, delete.enabled tombstones, the database going down and back, wrong credentials, and
records the table refuses going to the dead letter queue."""

from __future__ import annotations

import datetime
import decimal
import json
import time
import zoneinfo
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import duckdb
import pytest
from confluent_kafka import Consumer, Producer
from jdbc_sink_helpers import (
    JSON,
    OFFSETS,
    decimal_payload,
    envelope,
    field,
    json_sink,
    query,
    stored_progress,
    struct,
    wait_for,
)

from samsa.testing import SamsaBroker
from samsa.testing.connect import ConnectWorker
from samsa.testing.postgres import PostgresServer

pytestmark = pytest.mark.timeout(240)

KEY = {"type": "int64", "optional": False}
V1 = struct(field("name", "string"), field("qty", "int32"), field("price", "double", True))


@pytest.fixture(scope="module")
def broker(tmp_path_factory: pytest.TempPathFactory) -> Iterator[SamsaBroker]:
    with SamsaBroker(tmp_path_factory.mktemp("broker")) as b:
        yield b


@pytest.fixture(scope="module")
def worker(broker: SamsaBroker, tmp_path_factory: pytest.TempPathFactory) -> Iterator[ConnectWorker]:
    with ConnectWorker(broker.bootstrap, tmp_path_factory.mktemp("worker"),
                       props={"offset.flush.interval.ms": "500"}) as w:
        yield w


def produce(bootstrap: str, topic: str, items: list[tuple[bytes | None, bytes | None]]) -> None:
    p = Producer({"bootstrap.servers": bootstrap, "linger.ms": 5})
    for k, v in items:
        p.produce(topic, key=k, value=v)
    assert p.flush(30) == 0


def keyed(key: int, value: dict[str, Any] | None, schema: dict[str, Any] = V1) -> tuple[bytes | None,
                                                                                   bytes | None]:
    return envelope(KEY, key), envelope(schema, value)


def create(w: ConnectWorker, config: dict[str, str]) -> None:
    name = config.pop("name")
    resp = w.create(name, config)
    assert resp.status_code == 201, resp.text
    w.wait_state(name)


def delete(w: ConnectWorker, name: str) -> None:
    w.http.delete(f"/connectors/{name}")
    wait_for(lambda: w.http.get(f"/connectors/{name}/status").status_code == 404, 30,
             f"{name} deleted")


def done(dsn: str, connector: str, total: int, w: ConnectWorker) -> None:
    wait_for(lambda: stored_progress(dsn, connector) >= total, 60,
             f"{connector} to store offset {total}",
             lambda: f"stored {stored_progress(dsn, connector)}\n{w.log_tail()}")


# ---- modes -------------------------------------------------------------------------------------
def test_upsert_record_key_auto_create_evolve_and_deletes(
        broker: SamsaBroker, worker: ConnectWorker, postgres_server: PostgresServer) -> None:
    dsn = postgres_server.create_database("jdbc_upsert")
    topic = "jdbc-upsert"
    v2 = struct(field("name", "string"), field("qty", "int32"), field("price", "double", True),
                field("note", "string", True), field("amount", "bytes", True,
                                                     name="org.apache.kafka.connect.data.Decimal",
                                                     parameters={"scale": "2"}),
                field("at", "int64", True, name="org.apache.kafka.connect.data.Timestamp"),
                field("small", "int8", True), field("flag", "boolean", True))
    at = datetime.datetime(2024, 5, 6, 7, 8, 9, 123000, tzinfo=datetime.UTC)
    items = [keyed(i, {"name": f"n{i}", "qty": i, "price": i * 0.5}) for i in range(10)]
    items += [keyed(3, {"name": "three", "qty": 33, "price": None}),  # an update of key 3
              keyed(4, None), keyed(99, None),                       # tombstones (99 never existed)
              keyed(5, {"name": "five", "qty": 55, "price": 5.5, "note": "evolved",
                        "amount": decimal_payload(decimal.Decimal("12.34"), 2),
                        "at": int(at.timestamp() * 1000), "small": -3, "flag": True}, v2),
              keyed(4, {"name": "back", "qty": 4, "price": None}),   # re-inserted after its delete
              keyed(6, None)]
    produce(broker.bootstrap, topic, items)
    create(worker, json_sink("jdbc-upsert", postgres_server.jdbc_url("jdbc_upsert"), topic,
                             **{"insert.mode": "upsert", "pk.mode": "record_key", "pk.fields": "id",
                                "auto.create": "true", "auto.evolve": "true",
                                "delete.enabled": "true"}))
    done(dsn, "jdbc-upsert", len(items), worker)
    rows = query(dsn, 'SELECT id, name, qty, price, note, amount, "at", small, flag FROM "jdbc-upsert" '
                      "ORDER BY id")
    want: dict[int, tuple[Any, ...]] = {i: (i, f"n{i}", i, i * 0.5, None, None, None, None, None)
                                        for i in range(10)}
    want[3] = (3, "three", 33, None, None, None, None, None, None)
    want[4] = (4, "back", 4, None, None, None, None, None, None)
    want[5] = (5, "five", 55, 5.5, "evolved", decimal.Decimal("12.34"),
               at.replace(tzinfo=None), -3, True)
    del want[6]
    assert rows == [want[k] for k in sorted(want)]
    types = dict(query(dsn, "SELECT column_name, data_type FROM information_schema.columns "
                            "WHERE table_name = 'jdbc-upsert'"))
    assert types == {"id": "bigint", "name": "text", "qty": "integer", "price": "double precision",
                     "note": "text", "amount": "numeric", "at": "timestamp without time zone",
                     "small": "smallint", "flag": "boolean"}
    pk = query(dsn, "SELECT a.attname FROM pg_index i JOIN pg_attribute a ON a.attrelid = i.indrelid "
                    "AND a.attnum = ANY(i.indkey) WHERE i.indrelid = '\"jdbc-upsert\"'::regclass "
                    "AND i.indisprimary")
    assert pk == [("id",)]
    nullable = dict(query(dsn, "SELECT column_name, is_nullable FROM information_schema.columns "
                               "WHERE table_name = 'jdbc-upsert'"))
    assert (nullable["name"], nullable["price"], nullable["note"]) == ("NO", "YES", "YES")
    # the consumer group follows the offsets stored with the rows
    c = Consumer({"bootstrap.servers": broker.bootstrap, "group.id": "connect-jdbc-upsert"})
    from confluent_kafka import TopicPartition as KTP
    committed = wait_for(lambda: [p.offset for p in c.committed([KTP(topic, 0)], timeout=10)
                                  if p.offset == len(items)], 30, "the group's committed offset")
    c.close()
    assert committed == [len(items)]
    delete(worker, "jdbc-upsert")


def test_insert_with_pk_modes_kafka_and_none(
        broker: SamsaBroker, worker: ConnectWorker, postgres_server: PostgresServer) -> None:
    dsn = postgres_server.create_database("jdbc_insert")
    topic = "jdbc-insert"
    items = [keyed(i % 3, {"name": f"n{i}", "qty": i, "price": None}) for i in range(20)]
    produce(broker.bootstrap, topic, items)
    url = postgres_server.jdbc_url("jdbc_insert")
    create(worker, json_sink("jdbc-kafka", url, topic, **{
        "pk.mode": "kafka", "auto.create": "true", "table.name.format": "kafka_${topic}",
        "fields.whitelist": "name,qty"}))
    create(worker, json_sink("jdbc-none", url, topic, **{
        "pk.mode": "none", "auto.create": "true", "table.name.format": "plain_${topic}",
        "batch.size": "7"}))
    done(dsn, "jdbc-kafka", len(items), worker)
    done(dsn, "jdbc-none", len(items), worker)
    rows = query(dsn, 'SELECT __connect_topic, __connect_partition, __connect_offset, name, qty '
                      'FROM "kafka_jdbc-insert" ORDER BY __connect_offset')
    assert rows == [(topic, 0, i, f"n{i}", i) for i in range(20)]
    cols = [r[0] for r in query(dsn, "SELECT column_name FROM information_schema.columns WHERE "
                                     "table_name = 'kafka_jdbc-insert' ORDER BY ordinal_position")]
    assert cols == ["__connect_topic", "__connect_partition", "__connect_offset", "name", "qty"]
    plain = query(dsn, 'SELECT name, qty, price FROM "plain_jdbc-insert" ORDER BY qty')
    assert plain == [(f"n{i}", i, None) for i in range(20)]
    delete(worker, "jdbc-kafka")
    delete(worker, "jdbc-none")


def test_update_mode_with_record_value_keys(
        broker: SamsaBroker, worker: ConnectWorker, postgres_server: PostgresServer) -> None:
    dsn = postgres_server.create_database("jdbc_update")
    query(dsn, 'CREATE TABLE accounts (acct TEXT, region TEXT, balance BIGINT, '
               'PRIMARY KEY (acct, region))')
    query(dsn, "INSERT INTO accounts VALUES ('a', 'eu', 1), ('b', 'eu', 2), ('a', 'us', 3)")
    schema = struct(field("acct", "string"), field("region", "string"), field("balance", "int64"))
    topic = "jdbc-update"
    items = [(None, envelope(schema, {"acct": a, "region": r, "balance": b}))
             for a, r, b in [("a", "eu", 10), ("c", "eu", 99), ("a", "us", 30), ("a", "eu", 11)]]
    produce(broker.bootstrap, topic, items)
    create(worker, json_sink("jdbc-update", postgres_server.jdbc_url("jdbc_update"), topic, **{
        "insert.mode": "update", "pk.mode": "record_value", "pk.fields": "acct,region",
        "table.name.format": "accounts", "key.converter": "org.apache.kafka.connect.storage."
                                                          "StringConverter"}))
    done(dsn, "jdbc-update", len(items), worker)
    assert query(dsn, "SELECT acct, region, balance FROM accounts ORDER BY acct, region") == \
        [("a", "eu", 11), ("a", "us", 30), ("b", "eu", 2)]  # update never inserts ('c')
    delete(worker, "jdbc-update")


def test_duckdb_target(broker: SamsaBroker, worker: ConnectWorker, tmp_path: Path) -> None:
    path = tmp_path / "sink.duckdb"
    topic = "jdbc-duck"
    items = [keyed(i % 50, {"name": f"n{i}", "qty": i, "price": i / 4}) for i in range(500)]
    items += [keyed(k, None) for k in range(0, 50, 5)]
    produce(broker.bootstrap, topic, items)
    create(worker, json_sink("jdbc-duck", f"jdbc:duckdb:{path}", topic, **{
        "insert.mode": "upsert", "pk.mode": "record_key", "pk.fields": "id",
        "auto.create": "true", "delete.enabled": "true"}))
    c = Consumer({"bootstrap.servers": broker.bootstrap, "group.id": "connect-jdbc-duck"})
    from confluent_kafka import TopicPartition as KTP
    wait_for(lambda: c.committed([KTP(topic, 0)], timeout=10)[0].offset == len(items), 60,
             "the DuckDB sink to commit everything", worker.log_tail)
    c.close()
    delete(worker, "jdbc-duck")  # the task closes the file: DuckDB allows one writer process
    with duckdb.connect(str(path), read_only=True) as con:
        rows = con.execute('SELECT id, name, qty, price FROM "jdbc-duck" ORDER BY id').fetchall()
        stored = con.execute(f'SELECT topic, "partition", next_offset FROM "{OFFSETS}"').fetchall()
        types = dict(con.execute("SELECT column_name, data_type FROM information_schema.columns "
                                 "WHERE table_name = 'jdbc-duck'").fetchall())
    want = [(k, f"n{450 + k}", 450 + k, (450 + k) / 4) for k in range(50) if k % 5]
    assert rows == want
    assert stored == [(topic, 0, len(items))]
    assert types == {"id": "BIGINT", "name": "VARCHAR", "qty": "INTEGER", "price": "DOUBLE"}


# ---- failures ----------------------------------------------------------------------------------
def test_database_down_and_back_loses_nothing(
        broker: SamsaBroker, worker: ConnectWorker, postgres_server: PostgresServer) -> None:
    """insert mode without a key: a row written twice would show as a duplicate."""
    dsn = postgres_server.create_database("jdbc_down")
    topic = "jdbc-down"
    schema = struct(field("seq", "int32"))
    create(worker, json_sink("jdbc-down", postgres_server.jdbc_url("jdbc_down"), topic, **{
        "auto.create": "true", "retry.backoff.ms": "500", "max.retries": "100"}))
    produce(broker.bootstrap, topic, [(None, envelope(schema, {"seq": i})) for i in range(200)])
    done(dsn, "jdbc-down", 200, worker)
    postgres_server.kill()
    try:
        produce(broker.bootstrap, topic, [(None, envelope(schema, {"seq": i}))
                                          for i in range(200, 400)])
        time.sleep(2)  # the task tries, fails, and waits for the retry
        st = worker.status("jdbc-down")
        assert st["tasks"][0]["state"] == "RUNNING", st
    finally:
        postgres_server.start()
    produce(broker.bootstrap, topic, [(None, envelope(schema, {"seq": i})) for i in range(400, 500)])
    done(dsn, "jdbc-down", 500, worker)
    seqs = [r[0] for r in query(dsn, 'SELECT seq FROM "jdbc-down" ORDER BY seq')]
    assert seqs == list(range(500))
    assert "retriable error" in worker.log_tail(200_000)
    delete(worker, "jdbc-down")


def test_wrong_password_fails_the_task_with_a_trace(
        worker: ConnectWorker, postgres_server: PostgresServer) -> None:
    postgres_server.create_database("jdbc_auth")
    query(postgres_server.dsn(), "DROP ROLE IF EXISTS app")
    query(postgres_server.dsn(), "CREATE ROLE app LOGIN PASSWORD 'right'")
    hba = postgres_server.data_dir / "pg_hba.conf"
    original = hba.read_text()
    hba.write_text("host all app 127.0.0.1/32 scram-sha-256\n" + original)
    query(postgres_server.dsn(), "SELECT pg_reload_conf()")
    try:
        config = json_sink("jdbc-auth", postgres_server.jdbc_url("jdbc_auth"), "jdbc-auth", **{
            "connection.user": "app", "connection.password": "not-the-s3cret",
            "connection.attempts": "1"})
        config.pop("name")
        assert worker.create("jdbc-auth", config).status_code == 201
        st = wait_for(lambda: _task_failed(worker, "jdbc-auth"), 60, "the task to fail",
                      worker.log_tail)
        trace = st["tasks"][0]["trace"]
        assert "password authentication failed" in trace and "ConnectException" in trace, trace
        assert "not-the-s3cret" not in trace
        assert st["connector"]["state"] == "RUNNING"
    finally:
        hba.write_text(original)
        query(postgres_server.dsn(), "SELECT pg_reload_conf()")
    delete(worker, "jdbc-auth")


def _task_failed(w: ConnectWorker, name: str) -> dict[str, Any] | None:
    resp = w.http.get(f"/connectors/{name}/status")
    if resp.status_code != 200:
        return None
    st = resp.json()
    return st if st["tasks"] and st["tasks"][0]["state"] == "FAILED" else None


def test_records_that_do_not_fit_go_to_the_dlq(
        broker: SamsaBroker, worker: ConnectWorker, postgres_server: PostgresServer) -> None:
    dsn = postgres_server.create_database("jdbc_dlq")
    query(dsn, "CREATE TABLE items (id BIGINT PRIMARY KEY, name TEXT NOT NULL, qty SMALLINT)")
    schema = struct(field("id", "int64"), field("name", "string", True), field("qty", "int32"))
    topic, dlq = "jdbc-dlq", "jdbc-dlq-errors"
    good = [{"id": i, "name": f"n{i}", "qty": i} for i in range(40)]
    items = [(None, envelope(schema, v)) for v in good]
    bad = [(b"null-name", envelope(schema, {"id": 100, "name": None, "qty": 1})),   # NOT NULL
           (b"too-big", envelope(schema, {"id": 101, "name": "x", "qty": 70000})),  # SMALLINT
           (b"no-struct", envelope({"type": "string"}, "just text"))]             # no Struct
    items[10:10] = bad[:1]
    items[25:25] = bad[1:2]
    items.append(bad[2])
    produce(broker.bootstrap, topic, items)
    url = postgres_server.jdbc_url("jdbc_dlq")
    create(worker, json_sink("jdbc-dlq", url, topic, **{
        "insert.mode": "upsert", "pk.mode": "record_value", "pk.fields": "id",
        "table.name.format": "items", "key.converter": "org.apache.kafka.connect.storage."
                                                       "StringConverter",
        "value.converter": JSON, "value.converter.schemas.enable": "true",
        "errors.tolerance": "all", "errors.deadletterqueue.topic.name": dlq,
        "errors.deadletterqueue.topic.replication.factor": "1",
        "errors.deadletterqueue.context.headers.enable": "true"}))
    done(dsn, "jdbc-dlq", len(items), worker)
    assert query(dsn, "SELECT id, name, qty FROM items ORDER BY id") == \
        [(v["id"], v["name"], v["qty"]) for v in good]
    c = Consumer({"bootstrap.servers": broker.bootstrap, "group.id": "jdbc-dlq-check",
                  "auto.offset.reset": "earliest"})
    c.subscribe([dlq])
    got: list[Any] = []
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline and len(got) < len(bad):
        m = c.poll(0.5)
        if m is not None and m.error() is None:
            got.append(m)
    extra = c.consume(10, 1.0)
    c.close()
    assert sorted(m.key() for m in got) == sorted(k for k, _ in bad) and not extra
    for m in got:
        assert dict(m.headers() or [])["__connect.errors.stage"] == b"TASK_PUT"
    assert worker.status("jdbc-dlq")["tasks"][0]["state"] == "RUNNING"
    delete(worker, "jdbc-dlq")
    # without errors.tolerance=all the same records fail the task
    query(dsn, "DELETE FROM items")
    create(worker, json_sink("jdbc-strict", url, topic, **{
        "insert.mode": "upsert", "pk.mode": "record_value", "pk.fields": "id",
        "table.name.format": "items", "key.converter": "org.apache.kafka.connect.storage."
                                                       "StringConverter"}))
    st = wait_for(lambda: _task_failed(worker, "jdbc-strict"), 60, "the strict task to fail",
                  worker.log_tail)
    trace = st["tasks"][0]["trace"]
    assert "violates not-null constraint" in trace or "needs records with a Struct value" in trace
    # nothing after the refused record was written (its batch rolled back)
    assert query(dsn, "SELECT count(*) FROM items WHERE id >= 10") == [(0,)]
    delete(worker, "jdbc-strict")


def test_invalid_configs_are_refused(worker: ConnectWorker) -> None:
    base = {"connector.class": "io.confluent.connect.jdbc.JdbcSinkConnector", "topics": "t",
            "connection.url": "jdbc:duckdb::memory:"}
    cases = [({"delete.enabled": "true", "pk.mode": "record_value"}, "delete.enabled"),
             ({"insert.mode": "upsert"}, "pk.mode"),
             ({"insert.mode": "merge"}, "insert.mode"),
             ({"db.timezone": "Mars/Olympus"}, "db.timezone")]
    for extra, key in cases:
        resp = worker.http.put("/connector-plugins/JdbcSinkConnector/config/validate",
                               json={**base, **extra})
        assert resp.status_code == 200, resp.text
        body = resp.json()
        errors = {c["value"]["name"]: c["value"]["errors"] for c in body["configs"]}
        assert body["error_count"] >= 1 and errors[key], (extra, errors)


AVRO_USER = {"type": "record", "name": "User", "namespace": "app", "fields": [
    {"name": "name", "type": "string"}, {"name": "age", "type": "int"},
    {"name": "email", "type": ["null", "string"], "default": None},
    {"name": "born", "type": {"type": "int", "logicalType": "date"}},
    {"name": "balance", "type": {"type": "bytes", "logicalType": "decimal", "precision": 10,
                                 "scale": 2}},
    {"name": "seen", "type": {"type": "long", "logicalType": "timestamp-millis"}}]}


def test_avro_values_through_the_registry(
        broker: SamsaBroker, worker: ConnectWorker, postgres_server: PostgresServer) -> None:
    """Records written by confluent-kafka's AvroSerializer, read by the AvroConverter in the
    worker: logical types land as DATE / DECIMAL / TIMESTAMP columns."""
    from confluent_kafka.schema_registry import SchemaRegistryClient
    from confluent_kafka.schema_registry.avro import AvroSerializer
    from confluent_kafka.serialization import MessageField, SerializationContext

    from samsa.testing.registry import InProcessRegistry

    dsn = postgres_server.create_database("jdbc_avro")
    topic = "jdbc-avro"
    seen = datetime.datetime(2024, 1, 2, 3, 4, 5, 678000, tzinfo=datetime.UTC)
    users = [{"name": f"u{i % 4}", "age": i, "email": None if i % 2 else f"u{i}@x",
              "born": datetime.date(2000, 1, 1 + i), "balance": decimal.Decimal(f"{i}.25"),
              "seen": seen} for i in range(8)]
    with InProcessRegistry(broker.bootstrap) as registry:
        ser = AvroSerializer(SchemaRegistryClient({"url": registry.url}), json.dumps(AVRO_USER))
        ctx = SerializationContext(topic, MessageField.VALUE)
        produce(broker.bootstrap, topic, [(None, ser(u, ctx)) for u in users])
        create(worker, json_sink("jdbc-avro", postgres_server.jdbc_url("jdbc_avro"), topic, **{
            "insert.mode": "upsert", "pk.mode": "record_value", "pk.fields": "name",
            "auto.create": "true", "db.timezone": "Europe/Paris",
            "key.converter": "org.apache.kafka.connect.storage.StringConverter",
            "value.converter": "io.confluent.connect.avro.AvroConverter",
            "value.converter.schema.registry.url": registry.url}))
        done(dsn, "jdbc-avro", len(users), worker)
    rows = query(dsn, 'SELECT name, age, email, born, balance, seen FROM "jdbc-avro" ORDER BY name')
    paris = seen.astimezone(zoneinfo.ZoneInfo("Europe/Paris")).replace(tzinfo=None)
    assert rows == [(u["name"], u["age"], u["email"], u["born"], u["balance"], paris)
                    for u in users[4:]]
    types = dict(query(dsn, "SELECT column_name, data_type FROM information_schema.columns "
                            "WHERE table_name = 'jdbc-avro'"))
    assert types == {"name": "text", "age": "integer", "email": "text", "born": "date",
                     "balance": "numeric", "seen": "timestamp without time zone"}
    delete(worker, "jdbc-avro")


# ---- offsets edited through the REST API (KIP-875) ---------------------------------------------
def test_offsets_edited_through_rest_move_the_database_offsets(
        broker: SamsaBroker, worker: ConnectWorker, postgres_server: PostgresServer) -> None:
    """The offsets in the database win on the next assignment, so PATCH/DELETE of a stopped sink's
    offsets must change them there (the runtime asks the connector, as Kafka does)."""
    dsn = postgres_server.create_database("jdbc_alter")
    topic, name = "jdbc-alter", "jdbc-alter"
    produce(broker.bootstrap, topic, [keyed(i, {"name": f"n{i}", "qty": i, "price": None})
                                      for i in range(10)])
    create(worker, json_sink(name, postgres_server.jdbc_url("jdbc_alter"), topic, **{
        "insert.mode": "insert", "pk.mode": "none", "auto.create": "true"}))
    done(dsn, name, 10, worker)
    assert worker.http.put(f"/connectors/{name}/stop").status_code == 204
    wait_for(lambda: worker.status(name)["connector"]["state"] == "STOPPED", 30, "stopped")
    resp = worker.http.patch(f"/connectors/{name}/offsets", json={"offsets": [
        {"partition": {"kafka_topic": topic, "kafka_partition": 0}, "offset": {"kafka_offset": 4}}]})
    assert resp.status_code == 200, resp.text
    assert query(dsn, f'SELECT next_offset FROM "{OFFSETS}" WHERE connector = %s', [name]) == [(4,)]
    assert worker.http.put(f"/connectors/{name}/resume").status_code == 202
    # records 4..9 are written again (insert mode, no key): 16 rows, the stored offset back at 10
    wait_for(lambda: query(dsn, f'SELECT count(*) FROM "{topic}"') == [(16,)], 60, "re-delivery",
             worker.log_tail)
    done(dsn, name, 10, worker)
    assert worker.http.put(f"/connectors/{name}/stop").status_code == 204
    wait_for(lambda: worker.status(name)["connector"]["state"] == "STOPPED", 30, "stopped")
    resp = worker.http.delete(f"/connectors/{name}/offsets")
    assert resp.status_code == 200, resp.text
    assert query(dsn, f'SELECT count(*) FROM "{OFFSETS}" WHERE connector = %s', [name]) == [(0,)]
    delete(worker, name)
