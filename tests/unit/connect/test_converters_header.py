"""SimpleHeaderConverter: header strings as Kafka's Values writes and parses them."""

from __future__ import annotations

import datetime
import decimal

import pytest

from samsa.connect.converters.header import SimpleHeaderConverter
from samsa.connect.data import (
    BOOLEAN_SCHEMA,
    BYTES_SCHEMA,
    FLOAT32_SCHEMA,
    FLOAT64_SCHEMA,
    INT8_SCHEMA,
    INT16_SCHEMA,
    INT32_SCHEMA,
    INT64_SCHEMA,
    STRING_SCHEMA,
    SchemaAndValue,
    Struct,
    array_schema,
    date_schema,
    map_schema,
    struct_schema,
    time_schema,
    timestamp_schema,
)


@pytest.fixture
def hc() -> SimpleHeaderConverter:
    c = SimpleHeaderConverter()
    c.configure({})
    return c


@pytest.mark.parametrize("text,schema,value", [
    ("", STRING_SCHEMA, ""),
    ("hello world", STRING_SCHEMA, "hello world"),
    ("true", BOOLEAN_SCHEMA, True),
    ("false", BOOLEAN_SCHEMA, False),
    ("true}", STRING_SCHEMA, "true}"),
    ("12", INT8_SCHEMA, 12),
    ("-300", INT16_SCHEMA, -300),
    ("70000", INT32_SCHEMA, 70000),
    ("5000000000", INT64_SCHEMA, 5000000000),
    ("1.5", FLOAT32_SCHEMA, 1.5),
    ("1e400", None, None),  # fits neither float: a Decimal (checked below)
    ("2020-01-02", date_schema(), datetime.date(2020, 1, 2)),
    ("10:15:30.123Z", time_schema(), datetime.time(10, 15, 30, 123000)),
    ("2020-01-02T10:15:30.123Z", timestamp_schema(),
     datetime.datetime(2020, 1, 2, 10, 15, 30, 123000, tzinfo=datetime.UTC)),
    ("[1,2,3]", array_schema(INT8_SCHEMA), [1, 2, 3]),
    ("[1,2.5]", array_schema(FLOAT32_SCHEMA), [1.0, 2.5]),
    ('["a","b"]', array_schema(STRING_SCHEMA), ["a", "b"]),
    ('{"a":1,"b":2}', map_schema(STRING_SCHEMA, INT8_SCHEMA), {"a": 1, "b": 2}),
    ('{"k":[true,false]}', map_schema(STRING_SCHEMA, array_schema(BOOLEAN_SCHEMA)),
     {"k": [True, False]}),
    ("[1,", STRING_SCHEMA, "[1,"),
    ("[1,2] trailing", STRING_SCHEMA, "[1,2] trailing"),
    ("{not a map}", STRING_SCHEMA, "{not a map}"),
    ("12abc", STRING_SCHEMA, "12abc"),
])
def test_parse(hc: SimpleHeaderConverter, text: str, schema: object, value: object) -> None:
    sv = hc.to_connect_header("t", "h", text.encode())
    if schema is None:
        assert sv.schema is not None and sv.schema.name == "org.apache.kafka.connect.data.Decimal"
        assert sv.value == decimal.Decimal("1e400")
        return
    assert sv == SchemaAndValue(schema, value)  # type: ignore[arg-type]


def test_null(hc: SimpleHeaderConverter) -> None:
    assert hc.to_connect_header("t", "h", None) == SchemaAndValue.NULL
    assert hc.to_connect_header("t", "h", b"null") == SchemaAndValue.NULL
    assert hc.from_connect_header("t", "h", None, None) is None


def test_to_string(hc: SimpleHeaderConverter) -> None:
    s = struct_schema([("a", INT32_SCHEMA), ("b", STRING_SCHEMA)])
    cases = [
        (STRING_SCHEMA, 'plain "text"', b'plain "text"'),
        (INT64_SCHEMA, 5, b"5"),
        (FLOAT64_SCHEMA, 1e20, b"1.0E20"),
        (BOOLEAN_SCHEMA, True, b"true"),
        (BYTES_SCHEMA, b"\x00\x01", b"AAE="),
        (array_schema(STRING_SCHEMA), ["a", 'q"'], b'["a","q\\""]'),
        (map_schema(STRING_SCHEMA, INT32_SCHEMA), {"x": 1, "y": 2}, b'{"x":1,"y":2}'),
        (s, Struct(s, {"a": 1, "b": "z"}), b'{"a":1,"b":"z"}'),
        (date_schema(), datetime.date(2020, 1, 2), b"2020-01-02"),
        (time_schema(), datetime.time(1, 2, 3, 4000), b"01:02:03.004Z"),
        (timestamp_schema(), datetime.datetime(2020, 1, 2, 1, 2, 3, tzinfo=datetime.UTC),
         b"2020-01-02T01:02:03.000Z"),
    ]
    for schema, value, raw in cases:
        assert hc.from_connect_header("t", "h", schema, value) == raw


def test_roundtrips(hc: SimpleHeaderConverter) -> None:
    for schema, value in [(INT32_SCHEMA, 70000), (array_schema(STRING_SCHEMA), ['a,b', 'c"d']),
                          (map_schema(STRING_SCHEMA, array_schema(INT8_SCHEMA)), {"k": [1, 2]}),
                          (timestamp_schema(), datetime.datetime(2021, 3, 4, 5, 6, 7, 8000,
                                                                 tzinfo=datetime.UTC))]:
        raw = hc.from_connect_header("t", "h", schema, value)
        assert raw is not None
        assert hc.to_connect_header("t", "h", raw) == SchemaAndValue(schema, value)


def test_garbage_never_crashes(hc: SimpleHeaderConverter) -> None:
    for raw in [b"\xff\xfe", b"[" * 500, b"{" * 500 + b"}", b'["unterminated', b"{a:}", b"[,]",
                b"1" * 1000, b"{[1]:2}", b'{"a":1,"a":2}']:
        sv = hc.to_connect_header("t", "h", raw)
        assert sv.schema is not None or sv.value is None or isinstance(sv.value, dict | list)
