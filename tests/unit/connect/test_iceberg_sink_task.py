"""IcebergSinkTask driven directly (a real SQLite catalog and warehouse in tmp_path, an in-test
SinkTaskContext): zombie fencing, rewinds on open(), redeliveries, and the partition-by syntax."""

from __future__ import annotations

from pathlib import Path

import pytest
from pyiceberg.transforms import (
    BucketTransform,
    DayTransform,
    HourTransform,
    IdentityTransform,
    MonthTransform,
    TruncateTransform,
    YearTransform,
)

from samsa.connect.api import TopicPartition
from samsa.connect.connectors.iceberg_sink import IcebergSinkTask
from samsa.connect.connectors.iceberg_sink.config import catalog_properties, parse
from samsa.connect.connectors.iceberg_sink.schema import parse_partition_field
from samsa.connect.data import INT64_SCHEMA, STRING_SCHEMA, SinkRecord, Struct, struct_schema
from samsa.connect.errors import ConfigException, DataException
from tests.unit.connect.connectors_ctx import SinkContext

TP = TopicPartition("t", 0)
SCHEMA = struct_schema([("id", INT64_SCHEMA), ("name", STRING_SCHEMA)])


class RecordingContext(SinkContext):
    def __init__(self, configs: dict[str, str]) -> None:
        super().__init__(configs)
        self.assigned = {TP}
        self.seeks: list[dict[TopicPartition, int]] = []

    def offset(self, offsets: dict[TopicPartition, int]) -> None:
        self.seeks.append(dict(offsets))


def records(lo: int, hi: int) -> list[SinkRecord]:
    return [SinkRecord("t", 0, None, None, SCHEMA, Struct(SCHEMA, {"id": i, "name": f"n{i}"}),
                       kafka_offset=i) for i in range(lo, hi)]


def started(tmp_path: Path) -> tuple[IcebergSinkTask, RecordingContext]:
    props = {"name": "s", "iceberg.tables": "db.t", "iceberg.catalog.warehouse": str(tmp_path),
             "iceberg.tables.auto-create-enabled": "true",
             "iceberg.control.commit.interval-ms": "0"}
    task, ctx = IcebergSinkTask(), RecordingContext(props)
    task.initialize(ctx)
    task.start(props)
    task.open([TP])
    return task, ctx


def ids(task: IcebergSinkTask) -> list[int]:
    assert task.catalog is not None
    return sorted(task.catalog.load_table("db.t").scan().to_arrow().column("id").to_pylist())


def test_a_zombie_never_commits_and_resumes_without_duplicates(tmp_path: Path) -> None:
    zombie, _ = started(tmp_path)
    zombie.put(records(0, 100))
    owner, _ = started(tmp_path)  # the partition moved while the zombie still runs
    owner.put(records(0, 150))
    assert owner.pre_commit({TP: 150}) == {TP: 150}
    # the zombie's commit finds the offsets moved under it: dropped, rewound, nothing committed
    assert zombie.pre_commit({TP: 100}) == {}
    assert zombie.context.seeks[-1] == {TP: 0}  # type: ignore[attr-defined]
    assert ids(owner) == list(range(150))
    # redelivered from its rewind point, it skips what the table has and appends the rest
    zombie.put(records(0, 200))
    assert zombie.pre_commit({TP: 200}) == {TP: 200}
    assert ids(owner) == list(range(200))
    for t in (zombie, owner):
        t.stop()


def test_open_rewinds_to_the_tables_offsets_and_redelivery_is_ignored(tmp_path: Path) -> None:
    first, _ = started(tmp_path)
    first.put(records(0, 40))
    first.put(records(20, 60))  # a redelivery (a seek) of offsets already buffered
    assert first.pre_commit({TP: 60}) == {TP: 60}
    first.stop()
    second, ctx = started(tmp_path)
    assert ctx.seeks == [{TP: 60}]
    assert ids(second) == list(range(60))
    second.stop()


