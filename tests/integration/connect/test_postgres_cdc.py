"""The Debezium-compatible PostgreSQL CDC source against a real PostgreSQL (pgoutput logical
replication), a real broker and a real Connect worker process: Debezium's envelope and schemas
as JsonConverter writes them, snapshot + streaming, types, filters, transaction metadata,
heartbeats moving the slot, and the errors a user must see in /status."""

from __future__ import annotations

import base64
import decimal
from collections.abc import Iterator
from typing import Any

import pytest

from samsa.testing import SamsaBroker
from samsa.testing.connect import ConnectWorker
from samsa.testing.postgres import PostgresServer
from tests.postgres_cdc_util import cdc_config, confirmed_lsn, read_topic, sql, wait_for, wait_slot_active


@pytest.fixture(scope="module")
def broker(tmp_path_factory: pytest.TempPathFactory) -> Iterator[SamsaBroker]:
    with SamsaBroker(tmp_path_factory.mktemp("broker")) as b:
        yield b


@pytest.fixture(scope="module")
def worker(broker: SamsaBroker, tmp_path_factory: pytest.TempPathFactory) -> Iterator[ConnectWorker]:
    with ConnectWorker(broker.bootstrap, tmp_path_factory.mktemp("worker")) as w:
        yield w


def payloads(records: list[tuple[Any, Any]]) -> list[tuple[Any, Any]]:
    return [(k["payload"] if k else None, v["payload"] if v else None) for k, v in records]


def test_envelope_snapshot_create_update_delete_tombstone(postgres_server: PostgresServer,
                                                          broker: SamsaBroker,
                                                          worker: ConnectWorker) -> None:
    pg, db = postgres_server, "cdc_envelope"
    pg.create_database(db)
    sql(pg, db, "CREATE TABLE customers (id int PRIMARY KEY, name text NOT NULL, note text)",
        "INSERT INTO customers VALUES (1, 'ann', 'first'), (2, 'bob', NULL)")
    r = worker.create("env", cdc_config(pg, db, "env", **{"skipped.operations": "none"}))
    assert r.status_code == 201, r.text
    worker.wait_state("env", "RUNNING", tasks=1)
    wait_slot_active(pg, db, "slot_env")
    snap = read_topic(broker.bootstrap, "env.public.customers", min_count=2)
    assert len(snap) == 2
    (k1, v1), (k2, v2) = snap
    # Debezium's schema names and shapes, as JsonConverter writes them
    assert k1["schema"]["name"] == "env.public.customers.Key"
    assert k1["schema"]["fields"] == [{"type": "int32", "optional": False, "field": "id"}]
    assert v1["schema"]["name"] == "env.public.customers.Envelope"
    fields = {f["field"]: f for f in v1["schema"]["fields"]}
    assert list(fields)[:5] == ["before", "after", "source", "transaction", "op"]
    assert fields["before"]["name"] == "env.public.customers.Value"
    assert fields["before"]["optional"] is True
    assert fields["source"]["name"] == "io.debezium.connector.postgresql.Source"
    assert [f["field"] for f in fields["after"]["fields"]] == ["id", "name", "note"]
    assert {f["field"]: f["optional"] for f in fields["after"]["fields"]} == \
        {"id": False, "name": False, "note": True}
    p1, p2 = v1["payload"], v2["payload"]
    assert k1["payload"] == {"id": 1} and k2["payload"] == {"id": 2}
    assert p1["op"] == "r" and p1["before"] is None
    assert p1["after"] == {"id": 1, "name": "ann", "note": "first"}
    assert p1["source"]["snapshot"] == "true" and p2["source"]["snapshot"] == "last"
    assert p1["source"]["connector"] == "postgresql" and p1["source"]["name"] == "env"
    assert p1["source"]["db"] == db and p1["source"]["schema"] == "public"
    assert p1["source"]["table"] == "customers" and isinstance(p1["source"]["lsn"], int)
    assert isinstance(p1["ts_ms"], int)

    sql(pg, db, "INSERT INTO customers VALUES (3, 'cy', 'x')",
        "UPDATE customers SET name = 'ann2' WHERE id = 1",
        "DELETE FROM customers WHERE id = 2")
    got = payloads(read_topic(broker.bootstrap, "env.public.customers", min_count=6))
    assert len(got) == 6, got
    (kc, c), (ku, u), (kd, d), (kt, t) = got[2:]
    assert kc == {"id": 3} and c["op"] == "c" and c["after"] == {"id": 3, "name": "cy", "note": "x"}
    assert c["before"] is None and c["source"]["snapshot"] == "false"
    assert isinstance(c["source"]["txId"], int) and c["source"]["lsn"] >= p2["source"]["lsn"]
    assert ku == {"id": 1} and u["op"] == "u" and u["after"]["name"] == "ann2"
    assert u["before"] is None  # REPLICA IDENTITY DEFAULT: no old row image
    # delete: before holds the key (other required columns get Debezium's fallback values)
    assert kd == {"id": 2} and d["op"] == "d" and d["after"] is None
    assert d["before"] == {"id": 2, "name": "", "note": None}
    assert kt == {"id": 2} and t is None  # the tombstone

    # REPLICA IDENTITY FULL: updates and deletes carry the whole old row
    sql(pg, db, "ALTER TABLE customers REPLICA IDENTITY FULL",
        "UPDATE customers SET note = 'n' WHERE id = 3", "DELETE FROM customers WHERE id = 1")
    got = payloads(read_topic(broker.bootstrap, "env.public.customers", min_count=9))
    (_, u2), (_, d2), (_, t2) = got[6:9]
    assert u2["before"] == {"id": 3, "name": "cy", "note": "x"}
    assert u2["after"] == {"id": 3, "name": "cy", "note": "n"}
    assert d2["before"] == {"id": 1, "name": "ann2", "note": "first"} and t2 is None

    # a primary key change: delete + tombstone of the old key, create of the new one;
    # TRUNCATE is an op "t" event when skipped.operations does not skip it
    sql(pg, db, "UPDATE customers SET id = 30 WHERE id = 3", "TRUNCATE customers")
    got = payloads(read_topic(broker.bootstrap, "env.public.customers", min_count=13))
    assert [(k, v["op"] if v else None) for k, v in got[9:]] == \
        [({"id": 3}, "d"), ({"id": 3}, None), ({"id": 30}, "c"), (None, "t")]
    assert got[11][1]["after"] == {"id": 30, "name": "cy", "note": "n"}
    assert got[12][1]["before"] is None and got[12][1]["after"] is None
    worker.http.delete("/connectors/env")


