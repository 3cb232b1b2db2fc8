"""Confluent's JsonSchemaConverter: Connect data as JSON in the Confluent wire format, with a JSON
Schema in the registry. The mapping follows Confluent's JsonSchemaData: structs are objects titled
with the struct's name whose properties carry `connect.index`; optional schemas are
`oneOf [{"type":"null"}, ...]`; integer and number types carry `connect.type` (int8..int64,
float32/float64, bytes, map); maps with string keys are objects with `additionalProperties`,
others arrays of {key, value}; logical types are titled with Connect's names.
Reading foreign schemas: a property is optional unless the object lists it in `required` (or it
has `connect.index`, then only a null branch makes it optional); local `$ref`s
(#/definitions/.., #/$defs/..) are followed; types it cannot map raise DataException."""

from __future__ import annotations

import base64
import binascii
import decimal
import json
from dataclasses import dataclass
from typing import Any

from ..data import (
    DATE_NAME,
    DECIMAL_NAME,
    TIME_NAME,
    TIMESTAMP_NAME,
    Field,
    Schema,
    SchemaAndValue,
    Struct,
    Type,
    from_logical,
    to_logical,
)
from ..errors import DataException
from ._java import write_json
from .registry import RegistryConverter

_LOGICAL = {DECIMAL_NAME: ("number", Type.BYTES), DATE_NAME: ("integer", Type.INT32),
            TIME_NAME: ("integer", Type.INT32), TIMESTAMP_NAME: ("integer", Type.INT64)}
_CONNECT_TYPES = {"int8": Type.INT8, "int16": Type.INT16, "int32": Type.INT32, "int64": Type.INT64,
                  "float32": Type.FLOAT32, "float64": Type.FLOAT64, "bytes": Type.BYTES}


# ---- Connect -> JSON Schema ---------------------------------------------------------------------
def connect_to_json_schema(s: Schema, with_optional: bool = True) -> dict[str, Any]:
    if s.optional and with_optional:
        out: dict[str, Any] = {"oneOf": [{"type": "null"}, connect_to_json_schema(s, False)]}
        return out
    if s.name in _LOGICAL:
        jtype, physical = _LOGICAL[str(s.name)]
        out = {"type": jtype, "title": s.name, "connect.version": 1}
        if s.parameters:
            out["connect.parameters"] = dict(s.parameters)
        out["connect.type"] = physical.value if physical is not Type.INT32 else "int32"
        return out
    t = s.type
    if t in (Type.INT8, Type.INT16, Type.INT32, Type.INT64):
        out = {"type": "integer", "connect.type": t.value}
    elif t is Type.FLOAT32:
        out = {"type": "number", "connect.type": "float32"}
    elif t is Type.FLOAT64:
        out = {"type": "number", "connect.type": "float64"}
    elif t is Type.BOOLEAN:
        out = {"type": "boolean"}
    elif t is Type.STRING:
        out = {"type": "string"}
    elif t is Type.BYTES:
        out = {"type": "string", "connect.type": "bytes"}
    elif t is Type.ARRAY:
        out = {"type": "array", "items": connect_to_json_schema(_need(s.value_schema))}
    elif t is Type.MAP:
        ks, vs = _need(s.key_schema), _need(s.value_schema)
        if ks.type is Type.STRING and not ks.optional:
            out = {"type": "object", "additionalProperties": connect_to_json_schema(vs),
                   "connect.type": "map"}
        else:
            key = dict(connect_to_json_schema(ks), **{"connect.index": 0})
            val = dict(connect_to_json_schema(vs), **{"connect.index": 1})
            out = {"type": "array", "items": {"type": "object",
                                              "properties": {"key": key, "value": val}},
                   "connect.type": "map"}
    else:
        props = {}
        for f in s.fields:
            props[f.name] = dict(connect_to_json_schema(f.schema), **{"connect.index": f.index})
        out = {"type": "object"}
        if s.name:
            out["title"] = s.name
        out["properties"] = props
    if s.name and "title" not in out:
        out["title"] = s.name
    if s.version is not None:
        out["connect.version"] = s.version
    if s.doc is not None:
        out["description"] = s.doc
    if s.parameters:
        out["connect.parameters"] = dict(s.parameters)
    if s.default is not None:
        out["default"] = to_json_value(s, s.default)
    return out


