"""JsonConverter: the exact bytes Kafka's JsonConverter writes, and reading them back."""

from __future__ import annotations

import datetime
import decimal
import json

import pytest

from samsa.connect.converters.json_converter import JsonConverter
from samsa.connect.data import (
    BOOLEAN_SCHEMA,
    BYTES_SCHEMA,
    FLOAT32_SCHEMA,
    FLOAT64_SCHEMA,
    INT8_SCHEMA,
    INT16_SCHEMA,
    INT32_SCHEMA,
    INT64_SCHEMA,
    OPTIONAL_BOOLEAN_SCHEMA,
    OPTIONAL_INT32_SCHEMA,
    OPTIONAL_STRING_SCHEMA,
    STRING_SCHEMA,
    Schema,
    SchemaAndValue,
    Struct,
    Type,
    array_schema,
    date_schema,
    decimal_schema,
    map_schema,
    struct_schema,
    time_schema,
    timestamp_schema,
)
from samsa.connect.errors import ConfigException, DataException


def conv(**props: object) -> JsonConverter:
    c = JsonConverter()
    c.configure({k.replace("_", "."): v for k, v in props.items()}, False)
    return c


def test_config_defaults() -> None:
    keys = JsonConverter().config().keys
    assert keys["schemas.enable"].default is True
    assert keys["schemas.cache.size"].default == 1000
    assert keys["decimal.format"].default == "BASE64"
    assert keys["replace.null.with.default"].default is True
    with pytest.raises(ConfigException):
        conv(decimal_format="HEX")
    assert conv(decimal_format="numeric").decimal_numeric


@pytest.mark.parametrize("schema,value,expected", [
    (BOOLEAN_SCHEMA, True, b'{"schema":{"type":"boolean","optional":false},"payload":true}'),
    (INT8_SCHEMA, 12, b'{"schema":{"type":"int8","optional":false},"payload":12}'),
    (INT16_SCHEMA, -12, b'{"schema":{"type":"int16","optional":false},"payload":-12}'),
    (INT32_SCHEMA, 12, b'{"schema":{"type":"int32","optional":false},"payload":12}'),
    (INT64_SCHEMA, 4398046511104, b'{"schema":{"type":"int64","optional":false},"payload":4398046511104}'),
    (FLOAT32_SCHEMA, 12.2, b'{"schema":{"type":"float","optional":false},"payload":12.2}'),
    (FLOAT64_SCHEMA, 12.2, b'{"schema":{"type":"double","optional":false},"payload":12.2}'),
    (FLOAT64_SCHEMA, 1e20, b'{"schema":{"type":"double","optional":false},"payload":1.0E20}'),
    (FLOAT64_SCHEMA, 3.0, b'{"schema":{"type":"double","optional":false},"payload":3.0}'),
    (BYTES_SCHEMA, b"test-string",
     b'{"schema":{"type":"bytes","optional":false},"payload":"dGVzdC1zdHJpbmc="}'),
    (STRING_SCHEMA, 'a"b\n\x01',
     b'{"schema":{"type":"string","optional":false},"payload":"a\\"b\\n\\u0001"}'),
    (OPTIONAL_STRING_SCHEMA, None, b'{"schema":{"type":"string","optional":true},"payload":null}'),
    (None, True, b'{"schema":null,"payload":true}'),
])
def test_primitive_envelopes(schema: Schema | None, value: object, expected: bytes) -> None:
    c = conv()
    assert c.from_connect_data("t", schema, value) == expected
    back = c.to_connect_data("t", expected)
    if schema is not None:
        assert back.schema == schema
    assert back.value == value or (isinstance(value, float) and abs(back.value - value) < 1e-6)


