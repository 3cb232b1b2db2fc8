"""Connect's data model (Schema, Struct, logical types, records, headers) in Python.

Converters turn bytes into (schema, value) pairs of this model and back; transforms and
connectors only see this model. It follows Kafka Connect's `org.apache.kafka.connect.data` so a
connector or converter written against Kafka's semantics behaves the same here: the same types,
the same logical-type names and encodings (Decimal, Date, Time, Timestamp), the same optional /
default rules."""

from __future__ import annotations

import dataclasses
import datetime
import decimal
from collections.abc import Iterator
from dataclasses import dataclass, field
from enum import StrEnum
from typing import Any

from .errors import DataException


class Type(StrEnum):
    """Connect schema types; the value is the lower-case name JsonConverter writes."""

    INT8 = "int8"
    INT16 = "int16"
    INT32 = "int32"
    INT64 = "int64"
    FLOAT32 = "float"
    FLOAT64 = "double"
    BOOLEAN = "boolean"
    STRING = "string"
    BYTES = "bytes"
    ARRAY = "array"
    MAP = "map"
    STRUCT = "struct"

    @property
    def primitive(self) -> bool:
        return self not in (Type.ARRAY, Type.MAP, Type.STRUCT)


_INT_RANGES = {Type.INT8: 8, Type.INT16: 16, Type.INT32: 32, Type.INT64: 64}


@dataclass(frozen=True)
class Field:
    name: str
    index: int
    schema: Schema


@dataclass(frozen=True, eq=True)
class Schema:
    """An immutable Connect schema. Build structs with `struct_schema`, containers with
    `array_schema` / `map_schema`; logical types with the module's `decimal_schema` etc."""

    type: Type
    optional: bool = False
    default: Any = None
    name: str | None = None
    version: int | None = None
    doc: str | None = None
    parameters: tuple[tuple[str, str], ...] = ()
    fields: tuple[Field, ...] = ()
    key_schema: Schema | None = None
    value_schema: Schema | None = None

    def field(self, name: str) -> Field | None:
        if self.type is not Type.STRUCT:
            raise DataException(f"cannot look up fields on a non-struct schema ({self.type.value})")
        for f in self.fields:
            if f.name == name:
                return f
        return None

    @property
    def params(self) -> dict[str, str]:
        return dict(self.parameters)

    def with_(self, **changes: Any) -> Schema:
        """A copy with some attributes changed (optional=True, name=..., parameters=dict...)."""
        if isinstance(changes.get("parameters"), dict):
            changes["parameters"] = tuple(sorted(changes["parameters"].items()))
        return dataclasses.replace(self, **changes)

    def __hash__(self) -> int:  # defaults may be unhashable (dicts, lists)
        return hash((self.type, self.optional, self.name, self.version, self.fields,
                     self.key_schema, self.value_schema))

    def __repr__(self) -> str:
        bits = [self.type.value]
        if self.name:
            bits.append(self.name)
        if self.optional:
            bits.append("optional")
        return f"Schema({', '.join(bits)})"


def _p(t: Type, optional: bool = False) -> Schema:
    return Schema(t, optional=optional)


INT8_SCHEMA = _p(Type.INT8)
INT16_SCHEMA = _p(Type.INT16)
INT32_SCHEMA = _p(Type.INT32)
INT64_SCHEMA = _p(Type.INT64)
FLOAT32_SCHEMA = _p(Type.FLOAT32)
FLOAT64_SCHEMA = _p(Type.FLOAT64)
BOOLEAN_SCHEMA = _p(Type.BOOLEAN)
STRING_SCHEMA = _p(Type.STRING)
BYTES_SCHEMA = _p(Type.BYTES)
OPTIONAL_INT8_SCHEMA = _p(Type.INT8, True)
OPTIONAL_INT16_SCHEMA = _p(Type.INT16, True)
OPTIONAL_INT32_SCHEMA = _p(Type.INT32, True)
OPTIONAL_INT64_SCHEMA = _p(Type.INT64, True)
OPTIONAL_FLOAT32_SCHEMA = _p(Type.FLOAT32, True)
OPTIONAL_FLOAT64_SCHEMA = _p(Type.FLOAT64, True)
OPTIONAL_BOOLEAN_SCHEMA = _p(Type.BOOLEAN, True)
OPTIONAL_STRING_SCHEMA = _p(Type.STRING, True)
OPTIONAL_BYTES_SCHEMA = _p(Type.BYTES, True)