def _need(s: Schema | None) -> Schema:
    if s is None:
        raise DataException("a container schema without its element schema")
    return s


def to_json_value(s: Schema, value: Any) -> Any:
    if value is None:
        if s.default is not None:
            return to_json_value(s, s.default)
        if not s.optional:
            raise DataException(f"null value for a required {s.type.value} schema")
        return None
    if s.name == DECIMAL_NAME:
        if not isinstance(value, decimal.Decimal):
            raise DataException(f"Decimal expects decimal.Decimal, got {type(value).__name__}")
        return value
    if s.name in _LOGICAL:
        return from_logical(s, value)
    t = s.type
    if t is Type.STRUCT:
        if not isinstance(value, Struct):
            raise DataException(f"a struct schema needs a Struct value, got {type(value).__name__}")
        return {f.name: to_json_value(f.schema, value.get(f.name)) for f in s.fields}
    if t is Type.ARRAY:
        if not isinstance(value, list | tuple):
            raise DataException(f"an array schema needs a list, got {type(value).__name__}")
        return [to_json_value(_need(s.value_schema), v) for v in value]
    if t is Type.MAP:
        if not isinstance(value, dict):
            raise DataException(f"a map schema needs a dict, got {type(value).__name__}")
        ks, vs = _need(s.key_schema), _need(s.value_schema)
        if ks.type is Type.STRING and not ks.optional:
            return {k: to_json_value(vs, v) for k, v in value.items()}
        return [{"key": to_json_value(ks, k), "value": to_json_value(vs, v)} for k, v in value.items()]
    if t is Type.BYTES:
        if not isinstance(value, bytes | bytearray | memoryview):
            raise DataException(f"bytes expects bytes, got {type(value).__name__}")
        return base64.b64encode(bytes(value)).decode()
    return value


