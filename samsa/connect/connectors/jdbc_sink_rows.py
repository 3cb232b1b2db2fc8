"""How a sink record becomes a table row for the JDBC sink: which columns form the primary key
(pk.mode none / kafka / record_key / record_value with pk.fields, Confluent's rules), which value
fields become columns (fields.whitelist), and each value as the database driver wants it
(timestamps in db.timezone, nested data as JSON). One `Layout` per (key schema, value schema)
pair, computed once and cached: the per-record work is one pass over the fields."""

from __future__ import annotations

import base64
import datetime
import decimal
import json
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any
from zoneinfo import ZoneInfo

from ..data import (
    DATE_NAME,
    DECIMAL_NAME,
    INT32_SCHEMA,
    INT64_SCHEMA,
    STRING_SCHEMA,
    TIME_NAME,
    TIMESTAMP_NAME,
    Schema,
    SinkRecord,
    Struct,
    Type,
)
from ..errors import ConnectException, DataException

KAFKA_PK_DEFAULT = ("__connect_topic", "__connect_partition", "__connect_offset")
PK_MODES = ("none", "kafka", "record_key", "record_value")

Convert = Callable[[Any], Any]


@dataclass(frozen=True)
class ColumnDef:
    name: str
    schema: Schema
    key: bool


@dataclass
class Layout:
    """Columns of one schema pair: key columns first, then value columns."""

    key_columns: tuple[str, ...]
    value_columns: tuple[str, ...]
    columns: tuple[ColumnDef, ...]
    key_of: Callable[[SinkRecord], tuple[Any, ...]]
    values_of: Callable[[SinkRecord], tuple[Any, ...]]

    @property
    def names(self) -> tuple[str, ...]:
        return self.key_columns + self.value_columns


