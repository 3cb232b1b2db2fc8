"""The JDBC sink task driven directly against DuckDB files (no worker, no broker): how records
become rows (pk modes, whitelist, JSON columns, time zones), the config rules, the search for
refused records by splitting a batch, rewinding to the offsets stored with the rows, and the
per-key collapse of a batch in upsert mode."""

from __future__ import annotations

import datetime
import json
from pathlib import Path
from typing import Any

import duckdb
import pytest

from samsa.connect.api import TopicPartition
from samsa.connect.connectors.jdbc_sink import JdbcSinkConnector, JdbcSinkTask, Settings
from samsa.connect.connectors.jdbc_sink_rows import RowMapper
from samsa.connect.data import (
    INT32_SCHEMA,
    INT64_SCHEMA,
    OPTIONAL_STRING_SCHEMA,
    STRING_SCHEMA,
    Schema,
    SinkRecord,
    Struct,
    Type,
    array_schema,
    map_schema,
    struct_schema,
    timestamp_schema,
)
from samsa.connect.errors import ConfigException, ConnectException, DataException

VALUE = struct_schema([("name", STRING_SCHEMA), ("qty", INT32_SCHEMA),
                       ("note", OPTIONAL_STRING_SCHEMA)], name="row")


class Context:
    """A SinkTaskContext that records rewinds and reported records."""

    def __init__(self, reporting: bool = True) -> None:
        self.seeks: dict[TopicPartition, int] = {}
        self.reported: list[tuple[SinkRecord, Exception]] = []
        self.reporting = reporting
        self.configs: dict[str, str] = {}

    def offset(self, offsets: dict[TopicPartition, int]) -> None:
        self.seeks.update(offsets)

    def timeout(self, timeout_ms: int) -> None:
        pass

    def errant_record_reporter(self) -> Any:
        return self if self.reporting else None

    def report(self, record: SinkRecord, error: Exception) -> None:
        self.reported.append((record, error))


def rec(offset: int, key: Any, value: Struct | None, topic: str = "t", partition: int = 0,
        key_schema: Any = INT64_SCHEMA) -> SinkRecord:
    return SinkRecord(topic, partition, key_schema, key, VALUE if value is not None else None,
                      value, kafka_offset=offset)


def row(name: str, qty: int, note: str | None = None) -> Struct:
    return Struct(VALUE, {"name": name, "qty": qty, "note": note})


def task(path: Path, ctx: Context, **props: str) -> JdbcSinkTask:
    t = JdbcSinkTask()
    t.initialize(ctx)  # type: ignore[arg-type]
    t.start({"name": "unit", "connection.url": f"jdbc:duckdb:{path}", "auto.create": "true",
             **props})
    return t


def read(path: Path, sql: str) -> list[tuple[Any, ...]]:
    with duckdb.connect(str(path), read_only=True) as con:
        return con.execute(sql).fetchall()


# ---- config --------------------------------------------------------------------------------------
@pytest.mark.parametrize(("props", "key"), [
    ({"delete.enabled": "true", "pk.mode": "kafka"}, "delete.enabled"),
    ({"insert.mode": "update"}, "pk.mode"),
    ({"pk.fields": "a"}, "pk.fields"),
    ({"insert.mode": "MERGE"}, "insert.mode"),
    ({"quote.sql.identifiers": "sometimes"}, "quote.sql.identifiers"),
])
def test_config_rules(props: dict[str, str], key: str) -> None:
    base = {"name": "x", "connection.url": ":memory:"}
    with pytest.raises(ConfigException):
        Settings.parse({**base, **props})
    assert JdbcSinkConnector().validate({**base, **props})[key].errors


def test_defaults_are_confluents() -> None:
    s = Settings.parse({"connection.url": ":memory:"})
    assert (s.insert_mode, s.pk_mode, s.batch_size, s.table_format, s.max_retries,
            s.retry_backoff_ms, s.attempts, s.backoff_s, s.timezone, s.quote) == \
        ("insert", "none", 3000, "${topic}", 10, 3000, 3, 10.0, "UTC", True)
    assert (s.auto_create, s.auto_evolve, s.delete_enabled) == (False, False, False)


