"""Connect schemas and values <-> Avro, in the manner of Confluent's AvroData: structs are
records (unnamed ones `io.confluent.connect.avro.ConnectDefault`, then ConnectDefault2, ...),
optional schemas are unions with "null" first, int8/int16 are Avro ints marked
`"connect.type"`, maps with non-string keys are arrays of `io.confluent.connect.avro.MapEntry`
records, and the logical types carry both Avro's logicalType and Connect's name
(`connect.name`, `connect.version`, `connect.parameters`) so they read back as the same Connect
schema. Avro enums read as strings, fixed as bytes, other unions as a
`io.confluent.connect.avro.Union` struct with one optional field per branch."""

from __future__ import annotations

import datetime
import decimal
import re
from typing import Any

from ..data import (
    DATE_NAME,
    DECIMAL_NAME,
    DECIMAL_SCALE,
    TIME_NAME,
    TIMESTAMP_NAME,
    Field,
    Schema,
    Struct,
    Type,
    from_logical,
)
from ..errors import DataException

NAMESPACE = "io.confluent.connect.avro"
DEFAULT_RECORD = "ConnectDefault"
MAP_ENTRY = "MapEntry"
UNION = f"{NAMESPACE}.Union"
ENUM_PARAM = f"{NAMESPACE}.Enum"
PRECISION_PARAM = "connect.decimal.precision"
FIXED_SIZE_PARAM = "connect.fixed.size"
_NAME_OK = re.compile(r"[A-Za-z_][A-Za-z0-9_]*\Z")
_PRIMITIVE = {Type.INT32: "int", Type.INT64: "long", Type.FLOAT32: "float", Type.FLOAT64: "double",
              Type.BOOLEAN: "boolean", Type.STRING: "string", Type.BYTES: "bytes"}


