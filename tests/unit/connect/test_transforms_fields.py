"""InsertField, ReplaceField and MaskField: schemaless and schema'd records, tombstones, bad input
and bad configs, with Kafka's config names and error behaviour."""

from __future__ import annotations

import datetime
import decimal

import pytest

from samsa.connect.data import (
    EPOCH,
    INT32_SCHEMA,
    INT64_SCHEMA,
    OPTIONAL_INT32_SCHEMA,
    OPTIONAL_STRING_SCHEMA,
    STRING_SCHEMA,
    SinkRecord,
    SourceRecord,
    Struct,
    struct_schema,
    timestamp_schema,
)
from samsa.connect.errors import ConfigException, DataException
from samsa.connect.transforms.fields import (
    InsertFieldKey,
    InsertFieldValue,
    MaskFieldValue,
    ReplaceFieldKey,
    ReplaceFieldValue,
)

PERSON = struct_schema([("name", STRING_SCHEMA), ("age", INT32_SCHEMA)], name="person", version=3,
                       doc="a person")


def person(name: str = "ann", age: int = 30) -> Struct:
    return Struct(PERSON, {"name": name, "age": age})


def source(value, schema=None, key=None, key_schema=None, topic="t", ts=1_700_000_000_123):
    return SourceRecord(topic, 2, key_schema, key, schema, value, ts)


def sink(value, schema=None, offset=42):
    return SinkRecord("t", 2, None, None, schema, value, 1_700_000_000_123, kafka_offset=offset)


def configured(cls, **props):
    t = cls()
    t.configure({k.replace("_", "."): v for k, v in props.items()})
    return t


# ---- InsertField ------------------------------------------------------------------------------
def test_insert_field_schemaless_all_fields():
    t = configured(InsertFieldValue, topic_field="topic", partition_field="part", offset_field="off",
                   timestamp_field="ts", static_field="src", static_value="db1")
    rec = sink({"a": 1})
    out = t.apply(rec)
    assert out.value == {"a": 1, "topic": "t", "part": 2, "off": 42, "src": "db1",
                         "ts": 1_700_000_000_123}  # schemaless: the timestamp's ms, as Kafka
    assert out.value_schema is None
    assert rec.value == {"a": 1}  # the input is untouched
    bare = SinkRecord("t", None, None, None, None, {"a": 1}, None, kafka_offset=1)
    assert t.apply(bare).value == {"a": 1, "topic": "t", "off": 1, "src": "db1"}


def test_insert_field_with_schema_timestamp_is_logical():
    t = configured(InsertFieldValue, timestamp_field="ts")
    out = t.apply(source(person(), PERSON))
    assert out.value.get("ts") == EPOCH + datetime.timedelta(milliseconds=1_700_000_000_123)
    assert t.apply(source(person(), PERSON, ts=None)).value.get("ts") is None


def test_insert_field_with_schema_optional_and_required_specs():
    t = configured(InsertFieldValue, topic_field="topic!", partition_field="part?",
                   timestamp_field="ts", static_field="src", static_value="x")
    rec = source(person(), PERSON)
    out = t.apply(rec)
    s = out.value_schema
    assert [f.name for f in s.fields] == ["name", "age", "topic", "part", "ts", "src"]
    assert s.field("topic").schema == STRING_SCHEMA
    assert s.field("part").schema == OPTIONAL_INT32_SCHEMA
    assert s.field("ts").schema == timestamp_schema(optional=True)
    assert s.field("src").schema == OPTIONAL_STRING_SCHEMA
    assert (s.name, s.version, s.doc) == ("person", 3, "a person")
    assert out.value.get("name") == "ann" and out.value.get("topic") == "t"
    assert out.value.get("part") == 2 and out.value.get("src") == "x"
    assert rec.value == person() and rec.value.schema is PERSON


def test_insert_field_key_variant():
    t = configured(InsertFieldKey, static_field="k", static_value="v")
    out = t.apply(source("val", key={"id": 1}))
    assert out.key == {"id": 1, "k": "v"} and out.value == "val"


def test_insert_field_tombstone_passes():
    t = configured(InsertFieldValue, topic_field="topic")
    rec = source(None)
    assert t.apply(rec) is rec


def test_insert_field_offset_needs_sink_record():
    t = configured(InsertFieldValue, offset_field="off")
    with pytest.raises(DataException, match="Only SinkRecord supported"):
        t.apply(source({"a": 1}))


def test_insert_field_schemaless_needs_map():
    t = configured(InsertFieldValue, topic_field="topic")
    with pytest.raises(DataException, match=r"Only Map objects supported in absence of schema for "
                                            r"\[field insertion\], found: str"):
        t.apply(source("plain"))


def test_insert_field_schema_needs_struct():
    t = configured(InsertFieldValue, topic_field="topic")
    with pytest.raises(DataException, match="Only Struct objects supported"):
        t.apply(source(5, INT32_SCHEMA))


def test_insert_field_duplicate_name():
    t = configured(InsertFieldValue, topic_field="name")
    with pytest.raises(DataException, match="duplication name"):
        t.apply(source(person(), PERSON))


def test_insert_field_bad_configs():
    with pytest.raises(ConfigException, match="No field insertion configured"):
        configured(InsertFieldValue)
    with pytest.raises(ConfigException, match="static.value"):
        configured(InsertFieldValue, static_field="x")