def struct_schema(fields: list[tuple[str, Schema]] | tuple[tuple[str, Schema], ...], *,
                  name: str | None = None, optional: bool = False, version: int | None = None,
                  doc: str | None = None, default: Any = None) -> Schema:
    seen: set[str] = set()
    out = []
    for i, (fname, fschema) in enumerate(fields):
        if fname in seen:
            raise DataException(f"duplicate field {fname!r} in struct schema")
        seen.add(fname)
        out.append(Field(fname, i, fschema))
    return Schema(Type.STRUCT, optional=optional, name=name, version=version, doc=doc,
                  fields=tuple(out), default=default)


def array_schema(value_schema: Schema, *, optional: bool = False, name: str | None = None,
                 default: Any = None) -> Schema:
    return Schema(Type.ARRAY, optional=optional, name=name, value_schema=value_schema, default=default)


def map_schema(key_schema: Schema, value_schema: Schema, *, optional: bool = False,
               name: str | None = None, default: Any = None) -> Schema:
    return Schema(Type.MAP, optional=optional, name=name, key_schema=key_schema,
                  value_schema=value_schema, default=default)


# ---- logical types (names and encodings as Kafka Connect's) -----------------------------------
DECIMAL_NAME = "org.apache.kafka.connect.data.Decimal"
DECIMAL_SCALE = "scale"
DATE_NAME = "org.apache.kafka.connect.data.Date"
TIME_NAME = "org.apache.kafka.connect.data.Time"
TIMESTAMP_NAME = "org.apache.kafka.connect.data.Timestamp"
LOGICAL_NAMES = (DECIMAL_NAME, DATE_NAME, TIME_NAME, TIMESTAMP_NAME)
EPOCH = datetime.datetime(1970, 1, 1, tzinfo=datetime.UTC)
EPOCH_DATE = datetime.date(1970, 1, 1)


def decimal_schema(scale: int, *, optional: bool = False) -> Schema:
    return Schema(Type.BYTES, optional=optional, name=DECIMAL_NAME, version=1,
                  parameters=((DECIMAL_SCALE, str(scale)),))


def date_schema(*, optional: bool = False) -> Schema:
    return Schema(Type.INT32, optional=optional, name=DATE_NAME, version=1)


def time_schema(*, optional: bool = False) -> Schema:
    return Schema(Type.INT32, optional=optional, name=TIME_NAME, version=1)


def timestamp_schema(*, optional: bool = False) -> Schema:
    return Schema(Type.INT64, optional=optional, name=TIMESTAMP_NAME, version=1)


def decimal_to_bytes(schema: Schema, value: decimal.Decimal) -> bytes:
    """Big-endian two's-complement unscaled value, as Connect's Decimal.fromLogical."""
    scale = int(schema.params.get(DECIMAL_SCALE, "0"))
    unscaled = int(value.scaleb(scale).to_integral_value(rounding=decimal.ROUND_HALF_UP))
    if value.as_tuple().exponent != -scale and value.scaleb(scale) != unscaled:
        raise DataException(f"decimal {value} does not have scale {scale}")
    bits = (~unscaled if unscaled < 0 else unscaled).bit_length()  # Java's BigInteger.bitLength
    length = bits // 8 + 1
    return unscaled.to_bytes(length, "big", signed=True)


def decimal_from_bytes(schema: Schema, data: bytes) -> decimal.Decimal:
    scale = int(schema.params.get(DECIMAL_SCALE, "0"))
    return decimal.Decimal(int.from_bytes(data, "big", signed=True)).scaleb(-scale)


def to_logical(schema: Schema, raw: Any) -> Any:
    """The Python value of a logical type from its physical one (int days, ms, bytes)."""
    if raw is None or schema.name not in LOGICAL_NAMES:
        return raw
    if schema.name == DECIMAL_NAME:
        return decimal_from_bytes(schema, raw)
    if schema.name == DATE_NAME:
        return EPOCH_DATE + datetime.timedelta(days=int(raw))
    if schema.name == TIME_NAME:
        ms = int(raw)
        if not 0 <= ms < 86_400_000:
            raise DataException(f"Time value {ms} ms is outside one day")
        return (datetime.datetime.min + datetime.timedelta(milliseconds=ms)).time()
    return EPOCH + datetime.timedelta(milliseconds=int(raw))


