"""Field-level transforms: InsertField, ReplaceField and MaskField (Kafka's config names, defaults,
tombstone handling and DataException wording). Each has a `...Key` and a `...Value` class, Kafka's
`$Key` / `$Value`."""

from __future__ import annotations

import datetime
import decimal
import re
from typing import Any

from ..config_def import NO_DEFAULT, ConfigDef, ConfigType, Importance, non_empty_string
from ..data import (
    EPOCH,
    EPOCH_DATE,
    INT32_SCHEMA,
    INT64_SCHEMA,
    OPTIONAL_INT32_SCHEMA,
    OPTIONAL_INT64_SCHEMA,
    OPTIONAL_STRING_SCHEMA,
    STRING_SCHEMA,
    ConnectRecord,
    Schema,
    Struct,
    Type,
    timestamp_schema,
)
from ..errors import ConfigException, DataException
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
    require_sink,
    require_struct,
    struct_with_fields,
)


# ---- InsertField ---------------------------------------------------------------------------------
class _InsertionSpec:
    """`name` (optional field), `name?` (optional) or `name!` (required)."""

    def __init__(self, spec: str) -> None:
        self.optional = not spec.endswith("!")
        self.name = spec[:-1] if spec.endswith(("!", "?")) else spec


def _spec(value: str | None) -> _InsertionSpec | None:
    return _InsertionSpec(value) if value else None


class InsertField(KeyOrValue):
    """Insert the record's topic, partition, offset (sink records only), timestamp and/or a static
    string into a Struct or Map key/value."""

    PURPOSE = "field insertion"

    def config(self) -> ConfigDef:
        d = ConfigDef()
        docs = {
            "topic.field": "Field name for Kafka topic. Suffix with <code>!</code> to make this a "
                           "required field, or <code>?</code> to keep it optional (the default).",
            "partition.field": "Field name for Kafka partition. Suffix with <code>!</code> to make "
                               "this a required field, or <code>?</code> to keep it optional.",
            "offset.field": "Field name for Kafka offset - only applicable to sink connectors.",
            "timestamp.field": "Field name for record timestamp.",
            "static.field": "Field name for static data field.",
            "static.value": "Static field value, if field name configured.",
        }
        for name, doc in docs.items():
            d.define(name, ConfigType.STRING, None, None, Importance.MEDIUM, doc)
        return define_replace_null(d)

    def configure(self, props: dict[str, Any]) -> None:
        c = parse_config(self.config(), props)
        self.topic_field = _spec(c["topic.field"])
        self.partition_field = _spec(c["partition.field"])
        self.offset_field = _spec(c["offset.field"])
        self.timestamp_field = _spec(c["timestamp.field"])
        self.static_field = _spec(c["static.field"])
        self.static_value = c["static.value"]
        self.replace_null = c[REPLACE_NULL_WITH_DEFAULT]
        if self.topic_field is None and self.partition_field is None and self.offset_field is None \
                and self.timestamp_field is None and self.static_field is None:
            raise ConfigException("No field insertion configured")
        if self.static_field is not None and self.static_value is None:
            raise ConfigException("Invalid value null for configuration static.value: No value "
                                  f"specified for static field: {self.static_field.name}")
        self._cache = SchemaCache()

    def apply(self, record: ConnectRecord) -> ConnectRecord | None:
        value = self.operating_value(record)
        if value is None:  # a tombstone passes unchanged
            return record
        schema = self.operating_schema(record)
        if schema is None:
            updated = dict(require_map(value, self.PURPOSE))
            for name, v in self._inserts(record, True):
                updated[name] = v
            return self.new_record(record, None, updated)
        struct = require_struct(value, self.PURPOSE)
        new_schema = self._cache.get(schema) or self._cache.put(schema, self._schema(schema))
        out = Struct(new_schema)
        for f in schema.fields:
            out.put(f.name, field_value(struct, f.name, self.replace_null))
        for name, v in self._inserts(record, False):
            out.put(name, v)
        return self.new_record(record, new_schema, out)

    def _inserts(self, record: ConnectRecord, schemaless: bool) -> list[tuple[str, Any]]:
        """The (field, value) pairs to add; an absent partition or timestamp adds nothing. Without
        a schema the timestamp is its number of ms (as Kafka's), with one a Timestamp."""
        out: list[tuple[str, Any]] = []
        if self.topic_field:
            out.append((self.topic_field.name, record.topic))
        if self.partition_field and record.kafka_partition is not None:
            out.append((self.partition_field.name, record.kafka_partition))
        if self.offset_field:
            out.append((self.offset_field.name, require_sink(record, self.PURPOSE).kafka_offset))
        if self.timestamp_field and record.timestamp is not None:
            ts = record.timestamp
            out.append((self.timestamp_field.name,
                         ts if schemaless else EPOCH + datetime.timedelta(milliseconds=ts)))
        if self.static_field:
            out.append((self.static_field.name, self.static_value))
        return out

    def _schema(self, schema: Schema) -> Schema:
        fields = [(f.name, f.schema) for f in schema.fields]
        if self.topic_field:
            fields.append((self.topic_field.name,
                           OPTIONAL_STRING_SCHEMA if self.topic_field.optional else STRING_SCHEMA))
        if self.partition_field:
            fields.append((self.partition_field.name,
                           OPTIONAL_INT32_SCHEMA if self.partition_field.optional else INT32_SCHEMA))
        if self.offset_field:
            fields.append((self.offset_field.name,
                           OPTIONAL_INT64_SCHEMA if self.offset_field.optional else INT64_SCHEMA))
        if self.timestamp_field:
            fields.append((self.timestamp_field.name,
                           timestamp_schema(optional=self.timestamp_field.optional)))
        if self.static_field:
            fields.append((self.static_field.name,
                           OPTIONAL_STRING_SCHEMA if self.static_field.optional else STRING_SCHEMA))
        names = [n for n, _ in fields]
        for n in names:
            if names.count(n) > 1:
                raise DataException(f"Cannot create field because of field name duplication {n}")
        return struct_with_fields(schema, fields)