def test_schema_metadata_and_struct_shape() -> None:
    inner = struct_schema([("x", INT32_SCHEMA)], name="Inner", optional=True)
    s = struct_schema([("b", BOOLEAN_SCHEMA), ("s", OPTIONAL_STRING_SCHEMA), ("in", inner),
                       ("arr", array_schema(INT32_SCHEMA)),
                       ("m", map_schema(STRING_SCHEMA, INT32_SCHEMA)),
                       ("nm", map_schema(INT32_SCHEMA, INT32_SCHEMA))],
                      name="com.example.Rec", version=2, doc="a record")
    v = Struct(s, {"b": True, "s": None, "in": Struct(inner, {"x": 5}), "arr": [1, 2],
                   "m": {"k": 1}, "nm": {1: 12, 2: 15}})
    raw = conv().from_connect_data("t", s, v)
    assert raw == (
        b'{"schema":{"type":"struct","fields":['
        b'{"type":"boolean","optional":false,"field":"b"},'
        b'{"type":"string","optional":true,"field":"s"},'
        b'{"type":"struct","fields":[{"type":"int32","optional":false,"field":"x"}],'
        b'"optional":true,"name":"Inner","field":"in"},'
        b'{"type":"array","items":{"type":"int32","optional":false},"optional":false,"field":"arr"},'
        b'{"type":"map","keys":{"type":"string","optional":false},"values":{"type":"int32",'
        b'"optional":false},"optional":false,"field":"m"},'
        b'{"type":"map","keys":{"type":"int32","optional":false},"values":{"type":"int32",'
        b'"optional":false},"optional":false,"field":"nm"}],'
        b'"optional":false,"name":"com.example.Rec","version":2,"doc":"a record"},'
        b'"payload":{"b":true,"s":null,"in":{"x":5},"arr":[1,2],"m":{"k":1},"nm":[[1,12],[2,15]]}}')
    back = conv().to_connect_data("t", raw)
    assert back.schema == s and back.value == v


def test_logical_types_base64_and_numeric() -> None:
    s = struct_schema([("d", decimal_schema(2)), ("day", date_schema()), ("t", time_schema()),
                       ("ts", timestamp_schema())])
    v = Struct(s, {"d": decimal.Decimal("1.56"), "day": datetime.date(1970, 1, 1) + datetime.timedelta(10000),
                   "t": datetime.time(4, 0), "ts": datetime.datetime(2033, 5, 18, 3, 33, 20,
                                                                     tzinfo=datetime.UTC)})
    raw = conv().from_connect_data("t", s, v)
    doc = json.loads(raw)
    assert doc["schema"]["fields"][0] == {"type": "bytes", "optional": False,
                                          "name": "org.apache.kafka.connect.data.Decimal",
                                          "version": 1, "parameters": {"scale": "2"}, "field": "d"}
    assert raw.endswith(b'"payload":{"d":"AJw=","day":10000,"t":14400000,"ts":2000000000000}}')
    assert conv().to_connect_data("t", raw).value == v
    numeric = conv(decimal_format="NUMERIC").from_connect_data("t", s, v)
    assert b'"d":1.56,' in numeric
    assert conv().to_connect_data("t", numeric).value.get("d") == decimal.Decimal("1.56")
    # negative decimals: Java's minimal two's complement (-1.28 -> 0x80)
    one = conv().from_connect_data("t", decimal_schema(2), decimal.Decimal("-1.28"))
    assert one.endswith(b'"payload":"gA=="}')
    assert conv().to_connect_data("t", one).value == decimal.Decimal("-1.28")


def test_schemaless_mode() -> None:
    c = conv(schemas_enable="false")
    assert c.from_connect_data("t", None, {"a": [1, 2.5, None, "x"], "b": {"c": True}}) == \
        b'{"a":[1,2.5,null,"x"],"b":{"c":true}}'
    assert c.from_connect_data("t", None, {1: "a"}) == b'[[1,"a"]]'
    assert c.from_connect_data("t", INT32_SCHEMA, 5) == b"5"
    back = c.to_connect_data("t", b'{"a":[1,2.5,null,"x"],"big":12345678901234}')
    assert back.schema is None
    assert back.value == {"a": [1, 2.5, None, "x"], "big": 12345678901234}
    assert c.to_connect_data("t", b"null") == SchemaAndValue(None, None)
    assert c.to_connect_data("t", b"") == SchemaAndValue.NULL
    assert c.from_connect_data("t", None, None) is None