def from_logical(schema: Schema, value: Any) -> Any:
    """The physical value (int, bytes) of a logical-typed Python value."""
    if value is None or schema.name not in LOGICAL_NAMES:
        return value
    if schema.name == DECIMAL_NAME:
        if not isinstance(value, decimal.Decimal):
            raise DataException(f"Decimal expects decimal.Decimal, got {type(value).__name__}")
        return decimal_to_bytes(schema, value)
    if schema.name == DATE_NAME:
        if isinstance(value, datetime.datetime):
            value = value.date()
        if not isinstance(value, datetime.date):
            raise DataException(f"Date expects datetime.date, got {type(value).__name__}")
        return (value - EPOCH_DATE).days
    if schema.name == TIME_NAME:
        if not isinstance(value, datetime.time):
            raise DataException(f"Time expects datetime.time, got {type(value).__name__}")
        return ((value.hour * 60 + value.minute) * 60 + value.second) * 1000 + value.microsecond // 1000
    if not isinstance(value, datetime.datetime):
        raise DataException(f"Timestamp expects datetime.datetime, got {type(value).__name__}")
    if value.tzinfo is None:
        value = value.replace(tzinfo=datetime.UTC)
    return (value - EPOCH) // datetime.timedelta(milliseconds=1)


# ---- Struct and validation ----------------------------------------------------------------------
class Struct:
    """A value of a STRUCT schema: values by field name, checked against the schema on put."""

    __slots__ = ("schema", "_values")

    def __init__(self, schema: Schema, values: dict[str, Any] | None = None) -> None:
        if schema.type is not Type.STRUCT:
            raise DataException(f"Struct needs a struct schema, got {schema.type.value}")
        self.schema = schema
        self._values: dict[str, Any] = {}
        for k, v in (values or {}).items():
            self.put(k, v)

    def _field(self, name: str) -> Field:
        f = self.schema.field(name)
        if f is None:
            raise DataException(f"{name!r} is not a valid field name")
        return f

    def put(self, name: str, value: Any) -> Struct:
        f = self._field(name)
        validate_value(f.schema, value, name)
        self._values[name] = value
        return self

    def get(self, name: str) -> Any:
        """The field's value, or the field schema's default when it was never set."""
        f = self._field(name)
        if name in self._values:
            return self._values[name]
        return f.schema.default

    def get_without_default(self, name: str) -> Any:
        self._field(name)
        return self._values.get(name)

    def validate(self) -> None:
        for f in self.schema.fields:
            validate_value(f.schema, self.get(f.name), f.name)

    def as_dict(self) -> dict[str, Any]:
        return {f.name: self.get(f.name) for f in self.schema.fields}

    def __iter__(self) -> Iterator[tuple[str, Any]]:
        return iter(self.as_dict().items())

    def __eq__(self, other: object) -> bool:
        return isinstance(other, Struct) and self.schema == other.schema and \
            self.as_dict() == other.as_dict()

    def __hash__(self) -> int:
        return hash(self.schema)

    def __repr__(self) -> str:
        inner = ", ".join(f"{k}={v!r}" for k, v in self.as_dict().items())
        return f"Struct{{{inner}}}"


_PY_TYPES: dict[Type, tuple[type, ...]] = {
    Type.INT8: (int,), Type.INT16: (int,), Type.INT32: (int,), Type.INT64: (int,),
    Type.FLOAT32: (float, int), Type.FLOAT64: (float, int), Type.BOOLEAN: (bool,),
    Type.STRING: (str,), Type.BYTES: (bytes, bytearray, memoryview), Type.ARRAY: (list, tuple),
    Type.MAP: (dict,), Type.STRUCT: (Struct,),
}


def validate_value(schema: Schema, value: Any, where: str = "value") -> None:
    """Raise DataException unless `value` is a valid value of `schema` (Kafka's
    ConnectSchema.validateValue, with Python types in place of Java's)."""
    if value is None:
        if not schema.optional and schema.default is None:
            raise DataException(f"invalid null {where} for required {schema.type.value} field")
        return
    if schema.name in LOGICAL_NAMES:
        expected = {DECIMAL_NAME: (decimal.Decimal,), DATE_NAME: (datetime.date,),
                    TIME_NAME: (datetime.time,), TIMESTAMP_NAME: (datetime.datetime,)}[schema.name]
        if not isinstance(value, expected):
            raise DataException(f"invalid {where}: {schema.name} expects "
                                f"{expected[0].__name__}, got {type(value).__name__}")
        return
    ok = _PY_TYPES[schema.type]
    if not isinstance(value, ok) or (schema.type is not Type.BOOLEAN and isinstance(value, bool)
                                     and schema.type in _INT_RANGES):
        raise DataException(f"invalid Java object for schema type {schema.type.name}: "
                            f"{type(value).__name__} for {where}")
    value = _any(value)
    bits = _INT_RANGES.get(schema.type)
    if bits is not None and not -(1 << (bits - 1)) <= value < (1 << (bits - 1)):
        raise DataException(f"{where}: {value} does not fit {schema.type.value}")
    if schema.type is Type.STRUCT:
        if value.schema != schema:
            raise DataException(f"{where}: struct schemas do not match")
        value.validate()
    elif schema.type is Type.ARRAY:
        assert schema.value_schema is not None
        for i, item in enumerate(value):
            validate_value(schema.value_schema, item, f"{where}[{i}]")
    elif schema.type is Type.MAP:
        assert schema.key_schema is not None and schema.value_schema is not None
        for k, v in value.items():
            validate_value(schema.key_schema, k, f"{where} key")
            validate_value(schema.value_schema, v, f"{where}[{k!r}]")


