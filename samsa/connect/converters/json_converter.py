"""Kafka's JsonConverter: Connect data as JSON, by default wrapped in the
{"schema": ..., "payload": ...} envelope with the schema in Connect's own JSON form. The bytes are
the ones Kafka's converter writes (key order, compact separators, Java number text, base64 bytes),
so topics written by either are read by the other.

Deliberate difference: a JSON value of the wrong type for its schema (a string where an int32 is
expected) is a DataException here; Kafka's Jackson accessors quietly turn it into 0/false/null."""

from __future__ import annotations

import base64
import binascii
import datetime
import decimal
import json
from collections import OrderedDict
from collections.abc import Callable
from typing import Any

from ..api import Converter
from ..config_def import ConfigDef, ConfigType, Importance, at_least, one_of
from ..data import (
    DATE_NAME,
    DECIMAL_NAME,
    TIME_NAME,
    TIMESTAMP_NAME,
    Field,
    Headers,
    Schema,
    SchemaAndValue,
    Struct,
    Type,
    decimal_from_bytes,
    from_logical,
    to_logical,
)
from ..errors import DataException
from ._java import Float32, write_json
from .simple import TYPE_CONFIG

SCHEMAS_ENABLE = "schemas.enable"
SCHEMAS_CACHE_SIZE = "schemas.cache.size"
DECIMAL_FORMAT = "decimal.format"
REPLACE_NULL_WITH_DEFAULT = "replace.null.with.default"


def json_converter_config() -> ConfigDef:
    return (ConfigDef()
            .define(SCHEMAS_ENABLE, ConfigType.BOOLEAN, True, None, Importance.HIGH,
                    "Include schemas within each of the serialized values and keys.",
                    group="Schemas", order_in_group=0, display_name="Enable Schemas")
            .define(SCHEMAS_CACHE_SIZE, ConfigType.INT, 1000, at_least(0), Importance.HIGH,
                    "The maximum number of schemas that can be cached in this converter instance.",
                    group="Schemas", order_in_group=1, display_name="Schema Cache Size")
            .define(DECIMAL_FORMAT, ConfigType.STRING, "BASE64",
                    one_of("BASE64", "NUMERIC", case_insensitive=True), Importance.LOW,
                    "Controls which format this converter will serialize decimals in. This value "
                    "is case insensitive and can be either 'BASE64' (default) or 'NUMERIC'",
                    group="Serialization", order_in_group=0, display_name="Decimal Format")
            .define(REPLACE_NULL_WITH_DEFAULT, ConfigType.BOOLEAN, True, None, Importance.LOW,
                    "Whether to replace fields that have a default value and that are null to the "
                    "default value. When set to true, the default value is used, otherwise null "
                    "is used.", group="Serialization", order_in_group=1,
                    display_name="Replace null with default")
            .define(TYPE_CONFIG, ConfigType.STRING, "key", one_of("key", "value", "header"),
                    Importance.LOW, "How this converter will be used."))


class _LRU:
    def __init__(self, size: int) -> None:
        self.size = size
        self.items: OrderedDict[Any, Any] = OrderedDict()

    def get(self, key: Any) -> Any:
        try:
            value = self.items[key]
        except (KeyError, TypeError):
            return None
        self.items.move_to_end(key)
        return value

    def put(self, key: Any, value: Any) -> None:
        if self.size <= 0:
            return
        try:
            self.items[key] = value
        except TypeError:  # an unhashable default value: just do not cache it
            return
        self.items.move_to_end(key)
        while len(self.items) > self.size:
            self.items.popitem(last=False)

    def __len__(self) -> int:
        return len(self.items)


_TYPE_NAMES = {t.value: t for t in Type}


def _node_type(node: Any) -> str:
    if node is None:
        return "NULL"
    if isinstance(node, bool):
        return "BOOLEAN"
    if isinstance(node, int | float | decimal.Decimal):
        return "NUMBER"
    if isinstance(node, str):
        return "STRING"
    if isinstance(node, list):
        return "ARRAY"
    return "OBJECT"