# ---- rows ----------------------------------------------------------------------------------------
def test_row_mapping_rules() -> None:
    m = RowMapper("record_key", [], [], "UTC", False)
    with pytest.raises(ConnectException, match="exactly one PK column"):
        m.layout(rec(0, 1, row("a", 1)))
    with pytest.raises(DataException, match="needs a non-null key"):
        RowMapper("record_key", ["id"], [], "UTC", False).layout(rec(0, None, row("a", 1)))
    with pytest.raises(DataException, match="delete.enabled=false"):
        RowMapper("none", [], [], "UTC", False).layout(rec(0, 1, None))
    with pytest.raises(ConnectException, match="exactly three"):
        RowMapper("kafka", ["a", "b"], [], "UTC", False)
    with pytest.raises(DataException, match="Struct value"):
        RowMapper("none", [], [], "UTC", False).layout(
            SinkRecord("t", 0, None, None, STRING_SCHEMA, "text", kafka_offset=3))
    lay = RowMapper("kafka", [], ["qty"], "UTC", False).layout(rec(7, 1, row("a", 2), topic="x",
                                                                    partition=3))
    assert lay.names == ("__connect_topic", "__connect_partition", "__connect_offset", "qty")
    r = rec(7, 1, row("a", 2), topic="x", partition=3)
    assert lay.key_of(r) + lay.values_of(r) == ("x", 3, 7, 2)
    key_schema = struct_schema([("a", STRING_SCHEMA), ("b", INT32_SCHEMA)])
    lay = RowMapper("record_key", [], [], "UTC", False).layout(
        rec(0, Struct(key_schema, {"a": "k", "b": 2}), row("n", 1), key_schema=key_schema))
    assert lay.key_columns == ("a", "b") and lay.value_columns == ("name", "qty", "note")


def test_nested_values_are_json_and_timestamps_use_db_timezone() -> None:
    schema = struct_schema([("tags", array_schema(STRING_SCHEMA)),
                            ("attrs", map_schema(STRING_SCHEMA, INT32_SCHEMA)),
                            ("at", timestamp_schema())])
    at = datetime.datetime(2024, 6, 1, 12, 0, tzinfo=datetime.UTC)
    value = Struct(schema, {"tags": ["a", "b"], "attrs": {"x": 1}, "at": at})
    r = SinkRecord("t", 0, None, None, schema, value, kafka_offset=0)
    lay = RowMapper("none", [], [], "America/New_York", False).layout(r)
    tags, attrs, local = lay.values_of(r)
    assert (json.loads(tags), json.loads(attrs)) == (["a", "b"], {"x": 1})
    assert local == datetime.datetime(2024, 6, 1, 8, 0)


# ---- the task ------------------------------------------------------------------------------------
def test_refused_records_are_found_by_splitting(tmp_path: Path) -> None:
    path = tmp_path / "db.duckdb"
    with duckdb.connect(str(path)) as con:
        con.execute('CREATE TABLE t (id BIGINT PRIMARY KEY, name VARCHAR, qty TINYINT, '
                    'note VARCHAR NOT NULL)')
    ctx = Context()
    t = task(path, ctx, **{"insert.mode": "upsert", "pk.mode": "record_key", "pk.fields": "id"})
    bad = {17, 150, 298}  # qty out of TINYINT's range
    records = [rec(i, i, row(f"n{i}", 1000 if i in bad else i % 100, note="x")) for i in range(299)]
    records.append(rec(299, 299, row("no-note", 1)))  # NOT NULL
    t.open([TopicPartition("t", 0)])
    t.put(records)
    t.stop()
    assert sorted(r.kafka_offset for r, _ in ctx.reported) == sorted(bad | {299})
    assert all(isinstance(e, DataException) for _, e in ctx.reported)
    assert read(path, "SELECT count(*), min(id), max(id) FROM t") == [(296, 0, 297)]
    assert read(path, 'SELECT next_offset FROM "__samsa_connect_offsets"') == [(300,)]


def test_without_a_reporter_the_batch_fails_and_rolls_back(tmp_path: Path) -> None:
    path = tmp_path / "db.duckdb"
    ctx = Context(reporting=False)
    t = task(path, ctx, **{"pk.mode": "kafka"})
    t.open([TopicPartition("t", 0)])
    t.put([rec(0, 1, row("a", 1))])
    with pytest.raises(ConnectException):
        t.put([rec(1, 1, row("b", 2)), rec(1, 1, row("dup", 3))])  # the same Kafka key twice
    t.stop()
    assert read(path, "SELECT name FROM t") == [("a",)]
    assert read(path, 'SELECT next_offset FROM "__samsa_connect_offsets"') == [(1,)]