def test_nothing_is_committed_before_the_interval(tmp_path: Path) -> None:
    task, _ = started(tmp_path)
    assert task.cfg is not None
    task.cfg.commit_interval_ms = 3_600_000
    task._last_commit = float("inf")  # as if it had just committed
    task.put(records(0, 10))
    assert task.pre_commit({TP: 10}) == {}  # the group's offsets wait for the table
    assert task.catalog is not None
    assert task.catalog.load_table("db.t").current_snapshot() is None
    task.stop()


def test_partition_by_syntax() -> None:
    assert parse_partition_field("product") == ("product", IdentityTransform(), "product")
    assert parse_partition_field("hour(ts)") == ("ts", HourTransform(), "ts_hour")
    assert parse_partition_field("hours(ts)") == ("ts", HourTransform(), "ts_hour")
    assert parse_partition_field("days(ts)") == ("ts", DayTransform(), "ts_day")
    assert parse_partition_field("bucket(id, 16)") == ("id", BucketTransform(16), "id_bucket")
    assert parse_partition_field("truncate(name, 2)") == ("name", TruncateTransform(2),
                                                          "name_trunc")
    assert parse_partition_field("years(ts)") == ("ts", YearTransform(), "ts_year")
    assert parse_partition_field("month(ts)") == ("ts", MonthTransform(), "ts_month")
    with pytest.raises(DataException, match="unsupported partition transform"):
        parse_partition_field("void(x)")


def test_bucket_and_truncate_partitioned_writes(tmp_path: Path) -> None:
    props = {"name": "p", "iceberg.tables": "db.p", "iceberg.catalog.warehouse": str(tmp_path),
             "iceberg.tables.auto-create-enabled": "true",
             "iceberg.tables.default-partition-by": "bucket(id, 4), truncate(name, 2)",
             "iceberg.control.commit.interval-ms": "0"}
    task, ctx = IcebergSinkTask(), RecordingContext(props)
    task.initialize(ctx)
    task.start(props)
    task.open([TP])
    task.put(records(0, 40))
    assert task.pre_commit({TP: 40}) == {TP: 40}
    assert task.catalog is not None
    table = task.catalog.load_table("db.p")
    assert [f.name for f in table.spec().fields] == ["id_bucket", "name_trunc"]
    assert sorted(table.scan().to_arrow().column("id").to_pylist()) == list(range(40))
    assert table.inspect.partitions().num_rows > 4  # buckets x name prefixes
    task.stop()


def test_config_rules(tmp_path: Path) -> None:
    with pytest.raises(ConfigException, match="iceberg.tables is required"):
        parse({})
    with pytest.raises(ConfigException, match="route-field is required"):
        parse({"iceberg.tables.dynamic-enabled": "true"})
    with pytest.raises(ConfigException, match="upsert mode is not supported"):
        parse({"iceberg.tables": "a.b", "iceberg.tables.upsert-mode-enabled": "true"})
    cfg = parse({"iceberg.tables": "a.b", "iceberg.table.a.b.partition-by": "hour(ts), kind",
                 "iceberg.tables.default-partition-by": "x"})
    assert cfg.table("a.b").partition_by == ["hour(ts)", "kind"]
    assert cfg.table("a.c").partition_by == ["x"]
    props = catalog_properties({"iceberg.catalog.warehouse": str(tmp_path / "wh")})
    assert props == {"type": "sql", "warehouse": f"file://{tmp_path}/wh",
                     "uri": f"sqlite:///{tmp_path}/wh/catalog.db"}
    rest = catalog_properties({"iceberg.catalog.type": "rest",
                               "iceberg.catalog.uri": "http://cat:8181"})
    assert rest == {"type": "rest", "uri": "http://cat:8181"}