def test_nulls_and_defaults() -> None:
    c = conv()
    assert c.from_connect_data("t", None, None) is None
    assert c.to_connect_data("t", None) == SchemaAndValue.NULL
    with_default = Schema(Type.INT32, default=42)
    assert c.from_connect_data("t", with_default, None) == \
        b'{"schema":{"type":"int32","optional":false,"default":42},"payload":42}'
    back = c.to_connect_data("t", b'{"schema":{"type":"int32","optional":false,"default":42},'
                                  b'"payload":null}')
    assert back.value == 42 and back.schema.default == 42
    keep = conv(replace_null_with_default="false")
    opt_default = Schema(Type.INT32, optional=True, default=42)
    assert keep.from_connect_data("t", opt_default, None) == \
        b'{"schema":{"type":"int32","optional":true,"default":42},"payload":null}'
    assert keep.to_connect_data("t", b'{"schema":{"type":"int32","optional":true,"default":42},'
                                     b'"payload":null}').value is None
    s = struct_schema([("a", opt_default)])
    assert keep.from_connect_data("t", s, Struct(s, {"a": None})).endswith(b'"payload":{"a":null}}')
    assert c.from_connect_data("t", s, Struct(s, {"a": None})).endswith(b'"payload":{"a":42}}')
    with pytest.raises(DataException, match="null value for field that is required"):
        c.from_connect_data("t", INT32_SCHEMA, None)
    with pytest.raises(DataException, match="Invalid null value for required INT32"):
        c.to_connect_data("t", b'{"schema":{"type":"int32","optional":false},"payload":null}')
    assert c.to_connect_data("t", b'{"schema":{"type":"boolean","optional":true},"payload":null}') \
        == SchemaAndValue(OPTIONAL_BOOLEAN_SCHEMA, None)


@pytest.mark.parametrize("raw,match", [
    (b"not json", "serialization error"),
    (b'{"payload":1}', "requires \"schema\" and \"payload\""),
    (b'{"schema":null,"payload":1,"x":2}', "requires"),
    (b"[1]", "requires"),
    (b'{"schema":{"optional":true},"payload":1}', "Schema must contain 'type' field"),
    (b'{"schema":{"type":"nope"},"payload":1}', "Unknown schema type: nope"),
    (b'{"schema":{"type":"array"},"payload":[]}', "did not specify the element type"),
    (b'{"schema":{"type":"map","keys":{"type":"string"}},"payload":{}}', "value type"),
    (b'{"schema":{"type":"struct","fields":3},"payload":{}}', "not an array"),
    (b'{"schema":{"type":"struct","fields":[{"type":"int8"}]},"payload":{}}', "field name"),
    (b'{"schema":{"type":"int8","parameters":{"a":1}},"payload":1}', "string values"),
    (b'{"schema":{"type":"int8"},"payload":1000}', "out of range"),
    (b'{"schema":{"type":"int32"},"payload":"x"}', "Invalid JSON value"),
    (b'{"schema":{"type":"bytes"},"payload":"!!"}', "Invalid bytes"),
    (b'{"schema":{"type":"struct","fields":[]},"payload":[1]}', "Structs should be encoded"),
    (b'{"schema":{"type":"map","keys":{"type":"int32"},"values":{"type":"int32"}},"payload":[[1]]}',
     "expected length 2"),
    (b'{"schema":{"type":"int32","name":"org.apache.kafka.connect.data.Date"},"payload":"x"}',
     "Invalid type for Date"),
    (b'{"schema":{"type":"bytes","name":"org.apache.kafka.connect.data.Decimal",'
     b'"parameters":{"scale":"2"}},"payload":true}', "Invalid type for Decimal"),
    (b"[" * 5000 + b"]" * 5000, "serialization error"),
    (b'{"schema":null,"payload":NaN}', "serialization error"),
])
def test_bad_input_is_a_data_exception(raw: bytes, match: str) -> None:
    with pytest.raises(DataException, match=match):
        conv().to_connect_data("t", raw)