# ---- Connect -> Avro ----------------------------------------------------------------------------
class _ToAvro:
    def __init__(self) -> None:
        self.defaults = 0
        self.entries = 0
        self.defined: dict[str, Any] = {}

    def schema(self, s: Schema, with_optional: bool = True) -> Any:
        if s.optional and with_optional:
            inner = self.schema(s, with_optional=False)
            branches = inner if isinstance(inner, list) else [inner]
            if s.default is not None:
                return [*branches, "null"]
            return ["null", *branches]
        if s.name == DECIMAL_NAME:
            scale = int(s.params.get(DECIMAL_SCALE, "0"))
            precision = int(s.params.get(PRECISION_PARAM, "64"))
            return {"type": "bytes", "scale": scale, "precision": precision, "connect.version": 1,
                    "connect.parameters": dict(s.parameters), "connect.name": DECIMAL_NAME,
                    "logicalType": "decimal"}
        if s.name == DATE_NAME:
            return {"type": "int", "connect.version": 1, "connect.name": DATE_NAME, "logicalType": "date"}
        if s.name == TIME_NAME:
            return {"type": "int", "connect.version": 1, "connect.name": TIME_NAME,
                    "logicalType": "time-millis"}
        if s.name == TIMESTAMP_NAME:
            return {"type": "long", "connect.version": 1, "connect.name": TIMESTAMP_NAME,
                    "logicalType": "timestamp-millis"}
        if s.type is Type.STRUCT and s.name == UNION:
            return [self.schema(f.schema.with_(optional=False)) for f in s.fields]
        if s.type is Type.STRUCT:
            return self.record(s)
        out: dict[str, Any]
        if s.type in (Type.INT8, Type.INT16):
            out = {"type": "int", "connect.type": s.type.value}
        elif s.type in _PRIMITIVE:
            out = {"type": _PRIMITIVE[s.type]}
        elif s.type is Type.ARRAY:
            out = {"type": "array", "items": self.schema(_need(s.value_schema))}
        elif s.key_schema is not None and s.key_schema.type is Type.STRING and not s.key_schema.optional:
            out = {"type": "map", "values": self.schema(_need(s.value_schema))}
        else:
            self.entries += 1
            name = MAP_ENTRY if self.entries == 1 else f"{MAP_ENTRY}{self.entries}"
            entry = {"type": "record", "name": name, "namespace": NAMESPACE,
                     "fields": [{"name": "key", "type": self.schema(_need(s.key_schema))},
                                {"name": "value", "type": self.schema(_need(s.value_schema))}]}
            out = {"type": "array", "items": entry}
        self._meta(s, out)
        return out["type"] if len(out) == 1 else out

    def _meta(self, s: Schema, out: dict[str, Any]) -> None:
        if s.name is not None:
            out["connect.name"] = s.name
        if s.version is not None:
            out["connect.version"] = s.version
        if s.doc is not None:
            out["connect.doc"] = s.doc
        if s.parameters:
            out["connect.parameters"] = dict(s.parameters)

    def record(self, s: Schema) -> Any:
        if s.name:
            namespace, _, simple = s.name.rpartition(".")
            parts_ok = all(_NAME_OK.match(p) for p in namespace.split(".")) if namespace else True
            if not _NAME_OK.match(simple) or not parts_ok:
                simple = re.sub(r"[^A-Za-z0-9_]", "_", simple) or DEFAULT_RECORD
                if not _NAME_OK.match(simple):
                    simple = "_" + simple
                namespace = ".".join(re.sub(r"[^A-Za-z0-9_]", "_", p) for p in namespace.split(".")) \
                    if namespace else ""
        else:
            self.defaults += 1
            namespace, simple = NAMESPACE, DEFAULT_RECORD if self.defaults == 1 else \
                f"{DEFAULT_RECORD}{self.defaults}"
        full = f"{namespace}.{simple}" if namespace else simple
        if full in self.defined:
            if self.defined[full] == s:
                return full
            raise DataException(f"two different struct schemas are named {full}")
        self.defined[full] = s
        out: dict[str, Any] = {"type": "record", "name": simple}
        if namespace:
            out["namespace"] = namespace
        if s.doc is not None:
            out["doc"] = s.doc
        fields = []
        for f in s.fields:
            fj: dict[str, Any] = {"name": f.name, "type": self.schema(f.schema)}
            if f.schema.default is not None:
                fj["default"] = default_json(f.schema, f.schema.default)
            elif f.schema.optional:
                fj["default"] = None
            fields.append(fj)
        out["fields"] = fields
        if s.version is not None:
            out["connect.version"] = s.version
        if s.parameters:
            out["connect.parameters"] = dict(s.parameters)
        if s.name and s.name != full:
            out["connect.name"] = s.name
        return out


def _need(s: Schema | None) -> Schema:
    if s is None:
        raise DataException("a container schema without its element schema")
    return s


def connect_to_avro(schema: Schema) -> Any:
    """The Avro schema (JSON form) for a Connect schema."""
    return _ToAvro().schema(schema)


def default_json(schema: Schema, value: Any) -> Any:
    """An Avro default (JSON form) for a Connect default value."""
    if value is None:
        return None
    raw = from_logical(schema, value)
    if isinstance(raw, bytes | bytearray):
        return bytes(raw).decode("latin-1")
    if isinstance(raw, Struct):
        return {f.name: default_json(f.schema, raw.get(f.name)) for f in raw.schema.fields}
    if isinstance(raw, list | tuple):
        return [default_json(_need(schema.value_schema), v) for v in raw]
    if isinstance(raw, dict):
        if schema.key_schema is not None and schema.key_schema.type is not Type.STRING:
            return [{"key": default_json(schema.key_schema, k),
                     "value": default_json(_need(schema.value_schema), v)} for k, v in raw.items()]
        return {k: default_json(_need(schema.value_schema), v) for k, v in raw.items()}
    return raw