def routed_records() -> list[SinkRecord]:
    kinds = ["list", "create", "LIST", "other", None]
    return [SinkRecord("t", 0, None, None, None, {"id": i, "type": kinds[i % 5]}, kafka_offset=i)
            for i in range(50)]


def run_routing(tmp_path: Path, extra: dict[str, str]) -> IcebergSinkTask:
    props = {"name": "r", "iceberg.catalog.warehouse": str(tmp_path),
             "iceberg.tables.auto-create-enabled": "true", "iceberg.tables.route-field": "type",
             "iceberg.control.commit.interval-ms": "0", **extra}
    task, ctx = IcebergSinkTask(), RecordingContext(props)
    task.initialize(ctx)
    task.start(props)
    task.open([TP])
    task.put(routed_records())
    assert task.pre_commit({TP: 50}) == {TP: 50}
    return task


def table_ids(task: IcebergSinkTask, name: str) -> list[int]:
    assert task.catalog is not None
    return sorted(task.catalog.load_table(name).scan().to_arrow().column("id").to_pylist())


def test_static_routing_by_route_regex(tmp_path: Path) -> None:
    task = run_routing(tmp_path, {"iceberg.tables": "ev.lists,ev.creates",
                                  "iceberg.table.ev.lists.route-regex": "list|LIST",
                                  "iceberg.table.ev.creates.route-regex": "cre.*"})
    assert table_ids(task, "ev.lists") == [i for i in range(50) if i % 5 in (0, 2)]
    assert table_ids(task, "ev.creates") == [i for i in range(50) if i % 5 == 1]
    task.stop()


def test_dynamic_routing_lower_cases_the_table_name(tmp_path: Path) -> None:
    task = run_routing(tmp_path, {"iceberg.tables.dynamic-enabled": "true"})
    # the route value names the table (namespace `default` for a bare name), lower-cased
    assert table_ids(task, "default.list") == [i for i in range(50) if i % 5 in (0, 2)]
    assert table_ids(task, "default.create") == [i for i in range(50) if i % 5 == 1]
    assert table_ids(task, "default.other") == [i for i in range(50) if i % 5 == 3]
    task.stop()


class Reporter:
    def __init__(self) -> None:
        self.reported: list[tuple[SinkRecord, Exception]] = []

    def report(self, record: SinkRecord, error: Exception) -> None:
        self.reported.append((record, error))


class ReportingContext(RecordingContext):
    def __init__(self, configs: dict[str, str]) -> None:
        super().__init__(configs)
        self.reporter = Reporter()

    def errant_record_reporter(self) -> Reporter:  # type: ignore[override]
        return self.reporter


def evolving_task(tmp_path: Path, **extra: str) -> tuple[IcebergSinkTask, Reporter]:
    props = {"name": "e", "iceberg.tables": "db.e", "iceberg.catalog.warehouse": str(tmp_path),
             "iceberg.tables.auto-create-enabled": "true",
             "iceberg.tables.evolve-schema-enabled": "true",
             "iceberg.control.commit.interval-ms": "0", **extra}
    task, ctx = IcebergSinkTask(), ReportingContext(props)
    task.initialize(ctx)
    task.start(props)
    task.open([TP])
    return task, ctx.reporter