class InsertFieldKey(OnKey, InsertField):
    """org.apache.kafka.connect.transforms.InsertField$Key"""


class InsertFieldValue(OnValue, InsertField):
    """org.apache.kafka.connect.transforms.InsertField$Value"""


# ---- ReplaceField ------------------------------------------------------------------------------
def _renames_validator(name: str, value: Any) -> None:
    _parse_renames(name, value or [])


def _parse_renames(name: str, mappings: list[str]) -> dict[str, str]:
    out: dict[str, str] = {}
    for mapping in mappings:
        parts = mapping.split(":")
        if len(parts) != 2:
            raise ConfigException(name, mappings, f"Invalid rename mapping: {mapping}")
        out[parts[0]] = parts[1]
    return out


# Kafka 2.6 (KIP-629) renamed these; the old names still work when the new ones are absent.
_DEPRECATED = {"blacklist": "exclude", "whitelist": "include"}


class ReplaceField(KeyOrValue):
    """Keep (`include`), drop (`exclude`) and rename (`renames`) fields of a Struct or Map."""

    PURPOSE = "field replacement"

    def config(self) -> ConfigDef:
        d = ConfigDef()
        d.define("exclude", ConfigType.LIST, "", None, Importance.MEDIUM,
                 "Fields to exclude. This takes precedence over the fields to include.")
        d.define("include", ConfigType.LIST, "", None, Importance.MEDIUM,
                 "Fields to include. If specified, only these fields will be used.")
        d.define("renames", ConfigType.LIST, "", _renames_validator, Importance.MEDIUM,
                 "Field rename mappings.")
        return define_replace_null(d)

    def configure(self, props: dict[str, Any]) -> None:
        props = dict(props)
        for old, new in _DEPRECATED.items():
            if old in props and new not in props:
                props[new] = props.pop(old)
        c = parse_config(self.config(), props)
        self.exclude = set(c["exclude"])
        self.include = set(c["include"])
        self.renames = _parse_renames("renames", c["renames"])
        self.reverse = {v: k for k, v in self.renames.items()}
        self.replace_null = c[REPLACE_NULL_WITH_DEFAULT]
        self._cache = SchemaCache()

    def _keep(self, name: str) -> bool:
        return name not in self.exclude and (not self.include or name in self.include)

    def apply(self, record: ConnectRecord) -> ConnectRecord | None:
        value = self.operating_value(record)
        if value is None:
            return record
        schema = self.operating_schema(record)
        if schema is None:
            src = require_map(value, self.PURPOSE)
            return self.new_record(record, None, {self.renames.get(k, k): v for k, v in src.items()
                                                  if self._keep(k)})
        struct = require_struct(value, self.PURPOSE)
        new_schema = self._cache.get(schema)
        if new_schema is None:
            new_schema = self._cache.put(schema, struct_with_fields(
                schema, [(self.renames.get(f.name, f.name), f.schema) for f in schema.fields
                         if self._keep(f.name)]))
        out = Struct(new_schema)
        for f in new_schema.fields:
            out.put(f.name, field_value(struct, self.reverse.get(f.name, f.name), self.replace_null))
        return self.new_record(record, new_schema, out)