def test_restart_rewinds_to_stored_offsets_and_drops_what_is_stored(tmp_path: Path) -> None:
    path = tmp_path / "db.duckdb"
    tps = [TopicPartition("t", 0), TopicPartition("t", 1)]
    t = task(path, Context(), **{"pk.mode": "kafka"})
    t.open(tps)
    t.put([rec(i, i, row(f"n{i}", i)) for i in range(5)] + [rec(0, 9, row("p1", 9), partition=1)])
    assert t.pre_commit({tps[0]: 5, tps[1]: 1}) == {tps[0]: 5, tps[1]: 1}
    t.stop()
    ctx = Context()
    t = task(path, ctx, **{"pk.mode": "kafka"})
    t.open(tps)
    assert ctx.seeks == {tps[0]: 5, tps[1]: 1}
    # the consumer may still hand back records from the group's older position: dropped
    t.put([rec(i, i, row(f"n{i}", i)) for i in range(3, 7)])
    # records skipped before put (a transform, a tolerated converter error) still move it
    assert t.pre_commit({tps[0]: 9, tps[1]: 1}) == {tps[0]: 9, tps[1]: 1}
    t.stop()
    assert read(path, "SELECT count(*), max(__connect_offset) FROM t WHERE __connect_partition = 0") \
        == [(7, 6)]
    assert read(path, 'SELECT "partition", next_offset FROM "__samsa_connect_offsets" ORDER BY 1') \
        == [(0, 9), (1, 1)]


def test_upsert_batch_keeps_the_last_change_per_key(tmp_path: Path) -> None:
    path = tmp_path / "db.duckdb"
    t = task(path, Context(), **{"insert.mode": "upsert", "pk.mode": "record_key",
                                 "pk.fields": "id", "delete.enabled": "true"})
    t.open([TopicPartition("t", 0)])
    t.put([rec(0, 1, row("a", 1)), rec(1, 2, row("b", 2)), rec(2, 1, None), rec(3, 2, row("c", 3)),
           rec(4, 3, None), rec(5, 4, row("d", 4)), rec(6, 4, None), rec(7, 4, row("e", 5))])
    t.stop()
    assert read(path, "SELECT id, name, qty FROM t ORDER BY id") == [(2, "c", 3), (4, "e", 5)]


def test_auto_create_and_evolve_rules(tmp_path: Path) -> None:
    """auto.create: NOT NULL for required fields, DEFAULT from the schema; auto.evolve adds
    optional or defaulted fields and refuses a required one without default (the record is
    reported, the table unchanged)."""
    path = tmp_path / "db.duckdb"
    ctx = Context()
    t = task(path, ctx, **{"auto.evolve": "true", "pk.mode": "kafka"})
    t.open([TopicPartition("t", 0)])
    v1 = struct_schema([("name", STRING_SCHEMA),
                        ("qty", Schema(Type.INT32, default=7))])
    v2 = struct_schema([*((f.name, f.schema) for f in v1.fields),
                        ("note", OPTIONAL_STRING_SCHEMA), ("level", Schema(Type.INT64, default=3))])
    v3 = struct_schema([*((f.name, f.schema) for f in v2.fields), ("must", STRING_SCHEMA)])

    def r(offset: int, schema: Schema, **values: Any) -> SinkRecord:
        return SinkRecord("t", 0, None, None, schema, Struct(schema, values), kafka_offset=offset)
    t.put([r(0, v1, name="a", qty=1)])
    t.put([r(1, v2, name="b", qty=2, note="n", level=4), r(2, v3, name="c", qty=3, note=None,
                                                          level=5, must="x")])
    t.stop()
    assert [rec.kafka_offset for rec, _ in ctx.reported] == [2]
    assert "not optional and does not have a default" in str(ctx.reported[0][1])
    cols = read(path, "SELECT column_name, is_nullable, column_default FROM "
                      "information_schema.columns WHERE table_name = 't' ORDER BY ordinal_position")
    assert [c[:2] for c in cols] == [("__connect_topic", "NO"), ("__connect_partition", "NO"),
                                     ("__connect_offset", "NO"), ("name", "NO"), ("qty", "NO"),
                                     ("note", "YES"), ("level", "NO")]  # old rows get 3
    assert [str(c[2]) for c in cols[4:]] == ["7", "None", "3"]
    assert read(path, "SELECT name, qty, note, level FROM t ORDER BY name") == \
        [("a", 1, None, 3), ("b", 2, "n", 4)]