class JsonConverter(Converter):
    """Connect data <-> JSON. Also a header converter (header values use the same form)."""

    def __init__(self) -> None:
        self.schemas_enabled = True
        self.decimal_numeric = False
        self.replace_null_with_default = True
        self._from_cache = _LRU(1000)
        self._to_cache = _LRU(1000)

    def config(self) -> ConfigDef:
        return json_converter_config()

    def configure(self, configs: dict[str, Any], is_key: bool = False) -> None:
        conf = dict(configs)
        conf.setdefault(TYPE_CONFIG, "key" if is_key else "value")
        parsed = self.config().parse(conf)
        self.schemas_enabled = bool(parsed[SCHEMAS_ENABLE])
        self.decimal_numeric = str(parsed[DECIMAL_FORMAT]).upper() == "NUMERIC"
        self.replace_null_with_default = bool(parsed[REPLACE_NULL_WITH_DEFAULT])
        self._from_cache = _LRU(int(parsed[SCHEMAS_CACHE_SIZE]))
        self._to_cache = _LRU(int(parsed[SCHEMAS_CACHE_SIZE]))

    # ---- bytes out ------------------------------------------------------------------------------
    def from_connect_data(self, topic: str, schema: Schema | None, value: Any,
                          headers: Headers | None = None) -> bytes | None:
        if schema is None and value is None:
            return None
        payload = self.to_json(schema, value)
        try:
            if self.schemas_enabled:
                text = '{"schema":' + self.schema_text(schema) + ',"payload":' + write_json(payload) + "}"
            else:
                text = write_json(payload)
        except TypeError as e:
            raise DataException(f"Converting Kafka Connect data to byte[] failed due to "
                                f"serialization error: {e}") from None
        return text.encode("utf-8", "surrogatepass")

    def from_connect_header(self, topic: str, header_key: str, schema: Schema | None,
                            value: Any) -> bytes | None:
        return self.from_connect_data(topic, schema, value)

    def schema_text(self, schema: Schema | None) -> str:
        """The schema's JSON text (cached per schema, as Kafka caches the JSON node)."""
        if schema is None:
            return "null"
        cached = self._from_cache.get(schema)
        if cached is None:
            cached = write_json(self.as_json_schema(schema))
            self._from_cache.put(schema, cached)
        return str(cached)

    def as_json_schema(self, schema: Schema) -> dict[str, Any]:
        """Connect's JSON form of a schema, keys in the order Kafka writes them."""
        out: dict[str, Any] = {"type": schema.type.value}
        if schema.type is Type.ARRAY:
            out["items"] = self.as_json_schema(_need(schema.value_schema, "array items"))
        elif schema.type is Type.MAP:
            out["keys"] = self.as_json_schema(_need(schema.key_schema, "map keys"))
            out["values"] = self.as_json_schema(_need(schema.value_schema, "map values"))
        elif schema.type is Type.STRUCT:
            fields = []
            for f in schema.fields:
                fj = self.as_json_schema(f.schema)
                fj["field"] = f.name
                fields.append(fj)
            out["fields"] = fields
        out["optional"] = schema.optional
        if schema.name is not None:
            out["name"] = schema.name
        if schema.version is not None:
            out["version"] = schema.version
        if schema.doc is not None:
            out["doc"] = schema.doc
        if schema.parameters:
            out["parameters"] = dict(schema.parameters)
        if schema.default is not None:
            out["default"] = self.to_json(schema, schema.default)
        return out

    def to_json(self, schema: Schema | None, value: Any) -> Any:
        """A Connect value as a JSON tree (see _java.write_json for the node types)."""
        if value is None:
            if schema is None:
                return None
            if schema.default is not None and self.replace_null_with_default:
                return self.to_json(schema, schema.default)
            if schema.optional:
                return None
            raise DataException("Conversion error: null value for field that is required and has "
                                "no default value")
        if schema is not None and schema.name in _LOGICAL:
            return self._logical_to_json(schema, value)
        t = schema.type if schema is not None else _infer_type(value)
        try:
            if t in (Type.INT8, Type.INT16, Type.INT32, Type.INT64):
                if isinstance(value, bool) or not isinstance(value, int):
                    raise TypeError
                return value
            if t in (Type.FLOAT32, Type.FLOAT64):
                if isinstance(value, bool) or not isinstance(value, int | float):
                    raise TypeError
                return Float32(value) if t is Type.FLOAT32 else float(value)
            if t is Type.BOOLEAN:
                if not isinstance(value, bool):
                    raise TypeError
                return value
            if t is Type.STRING:
                if not isinstance(value, str):
                    raise TypeError
                return value
            if t is Type.BYTES:
                if not isinstance(value, bytes | bytearray | memoryview):
                    raise TypeError
                return bytes(value)
            if t is Type.ARRAY:
                if not isinstance(value, list | tuple):
                    raise TypeError
                item = schema.value_schema if schema is not None else None
                return [self.to_json(item, v) for v in value]
            if t is Type.MAP:
                if not isinstance(value, dict):
                    raise TypeError
                ks = schema.key_schema if schema is not None else None
                vs = schema.value_schema if schema is not None else None
                object_mode = all(isinstance(k, str) for k in value) if schema is None \
                    else ks is not None and ks.type is Type.STRING
                if object_mode:
                    return {_as_text(self.to_json(ks, k)): self.to_json(vs, v) for k, v in value.items()}
                return [[self.to_json(ks, k), self.to_json(vs, v)] for k, v in value.items()]
            if t is Type.STRUCT:
                if not isinstance(value, Struct):
                    raise TypeError
                if schema is None or value.schema != schema:
                    raise DataException("Mismatching schema.")
                get: Callable[[str], Any] = value.get if self.replace_null_with_default \
                    else value.get_without_default
                obj: dict[str, Any] = {}
                for f in schema.fields:
                    fv = get(f.name)
                    obj[f.name] = self._field_to_json(f, fv)
                return obj
        except TypeError:
            what = schema.type.name if schema is not None else "unknown schema"
            raise DataException(f"Invalid type for {what}: {type(value).__name__}") from None
        raise DataException(f"Couldn't convert {value!r} to JSON.")

    def _field_to_json(self, f: Field, value: Any) -> Any:
        if value is None and not self.replace_null_with_default and f.schema.optional:
            return None
        return self.to_json(f.schema, value)

    def _logical_to_json(self, schema: Schema, value: Any) -> Any:
        if schema.name == DECIMAL_NAME:
            if not isinstance(value, decimal.Decimal):
                raise DataException(f"Invalid type for Decimal, expected BigDecimal but was "
                                    f"{type(value).__name__}")
            if self.decimal_numeric:
                return value
            return from_logical(schema, value)
        kinds = {DATE_NAME: (datetime.date, "Date"), TIME_NAME: (datetime.time, "Time"),
                 TIMESTAMP_NAME: (datetime.datetime, "Timestamp")}
        expected, label = kinds[str(schema.name)]
        if not isinstance(value, expected):
            raise DataException(f"Invalid type for {label}, expected Date but was "
                                f"{type(value).__name__}")
        return from_logical(schema, value)

    # ---- bytes in -------------------------------------------------------------------------------
    def to_connect_data(self, topic: str, value: bytes | None,
                        headers: Headers | None = None) -> SchemaAndValue:
        if value is None:
            return SchemaAndValue.NULL
        if not bytes(value).strip() and not self.schemas_enabled:
            return SchemaAndValue.NULL  # Jackson reads no content as a missing node: null
        try:
            node = json.loads(bytes(value), parse_float=decimal.Decimal,
                              parse_constant=_reject_constant)
        except (ValueError, RecursionError) as e:
            raise DataException(f"Converting byte[] to Kafka Connect data failed due to "
                                f"serialization error: {e}") from None
        if self.schemas_enabled:
            if not (isinstance(node, dict) and len(node) == 2 and "schema" in node and "payload" in node):
                raise DataException(
                    'JsonConverter with schemas.enable requires "schema" and "payload" fields and '
                    "may not contain additional fields. If you are trying to deserialize plain JSON "
                    "data, set schemas.enable=false in your converter configuration.")
            schema_node, payload = node["schema"], node["payload"]
        else:
            schema_node, payload = None, node
        try:
            schema = self.as_connect_schema(schema_node)
            return SchemaAndValue(schema, self.to_connect(schema, payload))
        except RecursionError:
            raise DataException("JSON nested too deeply") from None

    def to_connect_header(self, topic: str, header_key: str, value: bytes | None) -> SchemaAndValue:
        return self.to_connect_data(topic, value)

    def as_connect_schema(self, node: Any) -> Schema | None:
        if node is None:
            return None
        if not isinstance(node, dict):
            raise DataException("Schema must contain 'type' field")
        key = write_json(node)
        cached = self._to_cache.get(key)
        if cached is not None:
            return cached  # type: ignore[no-any-return]
        schema = self._build_schema(node)
        self._to_cache.put(key, schema)
        return schema

    def _build_schema(self, node: dict[str, Any]) -> Schema:
        tname = node.get("type")
        if not isinstance(tname, str):
            raise DataException("Schema must contain 'type' field")
        t = _TYPE_NAMES.get(tname)
        if t is None:
            raise DataException(f"Unknown schema type: {tname}")
        attrs: dict[str, Any] = {}
        if t is Type.ARRAY:
            items = node.get("items")
            if items is None:
                raise DataException("Array schema did not specify the element type")
            attrs["value_schema"] = self.as_connect_schema(items)
        elif t is Type.MAP:
            if "keys" not in node:
                raise DataException("Map schema did not specify the key type")
            if "values" not in node:
                raise DataException("Map schema did not specify the value type")
            attrs["key_schema"] = self.as_connect_schema(node["keys"])
            attrs["value_schema"] = self.as_connect_schema(node["values"])
        elif t is Type.STRUCT:
            fields = node.get("fields")
            if not isinstance(fields, list):
                raise DataException('Struct schema\'s "fields" argument is not an array.')
            out: list[Field] = []
            seen: set[str] = set()
            for i, fnode in enumerate(fields):
                fname = fnode.get("field") if isinstance(fnode, dict) else None
                if not isinstance(fname, str):
                    raise DataException("Struct schema's field name not specified properly")
                if fname in seen:
                    raise DataException(f"Cannot create field because of field name duplication {fname}")
                seen.add(fname)
                fschema = self.as_connect_schema(fnode)
                assert fschema is not None
                out.append(Field(fname, i, fschema))
            attrs["fields"] = tuple(out)
        attrs["optional"] = node.get("optional") is True
        if isinstance(node.get("name"), str):
            attrs["name"] = node["name"]
        version = node.get("version")
        if isinstance(version, int) and not isinstance(version, bool):
            attrs["version"] = version
        if isinstance(node.get("doc"), str):
            attrs["doc"] = node["doc"]
        params = node.get("parameters")
        if isinstance(params, dict):
            for v in params.values():
                if not isinstance(v, str):
                    raise DataException("Schema parameters must have string values.")
            attrs["parameters"] = tuple(params.items())
        if (t in (Type.ARRAY, Type.MAP) and (attrs.get("value_schema") is None
                                            or (t is Type.MAP and attrs.get("key_schema") is None))):
            raise DataException(f"{t.value} schema with a null element schema")
        schema = Schema(t, **attrs)
        if "default" in node and node["default"] is not None:
            default = self.to_connect(schema, node["default"])
            schema = Schema(t, default=default, **attrs)
        return schema

    def to_connect(self, schema: Schema | None, node: Any) -> Any:
        if schema is not None:
            if node is None:
                if schema.default is not None and self.replace_null_with_default:
                    return schema.default
                if schema.optional:
                    return None
                raise DataException(f"Invalid null value for required {schema.type.name} field")
            t = schema.type
        else:
            if node is None:
                return None
            if isinstance(node, bool):
                t = Type.BOOLEAN
            elif isinstance(node, int):
                t = Type.INT64
            elif isinstance(node, float | decimal.Decimal):
                t = Type.FLOAT64
            elif isinstance(node, str):
                t = Type.STRING
            elif isinstance(node, list):
                t = Type.ARRAY
            else:
                t = Type.MAP
        if schema is not None and schema.name in _LOGICAL:
            return self._logical_to_connect(schema, node)
        return _TO_CONNECT[t](self, schema, node)

    def _logical_to_connect(self, schema: Schema, node: Any) -> Any:
        name = schema.name
        if name == DECIMAL_NAME:
            if isinstance(node, int | decimal.Decimal) and not isinstance(node, bool):
                return decimal.Decimal(node)
            if isinstance(node, str):
                try:
                    return decimal_from_bytes(schema, base64.b64decode(node, validate=True))
                except (binascii.Error, ValueError) as e:
                    raise DataException(f"Invalid bytes for Decimal field: {e}") from None
            raise DataException(f"Invalid type for Decimal, underlying representation should be "
                                f"numeric or bytes but was {_node_type(node)}")
        label = {DATE_NAME: "Date", TIME_NAME: "Time", TIMESTAMP_NAME: "Timestamp"}[str(name)]
        if not isinstance(node, int) or isinstance(node, bool) or \
                (name != TIMESTAMP_NAME and not -(1 << 31) <= node < (1 << 31)):
            what = "integral" if name == TIMESTAMP_NAME else "integer"
            raise DataException(f"Invalid type for {label}, underlying representation should be "
                                f"{what} but was {_node_type(node)}")
        try:
            return to_logical(schema, node)
        except OverflowError:
            raise DataException(f"{label} value {node} is out of range") from None


