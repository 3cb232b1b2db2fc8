"""The Snowflake-shaped sink's parts on their own: Snowflake's table naming, config validation,
Connect values -> RECORD_METADATA/RECORD_CONTENT JSON, and the task against a real DuckDB file
(buffer thresholds, rows + offsets in one transaction, rewind on open, the offset check that
stops a second writer)."""

from __future__ import annotations

import datetime
import decimal
import json
from pathlib import Path
from typing import Any

import duckdb
import pytest
from connectors_ctx import SinkContext

from samsa.connect.api import TopicPartition
from samsa.connect.connectors.snowflake.config import parse_settings, problems, warehouse_url
from samsa.connect.connectors.snowflake.naming import (
    java_string_hash,
    parse_topic2table,
    table_name,
)
from samsa.connect.connectors.snowflake.records import MetadataFlags, record_row
from samsa.connect.connectors.snowflake_sink import SnowflakeSinkConnector, SnowflakeSinkTask
from samsa.connect.data import (
    BYTES_SCHEMA,
    FLOAT64_SCHEMA,
    INT32_SCHEMA,
    STRING_SCHEMA,
    Headers,
    SinkRecord,
    Struct,
    TimestampType,
    array_schema,
    date_schema,
    decimal_schema,
    map_schema,
    struct_schema,
    time_schema,
    timestamp_schema,
)
from samsa.connect.errors import ConfigException, DataException

SEED = {"connector.class": "com.snowflake.kafka.connector.SnowflakeSinkConnector",
        "topics": "order-events", "snowflake.url.name": "duckdb:///tmp/x.duckdb",
        "snowflake.user.name": "SVC_KAFKA_CONNECTOR", "snowflake.private.key": "...",
        "snowflake.database.name": "STREAMING", "snowflake.schema.name": "PUBLIC",
        "buffer.count.records": "10000", "buffer.flush.time": "60",
        "key.converter": "org.apache.kafka.connect.storage.StringConverter",
        "value.converter": "io.confluent.connect.avro.AvroConverter"}


# ---- naming -----------------------------------------------------------------------------------
def test_java_hash_and_snowflake_table_names() -> None:
    assert java_string_hash("hello") == 99162322  # Java's "hello".hashCode()
    assert java_string_hash("polygenelubricants") == -(1 << 31)  # Integer.MIN_VALUE
    assert table_name("orders") == "orders"  # a valid identifier is kept
    assert table_name("order-events") == "order_events_782987144"
    assert table_name("1abc") == "_1abc_1556113"  # leading digit: '_' prefixed, digit kept
    assert table_name("a") == f"a_{java_string_hash('a')}"  # one character is not an identifier
    assert table_name("order-events", {"order-events": "ORDERS"}) == "ORDERS"
    assert table_name("app.user-events", {"REGEX_MATCHER>^app\\.(.*)-events$": "T_$1"}) == "T_user"


def test_topic2table_map_format() -> None:
    assert parse_topic2table("a:T1, b : db.sch.T2") == {"a": "T1", "b": "db.sch.T2"}
    for bad in ("a", "a:T1,a:T2", "a:1bad", "a:b:c", ":T"):
        with pytest.raises(ConfigException):
            parse_topic2table(bad)


# ---- config --------------------------------------------------------------------------------
def test_seed_config_is_valid_once_the_url_is_local() -> None:
    assert "snowflake.url.name" in problems(SEED | {"snowflake.url.name": "acct.snowflakecomputing.com"})
    s = parse_settings(SEED)
    assert (s.buffer_count, s.buffer_flush_s, s.buffer_bytes) == (10000, 60, 5000000)
    assert s.ingestion == "SNOWPIPE" and s.is_duckdb and s.schema == "PUBLIC"
    defaults = parse_settings({k: v for k, v in SEED.items() if not k.startswith("buffer.")})
    assert (defaults.buffer_count, defaults.buffer_flush_s, defaults.buffer_bytes) == \
        (10000, 120, 5000000)


@pytest.mark.parametrize("change,key", [
    ({"buffer.flush.time": "5"}, "buffer.flush.time"),  # SNOWPIPE: at least 10 s
    ({"snowflake.ingestion.method": "SNOWPIPE_STREAMING"}, "snowflake.role.name"),
    ({"snowflake.ingestion.method": "KAFKA"}, "snowflake.ingestion.method"),
    ({"snowflake.enable.schematization": "true"}, "snowflake.enable.schematization"),
    ({"snowflake.topic2table.map": "x"}, "snowflake.topic2table.map"),
    ({"snowflake.schema.name": ""}, "snowflake.schema.name"),
    ({"buffer.count.records": "0"}, "buffer.count.records"),
    ({"snowflake.url.name": "mysql://h/db"}, "snowflake.url.name"),
])
def test_invalid_settings_are_named(change: dict[str, str], key: str) -> None:
    props = SEED | change
    assert key in problems(props)
    values = SnowflakeSinkConnector().validate(props)
    assert values[key].errors
    with pytest.raises(ConfigException):
        parse_settings(props)