def _any(value: Any) -> Any:
    return value


def infer_schema(value: Any) -> Schema | None:
    """The schema of a schemaless primitive (for headers and Cast); None for containers."""
    if value is None:
        return None
    if isinstance(value, bool):
        return BOOLEAN_SCHEMA
    if isinstance(value, int):
        return INT64_SCHEMA if not -(1 << 31) <= value < (1 << 31) else INT32_SCHEMA
    if isinstance(value, float):
        return FLOAT64_SCHEMA
    if isinstance(value, str):
        return STRING_SCHEMA
    if isinstance(value, bytes | bytearray):
        return BYTES_SCHEMA
    if isinstance(value, Struct):
        return value.schema
    return None


@dataclass(frozen=True)
class SchemaAndValue:
    schema: Schema | None
    value: Any

    NULL: SchemaAndValue = None  # type: ignore[assignment]  # set below


SchemaAndValue.NULL = SchemaAndValue(None, None)


# ---- headers and records -------------------------------------------------------------------------
@dataclass(frozen=True)
class Header:
    key: str
    schema: Schema | None
    value: Any


class Headers:
    """An ordered multi-map of Connect headers (Kafka's ConnectHeaders)."""

    __slots__ = ("_items",)

    def __init__(self, items: list[Header] | None = None) -> None:
        self._items: list[Header] = list(items or [])

    def add(self, key: str, value: Any, schema: Schema | None = None) -> Headers:
        self._items.append(Header(key, schema if schema is not None else infer_schema(value), value))
        return self

    def last_with_name(self, key: str) -> Header | None:
        for h in reversed(self._items):
            if h.key == key:
                return h
        return None

    def all_with_name(self, key: str) -> list[Header]:
        return [h for h in self._items if h.key == key]

    def remove(self, key: str) -> Headers:
        self._items = [h for h in self._items if h.key != key]
        return self

    def copy(self) -> Headers:
        return Headers(list(self._items))

    def __iter__(self) -> Iterator[Header]:
        return iter(self._items)

    def __len__(self) -> int:
        return len(self._items)

    def __eq__(self, other: object) -> bool:
        return isinstance(other, Headers) and self._items == other._items

    def __repr__(self) -> str:
        return f"Headers({self._items!r})"


@dataclass
class ConnectRecord:
    """What a transform sees: topic, partition, key and value with their schemas, timestamp in
    ms and headers. Transforms return a new record (`new_record`) instead of mutating one."""

    topic: str
    kafka_partition: int | None
    key_schema: Schema | None
    key: Any
    value_schema: Schema | None
    value: Any
    timestamp: int | None = None
    headers: Headers = field(default_factory=Headers)

    def new_record(self, **changes: Any) -> Any:
        """A copy with some of topic, kafka_partition, key_schema, key, value_schema, value,
        timestamp, headers replaced (Kafka's ConnectRecord.newRecord). Headers are copied."""
        if "headers" not in changes:
            changes["headers"] = self.headers.copy()
        return dataclasses.replace(self, **changes)


@dataclass
class SourceRecord(ConnectRecord):
    """A record a source task produced, with where it came from (`source_partition`) and how far
    the source has been read (`source_offset`); both are JSON-able dicts."""

    source_partition: dict[str, Any] | None = None
    source_offset: dict[str, Any] | None = None


class TimestampType(StrEnum):
    NO_TIMESTAMP_TYPE = "NoTimestampType"
    CREATE_TIME = "CreateTime"
    LOG_APPEND_TIME = "LogAppendTime"


@dataclass
class SinkRecord(ConnectRecord):
    """A record consumed for a sink task, with its Kafka offset. The original topic, partition and
    offset survive transforms that rename or repartition it (KIP-793)."""

    kafka_offset: int = -1
    timestamp_type: TimestampType = TimestampType.NO_TIMESTAMP_TYPE
    original_topic: str | None = None
    original_kafka_partition: int | None = None
    original_kafka_offset: int | None = None

    def __post_init__(self) -> None:
        if self.original_topic is None:
            self.original_topic = self.topic
        if self.original_kafka_partition is None:
            self.original_kafka_partition = self.kafka_partition
        if self.original_kafka_offset is None:
            self.original_kafka_offset = self.kafka_offset