def test_evolution_widens_relaxes_and_refuses(tmp_path: Path) -> None:
    from samsa.connect.data import (
        FLOAT32_SCHEMA,
        FLOAT64_SCHEMA,
        OPTIONAL_STRING_SCHEMA,
        STRING_SCHEMA,
    )
    task, reporter = evolving_task(tmp_path, **{"iceberg.tables.auto-create-props.owner": "me"})
    v1 = struct_schema([("id", INT64_SCHEMA), ("name", STRING_SCHEMA), ("f", FLOAT32_SCHEMA)])
    v2 = struct_schema([("id", INT64_SCHEMA), ("name", OPTIONAL_STRING_SCHEMA),
                        ("f", FLOAT64_SCHEMA)])
    bad = struct_schema([("id", STRING_SCHEMA)])
    recs = [SinkRecord("t", 0, None, None, v1, Struct(v1, {"id": 1, "name": "a", "f": 0.5}),
                       kafka_offset=0),
            SinkRecord("t", 0, None, None, v2, Struct(v2, {"id": 2, "name": None, "f": 1e300}),
                       kafka_offset=1),
            SinkRecord("t", 0, None, None, bad, Struct(bad, {"id": "x"}), kafka_offset=2)]
    task.put(recs)
    assert task.pre_commit({TP: 3}) == {TP: 3}
    assert task.catalog is not None
    table = task.catalog.load_table("db.e")
    schema = table.schema()
    assert str(schema.find_field("f").field_type) == "double"  # float widened to double
    assert not schema.find_field("name").required  # required made optional
    assert str(schema.find_field("id").field_type) == "long"  # long -> string refused ...
    assert [(r.kafka_offset, "does not fit" in str(e)) for r, e in reporter.reported] == [(2, True)]
    assert table.properties["owner"] == "me"
    rows = sorted(table.scan().to_arrow().to_pylist(), key=lambda r: r["id"])
    assert rows == [{"id": 1, "name": "a", "f": 0.5}, {"id": 2, "name": None, "f": 1e300}]
    task.stop()


def test_null_for_a_required_column_is_reported_and_force_optional(tmp_path: Path) -> None:
    # the table is created from a schema with required columns; a schemaless map misses one
    strict, reporter = evolving_task(tmp_path / "b", **{"iceberg.tables.evolve-schema-enabled": "false"})
    ok = Struct(SCHEMA, {"id": 1, "name": "a"})
    strict.put([SinkRecord("t", 0, None, None, SCHEMA, ok, kafka_offset=0),
                SinkRecord("t", 0, None, None, None, {"id": 2, "name": None}, kafka_offset=1)])
    assert strict.pre_commit({TP: 2}) == {TP: 2}
    assert strict.catalog is not None
    assert strict.catalog.load_table("db.e").scan().to_arrow().column("id").to_pylist() == [1]
    assert [r.kafka_offset for r, _ in reporter.reported] == [1]
    assert "required column name" in str(reporter.reported[0][1])
    strict.stop()
    loose, _ = evolving_task(tmp_path / "c", **{"iceberg.tables.schema-force-optional": "true"})
    loose.put([SinkRecord("t", 0, None, None, SCHEMA, ok, kafka_offset=0)])
    assert loose.catalog is not None
    assert loose.pre_commit({TP: 1}) == {TP: 1}
    assert all(not f.required for f in loose.catalog.load_table("db.e").schema().fields)
    loose.stop()


def test_schemaless_evolution_adds_columns_and_reports_only_the_bad_row(tmp_path: Path) -> None:
    task, reporter = evolving_task(tmp_path)
    task.put([SinkRecord("t", 0, None, None, None, {"id": 1, "name": "a"}, kafka_offset=0)])
    task.put([SinkRecord("t", 0, None, None, None, {"id": "abc", "name": "c"}, kafka_offset=1),
              SinkRecord("t", 0, None, None, None, {"id": 2, "name": "b", "extra": True},
                         kafka_offset=2),
              SinkRecord("t", 0, None, None, None, {"id": 4, "name": "d"}, kafka_offset=3)])
    assert task.pre_commit({TP: 4}) == {TP: 4}
    assert task.catalog is not None
    table = task.catalog.load_table("db.e")
    assert not table.schema().find_field("extra").required
    rows = sorted(table.scan().to_arrow().to_pylist(), key=lambda r: r["id"])
    assert rows == [{"id": 1, "name": "a", "extra": None}, {"id": 2, "name": "b", "extra": True},
                    {"id": 4, "name": "d", "extra": None}]
    assert [r.kafka_offset for r, _ in reporter.reported] == [1]
    task.stop()