_LOGICAL = (DECIMAL_NAME, DATE_NAME, TIME_NAME, TIMESTAMP_NAME)
_BITS = {Type.INT8: 8, Type.INT16: 16, Type.INT32: 32, Type.INT64: 64}


def _need(schema: Schema | None, what: str) -> Schema:
    if schema is None:
        raise DataException(f"Couldn't translate a schema without {what}")
    return schema


def _as_text(node: Any) -> str:
    """Jackson's asText() of a map key node."""
    if isinstance(node, str):
        return node
    return write_json(node)


def _infer_type(value: Any) -> Type:
    if isinstance(value, bool):
        return Type.BOOLEAN
    if isinstance(value, int):
        return Type.INT64 if not -(1 << 31) <= value < (1 << 31) else Type.INT32
    if isinstance(value, float):
        return Type.FLOAT64
    if isinstance(value, str):
        return Type.STRING
    if isinstance(value, bytes | bytearray | memoryview):
        return Type.BYTES
    if isinstance(value, list | tuple):
        return Type.ARRAY
    if isinstance(value, dict):
        return Type.MAP
    if isinstance(value, Struct):
        return Type.STRUCT
    raise DataException(f"Java class {type(value).__name__} does not have corresponding schema type.")


def _reject_constant(name: str) -> Any:
    raise ValueError(f"non-standard JSON number {name}")