def to_avro_datum(schema: Schema, value: Any) -> Any:
    """A Connect value as the datum fastavro writes for connect_to_avro(schema)."""
    if value is None:
        if schema.default is not None:
            return to_avro_datum(schema, schema.default)
        if not schema.optional:
            raise DataException(f"null value for a required {schema.type.value} schema")
        return None
    if schema.name in (DECIMAL_NAME, DATE_NAME, TIME_NAME, TIMESTAMP_NAME):
        if schema.name == DECIMAL_NAME:
            if not isinstance(value, decimal.Decimal):
                raise DataException(f"Decimal expects decimal.Decimal, got {type(value).__name__}")
            return value
        from_logical(schema, value)  # type check
        if schema.name == TIMESTAMP_NAME and value.tzinfo is None:
            return value.replace(tzinfo=datetime.UTC)
        if schema.name == DATE_NAME and isinstance(value, datetime.datetime):
            return value.date()
        return value
    t = schema.type
    if t is Type.STRUCT:
        if not isinstance(value, Struct):
            raise DataException(f"a struct schema needs a Struct value, got {type(value).__name__}")
        if schema.name == UNION:  # the one branch that is set
            for f in schema.fields:
                if value.get(f.name) is not None:
                    return to_avro_datum(f.schema, value.get(f.name))
            return None
        return {f.name: to_avro_datum(f.schema, value.get(f.name)) for f in schema.fields}
    if t is Type.ARRAY:
        if not isinstance(value, list | tuple):
            raise DataException(f"an array schema needs a list, got {type(value).__name__}")
        return [to_avro_datum(_need(schema.value_schema), v) for v in value]
    if t is Type.MAP:
        if not isinstance(value, dict):
            raise DataException(f"a map schema needs a dict, got {type(value).__name__}")
        ks, vs = _need(schema.key_schema), _need(schema.value_schema)
        if ks.type is Type.STRING and not ks.optional:
            return {k: to_avro_datum(vs, v) for k, v in value.items()}
        return [{"key": to_avro_datum(ks, k), "value": to_avro_datum(vs, v)} for k, v in value.items()]
    if t is Type.BYTES and isinstance(value, bytearray | memoryview):
        return bytes(value)
    return value


