"""ValueToKey, ExtractField (V1 and V2 paths), HoistField and Flatten."""

from __future__ import annotations

import pytest

from samsa.connect.data import (
    INT32_SCHEMA,
    INT64_SCHEMA,
    OPTIONAL_INT32_SCHEMA,
    STRING_SCHEMA,
    SourceRecord,
    Struct,
    array_schema,
    map_schema,
    struct_schema,
)
from samsa.connect.errors import ConfigException, DataException
from samsa.connect.transforms.shape import (
    ExtractFieldKey,
    ExtractFieldValue,
    FlattenKey,
    FlattenValue,
    HoistFieldKey,
    HoistFieldValue,
    ValueToKey,
    parse_path,
)


def rec(value, schema=None, key=None, key_schema=None):
    return SourceRecord("t", 0, key_schema, key, schema, value, 5)


def configured(cls, **props):
    t = cls()
    t.configure({k.replace("_", "."): v for k, v in props.items()})
    return t


# ---- ValueToKey -------------------------------------------------------------------------------
def test_value_to_key_schemaless():
    out = configured(ValueToKey, fields="a,b").apply(rec({"a": 1, "b": 2, "c": 3}, key="old"))
    assert out.key == {"a": 1, "b": 2} and out.key_schema is None
    assert out.value == {"a": 1, "b": 2, "c": 3}


def test_value_to_key_with_schema():
    schema = struct_schema([("a", INT32_SCHEMA), ("b", INT32_SCHEMA), ("c", INT32_SCHEMA)])
    value = Struct(schema, {"a": 1, "b": 2, "c": 3})
    out = configured(ValueToKey, fields="a,b").apply(rec(value, schema))
    assert [f.name for f in out.key_schema.fields] == ["a", "b"]
    assert out.key.as_dict() == {"a": 1, "b": 2}
    assert out.value is value


def test_value_to_key_errors():
    schema = struct_schema([("a", INT32_SCHEMA)])
    with pytest.raises(DataException, match="Field does not exist: nope"):
        configured(ValueToKey, fields="nope").apply(rec(Struct(schema, {"a": 1}), schema))
    with pytest.raises(DataException, match="copying fields from value to key"):
        configured(ValueToKey, fields="a").apply(rec(None))
    with pytest.raises(ConfigException, match="fields"):
        configured(ValueToKey, fields="")


# ---- ExtractField -----------------------------------------------------------------------------
def test_extract_field_schemaless_and_null():
    t = configured(ExtractFieldKey, field="magic")
    assert t.apply(rec("v", key={"magic": 42})).key == 42
    assert t.apply(rec("v", key={"other": 1})).key is None
    assert t.apply(rec("v", key=None)).key is None
    with pytest.raises(DataException, match="field extraction"):
        t.apply(rec("v", key="not a map"))


def test_extract_field_with_schema():
    schema = struct_schema([("magic", INT32_SCHEMA), ("x", STRING_SCHEMA)])
    t = configured(ExtractFieldValue, field="magic")
    out = t.apply(rec(Struct(schema, {"magic": 42, "x": "y"}), schema))
    assert out.value == 42 and out.value_schema == INT32_SCHEMA
    null = t.apply(rec(None, schema))
    assert null.value is None and null.value_schema == INT32_SCHEMA
    with pytest.raises(DataException, match="Unknown field: nope"):
        configured(ExtractFieldValue, field="nope").apply(rec(Struct(schema, {"magic": 1, "x": ""}),
                                                              schema))


def test_extract_field_v2_nested():
    inner = struct_schema([("c", INT64_SCHEMA)])
    outer = struct_schema([("a.b", inner), ("a", STRING_SCHEMA)])
    value = Struct(outer, {"a.b": Struct(inner, {"c": 7}), "a": "x"})
    t = configured(ExtractFieldValue, field="`a.b`.c", field_syntax_version="V2")
    out = t.apply(rec(value, outer))
    assert out.value == 7 and out.value_schema == INT64_SCHEMA
    t2 = configured(ExtractFieldValue, field="a.b", field_syntax_version="v2")
    assert t2.apply(rec({"a": {"b": 3}})).value == 3
    # V1 takes the dotted name as one field
    assert configured(ExtractFieldValue, field="a.b").apply(rec({"a.b": 1, "a": {"b": 2}})).value == 1