# ---- JSON Schema -> Connect ---------------------------------------------------------------------
class _ToConnect:
    def __init__(self, root: Any) -> None:
        self.root = root
        self.depth = 0

    def deref(self, node: Any) -> Any:
        seen = 0
        while isinstance(node, dict) and "$ref" in node:
            ref = node["$ref"]
            if not isinstance(ref, str) or not ref.startswith("#"):
                raise DataException(f"unsupported JSON Schema reference {ref!r}")
            target: Any = self.root
            for part in [p for p in ref[1:].split("/") if p]:
                part = part.replace("~1", "/").replace("~0", "~")
                if not isinstance(target, dict) or part not in target:
                    raise DataException(f"unresolvable JSON Schema reference {ref}")
                target = target[part]
            node = target
            seen += 1
            if seen > 32:
                raise DataException("JSON Schema references loop")
        return node

    def schema(self, node: Any, optional: bool = False) -> Schema:
        self.depth += 1
        if self.depth > 64:
            raise DataException("JSON Schema nested too deeply for Connect")
        try:
            return self._schema(self.deref(node), optional)
        finally:
            self.depth -= 1

    def _schema(self, node: Any, optional: bool) -> Schema:
        if not isinstance(node, dict):
            raise DataException(f"unsupported JSON Schema {node!r}")
        for key in ("oneOf", "anyOf"):
            if isinstance(node.get(key), list):
                branches = [self.deref(b) for b in node[key]]
                non_null = [b for b in branches if not (isinstance(b, dict) and b.get("type") == "null")]
                if len(non_null) == 1:
                    inner = self.schema(non_null[0], optional or len(non_null) < len(branches))
                    return inner
                raise DataException("JSON Schema unions other than with null are not supported")
        jtype = node.get("type")
        if isinstance(jtype, list):
            non_null = [t for t in jtype if t != "null"]
            if len(non_null) != 1:
                raise DataException(f"unsupported JSON Schema type list {jtype}")
            optional = optional or len(non_null) < len(jtype)
            jtype = non_null[0]
        if jtype is None and "properties" in node:
            jtype = "object"
        if jtype is None and "enum" in node:
            jtype = "string"
        title = node.get("title") if isinstance(node.get("title"), str) else None
        ctype = node.get("connect.type")
        attrs: dict[str, Any] = {"optional": optional}
        if isinstance(node.get("connect.version"), int):
            attrs["version"] = node["connect.version"]
        if isinstance(node.get("description"), str):
            attrs["doc"] = node["description"]
        if isinstance(node.get("connect.parameters"), dict):
            attrs["parameters"] = tuple((str(k), str(v)) for k, v in node["connect.parameters"].items())
        if title in _LOGICAL:
            physical = _LOGICAL[title][1]
            if title == DECIMAL_NAME and "parameters" not in attrs:
                attrs["parameters"] = (("scale", "0"),)
            attrs.setdefault("version", 1)
            return Schema(physical, name=title, **attrs)
        if jtype == "integer":
            t = _CONNECT_TYPES.get(str(ctype), Type.INT64)
            return Schema(t if t not in (Type.FLOAT32, Type.FLOAT64, Type.BYTES) else Type.INT64,
                          name=title, **attrs)
        if jtype == "number":
            return Schema(Type.FLOAT32 if ctype == "float32" else Type.FLOAT64, name=title, **attrs)
        if jtype == "boolean":
            return Schema(Type.BOOLEAN, name=title, **attrs)
        if jtype == "string":
            return Schema(Type.BYTES if ctype == "bytes" else Type.STRING, name=title, **attrs)
        if jtype == "array":
            items = self.deref(node.get("items", {}))
            if ctype == "map" and isinstance(items, dict) and \
                    set((items.get("properties") or {}).keys()) == {"key", "value"}:
                props = items["properties"]
                return Schema(Type.MAP, key_schema=self.schema(props["key"]),
                              value_schema=self.schema(props["value"]), name=title, **attrs)
            return Schema(Type.ARRAY, value_schema=self.schema(items), name=title, **attrs)
        if jtype == "object":
            props = node.get("properties")
            extra = node.get("additionalProperties")
            if ctype == "map" or (not props and isinstance(extra, dict) and extra):
                return Schema(Type.MAP, key_schema=Schema(Type.STRING),
                              value_schema=self.schema(extra if isinstance(extra, dict) else {}),
                              name=title, **attrs)
            if not isinstance(props, dict):
                raise DataException("a JSON Schema object without properties has no Connect schema")
            required = set(node.get("required") or [])
            items = list(props.items())
            if all(isinstance(p, dict) and isinstance(p.get("connect.index"), int) for _, p in items):
                items.sort(key=lambda kv: kv[1]["connect.index"])
            fields = []
            for i, (name, p) in enumerate(items):
                by_connect = isinstance(p, dict) and "connect.index" in p
                opt = False if by_connect or name in required else True
                fields.append(Field(name, i, self.schema(p, opt)))
            return Schema(Type.STRUCT, name=title, fields=tuple(fields), **attrs)
        raise DataException(f"unsupported JSON Schema type {jtype!r}")


def json_schema_to_connect(node: Any) -> Schema:
    return _ToConnect(node).schema(node)


