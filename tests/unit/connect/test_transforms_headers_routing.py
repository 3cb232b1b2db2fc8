"""HeaderFrom, InsertHeader, DropHeaders, RegexRouter, SetSchemaMetadata, Filter and the
predicates TopicNameMatches, HasHeaderKey, RecordIsTombstone."""

from __future__ import annotations

import datetime
import decimal

import pytest

from samsa.connect.data import (
    BOOLEAN_SCHEMA,
    FLOAT32_SCHEMA,
    FLOAT64_SCHEMA,
    INT8_SCHEMA,
    INT16_SCHEMA,
    INT32_SCHEMA,
    INT64_SCHEMA,
    STRING_SCHEMA,
    Header,
    Headers,
    SinkRecord,
    SourceRecord,
    Struct,
    date_schema,
    decimal_schema,
    struct_schema,
    timestamp_schema,
)
from samsa.connect.errors import ConfigException, DataException
from samsa.connect.transforms.headers import (
    DropHeaders,
    HeaderFromKey,
    HeaderFromValue,
    InsertHeader,
    parse_literal,
)
from samsa.connect.transforms.predicates import HasHeaderKey, RecordIsTombstone, TopicNameMatches
from samsa.connect.transforms.routing import Filter, RegexRouter, SetSchemaMetadataKey, SetSchemaMetadataValue

SCHEMA = struct_schema([("a", INT32_SCHEMA), ("b", STRING_SCHEMA), ("c", INT32_SCHEMA)], name="abc")


def rec(value, schema=None, key=None, key_schema=None, topic="t", headers=None):
    return SourceRecord(topic, 0, key_schema, key, schema, value, 1, Headers(headers or []))


def configured(cls, **props):
    t = cls()
    t.configure({k.replace("_", "."): v for k, v in props.items()})
    return t


# ---- HeaderFrom ---------------------------------------------------------------------------------
def test_header_from_copy_schemaless():
    t = configured(HeaderFromValue, fields="a,b", headers="ha,hb", operation="copy")
    original = rec({"a": 1, "b": "x", "c": 3}, headers=[Header("old", STRING_SCHEMA, "o")])
    out = t.apply(original)
    assert out.value == {"a": 1, "b": "x", "c": 3}
    assert [(h.key, h.schema, h.value) for h in out.headers] == [
        ("old", STRING_SCHEMA, "o"), ("ha", None, 1), ("hb", None, "x")]
    assert len(original.headers) == 1


def test_header_from_move_with_schema():
    value = Struct(SCHEMA, {"a": 1, "b": "x", "c": 3})
    t = configured(HeaderFromValue, fields="a,b", headers="ha,hb", operation="move")
    out = t.apply(rec(value, SCHEMA))
    assert [f.name for f in out.value_schema.fields] == ["c"] and out.value_schema.name == "abc"
    assert out.value.as_dict() == {"c": 3}
    assert [(h.key, h.schema, h.value) for h in out.headers] == [("ha", INT32_SCHEMA, 1),
                                                                  ("hb", STRING_SCHEMA, "x")]
    assert value.get("a") == 1


def test_header_from_key_move_schemaless():
    t = configured(HeaderFromKey, fields="id", headers="id", operation="move")
    out = t.apply(rec("v", key={"id": 5, "z": 1}))
    assert out.key == {"z": 1} and out.headers.last_with_name("id").value == 5


def test_header_from_errors():
    with pytest.raises(ConfigException, match="same number of elements"):
        configured(HeaderFromValue, fields="a,b", headers="h", operation="copy")
    with pytest.raises(ConfigException, match="String must be one of"):
        configured(HeaderFromValue, fields="a", headers="h", operation="steal")
    t = configured(HeaderFromValue, fields="a", headers="h", operation="copy")
    with pytest.raises(DataException, match=r"\[header copy\]"):
        t.apply(rec("string"))
    with pytest.raises(DataException, match="not found"):
        configured(HeaderFromValue, fields="zz", headers="h", operation="copy").apply(
            rec(Struct(SCHEMA, {"a": 1, "b": "", "c": 2}), SCHEMA))


# ---- InsertHeader / DropHeaders ---------------------------------------------------------------
@pytest.mark.parametrize("text,schema,value", [
    ("true", BOOLEAN_SCHEMA, True),
    ("12", INT8_SCHEMA, 12),
    ("1000", INT16_SCHEMA, 1000),
    ("100000", INT32_SCHEMA, 100000),
    ("10000000000", INT64_SCHEMA, 10000000000),
    ("1.5", FLOAT32_SCHEMA, 1.5),
    ("1.0", INT8_SCHEMA, 1),
    ("-1.1", FLOAT32_SCHEMA, -1.1),
    ("1.5e300", FLOAT64_SCHEMA, 1.5e300),
    ("99999999999999999999", decimal_schema(0), decimal.Decimal("99999999999999999999")),
    ("2020-02-03", date_schema(), datetime.date(2020, 2, 3)),
    ("2020-02-03T04:05:06.007Z", timestamp_schema(),
     datetime.datetime(2020, 2, 3, 4, 5, 6, 7000, tzinfo=datetime.UTC)),
    ("hello world", STRING_SCHEMA, "hello world"),
    ("null", None, None),
    ("", STRING_SCHEMA, ""),
])
def test_parse_literal(text, schema, value):
    parsed = parse_literal(text)
    assert parsed.schema == schema and parsed.value == value


