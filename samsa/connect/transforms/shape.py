"""Transforms that change a record's shape: ValueToKey, ExtractField, HoistField and Flatten."""

from __future__ import annotations

import datetime
import decimal
from typing import Any

from ..api import Transformation
from ..config_def import NO_DEFAULT, ConfigDef, ConfigType, Importance, one_of
from ..data import ConnectRecord, Schema, Struct, Type, struct_schema
from ..errors import DataException
from ._util import (
    REPLACE_NULL_WITH_DEFAULT,
    KeyOrValue,
    OnKey,
    OnValue,
    SchemaCache,
    define_replace_null,
    field_value,
    non_empty_list,
    parse_config,
    require_map,
    require_map_or_null,
    require_struct,
    require_struct_or_null,
    struct_with_fields,
)


# ---- ValueToKey ---------------------------------------------------------------------------------
class ValueToKey(Transformation):
    """Replace the key with a Struct/Map of some of the value's fields."""

    PURPOSE = "copying fields from value to key"

    def config(self) -> ConfigDef:
        d = ConfigDef().define("fields", ConfigType.LIST, NO_DEFAULT, non_empty_list, Importance.HIGH,
                               "Field names on the record value to extract as the record key.")
        return define_replace_null(d)

    def configure(self, props: dict[str, Any]) -> None:
        c = parse_config(self.config(), props)
        self.fields: list[str] = list(c["fields"])
        self.replace_null = c[REPLACE_NULL_WITH_DEFAULT]
        self._cache = SchemaCache()

    def apply(self, record: ConnectRecord) -> ConnectRecord | None:
        if record.value_schema is None:
            value = require_map(record.value, self.PURPOSE)
            return record.new_record(key_schema=None,  # type: ignore[no-any-return]
                                     key={f: value.get(f) for f in self.fields})
        struct = require_struct(record.value, self.PURPOSE)
        schema = record.value_schema
        key_schema = self._cache.get(schema)
        if key_schema is None:
            fields = []
            for name in self.fields:
                f = schema.field(name)
                if f is None:
                    raise DataException(f"Field does not exist: {name}")
                fields.append((name, f.schema))
            key_schema = self._cache.put(schema, struct_schema(fields))
        key = Struct(key_schema)
        for name in self.fields:
            key.put(name, field_value(struct, name, self.replace_null))
        return record.new_record(key_schema=key_schema, key=key)  # type: ignore[no-any-return]


# ---- field paths (KIP-821 field.syntax.version) --------------------------------------------------
FIELD_SYNTAX_VERSION = "field.syntax.version"


def define_field_syntax(d: ConfigDef) -> ConfigDef:
    return d.define(FIELD_SYNTAX_VERSION, ConfigType.STRING, "V1",
                    one_of("V1", "V2", case_insensitive=True), Importance.HIGH,
                    "Defines the version of the syntax to access fields. If set to `V1`, then the "
                    "field paths are limited to access the elements at the root level of the struct "
                    "or map. If set to `V2`, the syntax will support accessing nested elements. To "
                    "access nested elements, dotted notation is used. If dots are already included "
                    "in the field name, then backtick pairs can be used to wrap field names "
                    "containing dots.")


def parse_path(path: str, version: str) -> list[str]:
    """A field path as its steps: V1 is the name itself; V2 splits on dots, with backticks
    quoting a step that contains dots (a doubled backtick inside is a literal one)."""
    if version.upper() == "V1":
        return [path]
    steps: list[str] = []
    i, n = 0, len(path)
    while i <= n:
        if i < n and path[i] == "`":
            j, buf = i + 1, []
            while j < n:
                if path[j] == "`":
                    if j + 1 < n and path[j + 1] == "`":
                        buf.append("`")
                        j += 2
                        continue
                    if j + 1 == n or path[j + 1] == ".":
                        break
                buf.append(path[j])
                j += 1
            if j >= n:  # no closing backtick: the text is taken literally
                end = path.find(".", i)
                end = n if end < 0 else end
                steps.append(path[i:end])
                i = end + 1
                continue
            steps.append("".join(buf))
            i = j + 2
        else:
            end = path.find(".", i)
            end = n if end < 0 else end
            steps.append(path[i:end])
            i = end + 1
    return steps


# ---- ExtractField -------------------------------------------------------------------------------
class ExtractField(KeyOrValue):
    """Replace the key/value with one of its fields (V2 syntax: a nested field)."""

    PURPOSE = "field extraction"

    def config(self) -> ConfigDef:
        d = ConfigDef().define("field", ConfigType.STRING, NO_DEFAULT, None, Importance.MEDIUM,
                               "Field name to extract.")
        return define_replace_null(define_field_syntax(d))

    def configure(self, props: dict[str, Any]) -> None:
        c = parse_config(self.config(), props)
        self.field_name: str = c["field"]
        self.path = parse_path(self.field_name, c[FIELD_SYNTAX_VERSION])
        self.replace_null = c[REPLACE_NULL_WITH_DEFAULT]

    def apply(self, record: ConnectRecord) -> ConnectRecord | None:
        schema = self.operating_schema(record)
        value = self.operating_value(record)
        if schema is None:
            current: Any = require_map_or_null(value, self.PURPOSE)
            for step in self.path:
                current = current.get(step) if isinstance(current, dict) else None
            return self.new_record(record, None, current)
        field_schema: Schema = schema
        for step in self.path:
            f = field_schema.field(step) if field_schema.type is Type.STRUCT else None
            if f is None:
                raise DataException(f"Unknown field: {self.field_name}")
            field_schema = f.schema
        struct = require_struct_or_null(value, self.PURPOSE)
        current = struct
        for step in self.path:
            if current is None:
                break
            current = field_value(current, step, self.replace_null)
        return self.new_record(record, field_schema, current)