def test_parse_path():
    assert parse_path("a.b.c", "V2") == ["a", "b", "c"]
    assert parse_path("`a.b`.c", "V2") == ["a.b", "c"]
    assert parse_path("a.`b``c`", "V2") == ["a", "b`c"]
    assert parse_path("a.b", "V1") == ["a.b"]
    with pytest.raises(ConfigException):
        configured(ExtractFieldValue, field="a", field_syntax_version="V3")


# ---- HoistField -------------------------------------------------------------------------------
def test_hoist_field():
    assert configured(HoistFieldKey, field="magic").apply(rec("v", key=42)).key == {"magic": 42}
    out = configured(HoistFieldValue, field="magic").apply(rec(42, INT32_SCHEMA))
    assert out.value_schema.field("magic").schema == INT32_SCHEMA
    assert out.value.get("magic") == 42
    with pytest.raises(ConfigException, match="field"):
        configured(HoistFieldValue)
    with pytest.raises(DataException):  # null into a required field
        configured(HoistFieldValue, field="f").apply(rec(None, INT32_SCHEMA))


# ---- Flatten ----------------------------------------------------------------------------------
def test_flatten_schemaless_nested_maps():
    value = {"a": {"b": {"c": 1}, "d": [1, 2]}, "e": None, "f": "x"}
    out = configured(FlattenValue).apply(rec(value))
    assert out.value == {"a.b.c": 1, "a.d": [1, 2], "e": None, "f": "x"}
    out = configured(FlattenKey, delimiter="_").apply(rec("v", key={"a": {"b": 1}}))
    assert out.key == {"a_b": 1}
    with pytest.raises(DataException, match="flattening"):
        configured(FlattenValue).apply(rec("s"))
    with pytest.raises(DataException, match="does not support"):
        configured(FlattenValue).apply(rec({"a": object()}))


def test_flatten_with_schema_optional_parent():
    inner = struct_schema([("x", INT32_SCHEMA), ("y", STRING_SCHEMA)], optional=True)
    outer = struct_schema([("id", INT32_SCHEMA), ("in", inner), ("arr", array_schema(INT32_SCHEMA))],
                          name="outer")
    value = Struct(outer, {"id": 1, "in": Struct(inner, {"x": 2, "y": "z"}), "arr": [3]})
    t = configured(FlattenValue)
    out = t.apply(rec(value, outer))
    assert [f.name for f in out.value_schema.fields] == ["id", "in.x", "in.y", "arr"]
    assert out.value_schema.field("in.x").schema == OPTIONAL_INT32_SCHEMA
    assert out.value_schema.name == "outer"
    assert out.value.as_dict() == {"id": 1, "in.x": 2, "in.y": "z", "arr": [3]}
    none_inner = Struct(outer, {"id": 1, "in": None, "arr": []})
    assert t.apply(rec(none_inner, outer)).value.as_dict() == {"id": 1, "in.x": None, "in.y": None,
                                                               "arr": []}
    assert t.apply(rec(None, outer)).value is None


def test_flatten_refuses_maps_with_schema():
    schema = struct_schema([("m", map_schema(STRING_SCHEMA, INT32_SCHEMA))])
    with pytest.raises(DataException, match="does not support MAP for record with schemas"):
        configured(FlattenValue).apply(rec(Struct(schema, {"m": {}}), schema))


def test_flatten_default_from_field():
    inner = struct_schema([("x", INT32_SCHEMA.with_(default=5))])
    outer = struct_schema([("in", inner)])
    out = configured(FlattenValue).apply(rec(Struct(outer, {"in": Struct(inner, {"x": 1})}), outer))
    assert out.value_schema.field("in.x").schema.default == 5


def test_replace_null_with_default_off_keeps_nulls():
    schema = struct_schema([("a", INT32_SCHEMA.with_(optional=True, default=9))])
    value = Struct(schema).put("a", None)
    on = configured(ExtractFieldValue, field="a").apply(rec(value, schema))
    off = configured(ExtractFieldValue, field="a",
                     replace_null_with_default="false").apply(rec(value, schema))
    assert (on.value, off.value) == (9, None)
    key_on = configured(ValueToKey, fields="a").apply(rec(value, schema))
    key_off = configured(ValueToKey, fields="a",
                         replace_null_with_default="false").apply(rec(value, schema))
    assert (key_on.key.get_without_default("a"), key_off.key.get_without_default("a")) == (9, None)