def _bad(schema: Schema | None, node: Any) -> DataException:
    t = schema.type.name if schema is not None else "schemaless"
    return DataException(f"Invalid JSON value for {t}: a {_node_type(node)}")


def _int(c: JsonConverter, schema: Schema | None, node: Any) -> Any:
    if isinstance(node, bool) or not isinstance(node, int):
        raise _bad(schema, node)
    bits = _BITS[schema.type] if schema is not None else 64
    if not -(1 << (bits - 1)) <= node < (1 << (bits - 1)):
        raise DataException(f"{node} is out of range for {schema.type.name if schema else 'INT64'}")
    return node


def _float(c: JsonConverter, schema: Schema | None, node: Any) -> Any:
    if isinstance(node, str) and node in ("NaN", "Infinity", "-Infinity"):
        return float(node)
    if isinstance(node, bool) or not isinstance(node, int | float | decimal.Decimal):
        raise _bad(schema, node)
    return float(node)


def _bool(c: JsonConverter, schema: Schema | None, node: Any) -> Any:
    if not isinstance(node, bool):
        raise _bad(schema, node)
    return node


def _str(c: JsonConverter, schema: Schema | None, node: Any) -> Any:
    if not isinstance(node, str):
        raise _bad(schema, node)
    return node


def _bytes(c: JsonConverter, schema: Schema | None, node: Any) -> Any:
    if not isinstance(node, str):
        raise DataException("Invalid bytes field")
    try:
        return base64.b64decode(node, validate=True)
    except (binascii.Error, ValueError):
        raise DataException("Invalid bytes field") from None