def test_streaming_allows_one_second_flushes() -> None:
    s = parse_settings(SEED | {"snowflake.ingestion.method": "snowpipe_streaming",
                               "snowflake.role.name": "R", "buffer.flush.time": "1"})
    assert s.ingestion == "SNOWPIPE_STREAMING" and s.buffer_flush_s == 1


def test_warehouse_urls() -> None:
    assert warehouse_url("/data/w.duckdb", "DB") == "duckdb:/data/w.duckdb"
    assert warehouse_url("duckdb:///data/w.duckdb", "DB") == "duckdb:///data/w.duckdb"
    assert warehouse_url("postgresql://u@h:5/", "STREAMING") == "postgresql://u@h:5/streaming"
    assert warehouse_url("jdbc:postgresql://h:5", "STREAMING") == "jdbc:postgresql://h:5/streaming"
    assert warehouse_url("postgresql://h:5/mine", "STREAMING") == "postgresql://h:5/mine"


# ---- records -> JSON -------------------------------------------------------------------------
LINE = struct_schema([("sku", STRING_SCHEMA), ("qty", INT32_SCHEMA)], name="Line")
ORDER = struct_schema([
    ("id", STRING_SCHEMA), ("total", decimal_schema(2)), ("price", FLOAT64_SCHEMA),
    ("day", date_schema()), ("at", time_schema()), ("ts", timestamp_schema()),
    ("raw", BYTES_SCHEMA), ("lines", array_schema(LINE)),
    ("tags", map_schema(STRING_SCHEMA, INT32_SCHEMA)),
    ("by_num", map_schema(INT32_SCHEMA, STRING_SCHEMA))], name="Order")


def sink_record(value: Any, schema: Any = None, *, key: Any = "k1", offset: int = 7,
                topic: str = "orders", partition: int = 2, headers: Headers | None = None) -> SinkRecord:
    return SinkRecord(topic, partition, STRING_SCHEMA if key is not None else None, key, schema,
                      value, 1700000000123, headers or Headers(), kafka_offset=offset,
                      timestamp_type=TimestampType.CREATE_TIME)


def test_connect_values_as_snowflake_writes_them() -> None:
    value = Struct(ORDER, {
        "id": "o1", "total": decimal.Decimal("12.50"), "price": 0.1,
        "day": datetime.date(2024, 5, 6), "at": datetime.time(7, 8, 9, 10000),
        "ts": datetime.datetime(2024, 5, 6, 7, 8, 9, 123000, tzinfo=datetime.UTC),
        "raw": b"\x00\x01", "lines": [Struct(LINE, {"sku": "s", "qty": 2})],
        "tags": {"a": 1}, "by_num": {1: "x"}})
    row = record_row(sink_record(value, ORDER, headers=Headers().add("src", "web")),
                     MetadataFlags(), value_schema_id=42)
    assert '"total":12.50' in row.content  # a JSON number, not text, not a rounded float
    assert json.loads(row.content) == {
        "id": "o1", "total": 12.5, "price": 0.1, "day": "2024-05-06T00:00:00.000Z",
        "at": "07:08:09.010+0000", "ts": 1714979289123, "raw": "AAE=",
        "lines": [{"sku": "s", "qty": 2}], "tags": {"a": 1}, "by_num": [[1, "x"]]}
    assert json.loads(row.metadata) == {"offset": 7, "partition": 2, "topic": "orders",
                                        "CreateTime": 1700000000123, "schema_id": 42,
                                        "key": "k1", "headers": {"src": "web"}}


def test_metadata_flags_tombstones_and_nan() -> None:
    r = sink_record(None, key=None)
    assert record_row(r, MetadataFlags()).content == "{}"
    assert json.loads(record_row(r, MetadataFlags(topic=False, createtime=False)).metadata) == \
        {"offset": 7, "partition": 2}
    assert record_row(r, MetadataFlags(all=False)).metadata == "{}"
    with pytest.raises(DataException, match="no JSON form"):
        record_row(sink_record({"x": float("nan")}), MetadataFlags())
    schemaless = record_row(sink_record({"a": [1, {"b": decimal.Decimal("1.5")}]}), MetadataFlags())
    assert schemaless.content == '{"a":[1,{"b":1.5}]}'


# ---- the task against a real DuckDB file --------------------------------------------------------
class RecordingContext(SinkContext):
    def __init__(self, configs: dict[str, str]) -> None:
        super().__init__(configs)
        self.rewinds: list[dict[TopicPartition, int]] = []

    def offset(self, offsets: dict[TopicPartition, int]) -> None:
        self.rewinds.append(dict(offsets))


def started_task(db: Path, **extra: str) -> tuple[SnowflakeSinkTask, RecordingContext]:
    props = SEED | {"name": "sf", "snowflake.url.name": str(db), "buffer.count.records": "5",
                    "value.converter": "org.apache.kafka.connect.json.JsonConverter"} | extra
    task = SnowflakeSinkTask()
    ctx = RecordingContext(props)
    task.initialize(ctx)
    task.start(props)
    return task, ctx


