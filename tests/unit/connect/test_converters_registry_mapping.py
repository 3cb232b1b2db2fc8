"""The registry converters' schema mappings and wire format, without a registry: Connect <->
Avro / Protobuf / JSON Schema and back, Confluent framing, subject name strategies."""

from __future__ import annotations

import datetime
import decimal
import json

import pytest

from samsa.connect.converters.avro import AvroConverter
from samsa.connect.converters.avro_data import avro_to_connect, connect_to_avro
from samsa.connect.converters.json_schema import (
    JsonSchemaConverter,
    connect_to_json_schema,
    json_schema_to_connect,
)
from samsa.connect.converters.protobuf import ProtobufConverter
from samsa.connect.converters.protobuf_data import connect_to_proto, read_indexes, write_indexes
from samsa.connect.converters.registry import frame, strategy_name, subject_name, unframe
from samsa.connect.data import (
    BOOLEAN_SCHEMA,
    BYTES_SCHEMA,
    FLOAT32_SCHEMA,
    FLOAT64_SCHEMA,
    INT8_SCHEMA,
    INT16_SCHEMA,
    INT32_SCHEMA,
    INT64_SCHEMA,
    OPTIONAL_STRING_SCHEMA,
    STRING_SCHEMA,
    Schema,
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

ADDRESS = struct_schema([("city", STRING_SCHEMA)], name="app.Address", optional=True)
USER = struct_schema([
    ("id", INT32_SCHEMA), ("small", INT8_SCHEMA), ("mid", INT16_SCHEMA), ("big", INT64_SCHEMA),
    ("f", FLOAT32_SCHEMA), ("d", FLOAT64_SCHEMA), ("ok", BOOLEAN_SCHEMA), ("name", OPTIONAL_STRING_SCHEMA),
    ("raw", BYTES_SCHEMA), ("tags", array_schema(STRING_SCHEMA)),
    ("scores", map_schema(STRING_SCHEMA, INT64_SCHEMA)), ("home", ADDRESS),
    ("price", decimal_schema(2)), ("born", date_schema()), ("at", time_schema()),
    ("ts", timestamp_schema()),
], name="app.User")


def user(**changes: object) -> Struct:
    values = {"id": 1, "small": -2, "mid": 300, "big": 1 << 40, "f": 1.5, "d": 0.1, "ok": True,
              "name": None, "raw": b"\x00\xff", "tags": ["a", "b"], "scores": {"x": 3},
              "home": Struct(ADDRESS, {"city": "Prague"}), "price": decimal.Decimal("-12.34"),
              "born": datetime.date(1999, 12, 31), "at": datetime.time(13, 14, 15, 16000),
              "ts": datetime.datetime(2024, 2, 29, 1, 2, 3, 4000, tzinfo=datetime.UTC)}
    values.update(changes)
    return Struct(USER, values)


# ---- framing and subjects ----------------------------------------------------------------------
def test_frame_and_subjects() -> None:
    assert frame(258, b"x") == b"\x00\x00\x00\x01\x02x"
    assert unframe(b"\x00\x00\x00\x01\x02x") == (258, b"x")
    for bad in (b"", b"\x00\x00", b"\x01\x00\x00\x00\x01x"):
        with pytest.raises(DataException, match="Unknown magic byte"):
            unframe(bad)
    assert subject_name("TopicNameStrategy", "orders", False, "a.B") == "orders-value"
    assert subject_name("TopicNameStrategy", "orders", True, None) == "orders-key"
    assert subject_name("RecordNameStrategy", "orders", False, "a.B") == "a.B"
    assert subject_name("TopicRecordNameStrategy", "orders", False, "a.B") == "orders-a.B"
    with pytest.raises(DataException):
        subject_name("RecordNameStrategy", "orders", False, None)
    assert strategy_name("io.confluent.kafka.serializers.subject.TopicRecordNameStrategy") == \
        "TopicRecordNameStrategy"
    with pytest.raises(ConfigException):
        strategy_name("com.example.Mine")


def test_configure_needs_url_and_bad_bytes_never_crash() -> None:
    with pytest.raises(ConfigException, match="schema.registry.url"):
        AvroConverter().configure({}, False)
    c = AvroConverter()
    c.configure({"schema.registry.url": "http://127.0.0.1:1", "value.subject.name.strategy":
                 "io.confluent.kafka.serializers.subject.RecordNameStrategy"}, False)
    assert c.strategy == "RecordNameStrategy" and c.auto_register and not c.use_latest
    with pytest.raises(DataException):
        c.to_connect_data("t", b"\x07garbage")
    assert c.to_connect_data("t", None).value is None
    assert c.from_connect_data("t", USER, None) is None


# ---- Avro --------------------------------------------------------------------------------------
def test_avro_schema_shape() -> None:
    avro = connect_to_avro(USER)
    assert avro["type"] == "record" and avro["name"] == "User" and avro["namespace"] == "app"
    fields = {f["name"]: f for f in avro["fields"]}
    assert fields["small"]["type"] == {"type": "int", "connect.type": "int8"}
    assert fields["mid"]["type"] == {"type": "int", "connect.type": "int16"}
    assert fields["big"]["type"] == "long" and fields["f"]["type"] == "float"
    assert fields["name"] == {"name": "name", "type": ["null", "string"], "default": None}
    assert fields["home"]["type"][0] == "null" and fields["home"]["type"][1]["name"] == "Address"
    assert fields["scores"]["type"] == {"type": "map", "values": "long"}
    assert fields["price"]["type"] == {
        "type": "bytes", "scale": 2, "precision": 64, "connect.version": 1,
        "connect.parameters": {"scale": "2"}, "connect.name": "org.apache.kafka.connect.data.Decimal",
        "logicalType": "decimal"}
    assert fields["born"]["type"]["logicalType"] == "date"
    assert fields["at"]["type"]["logicalType"] == "time-millis"
    assert fields["ts"]["type"] == {"type": "long", "connect.version": 1,
                                    "connect.name": "org.apache.kafka.connect.data.Timestamp",
                                    "logicalType": "timestamp-millis"}
    # unnamed structs and non-string map keys, as Confluent's AvroData names them
    anon = connect_to_avro(struct_schema([("m", map_schema(INT32_SCHEMA, STRING_SCHEMA)),
                                          ("s", struct_schema([("x", INT32_SCHEMA)]))]))
    assert (anon["namespace"], anon["name"]) == ("io.confluent.connect.avro", "ConnectDefault")
    assert anon["fields"][0]["type"]["items"]["name"] == "MapEntry"
    assert anon["fields"][1]["type"]["name"] == "ConnectDefault2"
    assert connect_to_avro(OPTIONAL_STRING_SCHEMA) == ["null", "string"]
    assert avro_to_connect(json.loads(json.dumps(connect_to_avro(USER)))) == USER


def test_avro_value_roundtrip() -> None:
    c = AvroConverter(client=object())
    fmt = c.to_format(USER)
    for value in (user(), user(name="n", home=None, tags=[], scores={})):
        payload = c.encode(fmt, USER, value)
        back = c.decode(fmt, payload)
        assert back.schema == USER and back.value == value
    with pytest.raises(DataException):
        c.decode(fmt, b"\x02")
    with pytest.raises(DataException):
        c.encode(fmt, USER, "not a struct")


def test_avro_foreign_schema_to_connect() -> None:
    c = AvroConverter(client=object())
    text = json.dumps({"type": "record", "name": "Evt", "namespace": "x", "fields": [
        {"name": "kind", "type": {"type": "enum", "name": "Kind", "symbols": ["A", "B"]}},
        {"name": "h", "type": {"type": "fixed", "name": "Hash", "size": 2}},
        {"name": "u", "type": ["null", "int", "string"]},
        {"name": "again", "type": "Kind"},
        {"name": "n", "type": "long", "default": 7}]})
    fmt = c.parse_registered(text, [])
    import io

    import fastavro
    buf = io.BytesIO()
    fastavro.schemaless_writer(buf, fmt.parsed, {"kind": "B", "h": b"ab", "u": "s", "again": "A", "n": 1})
    sv = c.decode(fmt, buf.getvalue())
    s = sv.schema
    assert s.name == "x.Evt"
    assert s.field("kind").schema.type is Type.STRING
    assert s.field("kind").schema.params["io.confluent.connect.avro.Enum"] == "x.Kind"
    assert s.field("h").schema.type is Type.BYTES
    union = s.field("u").schema
    assert union.name == "io.confluent.connect.avro.Union" and union.optional
    assert [f.name for f in union.fields] == ["int", "string"]
    assert sv.value.get("u").get("string") == "s" and sv.value.get("u").get("int") is None
    assert sv.value.get("kind") == "B" and sv.value.get("again") == "A" and sv.value.get("h") == b"ab"
    assert s.field("n").schema.default == 7


# ---- Protobuf ----------------------------------------------------------------------------------
def test_protobuf_text_and_roundtrip() -> None:
    s = struct_schema([("id", INT32_SCHEMA), ("name", OPTIONAL_STRING_SCHEMA),
                       ("tags", array_schema(STRING_SCHEMA)),
                       ("m", map_schema(STRING_SCHEMA, INT64_SCHEMA)), ("ts", timestamp_schema()),
                       ("home", ADDRESS)], name="shop.Order")
    text, full = connect_to_proto(s)
    assert full == "shop.Order"
    assert text == ('syntax = "proto3";\npackage shop;\nimport "google/protobuf/timestamp.proto";\n'
                    "message Order {\n  int32 id = 1;\n  string name = 2;\n  repeated string tags = 3;\n"
                    "  map<string, int64> m = 4;\n  google.protobuf.Timestamp ts = 5;\n"
                    "  Address home = 6;\n  message Address {\n    string city = 1;\n  }\n}\n")
    c = ProtobufConverter(client=object())
    fmt = c.to_format(s)
    v = Struct(s, {"id": 7, "name": "n", "tags": ["a"], "m": {"k": 2},
                   "ts": datetime.datetime(2024, 1, 1, 0, 0, 1, 5000, tzinfo=datetime.UTC),
                   "home": Struct(ADDRESS, {"city": "Brno"})})
    payload = c.encode(fmt, s, v)
    assert payload[0] == 0  # message index [0]: one zero byte
    back = c.decode(fmt, payload)
    assert back.schema.name == "shop.Order"
    assert all(f.schema.optional for f in back.schema.fields)  # proto3 fields are optional
    assert back.value.get("id") == 7 and back.value.get("tags") == ["a"]
    assert back.value.get("m") == {"k": 2} and back.value.get("ts") == v.get("ts")
    assert back.value.get("home").get("city") == "Brno"
    with pytest.raises(DataException):
        c.decode(fmt, b"\x00\xff\xff\xff")
    with pytest.raises(DataException):
        c.decode(fmt, b"\x02\x0a")  # message index 5: out of range
    with pytest.raises(DataException):
        c.to_format(INT32_SCHEMA)


def test_protobuf_message_indexes() -> None:
    assert write_indexes([0]) == b"\x00"
    assert write_indexes([1, 2]) == b"\x04\x02\x04"
    assert read_indexes(b"\x04\x02\x04rest") == ([1, 2], 3)
    assert read_indexes(b"\x00") == ([0], 1)
    with pytest.raises(DataException):
        read_indexes(b"\xff\xff")


# ---- JSON Schema -------------------------------------------------------------------------------
def test_json_schema_shape_and_roundtrip() -> None:
    js = connect_to_json_schema(USER)
    assert js["type"] == "object" and js["title"] == "app.User"
    props = js["properties"]
    assert props["id"] == {"type": "integer", "connect.type": "int32", "connect.index": 0}
    assert props["f"] == {"type": "number", "connect.type": "float32", "connect.index": 4}
    assert props["name"] == {"oneOf": [{"type": "null"}, {"type": "string"}], "connect.index": 7}
    assert props["raw"] == {"type": "string", "connect.type": "bytes", "connect.index": 8}
    assert props["scores"]["connect.type"] == "map"
    assert props["price"] == {"type": "number", "title": "org.apache.kafka.connect.data.Decimal",
                              "connect.version": 1, "connect.parameters": {"scale": "2"},
                              "connect.type": "bytes", "connect.index": 12}
    assert json_schema_to_connect(json.loads(json.dumps(js))) == USER
    c = JsonSchemaConverter(client=object())
    fmt = c.parse_registered(c.to_format(USER).text, [])
    payload = c.encode(c.to_format(USER), USER, user())
    doc = json.loads(payload)
    assert doc["price"] == -12.34 and doc["raw"] == "AP8=" and doc["born"] == 10956
    back = c.decode(fmt, payload)
    assert back.value == user()
    with pytest.raises(DataException):
        c.decode(fmt, b"{")
    with pytest.raises(DataException):
        c.decode(fmt, b'{"id":"x"}')


def test_json_schema_foreign() -> None:
    js = {"$schema": "http://json-schema.org/draft-07/schema#", "title": "Order", "type": "object",
          "properties": {"id": {"type": "string"}, "qty": {"type": "integer"},
                         "lines": {"type": "array", "items": {"$ref": "#/definitions/Line"}},
                         "meta": {"type": "object", "additionalProperties": {"type": "string"}}},
          "required": ["id"], "definitions": {"Line": {"type": "object", "properties": {
              "sku": {"type": ["string", "null"]}}}}}
    s = json_schema_to_connect(js)
    assert s.name == "Order"
    assert s.field("id").schema == STRING_SCHEMA
    assert s.field("qty").schema == Schema(Type.INT64, optional=True)
    assert s.field("lines").schema.value_schema.field("sku").schema == OPTIONAL_STRING_SCHEMA
    assert s.field("meta").schema.type is Type.MAP
    with pytest.raises(DataException):
        json_schema_to_connect({"type": "object", "properties": {"a": {"$ref": "other.json"}}})
    assert json_schema_to_connect({"type": "number"}) == FLOAT64_SCHEMA


def test_avro_general_union_roundtrip() -> None:
    c = AvroConverter(client=object())
    fmt = c.parse_registered(json.dumps({"type": "record", "name": "R", "fields": [
        {"name": "u", "type": ["null", "int", "string", {"type": "record", "name": "P",
                                                          "fields": [{"name": "x", "type": "int"}]}]}]}), [])
    import io

    import fastavro
    for datum in (5, "s", {"x": 1}, None):
        buf = io.BytesIO()
        fastavro.schemaless_writer(buf, fmt.parsed, {"u": datum})
        sv = c.decode(fmt, buf.getvalue())
        union = sv.value.get("u")
        out = c.to_format(sv.schema)
        assert json.loads(out.text)["fields"][0]["type"][0] == "null"
        again = c.decode(out, c.encode(out, sv.schema, sv.value))
        assert again.value == sv.value
        if datum is None:
            assert union is None
        else:
            assert [f.name for f in union.schema.fields if union.get(f.name) is not None] == \
                [{int: "int", str: "string", dict: "P"}[type(datum)]]
