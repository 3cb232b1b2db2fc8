"""DatagenConnector driven directly: determinism with random.seed, schema validity of every
record, offsets that let a restarted task continue, config validation."""

from __future__ import annotations

import pytest
from connectors_ctx import DictOffsetReader, poll_until, started_source

from samsa.connect.connectors.datagen import DatagenConnector, DatagenTask
from samsa.connect.connectors.datagen_quickstarts import QUICKSTARTS, TIME_MAX, TIME_MIN
from samsa.connect.data import (
    INT32_SCHEMA,
    INT64_SCHEMA,
    STRING_SCHEMA,
    SourceRecord,
    Struct,
    Type,
    validate_value,
)
from samsa.connect.errors import ConfigException, ConnectException


def _task_props(quickstart: str, task_id: int = 0, tasks: int = 1, **extra: str) -> dict[str, str]:
    c = DatagenConnector()
    c.start({"name": "dg", "kafka.topic": "mock", "quickstart": quickstart, "max.interval": "0",
             **extra})
    return c.task_configs(tasks)[task_id]


def _run(props: dict[str, str], count: int,
         reader: DictOffsetReader | None = None) -> tuple[list[SourceRecord], DictOffsetReader]:
    task = DatagenTask()
    ctx = started_source(task, props, reader)
    records = poll_until(task, count)
    task.stop()
    return records, ctx.reader


def _values(records: list[SourceRecord]) -> list[dict]:
    return [r.value.as_dict() for r in records]


@pytest.mark.parametrize("quickstart", sorted(QUICKSTARTS))
def test_every_record_is_valid_for_its_schema(quickstart: str) -> None:
    records, _ = _run(_task_props(quickstart), 200)
    assert len(records) == 200
    qs = QUICKSTARTS[quickstart]
    for r in records:
        assert r.topic == "mock" and r.value_schema == qs.schema
        assert r.value_schema is not None and r.value_schema.type is Type.STRUCT
        validate_value(r.value_schema, r.value)
        assert r.key_schema is not None
        validate_value(r.key_schema, r.key)
        assert r.key == r.value.get(qs.key_field)


def test_field_layouts_match_the_quickstarts() -> None:
    def layout(name: str) -> list[tuple[str, Type]]:
        return [(f.name, f.schema.type) for f in QUICKSTARTS[name].schema.fields]

    assert layout("orders") == [("ordertime", Type.INT64), ("orderid", Type.INT32),
                                ("itemid", Type.STRING), ("orderunits", Type.FLOAT64),
                                ("address", Type.STRUCT)]
    address = QUICKSTARTS["orders"].schema.field("address")
    assert address is not None
    assert [(f.name, f.schema.type) for f in address.schema.fields] == [
        ("city", Type.STRING), ("state", Type.STRING), ("zipcode", Type.INT64)]
    assert layout("users") == [("registertime", Type.INT64), ("userid", Type.STRING),
                               ("regionid", Type.STRING), ("gender", Type.STRING)]
    assert layout("pageviews") == [("viewtime", Type.INT64), ("userid", Type.STRING),
                                   ("pageid", Type.STRING)]
    assert QUICKSTARTS["orders"].schema.name == "ksql.orders"


def test_value_ranges() -> None:
    orders, _ = _run(_task_props("orders", **{"random.seed": "5"}), 100)
    for n, v in enumerate(_values(orders)):
        assert v["orderid"] == n
        assert TIME_MIN <= v["ordertime"] < TIME_MAX
        assert 0.1 <= v["orderunits"] <= 10.0
        assert v["itemid"].startswith("Item_")
        address = v["address"]
        assert isinstance(address, Struct) and 10000 <= address.get("zipcode") < 99999
    users, _ = _run(_task_props("users", **{"random.seed": "5"}), 100)
    assert {v["gender"] for v in _values(users)} == {"MALE", "FEMALE", "OTHER"}
    views, _ = _run(_task_props("pageviews"), 5)
    assert [v["viewtime"] for v in _values(views)] == [1, 11, 21, 31, 41]