def _b64(data: bytes) -> str:
    return base64.b64encode(data).decode()


def _unscaled(d: decimal.Decimal, scale: int) -> str:
    n = int(d.scaleb(scale))
    return _b64(n.to_bytes((n.bit_length() + 8) // 8, "big", signed=True))


def test_types_mapped_like_debezium(postgres_server: PostgresServer, broker: SamsaBroker,
                                    worker: ConnectWorker) -> None:
    pg, db = postgres_server, "cdc_types"
    pg.create_database(db)
    sql(pg, db, "CREATE TYPE mood AS ENUM ('sad', 'ok', 'happy')",
        """CREATE TABLE t (id int PRIMARY KEY, i2 int2, i8 int8, price numeric(10,2),
           anynum numeric, f8 float8, flag bool, label varchar(10), body text,
           tstz timestamptz, ts timestamp, d date, j json, jb jsonb, ints int[], words text[],
           u uuid, raw bytea, m mood)""")
    row = ("(1, 7, 9000000000, 12345.67, 1.234, 2.5, true, 'lbl', 'hello', "
           "'2024-01-02 03:04:05.123456+02', '2024-01-02 03:04:05.5', '2024-01-02', "
           "'{\"a\": 1}', '{\"b\": [1, 2]}', '{1,2,NULL}', '{\"a b\",c}', "
           "'a0eebc99-9c0b-4ef8-bb6d-6bb9bd380a11', '\\x0102ff', 'happy')")
    sql(pg, db, f"INSERT INTO t VALUES {row}")
    assert worker.create("types", cdc_config(pg, db, "types")).status_code == 201
    worker.wait_state("types", "RUNNING", tasks=1)
    wait_slot_active(pg, db, "slot_types")
    sql(pg, db, f"INSERT INTO t VALUES {row.replace('(1,', '(2,', 1)}")
    records = read_topic(broker.bootstrap, "types.public.t", min_count=2)
    assert [v["payload"]["op"] for _, v in records] == ["r", "c"]
    schema = next(f for f in records[0][1]["schema"]["fields"] if f["field"] == "after")
    fields = {f["field"]: f for f in schema["fields"]}

    def shape(name: str) -> tuple[Any, ...]:
        f = fields[name]
        return (f["type"], f.get("name"), f.get("parameters"))

    assert shape("i2") == ("int16", None, None)
    assert shape("i8") == ("int64", None, None)
    assert shape("price") == ("bytes", "org.apache.kafka.connect.data.Decimal",
                              {"scale": "2", "connect.decimal.precision": "10"})
    assert shape("anynum")[:2] == ("struct", "io.debezium.data.VariableScaleDecimal")
    assert shape("f8") == ("double", None, None)
    assert shape("flag") == ("boolean", None, None)
    assert shape("label") == ("string", None, None)
    assert shape("tstz") == ("string", "io.debezium.time.ZonedTimestamp", None)
    assert shape("ts") == ("int64", "io.debezium.time.MicroTimestamp", None)
    assert shape("d") == ("int32", "io.debezium.time.Date", None)
    assert shape("j") == ("string", "io.debezium.data.Json", None)
    assert shape("jb") == ("string", "io.debezium.data.Json", None)
    assert fields["ints"]["type"] == "array" and fields["ints"]["items"]["type"] == "int32"
    assert fields["words"]["items"]["type"] == "string"
    assert shape("u") == ("string", "io.debezium.data.Uuid", None)
    assert shape("raw") == ("bytes", None, None)
    assert shape("m") == ("string", "io.debezium.data.Enum", {"allowed": "sad,ok,happy"})
    expected = {
        "i2": 7, "i8": 9000000000, "price": _unscaled(decimal.Decimal("12345.67"), 2),
        "anynum": {"scale": 3, "value": _unscaled(decimal.Decimal("1.234"), 3)},
        "f8": 2.5, "flag": True, "label": "lbl", "body": "hello",
        "tstz": "2024-01-02T01:04:05.123456Z",
        "ts": 1704164645_500000, "d": 19724, "j": '{"a": 1}', "jb": '{"b": [1, 2]}',
        "ints": [1, 2, None], "words": ["a b", "c"],
        "u": "a0eebc99-9c0b-4ef8-bb6d-6bb9bd380a11", "raw": _b64(b"\x01\x02\xff"), "m": "happy"}
    for (_, value), want_id in zip(records, (1, 2), strict=True):
        after = value["payload"]["after"]
        assert after == {"id": want_id, **expected}, after  # snapshot and stream agree
    worker.http.delete("/connectors/types")


def test_decimal_handling_modes(postgres_server: PostgresServer, broker: SamsaBroker,
                                worker: ConnectWorker) -> None:
    pg, db = postgres_server, "cdc_decimal"
    pg.create_database(db)
    sql(pg, db, "CREATE TABLE n (id int PRIMARY KEY, price numeric(8,3))",
        "INSERT INTO n VALUES (1, 2.125)")
    for mode, want_type, want in (("double", "double", 2.125), ("string", "string", "2.125")):
        prefix = f"dec{mode}"
        assert worker.create(prefix, cdc_config(pg, db, prefix, **{
            "decimal.handling.mode": mode})).status_code == 201
        (_, v), = read_topic(broker.bootstrap, f"{prefix}.public.n", min_count=1)
        after = next(f for f in v["schema"]["fields"] if f["field"] == "after")
        assert next(f for f in after["fields"] if f["field"] == "price")["type"] == want_type
        assert v["payload"]["after"]["price"] == want
        worker.http.delete(f"/connectors/{prefix}")


def test_include_and_exclude_lists(postgres_server: PostgresServer, broker: SamsaBroker,
                                   worker: ConnectWorker) -> None:
    pg, db = postgres_server, "cdc_filters"
    pg.create_database(db)
    sql(pg, db, "CREATE SCHEMA other", "CREATE TABLE a (id int PRIMARY KEY)",
        "CREATE TABLE b (id int PRIMARY KEY)", "CREATE TABLE other.c (id int PRIMARY KEY)",
        "INSERT INTO a VALUES (1)", "INSERT INTO b VALUES (1)", "INSERT INTO other.c VALUES (1)")
    assert worker.create("incl", cdc_config(pg, db, "incl", **{
        "table.include.list": r"public\.a,other\..*"})).status_code == 201
    assert worker.create("excl", cdc_config(pg, db, "excl", **{
        "table.exclude.list": r"public\.b", "publication.autocreate.mode": "filtered"})
    ).status_code == 201
    worker.wait_state("incl", "RUNNING", tasks=1)
    worker.wait_state("excl", "RUNNING", tasks=1)
    wait_slot_active(pg, db, "slot_incl", "slot_excl")
    sql(pg, db, "INSERT INTO a VALUES (2)", "INSERT INTO b VALUES (2)",
        "INSERT INTO other.c VALUES (2)")
    for prefix in ("incl", "excl"):
        for table in ("public.a", "other.c"):
            got = read_topic(broker.bootstrap, f"{prefix}.{table}", min_count=2)
            assert [v["payload"]["op"] for _, v in got] == ["r", "c"], (prefix, table)
        assert read_topic(broker.bootstrap, f"{prefix}.public.b", timeout=2) == []
    # filtered: the publication lists only the captured tables
    published = sql(pg, db, "SELECT schemaname || '.' || tablename FROM pg_publication_tables "
                            "WHERE pubname = 'pub_excl' ORDER BY 1")
    assert [r[0] for r in published] == ["other.c", "public.a"]
    for name in ("incl", "excl"):
        worker.http.delete(f"/connectors/{name}")


def test_snapshot_modes(postgres_server: PostgresServer, broker: SamsaBroker,
                        worker: ConnectWorker) -> None:
    pg, db = postgres_server, "cdc_modes"
    pg.create_database(db)
    sql(pg, db, "CREATE TABLE s (id int PRIMARY KEY)", "INSERT INTO s VALUES (1), (2)")
    modes = {"only": "initial_only", "never": "never", "nodata": "no_data", "old": "schema_only"}
    for prefix, mode in modes.items():
        r = worker.create(prefix, cdc_config(pg, db, prefix, **{"snapshot.mode": mode}))
        assert r.status_code == 201, r.text
        worker.wait_state(prefix, "RUNNING", tasks=1)
    wait_slot_active(pg, db, "slot_never", "slot_nodata", "slot_old")
    sql(pg, db, "INSERT INTO s VALUES (3)")
    ops = {p: [(k["payload"]["id"], v["payload"]["op"]) for k, v in
               read_topic(broker.bootstrap, f"{p}.public.s", min_count=1, timeout=10)]
           for p in modes}
    assert ops["only"] == [(1, "r"), (2, "r")]  # a snapshot, then no streaming
    assert ops["never"] == ops["nodata"] == ops["old"] == [(3, "c")]
    assert not sql(pg, db, "SELECT 1 FROM pg_replication_slots WHERE slot_name = 'slot_only'")
    for p in modes:
        worker.http.delete(f"/connectors/{p}")


def test_transaction_metadata(postgres_server: PostgresServer, broker: SamsaBroker,
                              worker: ConnectWorker) -> None:
    pg, db = postgres_server, "cdc_txn"
    pg.create_database(db)
    sql(pg, db, "CREATE TABLE x (id int PRIMARY KEY)", "CREATE TABLE y (id int PRIMARY KEY)")
    assert worker.create("txm", cdc_config(pg, db, "txm", **{
        "provide.transaction.metadata": "true", "snapshot.mode": "never"})).status_code == 201
    worker.wait_state("txm", "RUNNING", tasks=1)
    wait_slot_active(pg, db, "slot_txm")
    with __import__("psycopg").connect(pg.dsn(db)) as conn:
        conn.execute("INSERT INTO x VALUES (1), (2)")
        conn.execute("INSERT INTO y VALUES (1)")
    meta = read_topic(broker.bootstrap, "txm.transaction", min_count=2)
    (bk, begin), (ek, end) = [(k["payload"], v["payload"]) for k, v in meta]
    assert begin["status"] == "BEGIN" and end["status"] == "END"
    assert bk == ek == {"id": begin["id"]} and end["id"] == begin["id"]
    assert end["event_count"] == 3
    assert sorted((c["data_collection"], c["event_count"]) for c in end["data_collections"]) == \
        [("public.x", 2), ("public.y", 1)]
    xs = read_topic(broker.bootstrap, "txm.public.x", min_count=2)
    ys = read_topic(broker.bootstrap, "txm.public.y", min_count=1)
    blocks = [v["payload"]["transaction"] for _, v in xs + ys]
    assert [(b["id"], b["total_order"], b["data_collection_order"]) for b in blocks] == \
        [(begin["id"], 1, 1), (begin["id"], 2, 2), (begin["id"], 3, 1)]
    worker.http.delete("/connectors/txm")


def test_heartbeats_advance_the_slot_while_tables_are_idle(
        postgres_server: PostgresServer, broker: SamsaBroker, worker: ConnectWorker) -> None:
    """WAL that no captured table writes (logical messages here) must not pile up behind the
    slot: heartbeat records carry the server's WAL position as their offset, and once they are
    committed the slot's confirmed_flush_lsn moves past that WAL."""
    pg, db = postgres_server, "cdc_heartbeat"
    pg.create_database(db)
    sql(pg, db, "CREATE TABLE h (id int PRIMARY KEY)")
    assert worker.create("hb", cdc_config(pg, db, "hb", **{
        "heartbeat.interval.ms": "300", "snapshot.mode": "never"})).status_code == 201
    worker.wait_state("hb", "RUNNING", tasks=1)
    wait_slot_active(pg, db, "slot_hb")
    start = confirmed_lsn(pg, db, "slot_hb")
    assert start is not None
    for _ in range(3):
        sql(pg, db, "SELECT pg_logical_emit_message(false, 'noise', repeat('x', 10000))")
    target = int(sql(pg, db, "SELECT pg_current_wal_lsn() - '0/0'")[0][0])
    assert target > start + 20_000
    wait_for(lambda: (confirmed_lsn(pg, db, "slot_hb") or 0) >= target, timeout=30)
    beats = read_topic(broker.bootstrap, "__debezium-heartbeat.hb", min_count=2,
                       stop_at=2)
    assert len(beats) >= 2
    assert beats[0][0]["payload"] == {"serverName": "hb"}
    assert beats[0][0]["schema"]["name"] == "io.debezium.connector.common.ServerNameKey"
    assert beats[0][1]["schema"]["name"] == "io.debezium.connector.common.Heartbeat"
    assert isinstance(beats[0][1]["payload"]["ts_ms"], int)
    # the captured table is still captured after all that
    sql(pg, db, "INSERT INTO h VALUES (1)")
    assert [v["payload"]["op"] for _, v in
            read_topic(broker.bootstrap, "hb.public.h", min_count=1)] == ["c"]
    worker.http.delete("/connectors/hb")


def test_snapshot_and_stream_meet_exactly_under_concurrent_writes(
        postgres_server: PostgresServer, broker: SamsaBroker, worker: ConnectWorker) -> None:
    """Writes that run while the initial snapshot is being read are either in the snapshot (the
    slot's exported snapshot saw them) or streamed after it, never both or neither: replaying
    the topic gives PostgreSQL's table."""
    import threading

    import psycopg

    pg, db = postgres_server, "cdc_concurrent"
    pg.create_database(db)
    sql(pg, db, "CREATE TABLE c (id int PRIMARY KEY, v int NOT NULL)",
        "INSERT INTO c SELECT g, 0 FROM generate_series(1, 20000) g")
    stop = threading.Event()
    writes = [0]

    def write() -> None:
        with psycopg.connect(pg.dsn(db), autocommit=True) as conn:
            i = 0
            while not stop.is_set() and i < 2000:
                i += 1
                conn.execute("UPDATE c SET v = v + 1 WHERE id = %s", (i * 7 % 20000 + 1,))
                conn.execute("INSERT INTO c VALUES (%s, %s)", (100_000 + i, i))
                conn.execute("DELETE FROM c WHERE id = %s", (i * 13 % 20000 + 1,))
                writes[0] = i

    writer = threading.Thread(target=write, daemon=True)
    writer.start()
    try:
        assert worker.create("conc", cdc_config(pg, db, "conc", **{
            "max.batch.size": "500"})).status_code == 201
        worker.wait_state("conc", "RUNNING", tasks=1)
        writer.join(60)  # 2,000 rounds of writes, running across slot creation and snapshot
    finally:
        stop.set()
        writer.join(60)
    assert writes[0] == 2000
    expected = {r[0]: r[1] for r in sql(pg, db, "SELECT id, v FROM c")}
    records = read_topic(broker.bootstrap, "conc.public.c", min_count=20000, timeout=60)
    table: dict[int, int] = {}
    for key, value in records:
        if value is None:
            continue
        p = value["payload"]
        if p["op"] == "d":
            table.pop(key["payload"]["id"], None)
        else:
            table[p["after"]["id"]] = p["after"]["v"]
    assert any(v and v["payload"]["op"] != "r" for _, v in records)  # some were streamed
    assert table == expected
    worker.http.delete("/connectors/conc")
