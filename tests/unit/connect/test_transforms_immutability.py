"""No transform changes the record it is given (nor its Struct, Map or Headers), whether it
succeeds or fails: every built-in, with and without schemas, keys and values."""

from __future__ import annotations

import copy
import datetime

import pytest

from samsa.connect.data import (
    INT32_SCHEMA,
    INT64_SCHEMA,
    STRING_SCHEMA,
    Header,
    Headers,
    SinkRecord,
    Struct,
    struct_schema,
    timestamp_schema,
)
from samsa.connect.errors import ConnectException
from samsa.connect.plugins import Plugins, PluginType

T = "org.apache.kafka.connect.transforms."
INNER = struct_schema([("x", INT32_SCHEMA)], optional=True)
SCHEMA = struct_schema([("id", INT32_SCHEMA), ("name", STRING_SCHEMA), ("ts", timestamp_schema()),
                        ("n", INT64_SCHEMA), ("inner", INNER)], name="row")
WHEN = datetime.datetime(2020, 5, 6, 7, 8, 9, tzinfo=datetime.UTC)

CONFIGS = {
    "InsertField": {"topic.field": "topic", "static.field": "s", "static.value": "v",
                    "offset.field": "off"},
    "ReplaceField": {"exclude": "name", "renames": "id:ident"},
    "MaskField": {"fields": "name,id"},
    "ExtractField": {"field": "inner"},
    "HoistField": {"field": "wrapped"},
    "Cast": {"spec": "id:string,n:int8"},
    "Flatten": {"delimiter": "_"},
    "TimestampConverter": {"field": "ts", "target.type": "string", "format": "yyyy-MM-dd"},
    "SetSchemaMetadata": {"schema.name": "renamed", "schema.version": "2"},
    "HeaderFrom": {"fields": "id,name", "headers": "h_id,h_name", "operation": "move"},
    "ValueToKey": {"fields": "id,name"},
    "TimestampRouter": {},
    "RegexRouter": {"regex": "(.*)", "replacement": "x-$1"},
    "Filter": {},
    "InsertHeader": {"header": "h", "value.literal": "42"},
    "DropHeaders": {"headers": "keep,drop"},
}


def records() -> list[SinkRecord]:
    struct = Struct(SCHEMA, {"id": 1, "name": "ann", "ts": WHEN, "n": 300,
                             "inner": Struct(INNER, {"x": 5})})
    as_map = {"id": 1, "name": "ann", "ts": WHEN, "n": 300, "inner": {"x": 5}}
    headers = [Header("keep", None, 1), Header("drop", STRING_SCHEMA, "d")]
    return [
        SinkRecord("t", 0, SCHEMA, struct, SCHEMA, struct, 1_000, Headers(list(headers)), kafka_offset=3),
        SinkRecord("t", 0, None, dict(as_map), None, dict(as_map), 1_000, Headers(list(headers)),
                   kafka_offset=3),
        SinkRecord("t", 0, None, None, None, None, None, Headers(list(headers)), kafka_offset=3),
    ]


def _variants() -> list[str]:
    out = []
    for name in CONFIGS:
        if name in ("ValueToKey", "TimestampRouter", "RegexRouter", "Filter", "InsertHeader",
                    "DropHeaders"):
            out.append(T + name)
        else:
            out += [f"{T}{name}$Key", f"{T}{name}$Value"]
    return out


@pytest.fixture(scope="module")
def plugins() -> Plugins:
    return Plugins()


@pytest.mark.parametrize("plugin", _variants())
def test_transform_never_mutates_its_input(plugins, plugin):
    base = plugin[len(T):].split("$")[0]
    t = plugins.new(plugin, PluginType.TRANSFORMATION)
    t.configure(dict(CONFIGS[base]))
    applied = 0
    for record in records():
        before = copy.deepcopy(record)
        try:
            out = t.apply(record)
        except ConnectException:
            out = None
        else:
            applied += 1
        assert record == before, f"{plugin} changed its input"
        if out is not None and out is not record:
            assert out.headers is not record.headers
    assert applied >= 1, f"{plugin} applied to none of the sample records"