class RowMapper:
    def __init__(self, pk_mode: str, pk_fields: Sequence[str], whitelist: Sequence[str],
                 timezone: str, delete_enabled: bool) -> None:
        self.pk_mode = pk_mode
        self.pk_fields = [f for f in pk_fields if f]
        self.whitelist = set(f for f in whitelist if f)
        self.tz = ZoneInfo(timezone)
        self.delete_enabled = delete_enabled
        self._cache: dict[tuple[Schema | None, Schema | None], Layout] = {}
        self._last: tuple[Schema | None, Schema | None, Layout] | None = None
        if pk_mode == "kafka" and self.pk_fields and len(self.pk_fields) != 3:
            raise ConnectException("pk.mode=kafka needs exactly three pk.fields (topic, partition, "
                                   f"offset column names), got {self.pk_fields}")

    def layout(self, record: SinkRecord) -> Layout:
        vs = record.value_schema if record.value is not None else None
        ks = record.key_schema if self.pk_mode == "record_key" else None
        if record.value is not None:
            if vs is None or vs.type is not Type.STRUCT or not isinstance(record.value, Struct):
                raise DataException(
                    f"JDBC sink needs records with a Struct value and a struct schema "
                    f"(JsonConverter with schemas.enable=true, or a registry converter), but found "
                    f"record at (topic='{record.topic}',partition={record.kafka_partition},"
                    f"offset={record.kafka_offset}) with a {type(record.value).__name__} value "
                    f"and {'no' if vs is None else vs.type.value} value schema")
        elif not self.delete_enabled:
            raise DataException(
                f"JDBC sink with delete.enabled=false cannot write a tombstone (null value) at "
                f"(topic='{record.topic}',partition={record.kafka_partition},"
                f"offset={record.kafka_offset})")
        if self.pk_mode == "record_key" and (record.key is None or record.key_schema is None):
            raise DataException(f"pk.mode=record_key needs a non-null key with a schema, but record "
                                f"at (topic='{record.topic}',partition={record.kafka_partition},"
                                f"offset={record.kafka_offset}) has none")
        last = self._last  # converters hand back the same schema objects: skip hashing them
        if last is not None and last[0] is ks and last[1] is vs:
            return last[2]
        cache_key = (ks, vs)
        found = self._cache.get(cache_key)
        if found is None:
            found = self._cache[cache_key] = self._build(ks, vs)
        self._last = (ks, vs, found)
        return found

    # ---- building a layout ---------------------------------------------------------------------
    def _build(self, key_schema: Schema | None, value_schema: Schema | None) -> Layout:
        keys: list[ColumnDef] = []
        key_of: Callable[[SinkRecord], tuple[Any, ...]] = _no_key
        mode = self.pk_mode
        if mode == "kafka":
            names = self.pk_fields or list(KAFKA_PK_DEFAULT)
            keys = [ColumnDef(names[0], STRING_SCHEMA, True), ColumnDef(names[1], INT32_SCHEMA, True),
                    ColumnDef(names[2], INT64_SCHEMA, True)]
            key_of = _kafka_key
        elif mode == "record_key":
            assert key_schema is not None
            if key_schema.type.primitive:
                if len(self.pk_fields) != 1:
                    raise ConnectException(
                        "Need exactly one PK column defined since the key schema for records is a "
                        f"primitive type ({key_schema.type.name}), defined columns are: "
                        f"{self.pk_fields}")
                keys = [ColumnDef(self.pk_fields[0], key_schema, True)]
                conv = self._converter(key_schema)
                key_of = _primitive_key(conv)
            elif key_schema.type is Type.STRUCT:
                fields = self._pick(key_schema, self.pk_fields, "record key")
                keys = [ColumnDef(f, _field_schema(key_schema, f), True) for f in fields]
                key_of = self._struct_getter(key_schema, fields, from_key=True)
            else:
                raise ConnectException(f"pk.mode=record_key needs a primitive or struct key, not "
                                       f"{key_schema.type.name}")
        elif mode == "record_value" and value_schema is not None:
            fields = self._pick(value_schema, self.pk_fields, "record value")
            keys = [ColumnDef(f, _field_schema(value_schema, f), True) for f in fields]
            key_of = self._struct_getter(value_schema, fields, from_key=False)
        key_names = {c.name for c in keys}
        values: list[ColumnDef] = []
        values_of: Callable[[SinkRecord], tuple[Any, ...]] = _no_key
        if value_schema is not None:
            names = [f.name for f in value_schema.fields if f.name not in key_names and
                     (not self.whitelist or f.name in self.whitelist)]
            values = [ColumnDef(n, _field_schema(value_schema, n), False) for n in names]
            values_of = self._struct_getter(value_schema, names, from_key=False)
        return Layout(tuple(c.name for c in keys), tuple(c.name for c in values),
                      tuple(keys + values), key_of, values_of)

    def _pick(self, schema: Schema, wanted: list[str], what: str) -> list[str]:
        if not wanted:
            return [f.name for f in schema.fields]
        have = {f.name for f in schema.fields}
        missing = [w for w in wanted if w not in have]
        if missing:
            raise ConnectException(f"PK field(s) {missing} not found in the {what} schema "
                                   f"(fields: {sorted(have)})")
        return list(wanted)

    def _struct_getter(self, schema: Schema, names: list[str],
                       from_key: bool) -> Callable[[SinkRecord], tuple[Any, ...]]:
        convs = [self._converter(_field_schema(schema, n)) for n in names]
        pairs = list(zip(names, convs, strict=True))

        def get(record: SinkRecord) -> tuple[Any, ...]:
            struct = record.key if from_key else record.value
            if not isinstance(struct, Struct):
                raise DataException(f"expected a Struct {'key' if from_key else 'value'}, got "
                                    f"{type(struct).__name__}")
            data = struct.as_dict()
            return tuple(data[n] if c is None or data[n] is None else c(data[n]) for n, c in pairs)
        return get

    def _converter(self, schema: Schema) -> Convert | None:
        """None when the driver takes the Python value as is."""
        if schema.name == TIMESTAMP_NAME:
            tz = self.tz

            def ts(v: Any) -> Any:
                if isinstance(v, datetime.datetime):
                    if v.tzinfo is None:
                        v = v.replace(tzinfo=datetime.UTC)
                    return v.astimezone(tz).replace(tzinfo=None)
                return v
            return ts
        if schema.name in (DECIMAL_NAME, DATE_NAME, TIME_NAME):
            return None
        if schema.type is Type.BYTES:
            return _bytes
        if schema.type in (Type.STRUCT, Type.ARRAY, Type.MAP):
            return _json
        return None


def _field_schema(schema: Schema, name: str) -> Schema:
    f = schema.field(name)
    assert f is not None
    return f.schema


def _no_key(record: SinkRecord) -> tuple[Any, ...]:
    return ()


def _kafka_key(record: SinkRecord) -> tuple[Any, ...]:
    return (record.original_topic or record.topic, record.original_kafka_partition,
            record.original_kafka_offset)


def _primitive_key(conv: Convert | None) -> Callable[[SinkRecord], tuple[Any, ...]]:
    def get(record: SinkRecord) -> tuple[Any, ...]:
        return (record.key if conv is None or record.key is None else conv(record.key),)
    return get


def _bytes(v: Any) -> Any:
    return bytes(v) if isinstance(v, bytearray | memoryview) else v


def _jsonable(v: Any) -> Any:
    if isinstance(v, Struct):
        return {k: _jsonable(x) for k, x in v.as_dict().items()}
    if isinstance(v, dict):
        return {str(k): _jsonable(x) for k, x in v.items()}
    if isinstance(v, list | tuple):
        return [_jsonable(x) for x in v]
    if isinstance(v, bytes | bytearray | memoryview):
        return base64.b64encode(bytes(v)).decode()
    if isinstance(v, decimal.Decimal):
        return str(v)
    if isinstance(v, datetime.datetime | datetime.date | datetime.time):
        return v.isoformat()
    return v


def _json(v: Any) -> str:
    return json.dumps(_jsonable(v), separators=(",", ":"))