class ReplaceFieldKey(OnKey, ReplaceField):
    """org.apache.kafka.connect.transforms.ReplaceField$Key"""


class ReplaceFieldValue(OnValue, ReplaceField):
    """org.apache.kafka.connect.transforms.ReplaceField$Value"""


# ---- MaskField ----------------------------------------------------------------------------------
_JAVA_INT = re.compile(r"[+-]?[0-9]+")
_INT_BITS = {Type.INT8: 8, Type.INT16: 16, Type.INT32: 32, Type.INT64: 64}


def _zero(value: Any) -> Any:
    """The 'empty' value of a value's type, as MaskField's primitive mapping."""
    if isinstance(value, bool):
        return False
    if isinstance(value, int):
        return 0
    if isinstance(value, float):
        return 0.0
    if isinstance(value, decimal.Decimal):
        return decimal.Decimal(0)
    if isinstance(value, str):
        return ""
    if isinstance(value, datetime.datetime):
        return EPOCH
    if isinstance(value, datetime.date):
        return EPOCH_DATE
    if isinstance(value, datetime.time):
        return datetime.time(0)
    if isinstance(value, list | tuple):
        return []
    if isinstance(value, dict):
        return {}
    raise DataException(f"Cannot mask value of type: {type(value).__name__}")


def _replacement(value: Any, replacement: str, schema: Schema | None) -> Any:
    """The replacement string parsed into the masked value's type (numbers and strings only)."""
    if isinstance(value, str):
        return replacement
    if isinstance(value, bool) or not isinstance(value, int | float | decimal.Decimal):
        raise DataException(f"Cannot mask value of type {type(value).__name__} with custom replacement.")
    try:
        if isinstance(value, int):
            if not _JAVA_INT.fullmatch(replacement):
                raise ValueError(replacement)
            n = int(replacement)
            bits = _INT_BITS.get(schema.type, 64) if schema is not None else 64
            if not -(1 << (bits - 1)) <= n < (1 << (bits - 1)):
                raise ValueError(replacement)
            return n
        if isinstance(value, float):
            return float(replacement)
        return decimal.Decimal(replacement)
    except (ValueError, decimal.InvalidOperation):
        raise DataException(f"Unable to convert {replacement} ({type(value).__name__}) to number") from None


class MaskField(KeyOrValue):
    """Replace the listed fields with their type's empty value (0, false, "", epoch, empty
    list/map) or with `replacement` for numeric and string fields."""

    PURPOSE = "mask fields"

    def config(self) -> ConfigDef:
        return (ConfigDef()
                .define("fields", ConfigType.LIST, NO_DEFAULT, non_empty_list, Importance.HIGH,
                        "Names of fields to mask.")
                .define("replacement", ConfigType.STRING, None, non_empty_string, Importance.LOW,
                        "Custom value replacement, that will be applied to all 'fields' values "
                        "(numeric or non-empty string values only)."))

    def configure(self, props: dict[str, Any]) -> None:
        c = parse_config(self.config(), props)
        self.fields = list(c["fields"])
        self.replacement: str | None = c["replacement"]

    def _mask(self, value: Any, schema: Schema | None) -> Any:
        if value is None:
            return None
        if self.replacement is None:
            return _zero(value)
        return _replacement(value, self.replacement, schema)

    def apply(self, record: ConnectRecord) -> ConnectRecord | None:
        value = self.operating_value(record)
        schema = self.operating_schema(record)
        if schema is None:
            src = require_map(value, self.PURPOSE)
            updated = dict(src)
            for name in self.fields:
                updated[name] = self._mask(src.get(name), None)
            return self.new_record(record, None, updated)
        struct = require_struct(value, self.PURPOSE)
        out = Struct(schema)
        masked = set(self.fields)
        for f in schema.fields:
            v = struct.get(f.name)
            out.put(f.name, self._mask(v, f.schema) if f.name in masked else v)
        return self.new_record(record, schema, out)


class MaskFieldKey(OnKey, MaskField):
    """org.apache.kafka.connect.transforms.MaskField$Key"""


class MaskFieldValue(OnValue, MaskField):
    """org.apache.kafka.connect.transforms.MaskField$Value"""