def _array(c: JsonConverter, schema: Schema | None, node: Any) -> Any:
    if not isinstance(node, list):
        raise _bad(schema, node)
    item = schema.value_schema if schema is not None else None
    return [c.to_connect(item, v) for v in node]


def _map(c: JsonConverter, schema: Schema | None, node: Any) -> Any:
    ks = schema.key_schema if schema is not None else None
    vs = schema.value_schema if schema is not None else None
    if schema is None or (ks is not None and ks.type is Type.STRING):
        if not isinstance(node, dict):
            raise DataException(f"Maps with string fields should be encoded as JSON objects, but "
                                f"found {_node_type(node)}")
        return {k: c.to_connect(vs, v) for k, v in node.items()}
    if not isinstance(node, list):
        raise DataException(f"Maps with non-string fields should be encoded as JSON array of "
                            f"tuples, but found {_node_type(node)}")
    out: dict[Any, Any] = {}
    for entry in node:
        if not isinstance(entry, list):
            raise DataException(f"Found invalid map entry instead of array tuple: {_node_type(entry)}")
        if len(entry) != 2:
            raise DataException(f"Found invalid map entry, expected length 2 but found :{len(entry)}")
        key = c.to_connect(ks, entry[0])
        try:
            out[key] = c.to_connect(vs, entry[1])
        except TypeError:
            raise DataException(f"unhashable map key of type {type(key).__name__}") from None
    return out


def _struct(c: JsonConverter, schema: Schema | None, node: Any) -> Any:
    if not isinstance(node, dict):
        raise DataException(f"Structs should be encoded as JSON objects, but found {_node_type(node)}")
    assert schema is not None
    result = Struct(schema)
    for f in schema.fields:
        result.put(f.name, c.to_connect(f.schema, node.get(f.name)))
    return result


_TO_CONNECT: dict[Type, Callable[[JsonConverter, Schema | None, Any], Any]] = {
    Type.INT8: _int, Type.INT16: _int, Type.INT32: _int, Type.INT64: _int,
    Type.FLOAT32: _float, Type.FLOAT64: _float, Type.BOOLEAN: _bool, Type.STRING: _str,
    Type.BYTES: _bytes, Type.ARRAY: _array, Type.MAP: _map, Type.STRUCT: _struct,
}