def rows(db: Path) -> list[tuple[int, int]]:
    with duckdb.connect(str(db), read_only=True) as conn:
        got = conn.execute("SELECT record_metadata->>'partition', record_content->>'i' "
                           "FROM public.orders").fetchall()
    return sorted((int(p), int(i)) for p, i in got)


def batch(offsets: range, partition: int = 0) -> list[SinkRecord]:
    return [sink_record({"i": o}, offset=o, partition=partition) for o in offsets]


def test_task_buffers_writes_and_resumes_exactly_once(tmp_path: Path) -> None:
    db = tmp_path / "w.duckdb"
    tp = TopicPartition("orders", 0)
    task, ctx = started_task(db)
    task.open([tp])
    task.put(batch(range(0, 4)))
    assert task.pre_commit({tp: 4}) == {}  # nothing in the warehouse yet: nothing to commit
    task.put(batch(range(4, 6)))  # 6 >= buffer.count.records (5): one flush
    assert rows(db) == [(0, i) for i in range(6)]
    assert task.pre_commit({tp: 6}) == {tp: 6}
    task.put(batch(range(6, 8)))  # buffered only, then the task dies
    task.stop()

    again, ctx2 = started_task(db)
    again.open([tp])
    assert ctx2.rewinds == [{tp: 6}]  # resumes from the warehouse's offset
    again.put(batch(range(3, 12)))  # the consumer replays from an older group offset
    assert rows(db) == [(0, i) for i in range(12)]  # 3..5 skipped, no duplicate
    again.stop()


def test_ignored_tombstones_still_move_the_offsets(tmp_path: Path) -> None:
    db = tmp_path / "n.duckdb"
    tp = TopicPartition("orders", 0)
    task, _ = started_task(db, **{"behavior.on.null.values": "IGNORE"})
    task.open([tp])
    task.put([sink_record(None, offset=o, partition=0) for o in range(10)])  # all skipped...
    task.flush({tp: 10})
    assert task.pre_commit({tp: 10}) == {tp: 10}  # ...but their offsets are stored
    task.stop()
    with duckdb.connect(str(db), read_only=True) as conn:
        assert conn.execute("SELECT count(*) FROM information_schema.tables "
                            "WHERE table_name = 'orders'").fetchone() == (0,)


def test_a_second_writer_is_fenced_by_the_stored_offsets(tmp_path: Path) -> None:
    """Two tasks believe they own partition 0 (a zombie after a rebalance): the one that flushes
    second finds the stored offset moved, writes nothing, and rewinds to it."""
    db = tmp_path / "z.duckdb"
    tp = TopicPartition("orders", 0)
    a, _ = started_task(db)
    b, ctx_b = started_task(db)
    a.open([tp])
    b.open([tp])
    a.put(batch(range(0, 6)))  # flushes 0..5, stored next offset 6
    b.put(batch(range(0, 6)))  # believes nothing is stored: fenced
    assert rows(db) == [(0, i) for i in range(6)]
    assert ctx_b.rewinds[-1] == {tp: 6}
    b.put(batch(range(6, 12)))
    assert rows(db) == [(0, i) for i in range(12)]
    a.stop()
    b.stop()


# ---- Snowflake's converter names ------------------------------------------------------------
def test_snowflake_converter_names_resolve_and_read_json() -> None:
    from samsa.connect.plugins import Plugins, PluginType

    plugins = Plugins()
    conv = plugins.new("com.snowflake.kafka.connector.records.SnowflakeJsonConverter",
                       PluginType.CONVERTER)
    conv.configure({}, False)
    got = conv.to_connect_data("t", b'{"a": [1, 2.5, "x"], "b": null}')
    assert got.schema is None and got.value == {"a": [1, 2.5, "x"], "b": None}
    with pytest.raises(DataException):
        conv.to_connect_data("t", b"{not json")
    avro = plugins.new("com.snowflake.kafka.connector.records.SnowflakeAvroConverter",
                       PluginType.CONVERTER)
    with pytest.raises(ConfigException, match="schema.registry.url"):
        avro.configure({}, False)


def test_an_incompatible_existing_table_fails_with_its_missing_column(tmp_path: Path) -> None:
    from samsa.connect.errors import ConnectException

    db = tmp_path / "old.duckdb"
    with duckdb.connect(str(db)) as conn:
        conn.execute("CREATE SCHEMA public; CREATE TABLE public.orders (record_metadata JSON)")
    task, _ = started_task(db)
    tp = TopicPartition("orders", 0)
    task.open([tp])
    with pytest.raises(ConnectException, match="no RECORD_CONTENT column"):
        task.put(batch(range(0, 6)))
    task.stop()


def test_mapped_table_names_keep_their_schema_part(tmp_path: Path) -> None:
    task, _ = started_task(tmp_path / "m.duckdb")
    assert task.warehouse is not None
    assert task.warehouse.qualified("ORDERS") == "public.orders"
    assert task.warehouse.qualified("SALES.ORDERS") == "sales.orders"
    assert task.warehouse.qualified("STREAMING.SALES.ORDERS") == "sales.orders"
    task.stop()