class ExtractFieldKey(OnKey, ExtractField):
    """org.apache.kafka.connect.transforms.ExtractField$Key"""


class ExtractFieldValue(OnValue, ExtractField):
    """org.apache.kafka.connect.transforms.ExtractField$Value"""


# ---- HoistField ---------------------------------------------------------------------------------
class HoistField(KeyOrValue):
    """Wrap the key/value in a Struct (with a schema) or a Map (without) under one field."""

    def config(self) -> ConfigDef:
        return ConfigDef().define("field", ConfigType.STRING, NO_DEFAULT, None, Importance.MEDIUM,
                                  "Field name for the single field that will be created in the "
                                  "resulting Struct or Map.")

    def configure(self, props: dict[str, Any]) -> None:
        self.field_name: str = parse_config(self.config(), props)["field"]
        self._cache = SchemaCache()

    def apply(self, record: ConnectRecord) -> ConnectRecord | None:
        schema = self.operating_schema(record)
        value = self.operating_value(record)
        if schema is None:
            return self.new_record(record, None, {self.field_name: value})
        new_schema = self._cache.get(schema) or \
            self._cache.put(schema, struct_schema([(self.field_name, schema)]))
        return self.new_record(record, new_schema, Struct(new_schema).put(self.field_name, value))


class HoistFieldKey(OnKey, HoistField):
    """org.apache.kafka.connect.transforms.HoistField$Key"""


class HoistFieldValue(OnValue, HoistField):
    """org.apache.kafka.connect.transforms.HoistField$Value"""


# ---- Flatten ------------------------------------------------------------------------------------
_SCHEMALESS_LEAVES = (bool, int, float, str, bytes, bytearray, list, tuple, decimal.Decimal,
                      datetime.date, datetime.time)


class Flatten(KeyOrValue):
    """Flatten nested Structs (and, without a schema, nested Maps) into one level, joining field
    names with `delimiter`. A field under an optional struct becomes optional; arrays are kept
    as they are."""

    PURPOSE = "flattening"

    def config(self) -> ConfigDef:
        return ConfigDef().define("delimiter", ConfigType.STRING, ".", None, Importance.MEDIUM,
                                  "Delimiter to insert between field names from the input record "
                                  "when generating field names for the output record")

    def configure(self, props: dict[str, Any]) -> None:
        self.delimiter: str = parse_config(self.config(), props)["delimiter"]
        self._cache = SchemaCache()

    def _name(self, prefix: str, name: str) -> str:
        return f"{prefix}{self.delimiter}{name}" if prefix else name

    def apply(self, record: ConnectRecord) -> ConnectRecord | None:
        schema = self.operating_schema(record)
        value = self.operating_value(record)
        if schema is None:
            src = require_map_or_null(value, self.PURPOSE)
            if src is None:
                return self.new_record(record, None, None)
            out: dict[str, Any] = {}
            self._flatten_map(src, "", out)
            return self.new_record(record, None, out)
        struct = require_struct_or_null(value, self.PURPOSE)
        new_schema = self._cache.get(schema)
        if new_schema is None:
            fields: list[tuple[str, Schema]] = []
            self._flatten_schema(schema, "", schema.optional, schema.default, fields)
            new_schema = self._cache.put(schema, struct_with_fields(schema, fields))
        if struct is None:
            return self.new_record(record, new_schema, None)
        flat = Struct(new_schema)
        self._flatten_struct(struct, schema, "", flat)
        return self.new_record(record, new_schema, flat)

    def _flatten_map(self, src: dict[Any, Any], prefix: str, out: dict[str, Any]) -> None:
        for k, v in src.items():
            name = self._name(prefix, str(k))
            if v is None or isinstance(v, _SCHEMALESS_LEAVES):
                out[name] = v
            elif isinstance(v, dict):
                self._flatten_map(v, name, out)
            else:
                raise DataException(f"Flatten transformation does not support {type(v).__name__} "
                                    f"for record without schemas (for field {name}).")

    def _flatten_schema(self, schema: Schema, prefix: str, optional: bool, default: Any,
                        out: list[tuple[str, Schema]]) -> None:
        for f in schema.fields:
            name = self._name(prefix, f.name)
            opt = optional or f.schema.optional
            fdefault = f.schema.default
            if fdefault is None and isinstance(default, Struct):
                fdefault = default.get(f.name)
            if f.schema.type is Type.STRUCT:
                self._flatten_schema(f.schema, name, opt, fdefault, out)
                continue
            if f.schema.type is Type.MAP:  # arrays pass as they are (KAFKA-12305); maps do not
                raise DataException(f"Flatten transformation does not support MAP for record with "
                                    f"schemas (for field {name}).")
            fs = f.schema
            if opt != fs.optional or fdefault is not fs.default:
                fs = fs.with_(optional=opt, default=fdefault)
            out.append((name, fs))

    def _flatten_struct(self, struct: Struct | None, schema: Schema, prefix: str, out: Struct) -> None:
        for f in schema.fields:
            name = self._name(prefix, f.name)
            v = struct.get(f.name) if struct is not None else None
            if f.schema.type is Type.STRUCT:
                self._flatten_struct(v, f.schema, name, out)
            else:
                out.put(name, v)


class FlattenKey(OnKey, Flatten):
    """org.apache.kafka.connect.transforms.Flatten$Key"""


class FlattenValue(OnValue, Flatten):
    """org.apache.kafka.connect.transforms.Flatten$Value"""