def from_json_value(s: Schema, node: Any) -> Any:
    if node is None:
        if s.default is not None:
            return s.default
        if not s.optional:
            raise DataException(f"null value for required {s.type.value} field")
        return None
    if s.name == DECIMAL_NAME:
        if isinstance(node, bool) or not isinstance(node, int | float | decimal.Decimal):
            raise DataException("Decimal expects a JSON number")
        return decimal.Decimal(node) if not isinstance(node, float) else decimal.Decimal(repr(node))
    if s.name in _LOGICAL:
        if isinstance(node, bool) or not isinstance(node, int):
            raise DataException(f"{s.name} expects a JSON integer")
        try:
            return to_logical(s, node)
        except OverflowError:
            raise DataException(f"{s.name} value {node} out of range") from None
    t = s.type
    if t is Type.STRUCT:
        if not isinstance(node, dict):
            raise DataException("a struct expects a JSON object")
        out = Struct(s)
        for f in s.fields:
            out.put(f.name, from_json_value(f.schema, node.get(f.name)))
        return out
    if t is Type.ARRAY:
        if not isinstance(node, list):
            raise DataException("an array expects a JSON array")
        return [from_json_value(_need(s.value_schema), v) for v in node]
    if t is Type.MAP:
        ks, vs = _need(s.key_schema), _need(s.value_schema)
        if isinstance(node, dict):
            return {k: from_json_value(vs, v) for k, v in node.items()}
        if isinstance(node, list):
            try:
                return {from_json_value(ks, e["key"]): from_json_value(vs, e.get("value")) for e in node}
            except (TypeError, KeyError, AttributeError):
                raise DataException("invalid map entries") from None
        raise DataException("a map expects a JSON object or array")
    if t in (Type.INT8, Type.INT16, Type.INT32, Type.INT64):
        if isinstance(node, bool) or not isinstance(node, int):
            raise DataException(f"{t.value} expects a JSON integer")
        return node
    if t in (Type.FLOAT32, Type.FLOAT64):
        if isinstance(node, bool) or not isinstance(node, int | float | decimal.Decimal):
            raise DataException(f"{t.value} expects a JSON number")
        return float(node)
    if t is Type.BOOLEAN:
        if not isinstance(node, bool):
            raise DataException("boolean expects true or false")
        return node
    if t is Type.BYTES:
        if not isinstance(node, str):
            raise DataException("bytes expects a base64 string")
        try:
            return base64.b64decode(node, validate=True)
        except (binascii.Error, ValueError):
            raise DataException("invalid base64 bytes") from None
    if not isinstance(node, str):
        raise DataException("string expects a JSON string")
    return node


# ---- the converter ------------------------------------------------------------------------------
@dataclass
class JsonSchemaFormat:
    raw: Any
    text: str
    connect: Schema | None = None


class JsonSchemaConverter(RegistryConverter):
    SCHEMA_TYPE = "JSON"

    def to_format(self, schema: Schema) -> JsonSchemaFormat:
        raw = connect_to_json_schema(schema)
        return JsonSchemaFormat(raw, json.dumps(raw, separators=(",", ":")), schema)

    def format_text(self, fmt: JsonSchemaFormat) -> str:
        return fmt.text

    def record_name(self, fmt: JsonSchemaFormat) -> str | None:
        title = fmt.raw.get("title") if isinstance(fmt.raw, dict) else None
        return title if isinstance(title, str) else None

    def parse_registered(self, text: str, references: list[Any]) -> JsonSchemaFormat:
        return JsonSchemaFormat(json.loads(text), text)

    def encode(self, fmt: JsonSchemaFormat, schema: Schema | None, value: Any) -> bytes:
        assert schema is not None
        return write_json(to_json_value(schema, value)).encode("utf-8", "surrogatepass")

    def decode(self, fmt: JsonSchemaFormat, payload: bytes) -> SchemaAndValue:
        if fmt.connect is None:
            fmt.connect = json_schema_to_connect(fmt.raw)
        try:
            node = json.loads(payload, parse_float=decimal.Decimal)
        except (ValueError, RecursionError) as e:
            raise DataException(f"invalid JSON: {e}") from None
        return SchemaAndValue(fmt.connect, from_json_value(fmt.connect, node))