# ---- Avro -> Connect ----------------------------------------------------------------------------
class _ToConnect:
    def __init__(self, named: dict[str, Any]) -> None:
        self.named = dict(named)
        self.building: dict[str, Schema | None] = {}

    def schema(self, node: Any, namespace: str = "") -> Schema:
        if isinstance(node, list):
            return self.union(node, namespace)
        if isinstance(node, str):
            if node in ("null",):
                raise DataException("a bare null Avro type has no Connect schema")
            prim = _from_primitive(node)
            if prim is not None:
                return Schema(prim)
            full = node if "." in node or not namespace else f"{namespace}.{node}"
            target = self.named.get(full) or self.named.get(node)
            if target is None:
                raise DataException(f"unknown Avro named type {node}")
            return self.schema(target, namespace)
        if not isinstance(node, dict):
            raise DataException(f"not an Avro schema: {node!r}")
        t = node.get("type")
        logical = node.get("logicalType")
        if isinstance(t, dict | list):
            return self.schema(t, namespace)
        if t == "bytes" and logical == "decimal" or t == "fixed" and logical == "decimal":
            params = {DECIMAL_SCALE: str(node.get("scale", 0)),
                      PRECISION_PARAM: str(node.get("precision", 64))}
            if isinstance(node.get("connect.parameters"), dict):
                params = {str(k): str(v) for k, v in node["connect.parameters"].items()}
                params.setdefault(DECIMAL_SCALE, str(node.get("scale", 0)))
            return Schema(Type.BYTES, name=DECIMAL_NAME, version=1, parameters=tuple(params.items()))
        if t == "int" and logical == "date":
            return Schema(Type.INT32, name=DATE_NAME, version=1)
        if t == "int" and logical == "time-millis":
            return Schema(Type.INT32, name=TIME_NAME, version=1)
        if t == "long" and logical == "timestamp-millis":
            return Schema(Type.INT64, name=TIMESTAMP_NAME, version=1)
        meta = _meta(node)
        if t == "record":
            return self.record(node, namespace)
        if t == "enum":
            full = _full(node, namespace)
            params = {ENUM_PARAM: full, **{f"{ENUM_PARAM}.{s}": s for s in node.get("symbols", [])}}
            self.named[full] = node
            return Schema(Type.STRING, name=full, doc=node.get("doc"), parameters=tuple(params.items()))
        if t == "fixed":
            full = _full(node, namespace)
            self.named[full] = node
            return Schema(Type.BYTES, name=full, parameters=((FIXED_SIZE_PARAM, str(node.get("size"))),))
        if t == "array":
            items = node.get("items")
            if isinstance(items, dict) and items.get("type") == "record" and \
                    _full(items, namespace).startswith(f"{NAMESPACE}.{MAP_ENTRY}") and \
                    [f.get("name") for f in items.get("fields", [])] == ["key", "value"]:
                self.named[_full(items, namespace)] = items
                kf, vf = items["fields"]
                return Schema(Type.MAP, key_schema=self.schema(kf["type"], namespace),
                              value_schema=self.schema(vf["type"], namespace), **meta)
            return Schema(Type.ARRAY, value_schema=self.schema(items, namespace), **meta)
        if t == "map":
            return Schema(Type.MAP, key_schema=Schema(Type.STRING),
                          value_schema=self.schema(node.get("values"), namespace), **meta)
        prim = _from_primitive(str(t))
        if prim is None:
            raise DataException(f"unsupported Avro type {t!r}")
        if prim is Type.INT32 and node.get("connect.type") in ("int8", "int16"):
            prim = Type(node["connect.type"])
        return Schema(prim, **meta)

    def record(self, node: dict[str, Any], namespace: str) -> Schema:
        full = _full(node, namespace)
        self.named[full] = node
        if full in self.building:
            built = self.building[full]
            if built is None:
                raise DataException(f"recursive Avro record {full} has no Connect schema")
            return built
        self.building[full] = None
        ns = full.rpartition(".")[0]
        fields = []
        for i, f in enumerate(node.get("fields", [])):
            fs = self.schema(f["type"], ns)
            if "default" in f and f["default"] is not None:
                try:
                    fs = fs.with_(default=_default_value(fs, f["default"]))
                except (DataException, TypeError, ValueError):
                    pass
            fields.append(Field(f["name"], i, fs))
        name: str | None = node.get("connect.name") or full
        default_prefix = f"{NAMESPACE}.{DEFAULT_RECORD}"
        if name and name.startswith(default_prefix) and \
                (name == default_prefix or name[len(default_prefix):].isdigit()):
            name = None
        version = node.get("connect.version")
        params = node.get("connect.parameters")
        out = Schema(Type.STRUCT, name=name, doc=node.get("doc"), fields=tuple(fields),
                     version=version if isinstance(version, int) else None,
                     parameters=tuple(params.items()) if isinstance(params, dict) else ())
        self.building[full] = out
        return out

    def union(self, branches: list[Any], namespace: str) -> Schema:
        non_null = [b for b in branches
                    if b != "null" and not (isinstance(b, dict) and b.get("type") == "null")]
        nullable = len(non_null) < len(branches)
        if len(non_null) == 1:
            inner = self.schema(non_null[0], namespace)
            return inner.with_(optional=True) if nullable else inner
        fields = []
        for i, b in enumerate(non_null):
            fs = self.schema(b, namespace).with_(optional=True)
            fields.append(Field(_branch_name(b, namespace), i, fs))
        return Schema(Type.STRUCT, name=UNION, optional=nullable, fields=tuple(fields))


def _branch_name(node: Any, namespace: str) -> str:
    if isinstance(node, str):
        return node.rpartition(".")[2]
    if isinstance(node, dict):
        if node.get("type") in ("record", "enum", "fixed"):
            return str(node.get("name", "")).rpartition(".")[2]
        return _branch_name(node.get("type"), namespace)
    return "branch"


def _meta(node: dict[str, Any]) -> dict[str, Any]:
    out: dict[str, Any] = {}
    if isinstance(node.get("connect.name"), str):
        out["name"] = node["connect.name"]
    if isinstance(node.get("connect.version"), int):
        out["version"] = node["connect.version"]
    if isinstance(node.get("connect.doc"), str):
        out["doc"] = node["connect.doc"]
    if isinstance(node.get("connect.parameters"), dict):
        out["parameters"] = tuple((str(k), str(v)) for k, v in node["connect.parameters"].items())
    return out


def _from_primitive(name: str) -> Type | None:
    return {"int": Type.INT32, "long": Type.INT64, "float": Type.FLOAT32, "double": Type.FLOAT64,
            "boolean": Type.BOOLEAN, "string": Type.STRING, "bytes": Type.BYTES}.get(name)