def test_same_seed_same_data_other_task_other_data() -> None:
    a, _ = _run(_task_props("users", **{"random.seed": "42"}), 50)
    b, _ = _run(_task_props("users", **{"random.seed": "42"}), 50)
    assert _values(a) == _values(b)
    assert [r.source_offset for r in a] == [r.source_offset for r in b]
    other_seed, _ = _run(_task_props("users", **{"random.seed": "43"}), 50)
    assert _values(other_seed) != _values(a)
    task1, _ = _run(_task_props("users", task_id=1, tasks=2, **{"random.seed": "42"}), 50)
    assert _values(task1) != _values(a)


def test_restart_from_offset_continues_the_same_sequence() -> None:
    props = _task_props("orders", **{"random.seed": "7"})
    straight, _ = _run(props, 10)
    first, reader = _run(props, 6)
    reader.commit(first[:4])  # four committed before the "crash"
    rest, _ = _run(props, 6, reader)
    assert _values(first[:4] + rest) == _values(straight)
    assert [r.source_offset["current.iteration"] for r in rest] == [5, 6, 7, 8, 9, 10]
    assert [r.source_offset["task.generation"] for r in rest] == [2] * 6
    assert rest[0].source_partition == {"task.id": 0}


def test_unseeded_restart_continues_the_count() -> None:
    props = _task_props("pageviews")
    first, reader = _run(props, 3)
    reader.commit(first)
    rest, _ = _run(props, 2, reader)
    assert [r.value.get("viewtime") for r in first + rest] == [1, 11, 21, 31, 41]


def test_headers_carry_generation_task_and_iteration() -> None:
    records, _ = _run(_task_props("users", task_id=2, tasks=3), 2)
    for n, r in enumerate(records):
        got = {h.key: (h.value, h.schema) for h in r.headers}
        assert got == {"task.generation": (0, INT64_SCHEMA), "task.id": (2, INT64_SCHEMA),
                       "current.iteration": (n, INT64_SCHEMA)}


def test_iterations_bound_each_task() -> None:
    props = _task_props("users", iterations="3")
    task = DatagenTask()
    started_source(task, props)
    task.idle_wait_s = 0.01
    polls = [task.poll() for _ in range(6)]
    assert [len(p) if p else 0 for p in polls] == [1, 1, 1, 0, 0, 0]
    task.stop()


def test_key_field_override() -> None:
    records, _ = _run(_task_props("pageviews", **{"schema.keyfield": "pageid"}), 3)
    assert all(r.key_schema == STRING_SCHEMA and r.key == r.value.get("pageid") for r in records)
    orders, _ = _run(_task_props("orders"), 2)
    assert [r.key for r in orders] == [0, 1] and orders[0].key_schema == INT32_SCHEMA


def test_quickstart_names_are_case_insensitive() -> None:
    records, _ = _run(_task_props("ORDERS"), 1)
    assert records[0].value_schema == QUICKSTARTS["orders"].schema


def test_validation_errors() -> None:
    c = DatagenConnector()
    values = c.validate({})
    assert values["kafka.topic"].errors and values["quickstart"].errors
    values = c.validate({"kafka.topic": "t", "quickstart": "clickstream"})
    assert values["quickstart"].errors and "orders" in values["quickstart"].errors[0]
    values = c.validate({"kafka.topic": "t", "quickstart": "users", "schema.keyfield": "nope",
                         "max.interval": "soon", "random.seed": "x"})
    assert values["schema.keyfield"].errors and values["max.interval"].errors
    assert values["random.seed"].errors
    ok = c.validate({"kafka.topic": "t", "quickstart": "users", "schema.keyfield": "regionid"})
    assert not any(v.errors for v in ok.values())
    with pytest.raises(ConfigException, match="could not start"):
        c.start({"kafka.topic": "t", "quickstart": "users", "schema.keyfield": "nope"})
    defaults = c.config().keys
    assert defaults["max.interval"].default == 500 and defaults["iterations"].default == -1
    assert defaults["random.seed"].default is None
    assert all(k.documentation for k in defaults.values())


def test_task_configs_and_bad_stored_offset() -> None:
    c = DatagenConnector()
    c.start({"kafka.topic": "t", "quickstart": "users", "tasks.max": "3"})
    configs = c.task_configs(3)
    assert [cfg["task.id"] for cfg in configs] == ["0", "1", "2"]
    assert all(cfg["quickstart"] == "users" for cfg in configs)
    reader = DictOffsetReader()
    reader.put({"task.id": 0}, {"current.iteration": "many"})
    with pytest.raises(ConnectException):
        started_source(DatagenTask(), configs[0], reader)