@pytest.mark.parametrize("literal,schema,value", [
    ("1.0", FLOAT32_SCHEMA, 1.0),  # InsertHeader keeps a written decimal point a float
    ("7", INT8_SCHEMA, 7),
    ("true", BOOLEAN_SCHEMA, True),
    ("abc", STRING_SCHEMA, "abc"),
    ("1.0e400", decimal_schema(0), None),  # beyond doubles: a Decimal
])
def test_insert_header_literal_types(literal, schema, value):
    out = configured(InsertHeader, header="h", value_literal=literal).apply(rec("v"))
    h = out.headers.last_with_name("h")
    assert h.schema.type is schema.type
    if value is not None:
        assert h.value == value


def test_insert_and_drop_headers():
    t = configured(InsertHeader, header="source", value_literal="db-1")
    original = rec("v", headers=[Header("x", None, 1)])
    out = t.apply(original)
    assert [(h.key, h.value) for h in out.headers] == [("x", 1), ("source", "db-1")]
    assert len(original.headers) == 1
    drop = configured(DropHeaders, headers="x,nope")
    dropped = drop.apply(out.new_record(headers=Headers([*out.headers, Header("x", None, 2)])))
    assert [h.key for h in dropped.headers] == ["source"]
    with pytest.raises(ConfigException, match="header"):
        configured(InsertHeader, value_literal="v")
    with pytest.raises(ConfigException, match="value.literal"):
        configured(InsertHeader, header="h")
    with pytest.raises(ConfigException, match="Empty list"):
        configured(DropHeaders, headers="")


# ---- RegexRouter ------------------------------------------------------------------------------
@pytest.mark.parametrize("regex,replacement,topic,expected", [
    ("(.*)", "prefix-$1", "orders", "prefix-orders"),
    ("(.*)-(\\d+)", "$2_$1", "orders-12", "12_orders"),
    ("(?<name>[a-z]+)\\.(.*)", "${name}_x", "db.table", "db_x"),
    ("a(b)?c", "[$1]", "ac", "[]"),
    ("(.*)", "\\$1-$1", "t", "$1-t"),
    ("orders", "nope", "orders-1", "orders-1"),  # the regex must match the whole topic
    ("(a)(b)(c)(d)(e)(f)(g)(h)(i)(j)", "$10$11", "abcdefghij", "ja1"),
])
def test_regex_router(regex, replacement, topic, expected):
    t = configured(RegexRouter, regex=regex, replacement=replacement)
    assert t.apply(rec("v", topic=topic)).topic == expected


def test_regex_router_errors():
    with pytest.raises(ConfigException, match="regex"):
        configured(RegexRouter, replacement="x")
    with pytest.raises(ConfigException, match="Invalid regex"):
        configured(RegexRouter, regex="(", replacement="x")
    with pytest.raises(DataException, match="No group 2"):
        configured(RegexRouter, regex="(.*)", replacement="$2").apply(rec("v"))


def test_regex_router_keeps_sink_record_origin():
    r = SinkRecord("orders", 3, None, None, None, "v", 1, kafka_offset=9)
    out = configured(RegexRouter, regex="(.*)", replacement="x-$1").apply(r)
    assert (out.topic, out.original_topic, out.kafka_offset) == ("x-orders", "orders", 9)


# ---- SetSchemaMetadata ------------------------------------------------------------------------
def test_set_schema_metadata():
    value = Struct(SCHEMA, {"a": 1, "b": "x", "c": 2})
    out = configured(SetSchemaMetadataValue, schema_name="foo", schema_version="42").apply(rec(value, SCHEMA))
    assert (out.value_schema.name, out.value_schema.version) == ("foo", 42)
    assert out.value.schema is out.value_schema and out.value.get("b") == "x"
    assert value.schema is SCHEMA
    out = configured(SetSchemaMetadataKey, schema_version="7").apply(rec("v", key=5, key_schema=INT32_SCHEMA))
    assert out.key_schema.version == 7 and out.key_schema.name is None and out.key == 5
    with pytest.raises(ConfigException, match="Neither schema name nor version"):
        configured(SetSchemaMetadataValue)
    with pytest.raises(DataException, match="Schema required for"):
        configured(SetSchemaMetadataValue, schema_name="x").apply(rec({"a": 1}))


def test_filter_drops():
    assert configured(Filter).apply(rec("v")) is None


# ---- predicates -------------------------------------------------------------------------------
def test_topic_name_matches():
    p = configured(TopicNameMatches, pattern="my-prefix-.*")
    assert p.test(rec("v", topic="my-prefix-orders"))
    assert not p.test(rec("v", topic="other-my-prefix-orders"))
    with pytest.raises(ConfigException, match="pattern"):
        configured(TopicNameMatches)
    with pytest.raises(ConfigException, match="valid regular expression"):
        configured(TopicNameMatches, pattern="[")
    with pytest.raises(ConfigException, match="may not be empty"):
        configured(TopicNameMatches, pattern="")


def test_has_header_key_and_tombstone():
    p = configured(HasHeaderKey, name="h")
    assert p.test(rec("v", headers=[Header("h", None, None)]))
    assert not p.test(rec("v", headers=[Header("x", None, 1)]))
    with pytest.raises(ConfigException, match="name"):
        configured(HasHeaderKey)
    t = configured(RecordIsTombstone)
    assert t.test(rec(None)) and not t.test(rec("v"))