def _full(node: dict[str, Any], namespace: str) -> str:
    name = str(node.get("name", ""))
    if "." in name:
        return name
    ns = node.get("namespace", namespace)
    return f"{ns}.{name}" if ns else name


def _default_value(schema: Schema, node: Any) -> Any:
    if schema.name in (DECIMAL_NAME, DATE_NAME, TIME_NAME, TIMESTAMP_NAME):
        return None
    if schema.type is Type.BYTES and isinstance(node, str):
        return node.encode("latin-1")
    if schema.type in (Type.FLOAT32, Type.FLOAT64):
        return float(node)
    if schema.type is Type.STRUCT or schema.type is Type.MAP or schema.type is Type.ARRAY:
        return None  # container defaults stay in the Avro schema only
    return node


def collect_named(node: Any, namespace: str, out: dict[str, Any]) -> None:
    """Every named type (record/enum/fixed) defined in an Avro schema, by full name."""
    if isinstance(node, list):
        for b in node:
            collect_named(b, namespace, out)
    elif isinstance(node, dict):
        t = node.get("type")
        if t in ("record", "enum", "fixed"):
            full = _full(node, namespace)
            out[full] = node
            ns = full.rpartition(".")[0]
            for f in node.get("fields", []) if t == "record" else []:
                collect_named(f.get("type"), ns, out)
        elif t == "array":
            collect_named(node.get("items"), namespace, out)
        elif t == "map":
            collect_named(node.get("values"), namespace, out)
        elif isinstance(t, dict | list):
            collect_named(t, namespace, out)


def avro_to_connect(node: Any, named: dict[str, Any] | None = None) -> Schema:
    """The Connect schema for an Avro schema (JSON form); `named` resolves referenced types."""
    return _ToConnect(named or {}).schema(node)


def from_avro_datum(schema: Schema, datum: Any) -> Any:
    """The Connect value of a datum fastavro read (return_record_name=True for unions)."""
    if datum is None:
        return None
    if schema.name in (DECIMAL_NAME, DATE_NAME, TIME_NAME, TIMESTAMP_NAME):
        if schema.name == DECIMAL_NAME and isinstance(datum, bytes | bytearray):
            from ..data import decimal_from_bytes
            return decimal_from_bytes(schema, bytes(datum))
        return datum
    if schema.type is Type.STRUCT and schema.name == UNION:
        return _union_value(schema, datum)
    if isinstance(datum, tuple) and len(datum) == 2 and isinstance(datum[0], str):
        datum = datum[1]  # a named branch of a nullable union
    t = schema.type
    if t is Type.STRUCT:
        if not isinstance(datum, dict):
            raise DataException(f"expected an Avro record, got {type(datum).__name__}")
        out = Struct(schema)
        for f in schema.fields:
            out.put(f.name, from_avro_datum(f.schema, datum.get(f.name)))
        return out
    if t is Type.ARRAY:
        return [from_avro_datum(_need(schema.value_schema), v) for v in datum]
    if t is Type.MAP:
        ks, vs = _need(schema.key_schema), _need(schema.value_schema)
        if isinstance(datum, list):
            return {from_avro_datum(ks, e["key"]): from_avro_datum(vs, e["value"]) for e in datum}
        return {k: from_avro_datum(vs, v) for k, v in datum.items()}
    if t in (Type.FLOAT32, Type.FLOAT64) and isinstance(datum, int):
        return float(datum)
    return datum


def _union_value(schema: Schema, datum: Any) -> Struct:
    out = Struct(schema)
    if isinstance(datum, tuple) and len(datum) == 2 and isinstance(datum[0], str):
        simple = datum[0].rpartition(".")[2]
        for f in schema.fields:
            if f.name == simple:
                out.put(f.name, from_avro_datum(f.schema, datum[1]))
                return out
    for f in schema.fields:
        try:
            value = from_avro_datum(f.schema, datum)
            out.put(f.name, value)
            return out
        except (DataException, TypeError, AttributeError, KeyError):
            continue
    raise DataException(f"no branch of the Avro union fits {type(datum).__name__}")