def test_bad_values_are_data_exceptions() -> None:
    c = conv()
    with pytest.raises(DataException):
        c.from_connect_data("t", INT32_SCHEMA, "x")
    with pytest.raises(DataException):
        c.from_connect_data("t", STRING_SCHEMA, 1)
    with pytest.raises(DataException, match="Mismatching schema"):
        c.from_connect_data("t", struct_schema([("a", INT32_SCHEMA)]),
                            Struct(struct_schema([("b", INT32_SCHEMA)]), {"b": 1}))
    with pytest.raises(DataException):
        c.from_connect_data("t", None, object())
    with pytest.raises(DataException, match="Invalid type for Decimal"):
        c.from_connect_data("t", decimal_schema(2), 1.5)


def test_java_number_text() -> None:
    c = conv(schemas_enable="false")
    cases = {1.0: b"1.0", 0.001: b"0.001", 0.0001: b"1.0E-4", 1234567.0: b"1234567.0",
             12345678.0: b"1.2345678E7", -0.0: b"-0.0", 0.1 + 0.2: b"0.30000000000000004"}
    for value, text in cases.items():
        assert c.from_connect_data("t", FLOAT64_SCHEMA, value) == text
    assert c.from_connect_data("t", FLOAT32_SCHEMA, 0.1) == b"0.1"
    assert c.from_connect_data("t", FLOAT32_SCHEMA, 1.1e10) == b"1.1E10"
    assert c.from_connect_data("t", FLOAT64_SCHEMA, float("nan")) == b'"NaN"'
    assert c.to_connect_data("t", b"1.0E-4").value == 0.0001


def test_schema_cache_is_bounded() -> None:
    c = conv(schemas_cache_size="2")
    for i in range(5):
        s = struct_schema([("a", OPTIONAL_INT32_SCHEMA)], name=f"n{i}")
        raw = c.from_connect_data("t", s, Struct(s, {"a": i}))
        assert c.to_connect_data("t", raw).value.get("a") == i
    assert len(c._from_cache) == 2 and len(c._to_cache) == 2


def test_header_methods() -> None:
    c = JsonConverter()
    c.configure({"converter.type": "header", "schemas.enable": "false"}, False)
    assert c.from_connect_header("t", "h", INT32_SCHEMA, 5) == b"5"
    assert c.to_connect_header("t", "h", b"[1]").value == [1]


def test_reads_what_kafka_writes_with_spaces_and_omitted_keys() -> None:
    c = conv()
    assert c.to_connect_data("t", b'{ "schema": null, "payload": null }') == SchemaAndValue.NULL
    assert c.to_connect_data("t", b'{ "schema": null, "payload": [1, "2", 3] }') == \
        SchemaAndValue(None, [1, "2", 3])
    sv = c.to_connect_data("t", b'{ "schema": { "type": "boolean", "default": true }, "payload": null }')
    assert sv == SchemaAndValue(Schema(Type.BOOLEAN, default=True), True)
    sv = c.to_connect_data("t", b'{ "schema": { "type": "boolean", "optional": false, "name": "bool", '
                                b'"version": 2, "doc": "the documentation", "parameters": '
                                b'{ "foo": "bar" }}, "payload": true }')
    assert sv.schema == Schema(Type.BOOLEAN, name="bool", version=2, doc="the documentation",
                               parameters=(("foo", "bar"),))
    sv = c.to_connect_data("t", b'{ "schema": { "type": "struct", "fields": [{ "field": "field1", '
                                b'"type": "boolean" }, { "field": "field2", "type": "string" }] }, '
                                b'"payload": { "field1": true, "field2": "string" } }')
    expected = struct_schema([("field1", BOOLEAN_SCHEMA), ("field2", STRING_SCHEMA)])
    assert sv == SchemaAndValue(expected, Struct(expected, {"field1": True, "field2": "string"}))
    sv = c.to_connect_data("t", b'{ "schema": { "type": "int64", "name": '
                                b'"org.apache.kafka.connect.data.Timestamp", "version": 1 }, '
                                b'"payload": 4000000000 }')
    assert sv == SchemaAndValue(timestamp_schema(), datetime.datetime(1970, 2, 16, 7, 6, 40,
                                                                      tzinfo=datetime.UTC))