def test_insert_field_replace_null_with_default():
    schema = struct_schema([("n", INT32_SCHEMA.with_(optional=True, default=7))])
    value = Struct(schema).put("n", None)
    on = configured(InsertFieldValue, topic_field="t").apply(source(value, schema))
    off = InsertFieldValue()
    off.configure({"topic.field": "t", "replace.null.with.default": "false"})
    assert on.value.get_without_default("n") == 7
    assert off.apply(source(value, schema)).value.get_without_default("n") is None


# ---- ReplaceField -----------------------------------------------------------------------------
def test_replace_field_schemaless():
    t = configured(ReplaceFieldValue, exclude="dont", renames="abc:xyz,foo:bar")
    out = t.apply(source({"dont": 1, "abc": 42, "foo": True, "etc": "etc"}))
    assert out.value == {"xyz": 42, "bar": True, "etc": "etc"}


def test_replace_field_include_with_schema():
    schema = struct_schema([("dont", STRING_SCHEMA), ("abc", INT32_SCHEMA), ("foo", STRING_SCHEMA),
                            ("etc", STRING_SCHEMA)], name="n")
    value = Struct(schema, {"dont": "w", "abc": 42, "foo": "f", "etc": "e"})
    t = configured(ReplaceFieldValue, include="abc,foo,dont", exclude="dont", renames="abc:xyz")
    out = t.apply(source(value, schema))
    assert [f.name for f in out.value_schema.fields] == ["xyz", "foo"]
    assert out.value_schema.name == "n"
    assert out.value.as_dict() == {"xyz": 42, "foo": "f"}
    assert value.get("abc") == 42 and value.schema is schema


def test_replace_field_deprecated_names():
    t = configured(ReplaceFieldKey, blacklist="a", whitelist="a,b")
    out = t.apply(source("v", key={"a": 1, "b": 2, "c": 3}))
    assert out.key == {"b": 2}


def test_replace_field_tombstone_and_bad_input():
    t = configured(ReplaceFieldValue, exclude="a")
    rec = source(None)
    assert t.apply(rec) is rec
    with pytest.raises(DataException, match="field replacement"):
        t.apply(source([1, 2]))


def test_replace_field_bad_rename():
    with pytest.raises(ConfigException, match="Invalid rename mapping: a:b:c"):
        configured(ReplaceFieldValue, renames="a:b:c")
    with pytest.raises(ConfigException, match="Invalid rename mapping: ab"):
        configured(ReplaceFieldValue, renames="ab")


# ---- MaskField --------------------------------------------------------------------------------
def test_mask_field_schemaless_zero_values():
    value = {"i": 5, "f": 1.5, "b": True, "s": "secret", "d": decimal.Decimal("1.5"),
             "ts": datetime.datetime(2020, 1, 1, tzinfo=datetime.UTC), "l": [1], "m": {"a": 1},
             "keep": "k"}
    t = configured(MaskFieldValue, fields="i,f,b,s,d,ts,l,m,missing")
    out = t.apply(source(value))
    assert out.value == {"i": 0, "f": 0.0, "b": False, "s": "", "d": decimal.Decimal(0), "ts": EPOCH,
                         "l": [], "m": {}, "keep": "k", "missing": None}
    assert value["s"] == "secret"


def test_mask_field_with_schema_and_replacement():
    schema = struct_schema([("s", STRING_SCHEMA), ("n", INT64_SCHEMA), ("o", OPTIONAL_STRING_SCHEMA)])
    value = Struct(schema, {"s": "secret", "n": 9, "o": None})
    out = configured(MaskFieldValue, fields="s,n,o", replacement="123").apply(source(value, schema))
    assert out.value.as_dict() == {"s": "123", "n": 123, "o": None}
    assert out.value_schema == schema


def test_mask_field_bad_replacement_and_types():
    with pytest.raises(DataException, match="Unable to convert abc"):
        configured(MaskFieldValue, fields="n", replacement="abc").apply(source({"n": 1}))
    with pytest.raises(DataException, match="with custom replacement"):
        configured(MaskFieldValue, fields="b", replacement="1").apply(source({"b": True}))
    with pytest.raises(DataException, match="Cannot mask value of type"):
        configured(MaskFieldValue, fields="b").apply(source({"b": b"raw"}))


def test_mask_field_configs():
    with pytest.raises(ConfigException, match="fields"):
        configured(MaskFieldValue)
    with pytest.raises(ConfigException, match="Empty list"):
        configured(MaskFieldValue, fields="")
    with pytest.raises(ConfigException, match="String may not be empty"):
        configured(MaskFieldValue, fields="a", replacement="")


def test_mask_field_null_value_is_bad_input():
    with pytest.raises(DataException, match="mask fields"):
        configured(MaskFieldValue, fields="a").apply(source(None))


def test_derived_struct_schemas_copy_basics_not_optionality():
    """Kafka's SchemaUtil.copySchemaBasics copies name, version, doc and parameters only."""
    optional = PERSON.with_(optional=True, parameters={"p": "1"})
    out = configured(InsertFieldValue, topic_field="topic").apply(source(Struct(optional, {
        "name": "a", "age": 1}), optional))
    assert not out.value_schema.optional
    assert (out.value_schema.name, out.value_schema.params) == ("person", {"p": "1"})
    out = configured(ReplaceFieldValue, exclude="age").apply(source(Struct(optional, {
        "name": "a", "age": 1}), optional))
    assert not out.value_schema.optional
